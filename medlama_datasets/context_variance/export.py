"""A context-variance build as a dataset folder: every config of a :class:`~.builder.ContextVarianceBuilder`
written at once, as Parquet, with its card and ``build_info.json`` (``medlama build context-variance``).

Folder layout (written atomically; an earlier build is replaced only by a complete one)::

    README.md                                  card: configs, schema, statistics
    build_info.json                            settings, statistics, index folders, every file's rows and SHA-256
    data/<source>/<context_type>/target-00000-of-00001-<sha8>.parquet
    data/<source>/<context_type>/negative-00000-of-00001-<sha8>.parquet
    pools/pools-<sha8>.parquet                 the entity pools the rows rank (one row per entity)

Each data file is named after its content (the first 8 hex digits of its SHA-256), the card names every file of
a config, and ``build_info.json`` records each file's rows and SHA-256 (:mod:`medlama.datasets.records`).
Each source's rows are made once (:meth:`~.builder.ContextVarianceBuilder.generate_sources`) and streamed to the
file of their context type and kind in batches, so memory stays bounded; a file is closed at
``max_shard_bytes`` (default :data:`MAX_SHARD_BYTES`) and the rows go on in the next shard, numbered
``-<shard>-of-<shards>``. A row stores its segments once with their layout (:mod:`.rows`), so the files grow
linearly with the documents.

Licences travel in the card and ``build_info.json``, which ``medlama push-dataset`` reads
(:mod:`medlama.datasets.licences`): the ``umls`` tag when the triples derive from the UMLS Metathesaurus
(pushed gated); each source's ``licence`` (with ``licence_basis``: how it is known) in ``build_info.json`` and
the card's licence list, and the ``mimic`` tag when a source quotes MIMIC notes (read as ``mimic``, or
carrying MIMIC's columns: pushed ``--private`` only, as is a source of ``unknown`` licence).
``build_info.json`` keeps every source's ``format``. Neither the card nor ``build_info.json`` names a local
path of its own accord: ``origin`` should not hold one; ``build_info.json`` does keep the corpus files and
index folders, which ``push-dataset`` cuts down to their names.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from medlama.core.atomic import claim_directory, staged_directory
from medlama.core.errors import MedlamaInputError
from medlama.datasets.card import render_context_variance_card
from medlama.datasets.context_variance.builder import ContextVarianceBuilder
from medlama.datasets.context_variance.knowledge import KnowledgeBase
from medlama.datasets.context_variance.layout import SPLIT, config_layout, data_file, features, pool_features
from medlama.datasets.context_variance.settings import BuildSettings, CorpusSpec, IndexEngine, KnowledgeSpec
from medlama.datasets.context_variance.stats import ContextVarianceBuild, pool_rows
from medlama.datasets.export import quiet_datasets, seal_folder
from medlama.core.defaults import BUILD_INFO

ROWS_PER_WRITE = 512
#: Bytes at which a data file is closed and the next shard begins (the ``datasets`` Hub's default shard size).
MAX_SHARD_BYTES = 500_000_000
#: The command that writes (and alone may replace) a context-variance folder: its ownership record.
KIND = "build context-variance"


def build_context_variance(knowledge: KnowledgeSpec | KnowledgeBase, corpora: Sequence[CorpusSpec],
                           out_dir: str | Path, *, settings: BuildSettings | None = None, num_proc: int = 1,
                           index_root: str | Path | None = None, index_engine: IndexEngine | None = None,
                           origin: str | None = None, umls_derived: bool | None = None, chunk_triples: int = 64,
                           progress: bool = True, max_shard_bytes: int = MAX_SHARD_BYTES,
                           reads: Sequence[str | Path] = (),
                           on_knowledge: Callable[[KnowledgeBase], None] | None = None) -> ContextVarianceBuild:
    """Build the context-variance sets of ``knowledge`` from ``corpora`` into ``out_dir`` (atomically): the
    one way a folder is built (``medlama build context-variance`` calls this).

    ``knowledge``: a built MedLAMA / BioLAMA folder (:class:`KnowledgeSpec`) or triples made in Python.
    ``index_root``: where corpus indexes are kept and reused (default ``$MEDLAMA_CACHE/cv-index``);
    ``num_proc``: matching processes for an index build and context-building processes; ``index_engine``:
    how indexes are built (default: locally with ``num_proc`` processes).
    ``origin``: where the triples come from, as the card says it (no local path: the card is published;
    default: the knowledge folder as the card names it, ``MedLAMA `hard```, else ``knowledge base``);
    ``umls_derived``: whether the triples come from the UMLS Metathesaurus (the card's ``umls`` tag);
    ``None`` infers it: a BioLAMA ``umls_`` relation, or an ``origin`` that names MedLAMA.
    ``max_shard_bytes``: the size at which a data file is closed and the next shard begins.
    ``reads``: the input paths, which ``out_dir`` may not be. ``on_knowledge``: called with the triples once
    they are loaded, before any index is opened.

    ``out_dir`` is claimed once, before anything is read: a folder written by another command (its ownership
    record does not name :data:`KIND`) is refused, and so is a second build into the same folder while one
    runs (its lock is held from that check to the swap). Raises :class:`MedlamaInputError` for an empty
    corpus, and when no triple found a context anywhere; :class:`~.index.pipeline.IndexSubmitted` when Slurm
    jobs will build an index first (nothing is written then).
    """
    check_shard_bytes(max_shard_bytes)  # before any indexing
    with claim_directory(out_dir, marker=BUILD_INFO, kind=KIND, reads=list(reads)):  # before indexing
        if index_engine is not None:
            index_engine.check_available()  # before anything is read
        source = {"knowledge": knowledge} if isinstance(knowledge, KnowledgeSpec) else {"knowledge_base": knowledge}
        builder = ContextVarianceBuilder(**source, corpora=tuple(corpora), settings=settings or BuildSettings(),
                                         index_root=index_root, num_proc=num_proc, chunk_triples=chunk_triples,
                                         index_engine=index_engine, progress=progress)
        kb = builder.knowledge_base()
        if on_knowledge is not None:
            on_knowledge(kb)
        if origin is None:
            origin = knowledge.origin if isinstance(knowledge, KnowledgeSpec) else "knowledge base"
        return _write_folder(builder, out_dir, origin=origin, umls_derived=umls_derived,
                             max_shard_bytes=max_shard_bytes)


def check_shard_bytes(value: int) -> None:
    """A shard size is a positive whole number of bytes."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MedlamaInputError(f"max_shard_bytes must be a positive number of bytes, not {value!r}",
                                field="max_shard_bytes")


