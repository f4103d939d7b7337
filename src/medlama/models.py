"""Models by name: the one place that turns a ``--model`` argument into something transformers loads.

* :func:`resolve_model`: ``None`` is the bundled encoder; a sentence-transformers folder becomes the folder
  of its ``Transformer`` module; an existing path stays as it is; anything else must be a Hub id, else a
  :class:`~medlama.errors.MedlamaInputError` says the path does not exist (rather than huggingface_hub's
  "Repo id must be in the form ...", which names no path).
* :func:`read_config` and :func:`load_tokenizer`: the model's config and tokenizer, with errors naming it.
* :func:`quiet_transformers`: silence transformers' load report while loading (callers raise their own
  error when weights are missing).
* :func:`pick_device`: the device asked for, else CUDA when there is one, else the CPU.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from medlama.errors import MedlamaInputError


def transformer_folder(folder: Path) -> Path:
    """The folder of a sentence-transformers model's ``Transformer`` module (``folder`` for other models)."""
    modules = folder / "modules.json"
    if not modules.is_file():
        return folder
    try:
        entries = json.loads(modules.read_text(encoding="utf-8"))
        sub = next(e.get("path", "") for e in entries if str(e.get("type", "")).endswith("Transformer"))
    except (ValueError, StopIteration, AttributeError, TypeError):
        return folder
    return folder / sub if sub else folder


def is_hub_id(text: str) -> bool:
    """Whether ``text`` is spelt as a Hugging Face Hub repository id (``name`` or ``namespace/name``)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(text)
    except HFValidationError:
        return False
    return True


def resolve_model(model: str | Path | None) -> str:
    """The path or Hub id that transformers should load for ``model`` (``None``: the bundled encoder)."""
    if model is None:
        from medlama.defaults import default_model_path

        return str(default_model_path())
    text = str(model)
    path = Path(text).expanduser()
    if path.exists():
        return str(transformer_folder(path)) if path.is_dir() else text
    if not is_hub_id(text):
        raise MedlamaInputError("model path does not exist (and it is not a Hub id either)", file=text)
    return text  # a Hub id: transformers resolves it (its cache, or the network when allowed)


def read_config(model: str | Path) -> Any:
    """The transformers config of ``model`` (a resolved path or Hub id)."""
    from transformers import AutoConfig

    path = str(model)
    if Path(path).exists() and not (Path(path) / "config.json").is_file():
        raise MedlamaInputError("not a model folder: no config.json (give a Hugging Face model folder, "
                                "e.g. the output of `medlama rewire`)", file=path)
    try:
        return AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as error:
        raise MedlamaInputError(f"cannot read the model config: {error}", file=path) from None


def load_tokenizer(model: str | Path) -> Any:
    """The tokenizer of ``model`` (a resolved path or Hub id)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(model))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise MedlamaInputError(f"cannot load the tokenizer: {error}", file=str(model)) from None


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' logging below errors (its load report) for the duration of the block."""
    from transformers.utils import logging

    level = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(level)


def pick_device(device: str | None = None) -> Any:
    """``torch.device(device)``, or CUDA when available, else the CPU."""
    import torch

    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
