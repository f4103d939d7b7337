"""Typed settings of a context-variance build: what decides the rows, the corpora and the knowledge base.

* :class:`BuildSettings` decides the rows (context types, negative targets, documents per triple, ...); it
  is recorded in ``build_info.json`` and the card, and the ``medlama build context-variance`` flags are
  made from its fields;
* :class:`CorpusSpec` is one corpus (a *source*): its name, files, format, reader options and declared licence
  (:meth:`CorpusSpec.source_licence` says what its licence is: :mod:`medlama.datasets.licences`);
* :class:`KnowledgeSpec` says where the triples come from: a built MedLAMA or BioLAMA folder;
* :class:`IndexEngine` says how a corpus index is built (:mod:`.index.pipeline`: local, Slurm or Ray), not what.

Each is checked when made (``medlama.core.settings.check`` plus the rules below), so no invalid one exists.
Turning command-line strings (``--corpus NAME:FORMAT:PATH``) into these is the command's job
(the CLI's ``build_context_variance`` command); the library takes only these typed objects.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from medlama.datasets.context_variance.contexts import CONTEXT_TYPES
from medlama.datasets.context_variance.kb_adapters import knowledge_base_from_biolama, knowledge_base_from_medlama
from medlama.datasets.licences import PHYSIONET, UNKNOWN, SourceLicence
from medlama.core.cache import cache_path
from medlama.core.errors import MedlamaInputError
from medlama.core.extras import check_available
from medlama.core.settings import Checked, check, setting
from medlama.loaders.corpora import FORMATS, corpus_fingerprint, load_corpus
from medlama.loaders.mimic_notes import mimic_signature
from medlama.datasets.prompts import DEFAULT_PROMPT_COLUMN, PROMPT_COLUMNS

#: Default source name of each corpus format (``jsonl`` and ``text`` corpora are named after their file).
SOURCE_NAMES = {"mimic": "ehr", "pmc": "pmc"}
#: Config names a source may not take.
RESERVED = {"pools", "all"}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class BuildSettings:
    """What decides the rows (recorded in ``build_info.json`` and the card).

    The field order is the order of ``settings`` in ``build_info.json``: keep it.
    """

    context_types: tuple[str, ...] = setting(
        CONTEXT_TYPES, help="context types to build: real, knowledge-only, knowledge-sorted, knowledge-random",
        metavar="TYPE")
    negative: bool = setting(True, help="build each context's negative-target counterpart")
    max_docs: int | None = setting(
        10, min=1, metavar="N",
        help="documents per triple and corpus, a seeded random sample when more (0 or none: all)")
    seed: int = setting(0, help="seed of the document sample and knowledge-random")
    max_segments: int | None = setting(None, min=1, metavar="N", help="keep S1..SN of each context (none: all)")
    random_mode: Literal["shuffle", "insert"] = setting(
        "shuffle", help="knowledge-random layout: shuffle (figure 2) or insert")
    separator: str = setting(", ", help="text between the entities of a knowledge context", cli=False)
    knowledge_end: str = setting(".", help="text ending a knowledge context", cli=False)

    def __post_init__(self) -> None:
        if isinstance(self.context_types, (tuple, list)):
            unknown = sorted(set(self.context_types) - set(CONTEXT_TYPES))
            if unknown or not self.context_types:
                raise MedlamaInputError(f"unknown context type(s) {unknown}; choose from {list(CONTEXT_TYPES)}",
                                        field="context_types")
        check(self)
        # the paper's order, whatever order they were given in: the configs and files follow it
        ordered = tuple(t for t in CONTEXT_TYPES if t in self.context_types)
        object.__setattr__(self, "context_types", ordered)


@dataclass(frozen=True)
class CorpusSpec:
    """A corpus to retrieve contexts from: its source name, files or folders, format and reader options."""

    name: str = setting(help="the source name: config names start with it (letters, digits, '_', '-')")
    paths: tuple[str, ...] = setting(help="the corpus files or folders")
    format: str = setting(help="the corpus format (medlama.loaders.corpora.FORMATS)")
    options: tuple[tuple[str, object], ...] = setting((), help="reader options, (name, value) pairs")
    on_bad_record: Literal["error", "skip"] = setting(
        "error", help="MIMIC: a record the CSV does not hold cleanly stops the build with its file and line "
                      "(error), or is left out and counted on stderr (skip)")
    licence: str | None = setting(
        None, help="the licence the builder declares for this source (an SPDX id such as CC-BY-4.0, or text); "
                   "recorded in the card. None: unknown, so the set is pushed only --private. MIMIC notes "
                   "(read as mimic, or carrying MIMIC's columns) are PhysioNet-licensed whatever is declared")

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise MedlamaInputError(f"unknown corpus format {self.format!r} for source {self.name!r}; choose from "
                                    f"{list(FORMATS)}", field="format")
        if not isinstance(self.name, str) or not _NAME.match(self.name) or self.name in RESERVED:
            raise MedlamaInputError(f"bad source name {self.name!r}: use letters, digits, '_' and '-' "
                                    f"(not {sorted(RESERVED)})", field="source")
        if not self.paths:
            raise MedlamaInputError(f"source {self.name!r} has no files", field="source")
        if self.licence is not None and (not isinstance(self.licence, str) or not self.licence.strip()
                                         or "\n" in self.licence):
            raise MedlamaInputError(f"source {self.name!r}: the declared licence must be one line of text (an SPDX "
                                    f"id such as CC-BY-4.0), not {self.licence!r}", field="licence")
        if self.licence is not None and self.format == "mimic":
            raise MedlamaInputError(f"source {self.name!r} is read as MIMIC notes, whose licence is {PHYSIONET} "
                                    f"(no redistribution); it cannot be declared {self.licence!r}", field="licence")
        check(self)

    @classmethod
    def make(cls, paths: str | Path | Iterable[str | Path], format: str, name: str | None = None, *,
             on_bad_record: str = "error", licence: str | None = None, **options) -> CorpusSpec:
        """A spec with the default source name of the format (``ehr``, ``pmc``, else the first file's stem).

        ``options`` are reader options of :func:`medlama.loaders.corpora.load_corpus`; ``None`` ones are left out.
        """
        paths = (paths,) if isinstance(paths, (str, Path)) else tuple(paths)
        if name is None:
            name = SOURCE_NAMES.get(format) or stem_name(paths[0] if paths else "")
        return cls(name, tuple(str(p) for p in paths), format,
                   tuple(sorted((k, v) for k, v in options.items() if v is not None)), on_bad_record, licence)

    def reader_options(self) -> dict:
        """The options of :func:`medlama.loaders.corpora.load_corpus` (and of the index fingerprint).

        ``on_bad_record`` goes to the MIMIC reader (the only one with records to skip) when it is ``skip``:
        an index built with skipped records is then not reused by a strict build, and the fingerprints of
        the default (strict) builds stay those of earlier versions.
        """
        options = dict(self.options)
        if self.format == "mimic" and self.on_bad_record != "error":
            options["on_bad_record"] = self.on_bad_record
        return options

    def load(self):
        """The streaming corpus (:func:`medlama.loaders.corpora.load_corpus`)."""
        return load_corpus(list(self.paths), self.format, **self.reader_options())

    def source_licence(self) -> SourceLicence:
        """This source's licence (:mod:`medlama.datasets.licences`): PhysioNet's for MIMIC notes, whatever
        reader reads them (a declaration for text carrying MIMIC's signature is an error); else the declared
        one; else unknown. Reads the first records of the files (:func:`~medlama.loaders.mimic_notes.mimic_signature`)."""
        signature = mimic_signature(list(self.paths), self.format, **dict(self.options))
        if signature is not None and self.format == "mimic":
            return SourceLicence(PHYSIONET, "reader")
        if signature is not None:
            if self.licence is not None and self.licence.strip().lower() != PHYSIONET.lower():
                raise MedlamaInputError(
                    f"source {self.name!r} holds MIMIC notes ({signature}), whose licence is {PHYSIONET} (no "
                    f"redistribution); it cannot be declared {self.licence!r}", field="licence")
            return SourceLicence(PHYSIONET, "columns", signature)
        if self.licence is not None:
            return SourceLicence(self.licence.strip(), "declared")
        return SourceLicence(UNKNOWN, "undeclared")

    def fingerprint(self) -> str:
        """A hash of the files and reader options; also checks that the files exist."""
        return corpus_fingerprint(list(self.paths), self.format, **self.reader_options())


def stem_name(path: str | Path) -> str:
    """A source name from a file name: ``sentences.txt.gz`` -> ``sentences``."""
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
        elif ((known.format, known.options, known.on_bad_record, known.licence)
              != (spec.format, spec.options, spec.on_bad_record, spec.licence)):
            raise MedlamaInputError(f"source {spec.name!r} is given as {known.format!r} and as {spec.format!r} (or "
                                    "with other reader options or licence); name the corpora differently",
                                    field="corpus")
        else:
            merged[spec.name] = dataclasses.replace(known, paths=known.paths + spec.paths)
    return list(merged.values())


@dataclass(frozen=True)
class KnowledgeSpec(Checked):
    """Where the triples come from: a built MedLAMA or BioLAMA folder and which of its rows."""

    kind: Literal["medlama", "biolama"] = setting(help="the dataset the folder holds", cli=False)
    folder: Path = setting(help="the built dataset folder", cli=False)
    config: str | None = setting(
        None, help="rows to use: MedLAMA hard or full; BioLAMA all, a source or <source>_<PID> (none: MedLAMA "
                   "hard, BioLAMA all)")
    split: str = setting("test", help="BioLAMA split")
    relations: tuple[str, ...] | None = setting(None, metavar="REL", help="only these relations (none: all)")
    limit: int | None = setting(None, min=1, metavar="N", help="only the first N rows of each relation (none: all)")
    prompt_column: str = setting(DEFAULT_PROMPT_COLUMN, choices=PROMPT_COLUMNS, help="MedLAMA prompt")

    @property
    def chosen_config(self) -> str:
        return self.config or ("hard" if self.kind == "medlama" else "all")

    @property
    def origin(self) -> str:
        """Where the triples come from, as the card says it: no local path (the card is published)."""
        if self.kind == "medlama":
            return f"MedLAMA `{self.chosen_config}`"
        return f"BioLAMA `{self.chosen_config}`, split `{self.split}`"

    def load(self):
        """The :class:`~.knowledge.KnowledgeBase` of these rows."""
        if self.kind == "medlama":
            return knowledge_base_from_medlama(self.folder, self.chosen_config, relations=self.relations,
                                               prompt_column=self.prompt_column, limit=self.limit)
        return knowledge_base_from_biolama(self.folder, self.chosen_config, split=self.split,
                                           relations=self.relations, limit=self.limit)


EXECUTORS = ("local", "slurm", "ray")


@dataclass(frozen=True)
class IndexEngine(Checked):
    """How a corpus index is built (not what: the index is the same whatever these are)."""

    executor: Literal["local", "slurm", "ray"] = setting(
        "local", help="where the index build runs: local processes (no setup), a Slurm cluster or a Ray cluster")
    tasks: int | None = setting(
        None, min=1, metavar="N", help="datatrove tasks of the read and match stages (the unit of resume and of "
                                       "parallelism on a cluster; none: 4 per worker process)")
    workers: int = setting(1, min=1, help="processes running tasks at once (local and Ray)", cli=False)
    chunk_size: int = setting(1000, min=1, help="documents per chunk (read and matched together)", cli=False)
    num_buckets: int = setting(64, min=1, help="postings buckets (each merged by one task)", cli=False)
    slurm_partition: str | None = setting(None, help="Slurm: the partition the jobs run on (required with slurm)")
    slurm_time: str = setting("24:00:00", help="Slurm: the time limit of each job")
    slurm_cpus_per_task: int = setting(1, min=1, help="Slurm: CPUs per task", cli=False)
    slurm_mem_per_cpu_gb: int = setting(4, min=1, help="Slurm: memory per CPU (GB)", cli=False)

    @property
    def task_count(self) -> int:
        return self.tasks if self.tasks is not None else 4 * self.workers

    def check_available(self) -> None:
        """Refuse an executor that cannot run here before any work starts."""
        if self.executor == "ray":
            check_available("ray", "ray", what="--executor ray")
        if self.executor == "slurm" and not self.slurm_partition:
            raise MedlamaInputError("--executor slurm needs --slurm-partition (the partition the jobs run on)",
                                    field="slurm_partition")
        if self.executor == "slurm" and shutil.which("sbatch") is None:
            raise MedlamaInputError("--executor slurm submits jobs with sbatch, which is not on the PATH here (run "
                                    "the command on a Slurm login node), or use --executor local", field="executor")


def default_index_root() -> Path:
    """Where corpus indexes are kept and reused: ``$MEDLAMA_CACHE/cv-index``, else ``~/.cache/medlama/cv-index``."""
    return cache_path("cv-index")
