"""Provenance of a result, so that a paper can cite it: versions, data, model, settings, command, date, device.

Every ``results.json`` (probe, recipe, ucm) and the rewiring record carry :func:`provenance`'s block. Models
and data are identified by what a reader can check: a Hub id with its revision, or a content hash of a
local folder (file names, sizes and bytes; never its local path, which means nothing on another machine).
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import shlex
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from medlama.core.public_paths import public_word, with_public_model
from medlama.core.defaults import BUILD_INFO
from medlama.core.defaults import default_model_path

__all__ = ["command_line", "device_description", "folder_hash", "model_identity", "package_versions", "provenance",
           "public_word", "with_public_model"]

#: The packages whose versions decide the numbers.
PACKAGES = ("medlama", "torch", "transformers", "sentence-transformers", "datasets", "huggingface-hub",
            "evaluate", "faiss-cpu", "numpy")

#: Files that do not change what a model computes or what a dataset holds.
_IGNORED = {".git", "__pycache__", "checkpoints", BUILD_INFO, ".medlama-output.json"}


def package_versions(packages: Sequence[str] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each package (``None`` when it is not installed)."""
    out: dict[str, str | None] = {}
    for name in packages:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def folder_hash(folder: str | Path, *, ignore: Sequence[str] = tuple(_IGNORED)) -> str:
    """SHA-256 over the relative paths and bytes of every file below ``folder`` (sorted; ``ignore``d names
    skipped at any depth). Two copies of one model or dataset on different machines hash the same.

    The bytes are read once per version of the folder (its files' paths, sizes and modification times): a run
    that records one model or dataset in several results hashes it once."""
    root = Path(folder).resolve()
    files = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        relative = path.relative_to(root)
        if not any(part in ignore for part in relative.parts):
            stat = path.stat()
            files.append((relative.as_posix(), stat.st_size, stat.st_mtime_ns))
    return _hash_files(str(root), tuple(files))


@functools.lru_cache(maxsize=32)
def _hash_files(root: str, files: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for relative, _size, _mtime in files:
        digest.update(relative.encode() + b"\0")
        with (Path(root) / relative).open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()


def model_identity(model: Any, revision: str | None = None) -> dict[str, Any]:
    """What identifies a model: ``{"id", "revision"}`` for a Hub id, ``{"name", "sha256"}`` for a folder.
    ``revision``: the commit the run loaded (the loaded config's ``_commit_hash``), ``None`` when unknown;
    never guessed from the cache, which may hold another revision than the one loaded.

    ``model`` may be ``None`` (the bundled encoder), a path or Hub id, or a loaded model (its
    ``name_or_path``). A folder is named by its last path component only.
    """
    if model is None:
        return {"id": "sentence-transformers/all-MiniLM-L6-v2", "bundled": True,
                "sha256": folder_hash(default_model_path())}
    if not isinstance(model, (str, Path)):
        name = getattr(model, "name_or_path", None) or getattr(getattr(model, "config", None), "_name_or_path", None)
        if not name:  # none, or "" (a model built from a config), which is no folder (not the current one)
            return {"id": type(model).__name__, "loaded_object": True}
        out = model_identity(name, getattr(getattr(model, "config", None), "_commit_hash", None))
        out["loaded_object"] = True
        return out
    path = Path(model).expanduser()
    if path.is_dir():
        return {"name": path.resolve().name, "sha256": folder_hash(path)}
    return {"id": str(model), "revision": revision}


def device_description(device: str | None = None) -> dict[str, Any]:
    """The device the numbers were computed on (CPU model or GPU name), and the torch build."""
    info: dict[str, Any] = {"platform": platform.platform(), "python": platform.python_version(),
                            "processor": platform.processor() or platform.machine()}
    try:
        # torch loads when this runs, not when the CLI parses its flags
        import torch

        info["torch_cuda"] = torch.version.cuda
        if (device or "").startswith("cuda") or (device is None and torch.cuda.is_available()):
            if torch.cuda.is_available():
                info["gpu"] = torch.cuda.get_device_name(0)
        info["device"] = device or ("cuda" if torch.cuda.is_available() else "cpu")
    except ImportError:
        info["device"] = device or "cpu"
    return info


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command as typed, with any local path reduced to its last component (``medlama probe ...``,
    :func:`medlama.core.public_paths.public_word`)."""
    words = list(sys.argv if argv is None else argv)
    if words and Path(words[0]).name in ("medlama", "__main__.py", "cli.py"):
        words = ["medlama", *words[1:]]
    return shlex.join(public_word(word) for word in words)


def provenance(*, settings: Mapping[str, Any] | None = None, data: Mapping[str, Any] | None = None,
               model: Any = None, models: Sequence[Any] | None = None, device: str | None = None,
               argv: Sequence[str] | None = None, revision: str | None = None) -> dict[str, Any]:
    """The block every result file carries (see the module docstring); ``revision``: the commit of the Hub
    model ``model`` that was loaded."""
    block: dict[str, Any] = {
        "versions": package_versions(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command_line(argv),
        "device": device_description(device),
    }
    if data is not None:
        block["data"] = dict(data)
    if models is not None:
        block["models"] = [model_identity(m) for m in models]
    elif model is not None or settings is not None:
        block["model"] = model_identity(model, revision)
    if settings is not None:
        block["settings"] = json.loads(json.dumps(settings, default=str))
    return block
