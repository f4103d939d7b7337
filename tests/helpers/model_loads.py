"""Counting the models a probe loads: every transformers model is loaded through ``PreTrainedModel.from_pretrained``
(the ``Auto*`` classes end there too), so counting its calls counts the loads of weights."""

from __future__ import annotations

from pathlib import Path


class ModelLoads:
    """Counts ``from_pretrained`` calls of any transformers model class while the test runs; ``folders`` lists
    each call's model folder (its name), so a test can say which model was loaded how often."""

    def __init__(self, monkeypatch) -> None:
        from transformers import PreTrainedModel

        self.folders: list[str] = []
        load = PreTrainedModel.from_pretrained.__func__

        def counted(cls, name, *args, **kwargs):
            self.folders.append(Path(str(name)).name)
            return load(cls, name, *args, **kwargs)

        monkeypatch.setattr(PreTrainedModel, "from_pretrained", classmethod(counted))

    def of(self, folder: str | Path) -> int:
        """How many times the model in ``folder`` was loaded."""
        return self.folders.count(Path(str(folder)).name)