def _write_folder(builder: ContextVarianceBuilder, out_dir: str | Path, *, origin: str,
                  umls_derived: bool | None, max_shard_bytes: int) -> ContextVarianceBuild:
    """Every config of ``builder`` into ``out_dir`` (claimed by the caller): Parquet files, card and
    ``build_info.json``, swapped in at once."""
    settings = builder.config.settings
    triples = builder.knowledge_base().triples
    out_dir = Path(out_dir)
    used_pools: dict = {}
    # the indexes first (outside the staging folder: later builds reuse them)
    sources = builder.generate_sources(used_pools)
    stats = []
    files: dict[tuple[str, str, bool], list[str]] = {}
    with staged_directory(out_dir, marker=BUILD_INFO, kind=KIND) as staging, quiet_datasets():  # under the claim
        for stat, batches in sources:
            stats.append(stat)
            writers = _Writers(staging, stat.source, settings, max_shard_bytes)
            try:
                for rows in batches:
                    writers.add(rows)
            except BaseException:
                writers.abandon()
                raise
            files.update(writers.close())
        configs, default_config = config_layout([s.source for s in stats], settings.context_types,
                                                settings.negative, files)
        if not any(stat.triples_with_context for stat in stats):
            searched = ", ".join(f"{s.source}: {s.documents:,} documents" for s in stats)
            raise MedlamaInputError(
                f"no triple found any context: none of the {len(triples):,} triples has a document that mentions "
                f"both its subject and its target ({searched}); check that the corpus and the knowledge base "
                "cover the same entities (names and aliases are matched case-insensitively)")
        _write_pools(staging / "pools" / "pools.parquet", used_pools)
        if umls_derived is None:  # the triples carry no provenance of their own: relation names and origin
            umls_derived = origin.startswith("MedLAMA") or any(t.relation.startswith("umls_") for t in triples)
        info = {"dataset": "context-variance", "origin": origin, "settings": asdict(settings),
                "sources": [asdict(s) for s in stats], "default_config": default_config,
                "max_shard_bytes": max_shard_bytes}
        # The files named after their content, recorded in `info` (configs, record): see medlama.datasets.records.
        sealed = seal_folder(staging, {name: {SPLIT: files} for name, files in configs.items()}, info)
        result = ContextVarianceBuild(out_dir, settings, stats, sealed, default_config, origin, umls_derived)
        (staging / "README.md").write_text(render_context_variance_card(result, staging), encoding="utf-8")
        (staging / BUILD_INFO).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return result


