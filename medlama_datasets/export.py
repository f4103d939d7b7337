"""Writing a built dataset as a folder, and preparing a builder afresh; shared by every builder here.

A built folder holds Parquet files named by their content (:mod:`medlama.datasets.records`), a README
dataset card whose YAML declares the configs by those exact names, and ``build_info.json`` (the marker every
build holds, with the record of the files that loading checks) and the hidden ownership record naming the command that
wrote it (``medlama.core.atomic.OWNER_NAME``: only that command replaces the folder). :func:`write_folder`
writes all of it atomically. :func:`prepare_fresh` runs a ``datasets`` builder into a scratch folder, so that a
``medlama build`` always regenerates (and re-checks) the data, while downloads stay in the cache.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path

from medlama.core.atomic import atomic_directory, staged_directory
from medlama.core.defaults import BUILD_INFO
from medlama.core.errors import MedlamaInputError

MARKER = BUILD_INFO


@contextmanager
def quiet_datasets() -> Iterator[None]:
    """No progress bars from ``datasets`` inside the block (dozens of small files, or a quiet build)."""
    # datasets loads when this runs, not when the CLI parses its flags
    from datasets.utils.logging import disable_progress_bar, enable_progress_bar, is_progress_bar_enabled

    was_enabled = is_progress_bar_enabled()
    disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            enable_progress_bar()


def to_parquet(dataset, path: Path) -> None:
    """``dataset`` as a Parquet file at ``path``, its folder created."""
    path.parent.mkdir(parents=True, exist_ok=True)
    dataset.to_parquet(str(path))


def relation_ranges(labels: Sequence[str]) -> dict[str, range]:
    """Row ranges per label, for labels that come in contiguous runs (the builders keep a relation's rows together)."""
    ranges, start = {}, 0
    for index in range(1, len(labels) + 1):
        if index == len(labels) or labels[index] != labels[start]:
            ranges[labels[start]] = range(start, index)
            start = index
    return ranges


def write_folder(out_dir: str | Path, tables: Mapping[str, object], configs: Mapping[str, Mapping[str, list[str]]],
                 card: Callable[[Path, dict], str], info: dict, *, kind: str, claimed: bool = False) -> dict:
    """Write ``tables`` (path inside the folder -> ``Dataset``), the card and ``build_info.json`` atomically;
    returns the configs with the files' final names.

    ``configs``: config name -> split -> the paths of ``tables`` it holds. Each file is renamed after its
    content (:func:`medlama.datasets.records.seal`); ``info`` gets the record of the files (``record``) and
    the configs with their final names (``configs``). ``card(folder, configs)`` renders the card once the
    tables are written in ``folder`` (the card states their sizes and names those files).
    ``kind``: the command writing it (``"build medlama"``); an existing ``out_dir`` must have been written
    by the same one. An earlier build in ``out_dir`` is replaced only once the new one is complete.
    ``claimed``: the caller holds the folder's one claim (``medlama.core.atomic.claim_directory``, taken
    *before* building, as the builds do); else the folder is claimed here, for the write.
    """
    stage = staged_directory if claimed else atomic_directory
    with stage(out_dir, marker=MARKER, kind=kind) as staging, quiet_datasets():
        for relative, table in tables.items():
            to_parquet(table, staging / relative)
        sealed = seal_folder(staging, configs, info)
        (staging / "README.md").write_text(card(staging, sealed), encoding="utf-8")
        (staging / MARKER).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return sealed


def seal_folder(staging: Path, configs: Mapping[str, Mapping[str, list[str]]], info: dict) -> dict:
    """Name the data files of ``staging`` after their content and record them in ``info`` (``build_info.json``:
    ``configs`` with the final names, ``record`` with rows and SHA-256 per file); returns those configs."""
    # datasets.records loads when this runs, not when the CLI parses its flags
    from medlama.datasets.records import seal

    sealed, record = seal(staging, configs)
    info["configs"] = sealed
    info["record"] = record
    return sealed


def prepare_fresh(builder_class, config_name: str, *, download_config=None, progress: bool = True,
                  **config_kwargs):
    """``(builder, DatasetDict)``: ``builder_class(config_name, **config_kwargs)`` prepared in a scratch folder.

    The data is regenerated (so the builder's checks and report are fresh) and held in memory; the
    download manager still reuses its cache (``download_config``, default: the builder's).
    """
    with tempfile.TemporaryDirectory(prefix="medlama-build-") as scratch, \
            (nullcontext() if progress else quiet_datasets()):
        builder = builder_class(config_name=config_name, cache_dir=scratch, **config_kwargs)
        builder.download_and_prepare(download_config=download_config)
        return builder, _splits(builder)


def _splits(builder):
    """The prepared splits in memory; one the input left empty (a test-only release's train and dev), an empty
    table of the builder's features (``datasets`` reads no split of no rows: "corresponds to no data")."""
    # datasets loads when this runs, not when the CLI parses its flags
    from datasets import DatasetDict

    return DatasetDict({name: _split(builder, name) for name in builder.info.splits})


def _split(builder, name: str):
    from datasets import Dataset  # as in _splits

    if not builder.info.splits[name].num_examples:
        return Dataset.from_dict({column: [] for column in builder.info.features}, features=builder.info.features)
    return builder.as_dataset(split=name, in_memory=True)


@contextmanager
def input_errors_unwrapped() -> Iterator[None]:
    """Inside a builder's preparation: a :class:`MedlamaInputError` raised while generating rows comes out
    as itself (``datasets`` wraps it in ``DatasetGenerationError``), so it still names file, row and field."""
    # datasets loads when this runs, not when the CLI parses its flags
    from datasets.exceptions import DatasetGenerationError

    try:
        yield
    except DatasetGenerationError as error:
        if isinstance(error.__cause__, MedlamaInputError):
            raise error.__cause__ from None
        raise
