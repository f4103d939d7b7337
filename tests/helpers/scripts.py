"""The benchmark scripts (``benchmarks/*.py``, ``benchmarks/device/*.py``: files, not a package) as modules for
the tests that run them."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
DEVICE = BENCHMARKS / "device"


def script(name: str, folder: Path = BENCHMARKS) -> ModuleType:
    """``folder/NAME.py`` imported as the module ``NAME``, its folder on ``sys.path`` while it is imported (so that
    it finds the scripts beside it), and only then."""
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))
