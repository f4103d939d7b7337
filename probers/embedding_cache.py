"""Candidate embeddings kept between probes: a second probe of the same model on the same pool encodes no
candidate (the whole hard set's 17,532 names took most of a quick ``--limit 20`` probe).

The cache key is everything the vectors depend on, so that a vector served is the vector encoding would give
now: the model's files (their SHA-256; a loaded model object or a Hub id is not cached), how it was loaded (a
LoRA adapter merged in, by its content), the encoder and its settings (layers, pooling, max length, batch size:
rows batched otherwise round otherwise), the device (a GPU by its name and CUDA version), the weights'
precision, the threads, the versions of torch, transformers and sentence-transformers, and the names
themselves. Any change gives another key. Entries live in medlama's cache (``$MEDLAMA_CACHE/embeddings``), one
``.npz`` per key, written atomically: two probes writing the same entry write the same bytes, and a reader sees
a whole file or none. ``MEDLAMA_EMBEDDING_CACHE=0`` turns the cache off. A cache that cannot be written (a full
disk, a read-only file system) is skipped with a one-line warning, and the probe goes on: its numbers do not
depend on the cache.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medlama.core.atomic import atomic_write_bytes
from medlama.core.cache import cache_path
from medlama.core.provenance import folder_hash, package_versions

#: The cache's sub-folder, and the variable that turns it off.
FOLDER, SWITCH = "embeddings", "MEDLAMA_EMBEDDING_CACHE"
#: What ``results.json`` records when the vectors were encoded but the cache could not be written.
NOT_STORED = "not stored"


def cache_key(encoder: Any, texts: Sequence[str], max_length: int | None, loaded: Any = None) -> str | None:
    """The key of ``texts`` encoded by ``encoder`` at ``max_length`` (module docstring); ``None`` when the
    cache is off or the model cannot be identified by its files. ``loaded``: how the model was loaded
    (:func:`medlama.core.models.loading_with`'s record: a LoRA adapter merged in, by its content; the revision)."""
    if os.environ.get(SWITCH, "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    folder = Path(str(getattr(encoder, "model_path", "")))
    if getattr(encoder, "borrowed", False) or not folder.is_dir():
        return None
    import torch  # torch is loaded already: the encoder holds a model

    parameter = next(encoder.model.parameters(), None)
    versions = package_versions(("torch", "transformers", "sentence-transformers"))
    names = hashlib.sha256("\0".join(texts).encode()).hexdigest()
    record = {"model": folder_hash(folder), "encoder": type(encoder).__name__,
              "layers": list(getattr(encoder, "layers", [-1])), "pooling": getattr(encoder, "pooling", None),
              "max_length": max_length if max_length is not None else getattr(encoder, "max_length", None),
              "own_max_length": getattr(encoder.model, "max_seq_length", None),
              "batch_size": encoder.batch_size, "device": str(encoder.device),
              "dtype": str(parameter.dtype) if parameter is not None else None, "threads": torch.get_num_threads(),
              "versions": versions, "names": names, "count": len(texts), "loaded": loaded,
              "gpu": (torch.cuda.get_device_name(encoder.device), torch.version.cuda)
              if str(encoder.device).startswith("cuda") else None}
    return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()


def encode_cached(encoder: Any, texts: Sequence[str], max_length: int | None, *, progress: str | None = None,
                  role: str | None = None, loaded: Any = None) -> tuple[dict[int, np.ndarray], str]:
    """``encoder.encode(texts, ...)``, served from the cache when it holds them: ``(vectors, how)`` with ``how``
    ``served`` (from the cache), ``stored`` (encoded and kept), ``not stored`` (encoded, but the cache could not
    be written: a full disk, a read-only or unwritable cache; a one-line warning says why and names
    ``MEDLAMA_EMBEDDING_CACHE=0``) or ``off`` (not cacheable)."""
    key = cache_key(encoder, texts, max_length, loaded)
    if key is None:
        return encoder.encode(texts, max_length, progress=progress, role=role), "off"
    path = cache_path(FOLDER, f"{key}.npz")
    try:
        with np.load(path) as stored:
            vectors = {int(layer): stored[layer] for layer in stored.files}
        if all(v.shape[0] == len(texts) for v in vectors.values()) and vectors:
            return vectors, "served"
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        pass  # absent, or not a whole entry: encode again and replace it
    vectors = encoder.encode(texts, max_length, progress=progress, role=role)
    buffer = io.BytesIO()
    np.savez(buffer, **{str(layer): array for layer, array in vectors.items()})
    try:
        atomic_write_bytes(path, buffer.getvalue())
    except OSError as error:  # a full disk, a read-only cache: the probe needs no cache, so it goes on without
        reason = error.strerror or str(error) or type(error).__name__
        print(f"medlama: warning: the candidate embeddings were not stored in the cache ({path.parent}: {reason}); "
              f"the probe goes on without it ({SWITCH}=0 turns the cache off)", file=sys.stderr)
        return vectors, NOT_STORED
    return vectors, "stored"

