"""The file record of a built folder: the data files a build wrote, named by their content, and the check that
a folder still holds exactly them before any config of it is read.

:func:`seal` runs as a build finishes: every data file the card will name gets its content in its name
(``data/hard/may_treat.parquet`` becomes ``data/hard/may_treat-<first 8 hex of its SHA-256>.parquet``), and
``build_info.json`` records each file's rows and SHA-256 and which configs have unique ``id`` values. A
card that names files by their content is what makes ``datasets.load_dataset(DIR, config)`` safe: ``datasets``
keys the cache of a local folder by the folder's name and its card, so two folders named ``medlama`` with
different rows, or a folder rebuilt in place, now differ in their cards and never share a cache entry.

:func:`check_folder` and :func:`check_files` run before a config is loaded (``medlama.datasets.folders``):
a file under the data folders that the build did not write (``data/hard/may_treat (1).parquet``, a copy
that would count a relation twice), a recorded file that is missing, a file that is not a readable Parquet
file (truncated), or one whose rows or bytes differ from the record is a :class:`MedlamaInputError` naming it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from medlama.core.errors import MedlamaInputError
from medlama.core.defaults import BUILD_INFO
from medlama.core.checksums import sha256_of

MARKER = BUILD_INFO
#: Hex digits of a file's SHA-256 in its name.
FINGERPRINT = 8
_REBUILD = "rebuild the folder with `medlama build`"


def fingerprinted_name(relative: str, digest: str) -> str:
    """``data/hard/may_treat.parquet`` -> ``data/hard/may_treat-<digest[:8]>.parquet``."""
    path = Path(relative)
    return path.with_name(f"{path.stem}-{digest[:FINGERPRINT]}{path.suffix}").as_posix()


def seal(folder: Path, configs: Mapping[str, Mapping[str, Sequence[str]]]) -> tuple[dict, dict]:
    """Give every file that ``configs`` (config -> split -> relative paths) names its content-fingerprinted
    name; returns ``(configs with the new names, record)`` where the record goes into ``build_info.json``."""
    # pyarrow loads when this runs, not when medlama.datasets.records is imported
    import pyarrow.parquet as pq

    names: dict[str, str] = {}
    files: dict[str, dict] = {}
    for relative in sorted({path for splits in configs.values() for paths in splits.values() for path in paths}):
        digest = sha256_of(folder / relative)
        names[relative] = fingerprinted_name(relative, digest)
        (folder / relative).rename(folder / names[relative])
        files[names[relative]] = {"rows": pq.ParquetFile(folder / names[relative]).metadata.num_rows,
                                  "sha256": digest}
    # Sorted by the names they had: the order in which a glob over the folder read them before files were named
    # after their content (a config's row order, which a bootstrap interval depends on).
    sealed = {config: {split: [names[path] for path in sorted(paths)] for split, paths in splits.items()}
              for config, splits in configs.items()}
    unique = sorted(config for config, splits in sealed.items()
                    if all(_ids_unique(folder, paths) for paths in splits.values())
                    and any(_has_id(folder, paths) for paths in splits.values()))
    return sealed, {"files": files, "unique_ids": unique}


def _has_id(folder: Path, paths: Sequence[str]) -> bool:
    # pyarrow loads when this runs, not when medlama.datasets.records is imported
    import pyarrow.parquet as pq

    return any("id" in pq.ParquetFile(folder / path).schema_arrow.names for path in paths)


def _ids_unique(folder: Path, paths: Sequence[str]) -> bool:
    # pyarrow loads when this runs, not when medlama.datasets.records is imported
    import pyarrow.parquet as pq

    seen: set = set()
    count = 0
    for path in paths:
        if "id" not in pq.ParquetFile(folder / path).schema_arrow.names:
            return False
        ids = pq.read_table(folder / path, columns=["id"]).column("id").to_pylist()
        seen.update(ids)
        count += len(ids)
    return len(seen) == count


def read_record(folder: Path) -> dict | None:
    """The file record of ``build_info.json``; ``None`` for a folder without one (a dataset that medlama did not
    build: it is read as its card says). A medlama build without a record is an error asking for a rebuild."""
    path = folder / MARKER
    if not path.is_file():
        return None
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise MedlamaInputError(f"unreadable build record: {error}", file=path) from None
    record = info.get("record") if isinstance(info, dict) else None
    if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
        raise MedlamaInputError("the build record names no data files (the folder was built by an earlier medlama, "
                                f"whose files cannot be checked); {_REBUILD}", file=path)
    return record


def has_record(folder: Path) -> bool:
    """Whether ``folder`` holds a build with a file record (a cached build made by an earlier medlama has none, and
    is built again)."""
    try:
        return read_record(folder) is not None
    except MedlamaInputError:
        return False


def has_choices(folder: Path) -> bool:
    """Whether ``folder``'s build wrote multiple-choice configs (a cached build made before them is built again)."""
    try:
        return "choices" in json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return False


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


