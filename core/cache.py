"""The one cache root of medlama: ``$MEDLAMA_CACHE``, else ``~/.cache/medlama``.

Downloads of the releases, datasets built for commands that were given no built folder, and the
context-variance corpus indexes all live below it, each in its own sub-folder.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The environment variable that moves the cache.
CACHE_ENV = "MEDLAMA_CACHE"


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """``cache_dir`` when given, else ``$MEDLAMA_CACHE``, else ``~/.cache/medlama``."""
    return Path(cache_dir or os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "medlama")


def cache_path(*parts: str, cache_dir: str | Path | None = None) -> Path:
    """A sub-folder (or file) of the cache root, e.g. ``cache_path("cv-index")``."""
    return cache_root(cache_dir).joinpath(*parts)
