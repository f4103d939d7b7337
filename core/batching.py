"""``--batch-size auto``: the largest batch that fits, found by trying.

A method's ``batch_size`` setting is a number or :data:`AUTO` (:data:`BatchSize`). With ``auto``, the work is
tried at :func:`starting_size` (several times the method's default) and, on an out-of-memory error, again at
half the size, by accelerate's :func:`~accelerate.utils.find_executable_batch_size` (which recognises CUDA, MPS
and CPU allocation failures and clears the device cache between tries). The size that worked is where the next
piece of work starts, and results record it beside ``"auto"`` (``resolved_batch_size``). A batch size changes
how many inputs share a forward pass, not what each input gets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar
import dataclasses

__all__ = ["AUTO", "AUTO_FACTOR", "BatchSize", "fit_batch", "is_auto", "starting_size"]

T = TypeVar("T")

#: The ``batch_size`` value that asks for the largest batch that fits.
AUTO = "auto"
#: A batch size setting: inputs per forward pass, or ``auto``.
BatchSize = int | Literal["auto"]
#: ``auto`` starts at this many times the method's default batch size.
AUTO_FACTOR = 8


def is_auto(settings: Any) -> bool:
    """Whether ``settings`` (a settings dataclass) asks for ``batch_size="auto"``."""
    return getattr(settings, "batch_size", None) == AUTO


def starting_size(settings: Any) -> int:
    """Where ``auto`` starts for ``settings``' class: :data:`AUTO_FACTOR` times its default batch size."""
    field = next(f for f in dataclasses.fields(settings) if f.name == "batch_size")
    default = field.default if isinstance(field.default, int) else 32
    return AUTO_FACTOR * default


def fit_batch(work: Callable[[int], T], start: int) -> tuple[T, int]:
    """``(work(size), size)`` for the first size, from ``start`` and halving on out-of-memory, at which ``work``
    runs; an error that is not out-of-memory is raised as it is."""
    # accelerate loads when this runs, not when the CLI parses its flags
    from accelerate.utils import find_executable_batch_size

    size = start
    tried: dict[str, int] = {}

    def halve() -> int:
        nonlocal size
        size //= 2
        return size

    @find_executable_batch_size(starting_batch_size=start, reduce_batch_size_fn=halve)
    def attempt(batch_size: int) -> T:
        tried["size"] = batch_size
        return work(batch_size)

    return attempt(), tried["size"]
