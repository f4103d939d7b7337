"""Context-variance probing sets as a ``datasets`` builder class (``ContextVarianceBuilder``).

For every corpus (a *source*: ``ehr`` for MIMIC notes, ``pmc`` for PMC articles, or a name of the
user's choosing for JSON Lines / plain text), the builder

1. settles its licence (:meth:`~.settings.CorpusSpec.source_licence`) and opens, or builds once, its
   entity index (:class:`~.index.corpus_index.CorpusIndex`: one per corpus fingerprint, shared by every knowledge base,
   each reading its own view of it; built, or extended to the knowledge base's forms, from the corpus files by the ``datatrove`` pipeline of :mod:`.index.pipeline`: locally with ``num_proc`` processes,
   or as ``index_engine`` says, e.g. on Slurm; resumable, bounded memory);
2. makes the rows of every triple (:mod:`.triple_rows`): at most ``max_docs`` documents mentioning both its
   subject and its target, every requested context type of each with its negative-target counterpart.

Its configs are :class:`ContextVarianceConfig` s named as :mod:`.layout` says (``<source>_<context_type>``,
``<source>_<context_type>_negative``, ``<source>``, ``pools``); they depend on the corpora given, so they
are made when asked for rather than listed. From Python::

    builder = ContextVarianceBuilder(config_name="ehr_real", corpora=[CorpusSpec.make(notes, "mimic")],
                                     knowledge=KnowledgeSpec("medlama", folder, config="full"))
    builder.download_and_prepare()
    real = builder.as_dataset(split="test")

``medlama build context-variance`` writes every config at once into a folder (:mod:`.export`), making
each source's rows once with :meth:`ContextVarianceBuilder.generate_sources`, what the configs'
``_generate_examples`` read too. A ``<source>`` config yields its rows in the order they are made; the
folder's ``<source>`` config reads them file by file.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import inspect
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import datasets
from datasets.fingerprint import Hasher
from tqdm.auto import tqdm

from medlama.datasets.context_variance.index.corpus_index import CorpusIndex
from medlama.datasets.context_variance.index.format import entity_payload
from medlama.datasets.context_variance.index.pipeline import open_or_build_spec_index
from medlama.datasets.context_variance.kb_adapters import pool_id, triple_id
from medlama.datasets.context_variance.knowledge import KnowledgeBase, entities_fingerprint
from medlama.datasets.context_variance.layout import SPLIT, config_layout, config_rows, features, pool_features
from medlama.datasets.context_variance.triple_rows import run_chunks
from medlama.datasets.context_variance.settings import (
    BuildSettings,
    CorpusSpec,
    IndexEngine,
    KnowledgeSpec,
    default_index_root,
    merge_specs,
)
from medlama.datasets.context_variance.stats import SourceStats, count_chunk, pool_rows
from medlama.core.errors import MedlamaInputError

_NOT_IN_ID = ("index_root", "num_proc", "chunk_triples", "progress", "index_engine")  # change how, not what, is built


@dataclass
class ContextVarianceConfig(datasets.BuilderConfig):
    """One config of a context-variance build, with what the rows are made from.

    ``knowledge`` (a built MedLAMA / BioLAMA folder) or ``knowledge_base`` (triples made in Python): one
    of the two. ``corpora``: the sources (same-named ones are united). ``index_root``: where corpus
    indexes are kept (default ``$MEDLAMA_CACHE/cv-index``). ``num_proc``: processes for indexing and
    building contexts. The name ``default`` (none given) becomes the default config, the first source's
    ``real``.
    """

    knowledge: KnowledgeSpec | None = None
    knowledge_base: KnowledgeBase | None = None
    corpora: tuple[CorpusSpec, ...] = ()
    settings: BuildSettings = field(default_factory=BuildSettings)
    index_root: str | Path | None = None
    num_proc: int = 1
    chunk_triples: int = 64
    #: How corpus indexes are built (:class:`~.settings.IndexEngine`: local, Slurm or Ray ``datatrove``
    #: executors); None: locally with ``num_proc`` worker processes.
    index_engine: IndexEngine | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.knowledge is None) == (self.knowledge_base is None):
            raise MedlamaInputError("give the triples as knowledge= (a built folder) or knowledge_base=, not "
                                    f"{'both' if self.knowledge is not None else 'neither'}", field="knowledge")
        if not isinstance(self.settings, BuildSettings):
            raise MedlamaInputError(f"settings must be a BuildSettings, got {type(self.settings).__name__}",
                                    field="settings")
        if not isinstance(self.num_proc, int) or self.num_proc < 1:
            raise MedlamaInputError(f"num_proc must be >= 1, got {self.num_proc}")
        if self.index_engine is not None and not isinstance(self.index_engine, IndexEngine):
            raise MedlamaInputError(f"index_engine must be an IndexEngine, got {type(self.index_engine).__name__}",
                                    field="index_engine")
        if not isinstance(self.chunk_triples, int) or self.chunk_triples < 1:
            raise MedlamaInputError(f"chunk_triples must be >= 1, got {self.chunk_triples}")
        if not self.corpora:
            raise MedlamaInputError("no corpus given: name at least one (--mimic, --pmc or --corpus)")
        self.corpora = tuple(merge_specs(self.corpora))
        layout, default = config_layout(self.sources, self.settings.context_types, self.settings.negative)
        if self.name == "default":
            self.name = default
        config_rows(self.name, self.sources, self.settings.context_types, self.settings.negative)  # known?

    @property
    def sources(self) -> list[str]:
        return [spec.name for spec in self.corpora]

    def create_config_id(self, config_kwargs: dict, custom_features=None) -> str:
        """The config name and a hash of what decides the rows, corpus and knowledge-base files included."""
        what = {key: value for key, value in config_kwargs.items() if key not in (*_NOT_IN_ID, "name", "version")}
        what.pop("knowledge_base", None)
        what.update(corpus_files=[spec.fingerprint() for spec in self.corpora],
                    triples=_knowledge_digest(self.knowledge_base) if self.knowledge_base is not None else None,
                    knowledge_files=_folder_digest(self.knowledge.folder) if self.knowledge is not None else None)
        return f"{self.name}-{Hasher.hash(what)}"


class ContextVarianceBuilder(datasets.GeneratorBasedBuilder):
    """The context-variance sets of a knowledge base and corpora (see the module docstring)."""

    BUILDER_CONFIG_CLASS = ContextVarianceConfig
    VERSION = datasets.Version("1.1.0")  # 1.1: rows hold segments and layout, not inputs (a new cache entry)
    config: ContextVarianceConfig

    def __init__(self, *args, dataset_name: str = "context_variance", **kwargs) -> None:
        _refuse_unknown_kwargs(kwargs)
        self._knowledge_base: KnowledgeBase | None = None
        self._indexes: dict[str, tuple[str, SourceStats]] = {}
        super().__init__(*args, dataset_name=dataset_name, **kwargs)

    # -------------------------------------------------------------------------- datasets' interface
    def _info(self) -> datasets.DatasetInfo:
        rows = config_rows(self.config.name, self.config.sources, self.config.settings.context_types,
                           self.config.settings.negative)
        return datasets.DatasetInfo(
            description="Context-variance probing sets (Yao et al., AMIA 2023): cloze prompts with retrieved "
                        "contexts added one segment at a time, for the UCM metric.",
            features=pool_features() if rows.pools else features())

    def _split_generators(self, dl_manager) -> list[datasets.SplitGenerator]:
        return [datasets.SplitGenerator(name=SPLIT)]

    def _generate_examples(self) -> Iterator[tuple[datasets.builder.Key, dict]]:
        settings = self.config.settings
        wanted = config_rows(self.config.name, self.config.sources, settings.context_types, settings.negative)
        used_pools: dict = {}
        sources = self.generate_sources(used_pools, None if wanted.pools else [wanted.source])
        if wanted.pools:  # the pools the rows rank: every source's rows decide which
            for _, batches in sources:
                for _ in batches:
                    pass
            columns = pool_rows(used_pools)
            for position, values in enumerate(zip(*columns.values())):
                yield datasets.builder.Key(0, position), dict(zip(columns, values))
            return
        position = 0
        for _, batches in sources:
            for rows in batches:
                for row in rows:
                    if wanted.wants(row):
                        yield datasets.builder.Key(0, position), row
                        position += 1

    # -------------------------------------------------------------------------- the work
    def knowledge_base(self) -> KnowledgeBase:
        """The triples (loaded once); an empty knowledge base is an error."""
        if self._knowledge_base is None:
            kb = self.config.knowledge_base if self.config.knowledge_base is not None else self.config.knowledge.load()
            if not len(kb):
                raise MedlamaInputError("the knowledge base has no triples")
            self._knowledge_base = kb
        return self._knowledge_base

    def generate_sources(self, used_pools: dict, names: list[str] | None = None
                         ) -> Iterator[tuple[SourceStats, Iterator[list[dict]]]]:
        """The rows of every source (of ``names``, or all): ``(counts, batches)`` per source, in order.

        Every source's index is opened or built when this is called, before any row. The batches are the rows chunk by
        chunk in triple order, counted into the source's counts as they come; read them before the next
        source. ``used_pools`` gains the pools of the triples that found a context. The one way rows are
        made: the configs (:meth:`_generate_examples`) and the folder export (:mod:`.export`) both read them.
        """
        stats = self._open_sources(names)  # now, not at the first row: every index before any row
        return ((stat, self._source_rows(stat, used_pools)) for stat in stats)

    def _open_sources(self, names: list[str] | None = None) -> list[SourceStats]:
        """Fresh counts of each source (of ``names``, or all), their indexes opened or built first."""
        kb = self.knowledge_base()
        root = Path(self.config.index_root) if self.config.index_root is not None else default_index_root()
        out = []
        for spec in self.config.corpora:
            if names is not None and spec.name not in names:
                continue
            if spec.name not in self._indexes:
                fingerprint = spec.fingerprint()  # also checks that the files exist
                licence = spec.source_licence()  # before the index: a bad declaration stops the build at once
                # One index per corpus: every knowledge base reads its own view of it (see .index).
                directory = root / f"{spec.name}-{hashlib.sha256(fingerprint.encode()).hexdigest()[:16]}"
                reused = CorpusIndex.is_current(directory, kb, fingerprint)
                started = time.perf_counter()
                engine = self.config.index_engine or IndexEngine(workers=self.config.num_proc)
                index = open_or_build_spec_index(spec, kb, directory, fingerprint=fingerprint, engine=engine)
                if index.num_documents == 0:
                    raise MedlamaInputError(f"corpus {spec.name!r} is empty: no documents in "
                                            f"{', '.join(spec.paths)}", field="corpus")
                self._indexes[spec.name] = (str(index.directory), SourceStats(
                    spec.name, spec.format, list(spec.paths), documents=index.num_documents,
                    stored_documents=index.num_stored_documents, index=str(directory), index_reused=reused,
                    triples=len(kb.triples), seconds=round(time.perf_counter() - started, 3),
                    licence=licence.licence, licence_basis=licence.basis, licence_evidence=licence.evidence))
            out.append(dataclasses.replace(self._indexes[spec.name][1], sequences={}, relations={}))
        return out

    def _source_rows(self, stat: SourceStats, used_pools: dict) -> Iterator[list[dict]]:
        """The rows of one source, chunk by chunk in triple order, counted into ``stat`` as they come;
        ``used_pools`` gains the pools of the triples that found a context."""
        kb = self.knowledge_base()
        triples, size = list(kb.triples), self.config.chunk_triples
        names = {entity_id: entity.name for entity_id, entity in kb.entities.items()}
        chunks = [(start, min(start + size, len(triples))) for start in range(0, len(triples), size)]
        started = time.perf_counter()
        bar = tqdm(total=len(triples), desc=f"contexts {stat.source}", unit="triple", disable=not self.config.progress)
        try:
            for rows, found in run_chunks(stat.source, self._indexes[stat.source][0], entity_payload(kb), chunks,
                                          triples, names, self.config.settings, self.config.num_proc):
                count_chunk(stat, rows, found, triples, used_pools)
                bar.update(len(found))
                yield rows
        finally:
            bar.close()
            stat.seconds = round(stat.seconds + time.perf_counter() - started, 3)


def _refuse_unknown_kwargs(kwargs: dict) -> None:
    """A misspelt config setting is an error naming it (``datasets`` would report a bare TypeError)."""
    known = ({f.name for f in dataclasses.fields(ContextVarianceConfig)}
             | set(inspect.signature(datasets.DatasetBuilder.__init__).parameters))
    for name in kwargs:
        if name not in known:
            near = difflib.get_close_matches(name, sorted(known), n=1)
            raise MedlamaInputError(f"unknown context-variance builder setting {name!r}"
                                    + (f" (did you mean {near[0]!r}?)" if near else ""), field=name)


def _knowledge_digest(kb: KnowledgeBase) -> str:
    digest = hashlib.sha256(entities_fingerprint(kb.entities.values()).encode())
    for t in kb.triples:
        digest.update(repr((triple_id(t), t.relation, t.subject.id, t.target.id, sorted(t.correct_ids),
                            pool_id(t), sorted(t.pool.ids), t.prompt())).encode())
    return digest.hexdigest()


def _folder_digest(folder: str | Path) -> list[tuple[str, int, int]]:
    root = Path(folder)
    return [(str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()]
