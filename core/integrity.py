"""What an output folder held when medlama wrote it, and the check that it still does.

:func:`medlama.core.atomic.atomic_directory` records, in the folder's ownership record
(:data:`medlama.core.atomic.OWNER_NAME`), the size and SHA-256 of every file it wrote (:func:`file_records`; hidden
files are not recorded). A command that changes a file of a finished output in place (the recipe writing
probing scores into a rewired model's card) records it again (:func:`record_again`).

:func:`check_vouched` is what ``medlama push-dataset`` and ``push-model`` ask before uploading: the folder was
written by one of the expected commands, and each file to upload is one that command wrote, unchanged. A
hand-made card, a weights file cut short or replaced, a file added by hand: each is refused, naming the file
and what differs. Safetensors weights are also checked for a whole body (:func:`safetensors_problem`), which
says "truncated" rather than only "changed".
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable
from pathlib import Path

from medlama.core.checksums import sha256_of
from medlama.core.atomic_files import atomic_write_text
from medlama.core.errors import MedlamaInputError
from medlama.core.ownership import OWNER_NAME, owner_record

#: The key of the ownership record that lists the files.
FILES_KEY = "files"


def _visible(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*")
                  if path.is_file() and not any(part.startswith(".") for part in path.relative_to(folder).parts))


def file_records(folder: str | Path, previous: dict | None = None) -> dict[str, dict]:
    """``{relative POSIX path: {"size": bytes, "sha256": hex}}`` of every visible file under ``folder``.

    ``previous``: records to reuse for files whose size and modification time are unchanged (hard-linked
    checkpoints carried from one output to the next are not read again)."""
    folder = Path(folder)
    records = {}
    for path in _visible(folder):
        relative = path.relative_to(folder).as_posix()
        stat = path.stat()
        known = (previous or {}).get(relative)
        if (isinstance(known, dict) and known.get("size") == stat.st_size
                and known.get("mtime_ns") == stat.st_mtime_ns and isinstance(known.get("sha256"), str)):
            records[relative] = dict(known)
            continue
        records[relative] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha256_of(path)}
    return records


def record_again(folder: str | Path, names: Iterable[str]) -> None:
    """Record anew the files ``names`` (relative paths) of a finished output that a medlama command has just
    rewritten in place; a folder without an ownership record is left as it is."""
    folder = Path(folder)
    record = owner_record(folder)
    if record is None or not isinstance(record.get(FILES_KEY), dict):
        return
    for name in names:
        path = folder / name
        stat = path.stat()
        record[FILES_KEY][Path(name).as_posix()] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
                                                    "sha256": sha256_of(path)}
    atomic_write_text(folder / OWNER_NAME, json.dumps(record) + "\n")


def safetensors_problem(path: str | Path) -> str | None:
    """What is wrong with a ``.safetensors`` file's layout (header length, header, data length), or None."""
    path = Path(path)
    size = path.stat().st_size
    try:
        with open(path, "rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            if length > size - 8:
                return f"its header claims {length:,} bytes but the file has {size:,}: the file is truncated"
            header = json.loads(handle.read(length))
    except (struct.error, ValueError, UnicodeDecodeError):
        return "its header cannot be read: not a safetensors file, or a truncated one"
    ends = [entry["data_offsets"][1] for key, entry in header.items()
            if key != "__metadata__" and isinstance(entry, dict) and "data_offsets" in entry]
    expected = 8 + length + max(ends, default=0)
    if expected != size:
        return (f"its tensors need {expected:,} bytes but the file has {size:,}: "
                + ("the file is truncated" if size < expected else "the file has bytes after its tensors"))
    return None


def change_since(path: Path, entry: dict) -> str | None:
    """How ``path`` differs from its record ``entry`` (:func:`file_records`), or None when it does not."""
    size = path.stat().st_size
    if size != entry.get("size"):
        return f"{entry.get('size'):,} bytes when written, {size:,} now"
    return "same size, different SHA-256" if sha256_of(path) != entry.get("sha256") else None


def check_vouched(folder: str | Path, files: Iterable[str], *, kinds: Iterable[str], command: str) -> None:
    """Refuse to publish ``files`` (relative paths) of ``folder`` unless medlama vouches for them.

    The folder's ownership record must name one of ``kinds`` (the commands that write what ``command`` uploads)
    and list every file with the size and SHA-256 it has now; safetensors weights must be whole. Raises
    :class:`MedlamaInputError` naming the folder, the file and what failed.
    """
    folder = Path(folder)
    kinds = tuple(kinds)
    writers = " or ".join(f"`medlama {kind}`" for kind in kinds)
    record = owner_record(folder)
    kind = record.get("kind") if record else None
    if not isinstance(kind, str) or not kind:
        raise MedlamaInputError(
            f"`medlama {command}` uploads only a folder written by {writers}, and this one has no ownership record "
            f"({OWNER_NAME}) saying it was: rebuild it with medlama (nothing was uploaded)", file=folder)
    if kind not in kinds:
        raise MedlamaInputError(f"this folder was written by `medlama {kind}`; `medlama {command}` uploads only a "
                                f"folder written by {writers} (nothing was uploaded)", file=folder)
    recorded = record.get(FILES_KEY)
    if not isinstance(recorded, dict):
        raise MedlamaInputError(
            f"the ownership record lists no files with their sizes and SHA-256: the folder was written by an "
            f"earlier medlama version, so nothing vouches that its files are the ones `medlama {kind}` wrote; "
            f"write it again with `medlama {kind}` (nothing was uploaded)", file=folder)
    for name in files:
        path = folder / name
        entry = recorded.get(name)
        if not isinstance(entry, dict):
            raise MedlamaInputError(f"{name!r} was not written by `medlama {kind}` (its ownership record does not "
                                    "list it): a file added or replaced by hand is not uploaded; remove it, or "
                                    f"write the folder again (nothing was uploaded)", file=folder)
        if name.endswith(".safetensors"):
            problem = safetensors_problem(path)
            if problem is not None:
                raise MedlamaInputError(f"{name!r}: {problem} (nothing was uploaded)", file=folder)
        change = change_since(path, entry)
        if change is not None:
            raise MedlamaInputError(f"{name!r} has changed since `medlama {kind}` wrote it ({change}): a file "
                                    "edited by hand is not uploaded; write the folder again (nothing was uploaded)",
                                    file=folder)
