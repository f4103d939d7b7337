"""A built dataset folder wherever it is, and one config of it loaded without the ``datasets`` cache mixing
folders up.

:func:`resolve_folder` accepts what ``load_dataset`` reads: a folder written by ``medlama build``, the
upload tree of ``medlama push-dataset --dry-run DIR`` (``DIR`` itself or ``DIR/<name>``), or a Hub dataset
id (``you/medlama``, ``you/medlama@v1`` for a branch, tag or commit), fetched once into the Hugging Face
cache (``huggingface_hub.snapshot_download``; offline, the cached snapshot). It returns the local folder and
what identifies the data (:attr:`DataFolder.info`, never a local path): ``kind`` (``folder`` or ``hub``),
``id`` (the Hub id, or the repository a dry run was made for, else the folder's name), ``revision`` (the
Hub commit), ``release_commit`` (the release the build recorded), ``release_verified`` (whether its files
were the pinned ones; ``release_differs`` lists those that were not) and ``sha256`` (of the folder's files).

:func:`load_config` reads one config's Parquet files by their absolute paths, after checking them against what
the build recorded (:mod:`medlama.datasets.records`): the exact files the card names, no stray file beside
them, no recorded file missing, each file readable with the rows and bytes the build wrote, and ids unique
where the build wrote them so. A damaged folder is an error naming the file, never a different number.
``datasets.load_dataset(DIR, config)`` is safe on a folder built by medlama too: its files are named after
their content and its card names them, so the card (by which ``datasets`` 5.2 keys a local folder's cache,
with the folder's name) differs whenever the rows do.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from medlama.core.errors import MedlamaInputError
from medlama.core.defaults import BUILD_INFO
from medlama.core.provenance import folder_hash
from medlama.datasets.export import quiet_datasets

_COMMIT = re.compile(r"[0-9a-f]{40}")
_FORMATS = {".parquet": "parquet"}


@dataclass(frozen=True)
class DataFolder:
    """A local dataset folder and what identifies its data (module docstring)."""

    path: Path
    info: dict = field(default_factory=dict, compare=False)


def identity(folder: Path, kind: str, repo_id: str | None = None, revision: str | None = None) -> dict:
    """What identifies the data of ``folder`` (module docstring); ``kind`` says where it came from.

    ``release_verified``: whether the build's input was checked against its pinned SHA-256 (a ``--no-verify``
    build of a modified copy is not the release; ``release_differs`` then names its files that differ)."""
    try:
        report = json.loads((folder / BUILD_INFO).read_text(encoding="utf-8")).get("report") or {}
    except (OSError, ValueError, AttributeError):
        report = {}
    report = report if isinstance(report, dict) else {}
    out = {"kind": kind, "id": repo_id or folder.name, "revision": revision, "release_commit": report.get("commit"),
           "release_verified": report.get("checksums_verified"), "sha256": folder_hash(folder)}
    differs = [*report.get("checksum_mismatches", ()), *report.get("checksums_unchecked", ())]
    if differs:
        out["release_differs"] = differs
    return out


def _dry_run_tree(folder: Path) -> tuple[Path, str] | None:
    """``(tree, repo_id)`` when ``folder`` is a ``push-dataset --dry-run`` folder (a manifest beside the tree)."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        repo_id = manifest["repo_id"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    tree = folder / str(repo_id).split("/")[-1]
    if manifest.get("repo_type") != "dataset" or not (tree / "README.md").is_file():
        return None
    return tree, repo_id


def split_hub_id(value: str) -> tuple[str, str | None] | None:
    """``(repo_id, revision)`` of ``user/name`` or ``user/name@revision``; None when ``value`` is not one."""
    # huggingface_hub loads when this runs, not when the CLI parses its flags
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    repo_id, _, revision = value.partition("@")
    if repo_id.count("/") != 1 or repo_id.startswith((".", "/", "~")):
        return None
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        return None
    return repo_id, revision or None


def _snapshot(repo_id: str, revision: str | None) -> tuple[Path, str | None]:
    """The Hub dataset ``repo_id`` at ``revision`` as a local folder, and its commit."""
    # huggingface_hub loads when this runs, not when the CLI parses its flags
    import huggingface_hub
    from huggingface_hub.errors import (GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError,
                                        RevisionNotFoundError)

    where = f"{repo_id}{'@' + revision if revision else ''}"
    try:
        path = Path(huggingface_hub.snapshot_download(repo_id, repo_type="dataset", revision=revision))
    except GatedRepoError:
        raise MedlamaInputError(f"the Hub dataset {where} is gated: request access on "
                                f"https://huggingface.co/datasets/{repo_id} and log in (`hf auth login`)") from None
    except RevisionNotFoundError:
        raise MedlamaInputError(f"the Hub dataset {repo_id} has no revision {revision!r}") from None
    except RepositoryNotFoundError:
        raise MedlamaInputError(f"no Hub dataset {repo_id!r} (or it is private: log in with `hf auth login`), "
                                "and no local folder of that name") from None
    except LocalEntryNotFoundError:
        raise MedlamaInputError(f"the Hub dataset {where} is not in the local Hugging Face cache and the Hub "
                                "cannot be reached (offline); run once online, or pass a local folder") from None
    # snapshot_download returns .../snapshots/<commit>: the commit the revision resolved to.
    return path, path.name if _COMMIT.fullmatch(path.name) else revision


