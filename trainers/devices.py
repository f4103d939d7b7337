"""How precisely a rewiring runs (how many processes run it: :mod:`medlama.core.distributed`).

One process trains on CPU or one CUDA card; several (``torchrun`` / ``accelerate launch``) each take a
slice of every global batch (see :func:`medlama.trainers.trainer.rewire`). Precision ``bf16`` is CUDA
mixed precision on cards that support it and CPU autocast elsewhere; ``fp16`` needs CUDA.
"""

from __future__ import annotations

from medlama.core.errors import MedlamaInputError

PRECISIONS = ("auto", "fp32", "fp16", "bf16")


def resolve_precision(precision: str = "auto") -> str:
    """``"bf16"``, ``"fp16"`` or ``"fp32"`` for this machine (``auto``: bf16 where the CUDA card supports it,
    else fp16 on CUDA, else fp32). ``bf16`` without CUDA is CPU autocast (torch supports it on every CPU;
    fast only where the CPU has bf16 instructions); ``fp16`` without CUDA is an error."""
    # torch loads when this runs, not when medlama.trainers.devices is imported
    import torch

    if precision not in PRECISIONS:
        raise MedlamaInputError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    cuda = torch.cuda.is_available()
    if precision == "auto":
        if not cuda:
            return "fp32"
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if precision == "fp16" and not cuda:
        raise MedlamaInputError("fp16 mixed precision needs a CUDA GPU; use --precision fp32 or bf16 on CPU")
    if precision == "bf16" and cuda and not torch.cuda.is_bf16_supported():
        raise MedlamaInputError("this GPU does not support bf16; use --precision fp16")
    return precision
