"""Fetching pinned release files through the ``datasets`` download manager, checked against SHA-256.

The download manager caches by URL (below the builder's cache, ``$MEDLAMA_CACHE/builder/downloads``
unless told otherwise) and extracts archives into the same cache. The pinned files are immutable, so
no ETag is asked for (:func:`download_config`): a cached copy is reused without a request. A file whose
SHA-256 does not match is removed from the cache again (:func:`discard`), so that it is never used and
a retry fetches it anew.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from medlama.core.checksums import sha256_of
from medlama.core.errors import MedlamaInputError


def builder_cache(cache_dir: str | Path | None = None) -> Path:
    """Where the builders keep prepared data and downloads: ``cache_dir``, else ``<medlama cache>/builder``."""
    if cache_dir is not None:
        return Path(cache_dir)
    from medlama.core.cache import cache_root  # the one cache root ($MEDLAMA_CACHE)

    return cache_root() / "builder"


def download_config(cache_dir: str | Path | None = None):
    """The download settings of a build: the downloads folder of :func:`builder_cache`, no ETag requests."""
    # datasets loads when this runs, not when medlama.datasets.downloads is imported
    from datasets import DownloadConfig

    return DownloadConfig(cache_dir=str(builder_cache(cache_dir) / "downloads"), use_etag=False)


def download(dl_manager, urls, *, offline_hint: str):
    """``dl_manager.download(urls)`` with a download failure turned into a :class:`MedlamaInputError`."""
    try:
        return dl_manager.download(urls)
    except (OSError, ValueError) as error:  # ConnectionError (and offline mode) is an OSError
        first = urls if isinstance(urls, str) else next(iter(urls.values()))
        raise MedlamaInputError(f"download failed ({error}); {offline_hint}", file=first) from error


def discard(dl_manager, path: str | Path) -> None:
    """Remove a rejected download (and the download manager's notes on it) from the cache.

    Only files inside the download cache: a ``file://`` URL is served in place and must stay.
    """
    path = Path(path)
    cache = Path(dl_manager.download_config.cache_dir or "").resolve()
    if cache in path.resolve().parents:
        for leftover in (path, Path(f"{path}.json"), Path(f"{path}.lock")):
            leftover.unlink(missing_ok=True)


def check_sha256(dl_manager, path: str | Path, expected: str, *, url: str) -> str:
    """``expected`` if the downloaded ``path`` has that SHA-256; else discard it and raise, naming ``url``."""
    actual = sha256_of(Path(path))
    if actual != expected:
        discard(dl_manager, path)
        raise MedlamaInputError(f"checksum mismatch after download: SHA-256 {actual}, expected {expected}", file=url)
    return actual


def fetch_verified(dl_manager, urls: Mapping[str, str], expected: Mapping[str, str], *,
                   offline_hint: str) -> dict[str, Path]:
    """Download every URL of ``urls`` (name -> URL) and check each file against ``expected[name]``."""
    paths = download(dl_manager, dict(urls), offline_hint=offline_hint)
    for name, path in paths.items():
        check_sha256(dl_manager, path, expected[name], url=urls[name])
    return {name: Path(os.fspath(path)) for name, path in paths.items()}
