"""The shape of a context-variance build: row and pool schemas, config names and the files behind them.

Configs (one split, ``test``): ``<source>_<context_type>`` (O_t-centred), ``<source>_<context_type>_negative``
(negative-target-centred), ``<source>`` (all context types of a source, both kinds) and ``pools``. The
default config is ``<first source>_real``. In a built folder they are the files (each then named after its
content, ``target-00000-of-00002-<sha8>.parquet``: :mod:`medlama.datasets.records`)::

    data/<source>/<context_type>/target-<shard>-of-<shards>.parquet
    data/<source>/<context_type>/negative-<shard>-of-<shards>.parquet
    pools/pools.parquet

Each source's rows of one context type and kind are split into shards of bounded size (:mod:`.export`),
numbered as the ``datasets`` Hub numbers them; a config lists its shards in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from datasets import Features, List, Value

from medlama.datasets.context_variance.contexts import REAL
from medlama.core.errors import MedlamaInputError

SPLIT = "test"
POOLS = "pools"


def features():
    """The declared schema of a context-sequence row: segments and layout, no inputs (:mod:`.rows` rebuilds them,
    so a row grows linearly with its document)."""
    return Features({
        "id": Value("string"),
        "triple_id": Value("string"),
        "relation": Value("string"),
        "source": Value("string"),
        "doc_id": Value("string"),
        "context_type": Value("string"),
        "negative": Value("bool"),
        "subject_id": Value("string"),
        "subject_name": Value("string"),
        "target_id": Value("string"),
        "target_name": Value("string"),
        "center_id": Value("string"),
        "center_name": Value("string"),
        "correct_ids": List(Value("string")),
        "correct_names": List(Value("string")),
        "pool_id": Value("string"),
        "prompt": Value("string"),
        "added_entities": List(Value("string")),
        "added_texts": List(Value("string")),
        "added_is_correct": List(Value("bool")),
        "added_is_new": List(Value("bool")),
        "segments": List(Value("string")),
        "layout": List(Value("int32")),
        "knowledge_separator": Value("string"),
        "knowledge_end": Value("string"),
    })


def pool_features():
    """The declared schema of a ``pools`` row (one per pool entity)."""
    return Features({"pool_id": Value("string"), "entity_id": Value("string"), "name": Value("string"),
                     "aliases": List(Value("string"))})


def data_file(source: str, context_type: str, negative: bool, shard: int | None = None,
              shards: int | None = None) -> str:
    """The folder-relative Parquet file of one source, context type and kind; with ``shard`` (0-based), that
    shard of it, ``-<shard>-of-<shards>`` as the ``datasets`` Hub numbers shards (``shards`` None: not yet known)."""
    stem = f"data/{source}/{context_type}/" + ("negative" if negative else "target")
    if shard is None:
        return f"{stem}.parquet"
    return f"{stem}-{shard:05d}" + (f"-of-{shards:05d}" if shards is not None else "") + ".parquet"


#: The data files of each (source, context type, negative flag), as written.
FileMap = Mapping[tuple[str, str, bool], Sequence[str]]


def config_layout(sources: Sequence[str], context_types: Sequence[str], negative: bool,
                  files: FileMap | None = None) -> tuple[dict[str, list[str]], str]:
    """Config name -> its data files (relative, as written; a build then names them after their content), and the
    default config. ``files``: the shards written for each (source, context type, negative flag) (default: one
    unsharded file each). A config names each of its files (sorted: shards in order), never a glob."""
    def of(source: str, context_type: str, kind: bool) -> list[str]:
        return list(files[(source, context_type, kind)]) if files is not None else [data_file(source, context_type,
                                                                                              kind)]

    layout: dict[str, list[str]] = {}
    for source in sources:
        for context_type in context_types:
            layout[f"{source}_{context_type}"] = sorted(of(source, context_type, False))
            if negative:
                layout[f"{source}_{context_type}_negative"] = sorted(of(source, context_type, True))
        layout[source] = sorted(path for context_type in context_types for kind in (False, True)
                                for path in of(source, context_type, kind))
    layout[POOLS] = ["pools/pools.parquet"]
    first = sources[0]
    default = f"{first}_{REAL}" if REAL in context_types else f"{first}_{context_types[0]}"
    return layout, default


@dataclass(frozen=True)
class ConfigRows:
    """Which rows a config holds: a source's, of some context types and kinds (``pools``: the pools)."""

    source: str | None
    context_types: tuple[str, ...]
    kinds: tuple[bool, ...]  # negative flags

    @property
    def pools(self) -> bool:
        return self.source is None

    def wants(self, row: dict) -> bool:
        return row["context_type"] in self.context_types and row["negative"] in self.kinds


def config_rows(name: str, sources: Sequence[str], context_types: Sequence[str], negative: bool) -> ConfigRows:
    """The rows of config ``name``; an unknown name is an error listing the configs there are."""
    if name == POOLS:
        return ConfigRows(None, (), ())
    kinds = (False, True) if negative else (False,)
    for source in sources:
        if name == source:
            return ConfigRows(source, tuple(context_types), kinds)
        for context_type in context_types:
            if name == f"{source}_{context_type}":
                return ConfigRows(source, (context_type,), (False,))
            if negative and name == f"{source}_{context_type}_negative":
                return ConfigRows(source, (context_type,), (True,))
    known = list(config_layout(sources, context_types, negative)[0])
    raise MedlamaInputError(f"unknown context-variance config {name!r}; the configs of these corpora and "
                            f"settings are {known}", field="config")