def resolve_folder(data: str | Path, *, dataset: str = "medlama") -> DataFolder:
    """The local folder of ``data`` (a built folder, a ``push-dataset`` dry run, a Hub dataset id) and its
    identity; ``dataset`` names the build command in errors."""
    folder = Path(data)
    if folder.exists():
        if (folder / "README.md").is_file():
            return DataFolder(folder, identity(folder, "folder", None, None))
        dry_run = _dry_run_tree(folder) if folder.is_dir() else None
        if dry_run is not None:
            return DataFolder(dry_run[0], identity(dry_run[0], "folder", dry_run[1], None))
        raise MedlamaInputError(f"not a built dataset folder (no README.md); run `medlama build {dataset} --out DIR`",
                                file=folder)
    hub = split_hub_id(str(data))
    if hub is None:
        raise MedlamaInputError("no such dataset folder, and not a Hub dataset id (user/name or "
                                f"user/name@revision); build one with `medlama build {dataset} --out DIR`", file=folder)
    path, commit = _snapshot(*hub)
    if not (path / "README.md").is_file():
        raise MedlamaInputError(f"the Hub dataset {hub[0]} has no README.md card declaring its configs")
    return DataFolder(path, identity(path, "hub", hub[0], commit))


def folder_configs(folder: str | Path) -> dict[str, dict[str, list[str]]]:
    """Config name -> split -> data file patterns, as the folder's card (YAML ``configs``) declares them.

    The card is parsed once per version of the file (its path, size and modification time): a probe of
    several relations reads a config per relation."""
    readme = (Path(folder) / "README.md").resolve()
    try:
        stat = readme.stat()
    except OSError:
        return _parse_configs(str(readme), None)  # not cached: the error says what is wrong
    parsed = _cached_configs(str(readme), (stat.st_size, stat.st_mtime_ns))
    return {name: {split: list(paths) for split, paths in splits.items()} for name, splits in parsed.items()}


@functools.lru_cache(maxsize=64)
def _cached_configs(readme: str, version: tuple[int, int]) -> dict[str, dict[str, list[str]]]:
    return _parse_configs(readme, version)


def _parse_configs(readme: str, _version) -> dict[str, dict[str, list[str]]]:
    # huggingface_hub loads when this runs, not when the CLI parses its flags
    from huggingface_hub import DatasetCard

    try:
        configs = DatasetCard.load(readme).data.get("configs") or []
    except Exception as error:  # a card that does not parse: say where
        raise MedlamaInputError(f"cannot read the dataset card: {error}", file=Path(readme)) from None
    out: dict[str, dict[str, list[str]]] = {}
    for config in configs:
        entries = config.get("data_files") or []
        entries = [entries] if isinstance(entries, (str, dict)) else entries
        splits: dict[str, list[str]] = {}
        for entry in entries:
            split, paths = (entry.get("split", "train"), entry.get("path")) if isinstance(entry, dict) else ("train", entry)
            splits.setdefault(split, []).extend([paths] if isinstance(paths, str) else list(paths or []))
        out[str(config.get("config_name", "default"))] = splits
    return out


def load_config(folder: str | Path, config: str, split: str = "test"):
    """The ``split`` of ``config`` of a local dataset folder as a ``datasets.Dataset`` (module docstring)."""
    # datasets loads when this runs, not when the CLI parses its flags
    from datasets import load_dataset

    # datasets.records loads when a folder is read, not when the CLI parses its flags
    from medlama.datasets import records

    folder = Path(folder).resolve()
    configs = folder_configs(folder)
    if config not in configs:
        raise MedlamaInputError(f"cannot load config {config!r}: no such config; the dataset has {sorted(configs)}",
                                file=folder)
    if split not in configs[config]:
        raise MedlamaInputError(f"cannot load config {config!r}, split {split!r}: no such split; it has "
                                f"{sorted(configs[config])}",
                                file=folder)
    record = records.read_record(folder)
    if record is not None:  # a medlama build: the card names its exact files, checked against the record
        records.check_folder(folder, record)
        names = list(dict.fromkeys(configs[config][split]))
        files = [folder / name for name in names]
    else:  # another dataset: its card's patterns, as datasets reads them
        files = sorted({path for pattern in configs[config][split] for path in folder.glob(pattern) if path.is_file()})
        names = [path.relative_to(folder).as_posix() for path in files]
    if not files:
        raise MedlamaInputError(f"config {config!r}, split {split!r}: no file matches "
                                f"{configs[config][split]}", file=folder)
    formats = {_FORMATS.get(path.suffix) for path in files}
    if len(formats) != 1 or None in formats:
        raise MedlamaInputError(f"config {config!r}: only Parquet data files are read here, got "
                                f"{sorted({path.suffix for path in files})}", file=folder)
    records.check_files(folder, names, record)

    with quiet_datasets():
        loaded = load_dataset(formats.pop(), data_files={split: [str(path) for path in files]}, split=split)
    records.check_unique_ids(folder, config, loaded, record)
    # Which folder and config the rows are: selections, shuffles and filters keep a Dataset's info, so a
    # part of it can still be ranked against its config's candidate pool (medlama.runs.queries).
    loaded.info.description = json.dumps({_LOADED_FROM: {"folder": str(folder), "config": config}})
    return loaded


_LOADED_FROM = "medlama_loaded_from"


def loaded_from(dataset) -> tuple[Path, str] | None:
    """``(folder, config)`` that :func:`load_config` read ``dataset`` (or a part of it) from, or ``None`` for a
    Dataset loaded otherwise or whose folder is gone."""
    try:
        record = json.loads(dataset.info.description or "")[_LOADED_FROM]
        folder, config = Path(record["folder"]), str(record["config"])
    except (AttributeError, ValueError, TypeError, KeyError):
        return None
    return (folder, config) if folder.is_dir() else None