class _Writers:
    """The Parquet shards of each (context type, negative) of a source, fed in batches (bounded memory).

    Rows are written in batches (one row group each) of at most :data:`ROWS_PER_WRITE` rows or an eighth of
    ``max_shard_bytes`` in text. A shard is closed once its bytes reach ``max_shard_bytes`` (it may pass it by
    one batch), and the next batch opens the next shard; every kind has at least one shard (empty when it has
    no rows), so each config loads. :meth:`close` numbers the shards ``-<shard>-of-<shards>`` and returns them.
    """

    def __init__(self, root: Path, source: str, settings: BuildSettings, max_shard_bytes: int) -> None:
        self.root, self.source, self.max_shard_bytes = root, source, max_shard_bytes
        self.schema = features().arrow_schema
        self.buffers: dict[tuple[str, bool], list[dict]] = {}
        self.buffered: dict[tuple[str, bool], int] = {}  # characters of text in the buffer
        self.batch_chars = max(1, max_shard_bytes // 8)
        self.shards: dict[tuple[str, bool], int] = {}  # shards opened so far
        self.open: dict[tuple[str, bool], tuple] = {}  # (writer, sink) of the shard being written
        for context_type in settings.context_types:
            for negative in (False, True):
                self.buffers[(context_type, negative)] = []
                self.buffered[(context_type, negative)] = 0
                self.shards[(context_type, negative)] = 0
                (root / data_file(source, context_type, negative)).parent.mkdir(parents=True, exist_ok=True)

    def add(self, rows: Iterable[dict]) -> None:
        for row in rows:
            key = (row["context_type"], row["negative"])
            self.buffers[key].append(row)
            self.buffered[key] += sum(map(len, row["segments"])) + len(row["prompt"])
            # a batch is one row group: bounded in rows, and in text so that a shard ends near its bound
            if len(self.buffers[key]) >= ROWS_PER_WRITE or self.buffered[key] >= self.batch_chars:
                self._flush(key)

    def _start(self, key: tuple[str, bool]) -> None:
        path = self.root / data_file(self.source, key[0], key[1], self.shards[key])
        sink = pa.OSFile(str(path), "wb")
        self.open[key] = (pq.ParquetWriter(sink, self.schema, compression="zstd"), sink)
        self.shards[key] += 1

    def _finish(self, key: tuple[str, bool]) -> None:
        writer, sink = self.open.pop(key)
        writer.close()
        sink.close()

    def _flush(self, key: tuple[str, bool]) -> None:
        if not self.buffers[key]:
            return
        if key not in self.open:
            self._start(key)
        writer, sink = self.open[key]
        writer.write_table(pa.Table.from_pylist(self.buffers[key], schema=self.schema))
        self.buffers[key], self.buffered[key] = [], 0
        if sink.tell() >= self.max_shard_bytes:  # full: the next rows go to the next shard
            self._finish(key)

    def close(self) -> dict[tuple[str, str, bool], list[str]]:
        """Flush and close every shard; (source, context type, negative) -> its shards, numbered in order."""
        files = {}
        for key in self.buffers:
            self._flush(key)
            if not self.shards[key]:
                self._start(key)  # no rows: one empty shard, so that the config still loads
            if key in self.open:
                self._finish(key)
            count = self.shards[key]
            names = []
            for shard in range(count):
                name = data_file(self.source, key[0], key[1], shard, count)
                (self.root / data_file(self.source, key[0], key[1], shard)).rename(self.root / name)
                names.append(name)
            files[(self.source, *key)] = names
        return files

    def abandon(self) -> None:
        """Close the open shards after a failure (the staging folder is thrown away)."""
        for key in list(self.open):
            self._finish(key)


def _write_pools(path: Path, pools: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(pool_rows(pools), schema=pool_features().arrow_schema), path, compression="zstd")