def check_folder(folder: Path, record: Mapping) -> None:
    """Every recorded file is there, and no other file under the folders that hold them (hidden files aside:
    no reader takes them). Checked once per version of the folder's listing."""
    tops = sorted({name.split("/")[0] for name in record["files"] if "/" in name})
    listing = tuple(sorted(
        (path.relative_to(folder).as_posix(), _stat(path)) for top in tops for path in (folder / top).rglob("*")
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(folder).parts)))
    _check_listing(str(folder), tuple(sorted(record["files"])), listing)


@functools.lru_cache(maxsize=32)
def _check_listing(folder: str, recorded: tuple[str, ...], listing: tuple) -> None:
    present = {name for name, _ in listing}
    stray = sorted(present - set(recorded))
    if stray:
        raise MedlamaInputError(f"{stray[0]!r} is not a file this build wrote (a stray copy would be read as "
                                f"more rows{f'; {len(stray) - 1} more' if len(stray) > 1 else ''}): remove it, or "
                                f"{_REBUILD}", file=Path(folder) / stray[0])
    missing = [name for name in recorded if name not in present]
    if missing:
        more = f" ({len(missing) - 1} more missing)" if len(missing) > 1 else ""
        raise MedlamaInputError(f"{missing[0]!r} is missing: the build wrote it{more}, and without it the configs "
                                f"that hold it would lose rows; {_REBUILD}",
                                file=Path(folder) / missing[0])


def check_files(folder: Path, names: Iterable[str], record: Mapping | None) -> None:
    """Each file is a readable Parquet file; with a ``record``, one that the build wrote, with the rows and bytes it
    recorded."""
    for name in names:
        path = folder / name
        entry = None
        if record is not None:
            entry = record["files"].get(name)
            if entry is None:
                raise MedlamaInputError(f"the card names {name!r}, a file this build did not write; {_REBUILD}",
                                        file=path)
        _check_file(str(path), _stat(path), None if entry is None else (entry.get("rows"), entry.get("sha256")))


@functools.lru_cache(maxsize=256)
def _check_file(path: str, version: tuple[int, int] | None, expected: tuple[int, str] | None) -> None:
    # pyarrow loads when this runs, not when medlama.datasets.records is imported
    import pyarrow as pa
    import pyarrow.parquet as pq

    if version is None:
        raise MedlamaInputError(f"missing data file; {_REBUILD}", file=Path(path))
    try:
        rows = pq.ParquetFile(path).metadata.num_rows
    except (pa.ArrowException, OSError) as error:
        raise MedlamaInputError(f"not a readable Parquet file (truncated or damaged?): {error}; {_REBUILD}",
                                file=Path(path)) from None
    if expected is None:
        return
    if rows != expected[0]:
        raise MedlamaInputError(f"has {rows:,} rows, the build wrote {expected[0]:,}; {_REBUILD}", file=Path(path))
    digest = sha256_of(Path(path))
    if digest != expected[1]:
        raise MedlamaInputError(f"its bytes differ from what the build wrote (SHA-256 {digest}, recorded "
                                f"{expected[1]}): modified after the build; {_REBUILD}", file=Path(path))


def check_unique_ids(folder: Path, config: str, data, record: Mapping | None) -> None:
    """The loaded ``data`` of ``config`` has no ``id`` twice, when the build recorded its ids as unique."""
    if record is None or config not in record.get("unique_ids", ()) or "id" not in data.column_names:
        return
    ids = data["id"]
    if len(set(ids)) != len(ids):
        seen: set = set()
        twice = next(value for value in ids if value in seen or seen.add(value))
        raise MedlamaInputError(f"config {config!r}: id {twice!r} appears more than once, though the build wrote "
                                f"each id once; {_REBUILD}", file=folder)
