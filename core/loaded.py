"""A model already in memory, probed as it is: :class:`LoadedModel` (a transformers model with its tokenizer),
what the masked-LM, causal-LM and sequence-to-sequence loaders of :mod:`medlama.probers` take in place of a
folder or Hub id. It is the model a trainer is training (``medlama.integrations.ProbeCallback``), so it is
never moved to another device, cast to another precision nor cut to fewer layers, and its tokenizer is never
changed (a copy is, where a prober needs a pad token it lacks). Its mode is its owner's: a model in training
mode (dropout on, so every probe would differ) is refused; the callback switches it to eval mode around each
probe and back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from medlama.core.errors import MedlamaInputError


@dataclass(frozen=True)
class LoadedModel:
    """``model`` (a transformers ``PreTrainedModel`` in memory) with its ``tokenizer``; ``name``: what results
    record as its model (default: the model's ``name_or_path``, else its class name)."""

    model: Any
    tokenizer: Any
    name: str | None = None

    def __post_init__(self) -> None:
        if not all(hasattr(self.model, name) for name in ("config", "parameters", "get_output_embeddings")):
            raise MedlamaInputError(f"cannot probe a {type(self.model).__name__} in memory: give a transformers "
                                    "PreTrainedModel with its tokenizer, or a model folder or Hub id")
        if self.tokenizer is None:
            raise MedlamaInputError("a model in memory needs its tokenizer: pass tokenizer=")
        if getattr(self.model, "training", False):
            raise MedlamaInputError("the model in memory is in training mode (dropout on: every probe would "
                                    "differ); call model.eval() before probing it")

    def __str__(self) -> str:
        return self.name or getattr(self.model, "name_or_path", None) or type(self.model).__name__

    @property
    def name_or_path(self) -> str | None:
        """The model's own ``name_or_path`` (what :func:`medlama.core.provenance.model_identity` records of a
        loaded model)."""
        return getattr(self.model, "name_or_path", None) or None

    @property
    def config(self) -> Any:
        return self.model.config

    def device(self, asked: Any = None) -> Any:
        """The device the model is probed on: its own (its first parameter's). Asking for another is an error:
        a model in memory is never moved (``asked``: ``None``, or the same device)."""
        # torch is loaded already: the model is a torch module
        import torch

        own = next(self.model.parameters()).device
        if asked is not None:
            wanted = torch.device(asked)
            if wanted.type != own.type or (wanted.index is not None and wanted.index != (own.index or 0)):
                raise MedlamaInputError(f"the model in memory is on {own}, not {wanted}: it is probed where it is "
                                        "(give no device, or its own)")
        return own

    def dtype_name(self) -> str:
        """The weights' precision as the causal settings spell it (``fp32``, ``bf16``, ``fp16``)."""
        dtype = str(next(self.model.parameters()).dtype).removeprefix("torch.")
        names = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
        if dtype not in names:
            raise MedlamaInputError(f"cannot probe a model in memory whose weights are {dtype}; "
                                    f"medlama probes {', '.join(names)}")
        return names[dtype]

    def check_dtype(self, asked: str) -> None:
        """Refuse a precision other than the weights' own (``asked`` as the settings spell it): a model in memory
        is probed as it is, never cast, so the caller's (training) model stays untouched."""
        if asked != self.dtype_name():
            raise MedlamaInputError(f"the model in memory is {self.dtype_name()}, not {asked}: give dtype "
                                    f"{self.dtype_name()!r} (it is probed in its own precision)", file=str(self))


__all__ = ["LoadedModel"]
