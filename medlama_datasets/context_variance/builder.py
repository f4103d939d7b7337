"""Context-variance probing sets as a Hugging Face dataset folder (``medlama build context-variance``).

For every corpus (a *source*: ``ehr`` for MIMIC-III notes, ``pmc`` for PMC articles, or a name of the
user's choosing for JSON Lines / plain text), the builder

1. reads the corpus with :mod:`medlama.loaders.corpora` (streaming) and opens, or builds once, its
   entity index (:class:`~.index.CorpusIndex`, cached by corpus fingerprint and entity set, built with
   ``num_proc`` matching workers, bounded memory);
2. retrieves for each triple at most ``max_docs`` documents mentioning both its subject and its target
   (a seeded random sample when there are more);
3. builds every requested context type of each document, with its negative-target counterpart
   (:func:`~.segmentation.build_contexts`), in ``num_proc`` processes;
4. streams one row per (triple, document, context type, negative flag) to Parquet.

Folder layout (written atomically; an earlier build is replaced only by a complete one)::

    README.md                                  card: configs, schema, statistics
    build_info.json                            settings, statistics, index folders
    data/<source>/<context_type>/target.parquet
    data/<source>/<context_type>/negative.parquet
    pools/pools.parquet                        the entity pools the rows rank (one row per entity)

Configs (one split, ``test``): ``<source>_<context_type>`` (O_t-centred), ``<source>_<context_type>_negative``
(negative-target-centred), ``<source>`` (all context types of a source, both kinds) and ``pools``. The
default config is ``<first source>_real``.

Licences travel in the card's tags, which ``medlama push-dataset`` reads (:mod:`medlama.hub`):

* ``umls``: the triples are derived from the UMLS Metathesaurus (MedLAMA, or BioLAMA's ``umls`` source),
  so the build is pushed gated to UMLS licensees;
* ``mimic``: a source has the ``mimic`` format, so the rows quote MIMIC-III notes, which the PhysioNet
  data use agreement forbids redistributing: the build is only pushed ``--private``. The card names the
  MIMIC-derived sources, and ``build_info.json`` keeps every source's ``format``.

Neither the card nor ``build_info.json`` names a local path of its own accord: ``origin`` should not hold
one (the command gives the knowledge base's kind and config only); ``build_info.json`` does keep the
corpus files and index folders, which ``push-dataset`` cuts down to their names.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

from medlama.datasets.context_variance.kb_adapters import pool_id, triple_id
from medlama.datasets.context_variance.knowledge import KnowledgeBase, Triple
from medlama.datasets.context_variance.segmentation import CONTEXT_TYPES, REAL
from medlama.errors import MedlamaInputError

SPLIT = "test"
#: Default source name of each corpus format (``jsonl`` and ``text`` corpora are named after their file).
SOURCE_NAMES = {"mimic": "ehr", "pmc": "pmc"}
RESERVED = {"pools", "all"}
ROWS_PER_WRITE = 512
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


def features():
    """The declared schema of a context-sequence row."""
    from datasets import Features, List, Value

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
        "inputs": List(Value("string")),
        "added_entities": List(Value("string")),
        "added_texts": List(Value("string")),
        "added_is_correct": List(Value("bool")),
        "added_is_new": List(Value("bool")),
        "segments": List(Value("string")),
        "layout": List(Value("int32")),
    })


def pool_features():
    from datasets import Features, List, Value

    return Features({"pool_id": Value("string"), "entity_id": Value("string"), "name": Value("string"),
                     "aliases": List(Value("string"))})


# ------------------------------------------------------------------------------------------ corpora
@dataclass(frozen=True)
class CorpusSpec:
    """A corpus to retrieve contexts from: its source name, files or folders, format and reader options."""

    name: str
    paths: tuple[str, ...]
    format: str
    options: tuple[tuple[str, object], ...] = ()

    def __post_init__(self) -> None:
        from medlama.loaders.corpora import FORMATS

        if self.format not in FORMATS:
            raise MedlamaInputError(f"unknown corpus format {self.format!r} for source {self.name!r}; choose from "
                                    f"{list(FORMATS)}", field="format")
        if not _NAME.match(self.name or "") or self.name in RESERVED:
            raise MedlamaInputError(f"bad source name {self.name!r}: use letters, digits, '_' and '-' "
                                    f"(not {sorted(RESERVED)})", field="source")
        if not self.paths:
            raise MedlamaInputError(f"source {self.name!r} has no files", field="source")

    @classmethod
    def make(cls, paths: str | Path | Iterable[str | Path], format: str, name: str | None = None,
             **options) -> CorpusSpec:
        """A spec with the default source name of the format (``ehr``, ``pmc``, else the first file's stem)."""
        paths = (paths,) if isinstance(paths, (str, Path)) else tuple(paths)
        if name is None:
            name = SOURCE_NAMES.get(format) or _stem_name(paths[0] if paths else "")
        return cls(name, tuple(str(p) for p in paths), format,
                   tuple(sorted((k, v) for k, v in options.items() if v is not None)))

    @classmethod
    def parse(cls, spec: str, **options) -> CorpusSpec:
        """``FORMAT:PATH`` or ``NAME:FORMAT:PATH`` (e.g. ``pubmed:text:sentences.txt``)."""
        from medlama.loaders.corpora import FORMATS

        parts = spec.split(":", 2)
        if len(parts) >= 2 and parts[0] in FORMATS:
            return cls.make(spec.split(":", 1)[1], parts[0], **options)
        if len(parts) == 3:
            return cls.make(parts[2], parts[1], parts[0], **options)
        raise MedlamaInputError(f"bad corpus {spec!r}: write FORMAT:PATH or NAME:FORMAT:PATH with FORMAT one of "
                                f"{list(FORMATS)}", field="corpus")

    def reader_options(self) -> dict:
        return dict(self.options)

    def load(self):
        from medlama.loaders.corpora import load_corpus

        return load_corpus(list(self.paths), self.format, **self.reader_options())

    def fingerprint(self) -> str:
        from medlama.loaders.corpora import corpus_fingerprint

        return corpus_fingerprint(list(self.paths), self.format, **self.reader_options())


def _stem_name(path: str | Path) -> str:
    stem = Path(str(path)).name
    for suffix in (".gz", ".jsonl", ".json", ".txt"):
        stem = stem[: -len(suffix)] if stem.lower().endswith(suffix) else stem
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", stem).strip("_-") or "corpus"
    return stem


def merge_specs(specs: Sequence[CorpusSpec]) -> list[CorpusSpec]:
    """Specs of the same source name united (their files added up); one format per source."""
    merged: dict[str, CorpusSpec] = {}
    for spec in specs:
        known = merged.get(spec.name)
        if known is None:
            merged[spec.name] = spec
        elif known.format != spec.format or known.options != spec.options:
            raise MedlamaInputError(f"source {spec.name!r} is given as {known.format!r} and as {spec.format!r}; "
                                    "name the corpora differently", field="corpus")
        else:
            merged[spec.name] = CorpusSpec(spec.name, known.paths + spec.paths, spec.format, spec.options)
    return list(merged.values())


def default_index_root() -> Path:
    return Path(os.environ.get("MEDLAMA_CACHE") or Path.home() / ".cache" / "medlama") / "cv-index"


# ------------------------------------------------------------------------------------------ settings
@dataclass(frozen=True)
class BuildSettings:
    """What decides the rows (recorded in ``build_info.json`` and the card)."""

    context_types: tuple[str, ...] = CONTEXT_TYPES
    negative: bool = True
    max_docs: int | None = 10
    seed: int = 0
    max_segments: int | None = None
    random_mode: str = "shuffle"
    separator: str = ", "
    knowledge_end: str = "."

    def check(self) -> BuildSettings:
        unknown = sorted(set(self.context_types) - set(CONTEXT_TYPES))
        if unknown or not self.context_types:
            raise MedlamaInputError(f"unknown context type(s) {unknown}; choose from {list(CONTEXT_TYPES)}",
                                    field="context_types")
        if self.max_docs is not None and self.max_docs < 1:
            raise MedlamaInputError(f"max docs must be >= 1, got {self.max_docs}")
        if self.max_segments is not None and self.max_segments < 1:
            raise MedlamaInputError(f"max segments must be >= 1, got {self.max_segments}")
        if self.random_mode not in ("shuffle", "insert"):
            raise MedlamaInputError(f"random mode must be 'shuffle' or 'insert', not {self.random_mode!r}")
        ordered = tuple(t for t in CONTEXT_TYPES if t in self.context_types)
        object.__setattr__(self, "context_types", ordered)
        return self


@dataclass
class SourceStats:
    """Counts for one source (and, in ``relations``, per relation)."""

    source: str
    format: str
    paths: list[str]
    documents: int = 0
    stored_documents: int = 0
    index: str = ""
    index_reused: bool = False
    triples: int = 0
    triples_with_context: int = 0
    documents_retrieved: int = 0
    sequences: dict[str, int] = field(default_factory=dict)  # "<context_type>" / "<context_type>_negative"
    inputs: int = 0
    records: int = 0  # inputs after input0: one UCM record each
    relations: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class ContextVarianceBuild:
    out: Path
    settings: BuildSettings
    sources: list[SourceStats]
    configs: dict[str, str]
    default_config: str
    origin: str
    umls_derived: bool = False

    @property
    def mimic_sources(self) -> list[str]:
        """Sources whose rows quote MIMIC-III notes (format ``mimic``): never redistributed publicly."""
        return [s.source for s in self.sources if s.format == "mimic"]


# ------------------------------------------------------------------------------------------ rows
def sequence_rows(triple: Triple, source: str, doc_id: str, text: str, mentions, settings: BuildSettings,
                  names: dict[str, str]) -> list[dict]:
    """The rows of one retrieved document: one per context type and negative flag.

    None when the subject's only mentions are also mentions of the target (the same words name both,
    as MedLAMA's easy rows do): such a document holds no context *about* the subject.
    """
    from medlama.datasets.context_variance.segmentation import build_contexts

    tid = triple_id(triple)
    subject, target = triple.subject.id, triple.target.id
    if not any(subject in m.entity_ids and target not in m.entity_ids for m in mentions):
        return []  # the subject is only mentioned as the target's own name (a shared surface form)
    try:
        contexts = build_contexts(triple, text, mentions, context_types=settings.context_types,
                                  negative=settings.negative, seed=f"{settings.seed}:{tid}:{doc_id}",
                                  random_mode=settings.random_mode, separator=settings.separator,
                                  knowledge_end=settings.knowledge_end, max_segments=settings.max_segments)
    except ValueError:  # the target's mentions all stand for other entities here
        return []
    correct = [entity.id for entity in triple.correct_objects]
    rows = []
    for (context_type, negative), sequence in contexts.items():
        inputs = sequence.inputs
        rows.append({
            "id": f"{source}/{tid}/{doc_id}/{context_type}" + ("/negative" if negative else ""),
            "triple_id": tid, "relation": triple.relation, "source": source, "doc_id": doc_id,
            "context_type": context_type, "negative": negative,
            "subject_id": triple.subject.id, "subject_name": triple.subject.name,
            "target_id": triple.target.id, "target_name": triple.target.name,
            "center_id": sequence.center_entity, "center_name": names.get(sequence.center_entity,
                                                                          sequence.center_entity),
            "correct_ids": correct, "correct_names": [entity.name for entity in triple.correct_objects],
            "pool_id": pool_id(triple), "prompt": sequence.prompt,
            "inputs": [step.text for step in inputs],
            "added_entities": [step.added_entity for step in inputs],
            "added_texts": [step.added_text for step in inputs],
            "added_is_correct": [step.added_is_correct for step in inputs],
            "added_is_new": [step.added_is_new for step in inputs],
            "segments": [segment.text if context_type == REAL else segment.knowledge_text
                         for segment in sequence.segments],
            "layout": list(sequence.layout),
        })
    return rows


# Worker state (one process builds the rows of a range of triples against one index).
_W: dict = {}


def _init_worker(triples: Sequence[Triple], names: dict[str, str], settings: BuildSettings,
                 block_torch: bool = False) -> None:
    import sys

    if block_torch and "torch" not in sys.modules:
        sys.modules["torch"] = None  # type: ignore[assignment]  # never needed here; keeps workers small
    _W.update(triples=triples, names=names, settings=settings, indexes={})


def _rows_for(source: str, index_dir: str, start: int, stop: int) -> tuple[list[dict], list[tuple[int, int]]]:
    """Rows of triples ``start..stop`` and, per triple, (its position, documents retrieved)."""
    index = _W["indexes"].get(index_dir)
    if index is None:
        index = _W["indexes"][index_dir] = open_index(index_dir)
    settings: BuildSettings = _W["settings"]
    rows: list[dict] = []
    found: list[tuple[int, int]] = []
    for position in range(start, stop):
        triple = _W["triples"][position]
        documents = index.retrieve(triple, max_docs=settings.max_docs, seed=settings.seed)
        produced = 0
        for document in documents:
            new = sequence_rows(triple, source, document.doc_id, document.text, document.mentions, settings,
                                _W["names"])
            produced += bool(new)
            rows.extend(new)
        found.append((position, produced))
    return rows, found


#: Postings kept in memory at most when retrieving (16 bytes each): beyond, buckets are read as needed.
MAX_CACHED_POSTINGS = 32_000_000


def open_index(directory: str | Path):
    """A :class:`~.index.CorpusIndex` that keeps every postings bucket in memory when they fit.

    Triples come in knowledge-base order, not bucket order: with the index's default cache of 16
    buckets nearly every lookup would read a bucket file again.
    """
    import json as _json

    from medlama.datasets.context_variance.index import CorpusIndex

    manifest = _json.loads((Path(directory) / "manifest.json").read_text(encoding="utf-8"))
    buckets = manifest.get("num_buckets", 16)
    fits = manifest.get("num_postings", 0) <= MAX_CACHED_POSTINGS
    return CorpusIndex(directory, cache_buckets=buckets if fits else 16)


class _Writers:
    """One Parquet writer per (context type, negative) of a source, fed in batches (bounded memory)."""

    def __init__(self, root: Path, source: str, settings: BuildSettings) -> None:
        import pyarrow.parquet as pq

        self.schema = features().arrow_schema
        self.buffers: dict[tuple[str, bool], list[dict]] = {}
        self.writers = {}
        for context_type in settings.context_types:
            for negative in (False, True):
                path = root / "data" / source / context_type / ("negative.parquet" if negative else "target.parquet")
                path.parent.mkdir(parents=True, exist_ok=True)
                self.writers[(context_type, negative)] = pq.ParquetWriter(path, self.schema, compression="zstd")
                self.buffers[(context_type, negative)] = []

    def add(self, rows: Iterable[dict]) -> None:
        for row in rows:
            key = (row["context_type"], row["negative"])
            self.buffers[key].append(row)
            if len(self.buffers[key]) >= ROWS_PER_WRITE:
                self._flush(key)

    def _flush(self, key) -> None:
        import pyarrow as pa

        if self.buffers[key]:
            self.writers[key].write_table(pa.Table.from_pylist(self.buffers[key], schema=self.schema))
            self.buffers[key] = []

    def close(self) -> None:
        for key, writer in self.writers.items():
            self._flush(key)
            writer.close()


# ------------------------------------------------------------------------------------------ build
def build_context_variance(kb: KnowledgeBase, corpora: Sequence[CorpusSpec], out_dir: str | Path, *,
                           settings: BuildSettings = BuildSettings(), num_proc: int = 1,
                           index_root: str | Path | None = None, origin: str = "knowledge base",
                           umls_derived: bool | None = None, chunk_triples: int = 64,
                           progress: bool = True) -> ContextVarianceBuild:
    """Build the context-variance sets of ``kb`` from ``corpora`` into ``out_dir`` (atomically).

    ``index_root``: where corpus indexes are kept and reused (default ``$MEDLAMA_CACHE/cv-index``);
    ``num_proc``: matching processes for an index build and context-building processes.
    ``origin``: where the triples come from, as the card says it (no local path: the card is published);
    ``umls_derived``: whether the triples come from the UMLS Metathesaurus (the card's ``umls`` tag);
    ``None`` infers it: a BioLAMA ``umls_`` relation, or an ``origin`` that names MedLAMA.
    Raises :class:`MedlamaInputError` for an empty corpus, and when no triple found a context anywhere.
    """
    from tqdm.auto import tqdm

    from medlama.atomic import atomic_directory, check_replaceable
    from medlama.datasets.context_variance.index import CorpusIndex
    from medlama.datasets.context_variance.knowledge import entities_fingerprint
    from medlama.datasets.medlama import _quiet_datasets

    settings = settings.check()
    if num_proc < 1:
        raise MedlamaInputError(f"num_proc must be >= 1, got {num_proc}")
    if not corpora:
        raise MedlamaInputError("no corpus given: name at least one (--mimic, --pmc or --corpus)")
    corpora = merge_specs(corpora)
    if not len(kb):
        raise MedlamaInputError("the knowledge base has no triples")
    index_root = Path(index_root) if index_root is not None else default_index_root()
    entities_key = entities_fingerprint(kb.entities.values())
    triples = list(kb.triples)
    names = {entity_id: entity.name for entity_id, entity in kb.entities.items()}
    out_dir = Path(out_dir)
    check_replaceable(out_dir, marker="build_info.json")  # before indexing, not after it
    stats: list[SourceStats] = []

    # Indexes first (outside the staging folder: they are reused by later builds).
    indexes = {}
    for spec in corpora:
        fingerprint = spec.fingerprint()  # also checks that the files exist
        key = hashlib.sha256(f"{fingerprint}\n{entities_key}".encode()).hexdigest()[:16]
        directory = index_root / f"{spec.name}-{key}"
        reused = CorpusIndex.is_current(directory, kb, fingerprint)
        started = time.perf_counter()
        index = CorpusIndex.open_or_build(spec.load(), kb, directory, fingerprint=fingerprint, num_proc=num_proc)
        if index.num_documents == 0:
            raise MedlamaInputError(f"corpus {spec.name!r} is empty: no documents in {', '.join(spec.paths)}",
                                    field="corpus")
        indexes[spec.name] = index
        stats.append(SourceStats(spec.name, spec.format, list(spec.paths), documents=index.num_documents,
                                 stored_documents=index.num_stored_documents, index=str(directory),
                                 index_reused=reused, triples=len(triples),
                                 seconds=round(time.perf_counter() - started, 3)))

    configs, default_config = config_layout([s.source for s in stats], settings)
    used_pools: dict[str, object] = {}
    with atomic_directory(out_dir, marker="build_info.json") as staging, _quiet_datasets():
        for stat in stats:
            started = time.perf_counter()
            writers = _Writers(staging, stat.source, settings)
            try:
                chunks = [(start, min(start + chunk_triples, len(triples)))
                          for start in range(0, len(triples), chunk_triples)]
                bar = tqdm(total=len(triples), desc=f"contexts {stat.source}", unit="triple", disable=not progress)
                for rows, found in _run_chunks(stat.source, str(indexes[stat.source].directory), chunks, triples,
                                               names, settings, num_proc):
                    writers.add(rows)
                    _count(stat, rows, found, triples, used_pools)
                    bar.update(len(found))
                bar.close()
            finally:
                writers.close()
            stat.seconds = round(stat.seconds + time.perf_counter() - started, 3)
        if not any(stat.triples_with_context for stat in stats):
            searched = ", ".join(f"{s.source}: {s.documents:,} documents" for s in stats)
            raise MedlamaInputError(
                f"no triple found any context: none of the {len(triples):,} triples has a document that mentions "
                f"both its subject and its target ({searched}); check that the corpus and the knowledge base "
                "cover the same entities (names and aliases are matched case-insensitively)")
        _write_pools(staging / "pools" / "pools.parquet", used_pools)
        if umls_derived is None:  # the triples carry no provenance of their own: relation names and origin
            umls_derived = origin.startswith("MedLAMA") or any(t.relation.startswith("umls_") for t in triples)
        result = ContextVarianceBuild(out_dir, settings, stats, configs, default_config, origin, umls_derived)
        (staging / "README.md").write_text(render_card(result), encoding="utf-8")
        info = {"dataset": "context-variance", "origin": origin, "settings": asdict(settings),
                "sources": [asdict(s) for s in stats], "configs": configs, "default_config": default_config}
        (staging / "build_info.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return result


def _run_chunks(source: str, index_dir: str, chunks, triples, names, settings, num_proc: int):
    """(rows, found) of each chunk of triples, in order; in ``num_proc`` processes when more than one."""
    if num_proc == 1 or len(chunks) == 1:
        _init_worker(triples, names, settings)
        try:
            for start, stop in chunks:
                yield _rows_for(source, index_dir, start, stop)
        finally:
            _W.clear()
        return
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(num_proc, mp_context=context, initializer=_init_worker,
                               initargs=(triples, names, settings, True))
    try:
        pending: dict[int, Future] = {}
        done: dict[int, tuple] = {}
        next_out = 0
        for number, (start, stop) in enumerate(chunks):
            pending[number] = pool.submit(_rows_for, source, index_dir, start, stop)
            while len(pending) >= 2 * num_proc:
                finished, _ = wait(pending.values(), return_when=FIRST_COMPLETED)
                for key in [k for k, f in pending.items() if f in finished]:
                    done[key] = pending.pop(key).result()
                while next_out in done:  # in order, so the files do not depend on scheduling
                    yield done.pop(next_out)
                    next_out += 1
        for key in sorted(pending):
            done[key] = pending.pop(key).result()
        while next_out in done:
            yield done.pop(next_out)
            next_out += 1
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _count(stat: SourceStats, rows: list[dict], found: list[tuple[int, int]], triples: Sequence[Triple],
           used_pools: dict) -> None:
    for position, documents in found:
        triple = triples[position]
        per = stat.relations.setdefault(triple.relation, {"triples": 0, "triples_with_context": 0, "sequences": 0,
                                                          "records": 0})
        per["triples"] += 1
        if documents:
            stat.triples_with_context += 1
            stat.documents_retrieved += documents
            per["triples_with_context"] += 1
            used_pools.setdefault(pool_id(triple), triple.pool)
    for row in rows:
        key = row["context_type"] + ("_negative" if row["negative"] else "")
        stat.sequences[key] = stat.sequences.get(key, 0) + 1
        stat.inputs += len(row["inputs"])
        stat.records += len(row["inputs"]) - 1
        per = stat.relations[row["relation"]]
        per["sequences"] += 1
        per["records"] += len(row["inputs"]) - 1


def _write_pools(path: Path, pools: dict) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    columns: dict[str, list] = {"pool_id": [], "entity_id": [], "name": [], "aliases": []}
    for key in sorted(pools):
        for entity in pools[key]:
            columns["pool_id"].append(key)
            columns["entity_id"].append(entity.id)
            columns["name"].append(entity.name)
            columns["aliases"].append(list(entity.aliases))
    schema = pool_features().arrow_schema
    pq.write_table(pa.table(columns, schema=schema), path, compression="zstd")


def config_layout(sources: Sequence[str], settings: BuildSettings) -> tuple[dict[str, str], str]:
    """Config name -> data files (relative glob), and the default config."""
    layout: dict[str, str] = {}
    for source in sources:
        for context_type in settings.context_types:
            layout[f"{source}_{context_type}"] = f"data/{source}/{context_type}/target.parquet"
            if settings.negative:
                layout[f"{source}_{context_type}_negative"] = f"data/{source}/{context_type}/negative.parquet"
        layout[source] = f"data/{source}/*/*.parquet"
    layout["pools"] = "pools/pools.parquet"
    first = sources[0]
    default = f"{first}_{REAL}" if REAL in settings.context_types else f"{first}_{settings.context_types[0]}"
    return layout, default


# ------------------------------------------------------------------------------------------ card
def statistics_markdown(build: ContextVarianceBuild) -> str:
    lines = ["| Source | Documents | Triples | Triples with contexts | Documents used | "
             + " | ".join(f"`{t}`" for t in build.settings.context_types)
             + " | Negative-target sequences | Inputs | UCM records |",
             "|---|---:|---:|---:|---:|" + "---:|" * len(build.settings.context_types) + "---:|---:|---:|"]
    for s in build.sources:
        negative = sum(v for k, v in s.sequences.items() if k.endswith("_negative"))
        per_type = " | ".join(f"{s.sequences.get(t, 0):,}" for t in build.settings.context_types)
        lines.append(f"| `{s.source}` ({s.format}) | {s.documents:,} | {s.triples:,} | {s.triples_with_context:,} | "
                     f"{s.documents_retrieved:,} | {per_type} | {negative:,} | {s.inputs:,} | {s.records:,} |")
    lines += ["", "| Source | Relation | Triples | With contexts | Sequences | UCM records |",
              "|---|---|---:|---:|---:|---:|"]
    for s in build.sources:
        for relation, per in sorted(s.relations.items()):
            lines.append(f"| `{s.source}` | `{relation}` | {per['triples']:,} | {per['triples_with_context']:,} | "
                         f"{per['sequences']:,} | {per['records']:,} |")
    return "\n".join(lines)


def render_card(build: ContextVarianceBuild) -> str:
    from datasets import DatasetInfo, SplitDict, SplitInfo

    from medlama.datasets.card import render_card as render

    infos = {}
    for name in build.configs:
        if name == "pools":
            feats, rows = pool_features(), None
        else:
            feats, rows = features(), _config_rows(build, name)
        splits = SplitDict()
        if rows is not None:
            splits.add(SplitInfo(name=SPLIT, num_examples=rows))
        infos[name] = DatasetInfo(features=feats, config_name=name, splits=splits if rows is not None else None)
    text = render("context_variance", build.configs, build.default_config, infos, statistics_markdown(build),
                  split=SPLIT)
    s = build.settings
    summary = (f"This build: triples from {build.origin}; sources {', '.join(f'`{x.source}`' for x in build.sources)}; "
               f"context types {', '.join(f'`{t}`' for t in s.context_types)}"
               f"{' with negative-target counterparts' if s.negative else ''}; at most "
               f"{s.max_docs if s.max_docs is not None else 'all'} documents per triple (seed {s.seed}); "
               f"{'all segments' if s.max_segments is None else f'at most {s.max_segments} segments'} per context; "
               f"knowledge-random mode `{s.random_mode}`.")
    total = sum(sum(x.sequences.values()) for x in build.sources)
    size = ("n<1K" if total < 1_000 else "1K<n<10K" if total < 10_000 else "10K<n<100K" if total < 100_000
            else "100K<n<1M" if total < 1_000_000 else "1M<n<10M")
    text = text.replace("size_categories:\n- n<1K", f"size_categories:\n- {size}", 1)
    return _with_licence_tags(text.replace("<!-- build-summary -->", summary + _licence_summary(build)), build)


def _licence_summary(build: ContextVarianceBuild) -> str:
    """The card's sentences on licensed data, matching the tags :func:`_with_licence_tags` adds."""
    from medlama.hub import MIMIC_TAG, UMLS_TAG

    text = ""
    if build.umls_derived:
        text += (f"\n\nThe triples are derived from the UMLS Metathesaurus (tag `{UMLS_TAG}`): share this build "
                 "only with UMLS licensees; `medlama push-dataset` pushes it gated.")
    if build.mimic_sources:
        names = ", ".join(f"`{name}`" for name in build.mimic_sources)
        text += (f"\n\n**MIMIC-III notes.** The rows of {names} quote MIMIC-III clinical notes (tag `{MIMIC_TAG}`), "
                 "which the PhysioNet data use agreement forbids redistributing: share this build only with "
                 "credentialed PhysioNet users; `medlama push-dataset` refuses to push it unless `--private`.")
    return text


def _with_licence_tags(text: str, build: ContextVarianceBuild) -> str:
    """``text`` with the ``umls`` / ``mimic`` tags that ``medlama push-dataset`` gates on."""
    from huggingface_hub import DatasetCard

    from medlama.hub import MIMIC_TAG, UMLS_TAG  # the tags push-dataset gates on: one definition

    wanted = ([UMLS_TAG] if build.umls_derived else []) + ([MIMIC_TAG] if build.mimic_sources else [])
    if not wanted:
        return text
    card = DatasetCard(text)
    card.data.tags = [tag for tag in (card.data.tags or []) if tag not in wanted] + wanted
    return str(card)


def _config_rows(build: ContextVarianceBuild, name: str) -> int:
    for s in build.sources:
        if name == s.source:
            return sum(s.sequences.values())
        for context_type in build.settings.context_types:
            if name == f"{s.source}_{context_type}":
                return s.sequences.get(context_type, 0)
            if name == f"{s.source}_{context_type}_negative":
                return s.sequences.get(f"{context_type}_negative", 0)
    return 0
