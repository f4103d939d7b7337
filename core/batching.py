"""``--batch-size auto``: the largest batch that fits, found by trying.

A method's ``batch_size`` setting is a number or :data:`AUTO` (:data:`BatchSize`). With ``auto``, the work is
tried at :func:`starting_size` (several times the method's default) and, on an out-of-memory error, again at
half the size, by accelerate's :func:`~accelerate.utils.find_executable_batch_size` (which recognises CUDA, MPS
and CPU allocation failures and clears the device cache between tries). The size that worked is where the next
piece of work starts, and results record it beside ``"auto"`` (``resolved_batch_size``). A batch size changes
how many inputs share a forward pass, not what each input gets.

Every batch size of inputs per forward pass is declared by :func:`batch_size_setting` (a number or ``auto``, at
least 1), and every command that offers ``--batch-size`` for them makes it from :class:`BatchSizeFlag`: one
flag, one reading of its word, one check, whichever command or method takes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar
import dataclasses

from medlama.core.settings import check, setting

__all__ = ["AUTO", "AUTO_FACTOR", "BATCH_SIZE_HELP", "BatchSize", "BatchSizeFlag", "batch_size_setting", "fit_batch",
           "is_auto", "starting_size"]

T = TypeVar("T")

#: The ``batch_size`` value that asks for the largest batch that fits.
AUTO = "auto"
#: A batch size setting: inputs per forward pass, or ``auto``.
BatchSize = int | Literal["auto"]
#: ``auto`` starts at this many times the method's default batch size.
AUTO_FACTOR = 8
#: What ``--batch-size`` means wherever it is offered (``medlama rewire``'s and ``optiprompt``'s are other
#: settings: pairs or examples per optimiser step).
BATCH_SIZE_HELP = "inputs per forward pass (or auto: the largest batch that fits, halved on out-of-memory)"


def batch_size_setting(default: int | None, *, help: str, **more: Any) -> Any:
    """The one declaration of a batch size of inputs per forward pass (annotated :data:`BatchSize`): a whole
    number of at least 1, or ``auto``, spelt ``--batch-size N`` on the command line. ``help``: what the inputs
    are for this method; ``more``: further :func:`~medlama.core.settings.setting` keywords."""
    return setting(default, help=help, metavar="N", min=1, **more)


@dataclasses.dataclass(frozen=True)
class BatchSizeFlag:
    """``--batch-size`` of a command that runs methods or rankers (``medlama probe``, ``ucm``, ``recipe``,
    ``sweep``): one value for every method it runs, each method's own default where it is not given."""

    batch_size: BatchSize | None = batch_size_setting(None, help=BATCH_SIZE_HELP, show_default=False)

    def __post_init__(self) -> None:
        check(self)


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
