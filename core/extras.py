"""Optional extras: a module that only an extra installs (``mteb``, ``harness`` for lm-eval, ``peft``, ``ray``)
is imported through :func:`require`, so that a missing one is a clear message naming the extra to install, not a
bare ``ModuleNotFoundError``."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from medlama.core.errors import MedlamaInputError


def require(module: str, extra: str, *, what: str | None = None) -> ModuleType:
    """Import ``module``, or refuse with the ``pip install "medlama[EXTRA]"`` that brings it. ``what``: what needs
    it, for the message (default: the module)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name is None or module.split(".")[0] != error.name.split(".")[0]:
            raise  # another module missing inside it: not the extra's
        raise MedlamaInputError(f"{what or module} needs the {extra!r} extra: pip install \"medlama[{extra}]\" "
                                f"(no module named {error.name!r})") from None


def check_available(module: str, extra: str, *, what: str | None = None) -> None:
    """Refuse, as :func:`require` does, when ``module`` is not installed, without importing it (an argument
    check before any work: importing ``ray`` or ``peft`` takes seconds)."""
    if importlib.util.find_spec(module) is None:
        raise MedlamaInputError(f"{what or module} needs the {extra!r} extra: pip install \"medlama[{extra}]\" "
                                f"(no module named {module!r})")
