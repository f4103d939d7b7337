"""A model whose forward pass runs out of memory above a batch size, as a GPU would: what ``auto`` backs off from."""

from __future__ import annotations


def limit_rows(monkeypatch, model_class, fits: int) -> list[int]:
    """Patch ``model_class.forward`` to raise CUDA's out-of-memory error on more than ``fits`` rows; the rows of
    every call are appended to the list returned."""
    import torch  # the tests that simulate memory run models anyway

    forward, rows = model_class.forward, []

    def limited(self, input_ids=None, **kwargs):
        rows.append(input_ids.shape[0])
        if input_ids.shape[0] > fits:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (simulated)")
        return forward(self, input_ids=input_ids, **kwargs)

    monkeypatch.setattr(model_class, "forward", limited)
    return rows
