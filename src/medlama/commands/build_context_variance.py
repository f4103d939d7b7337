"""``medlama build context-variance``: the context-variance sets of a built MedLAMA / BioLAMA folder as a dataset
folder (added to ``medlama build`` by :mod:`medlama.commands.build`, as its declaration names this module).

This module turns the command line into typed settings and nothing more. Every flag but the paths (``--out``,
``--medlama`` / ``--biolama``), the repeatable ``--corpus`` / ``--corpus-licence`` and ``--json`` is made by
:func:`medlama.commands.flags.add_settings_flags` from the fields of a settings class: the knowledge-base
flags from :class:`~medlama.datasets.context_variance.settings.KnowledgeSpec`, the row flags from
:class:`~medlama.datasets.context_variance.settings.BuildSettings`, the index engine's from
:class:`~medlama.datasets.context_variance.settings.IndexEngine`, the corpora from :class:`CorpusFlags` (whose
strings, ``--mimic``, ``--pmc``, ``--corpus [NAME:]FORMAT:PATH`` with ``--corpus-licence NAME=LICENCE``, become
:class:`~medlama.datasets.context_variance.settings.CorpusSpec` s) and how the build runs from
:class:`RunSettings`. :func:`build` then takes those settings only and builds the folder with
:func:`medlama.datasets.context_variance.export.build_context_variance`, the one path through the
:class:`~medlama.datasets.context_variance.builder.ContextVarianceBuilder`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from medlama.commands.flags import add_settings_flags, given_settings
from medlama.core.display import print_table
from medlama.core.errors import MedlamaInputError
from medlama.core.progress import enabled as progress_enabled
from medlama.core.settings import Checked, check, setting, settings_from
from medlama.datasets.context_variance.settings import BuildSettings, CorpusSpec, IndexEngine, KnowledgeSpec
from medlama.datasets.registry import Declaration, declared
from medlama.loaders.corpus_files import FORMATS
from medlama.loaders.mimic_notes import ON_BAD_RECORD

#: The flags of :class:`CorpusFlags` that name corpora (the others are reader options).
_CORPUS_PATHS = ("mimic", "pmc")


@dataclass(frozen=True)
class CorpusFlags(Checked):
    """The corpora as the command line names them (at least one), with the reader options that apply."""

    mimic: tuple[str, ...] | None = setting(
        None, metavar="PATH", help="MIMIC notes: MIMIC-III NOTEEVENTS.csv[.gz] or MIMIC-IV-Note discharge.csv[.gz] / "
                                   "radiology.csv[.gz] (source 'ehr')")
    pmc: tuple[str, ...] | None = setting(None, metavar="PATH",
                                          help="PMC articles, .xml/.nxml/.txt or folders (source 'pmc')")
    corpus: tuple[str, ...] | None = setting(None, cli=False, help="other corpora, [NAME:]FORMAT:PATH each")
    corpus_licence: tuple[str, ...] | None = setting(None, cli=False, help="source licences, NAME=LICENCE each")
    categories: tuple[str, ...] | None = setting(
        None, metavar="CATEGORY", help="MIMIC: only notes of these categories (e.g. 'Discharge summary'; none: all)")
    text_per: Literal["line", "file"] = setting("line", help="text corpora: one document per line or per file")
    text_field: str = setting("text", help="JSON Lines: the text field")
    on_bad_record: str = setting(
        "error", choices=ON_BAD_RECORD,
        help="MIMIC: a record the CSV does not hold cleanly (an unterminated quote, a wrong field count) stops the "
             "build naming its file and line (error), or is left out and counted on stderr (skip)")

    def specs(self) -> list[CorpusSpec]:
        """The corpora named by ``--mimic``, ``--pmc`` and ``--corpus``, with the reader options that apply and
        the licences ``--corpus-licence`` declares."""
        specs = []
        if self.mimic:
            specs.append(CorpusSpec.make(self.mimic, "mimic", categories=self.categories,
                                         on_bad_record=self.on_bad_record))
        if self.pmc:
            specs.append(CorpusSpec.make(self.pmc, "pmc"))
        for spec in self.corpus or ():
            options: dict = {}
            fmt = parse_corpus(spec).format
            if fmt == "text":
                options["per"] = self.text_per
            elif fmt == "jsonl" and self.text_field != "text":
                options["text_field"] = self.text_field
            elif fmt == "mimic":
                options["on_bad_record"] = self.on_bad_record
                if self.categories:
                    options["categories"] = self.categories
            specs.append(parse_corpus(spec, **options))
        return _with_licences(specs, self.corpus_licence or ())


@dataclass(frozen=True)
class RunSettings:
    """How the build runs and cuts its files (not what the rows are)."""

    num_proc: int = setting(1, help="processes for indexing and building contexts")
    index_dir: Path | None = setting(
        None, help="where corpus indexes are kept and reused (none: $MEDLAMA_CACHE/cv-index, else "
                   "~/.cache/medlama/cv-index; with --executor slurm, a folder the nodes share)")
    max_shard_mb: int = setting(
        500, metavar="MB", help="a data file is closed at this size (megabytes) and the rows go on in its next shard "
                                "(500: the datasets Hub's shard size)")

    def __post_init__(self) -> None:
        if isinstance(self.max_shard_mb, int) and self.max_shard_mb < 1:
            raise MedlamaInputError(f"--max-shard-mb must be at least 1, not {self.max_shard_mb}",
                                    field="max_shard_mb")
        check(self)


def register(builders, declaration: Declaration | None = None) -> None:
    """Add the ``context-variance`` parser to ``medlama build``'s sub-parsers (its name, help and description
    are its declaration's, :mod:`medlama.datasets.declared.context_variance`, which ``medlama build`` passes)."""
    declaration = declaration or declared("context-variance")
    parser = builders.add_parser(declaration.name, help=declaration.build.help,
                                 description=declaration.build.description)
    parser.add_argument("--out", required=True, type=Path, help="output folder; load it with medlama.datasets.folders.load_config(OUT, 'ehr_real')")
    kb = parser.add_mutually_exclusive_group(required=True)
    kb.add_argument("--medlama", type=Path, metavar="DIR", help="a built MedLAMA folder (pool: the relation's answers) "
                                                                "(default: none; give --medlama or --biolama)")
    kb.add_argument("--biolama", type=Path, metavar="DIR", help="a built BioLAMA folder (pool: the object type's "
                                                                "entities) (default: none)")
    add_settings_flags(parser, KnowledgeSpec)
    corpora = parser.add_argument_group("corpora (at least one)")
    readers = tuple(field.name for field in dataclasses.fields(CorpusFlags) if field.name not in _CORPUS_PATHS)
    add_settings_flags(corpora, CorpusFlags, exclude=readers)
    # Repeatable (each use adds one), which the settings flags are not: written here.
    corpora.add_argument("--corpus", action="append", metavar="[NAME:]FORMAT:PATH",
                         help="another corpus, e.g. pubmed:text:sentences.txt (formats mimic, pmc, jsonl, text); "
                              "repeat for more files or corpora (default: none)")
    corpora.add_argument("--corpus-licence", action="append", metavar="NAME=LICENCE",
                         help="declare the licence of source NAME (an SPDX id such as CC-BY-4.0, or text), recorded "
                              "in build_info.json and the card; repeat for more sources. A source left undeclared is "
                              "'unknown' and the set is then pushed only --private; MIMIC notes (read with --mimic, or "
                              "JSON Lines / text carrying MIMIC's columns) are PhysioNet-licensed and cannot be "
                              "declared otherwise (default: none)")
    add_settings_flags(corpora, CorpusFlags, exclude=_CORPUS_PATHS)
    add_settings_flags(parser, BuildSettings, title="contexts")
    add_settings_flags(parser, RunSettings)
    add_settings_flags(parser, IndexEngine, title="index engine (datatrove; --num-proc: local and Ray workers)")
    parser.add_argument("--json", action="store_true", help="print the statistics as JSON")
    parser.set_defaults(func=run)


def parse_corpus(spec: str, **options) -> CorpusSpec:
    """A :class:`CorpusSpec` from ``NAME:FORMAT:PATH`` (e.g. ``pubmed:text:sentences.txt``; read so whenever the
    second part is a format, even with a NAME that is a format name too) or ``FORMAT:PATH``."""
    parts = spec.split(":", 2)
    # NAME:FORMAT:PATH first, whatever NAME is (a source may be named like a format: mimic:jsonl:notes.jsonl);
    # FORMAT:PATH when the second part is no format (the path may hold ':', as in text:C:/data/x.txt).
    if len(parts) == 3 and parts[1] in FORMATS:
        return CorpusSpec.make(parts[2], parts[1], parts[0], **options)
    if len(parts) >= 2 and parts[0] in FORMATS:
        return CorpusSpec.make(spec.split(":", 1)[1], parts[0], **options)
    if len(parts) == 3:
        return CorpusSpec.make(parts[2], parts[1], parts[0], **options)
    raise MedlamaInputError(f"bad corpus {spec!r}: write FORMAT:PATH or NAME:FORMAT:PATH with FORMAT one of "
                            f"{list(FORMATS)}", field="corpus")


def _with_licences(specs: list[CorpusSpec], declarations) -> list[CorpusSpec]:
    """``specs`` with the licences ``--corpus-licence NAME=LICENCE`` declares; a name no source has, a
    declaration without ``=`` or one source declared twice differently is an error."""
    licences: dict[str, str] = {}
    for declaration in declarations:
        name, equals, licence = declaration.partition("=")
        name, licence = name.strip(), licence.strip()
        if not equals or not name or not licence:
            raise MedlamaInputError(f"bad --corpus-licence {declaration!r}: write NAME=LICENCE, e.g. pmc=CC-BY-4.0",
                                    field="corpus_licence")
        if licences.get(name, licence) != licence:
            raise MedlamaInputError(f"source {name!r} is declared both {licences[name]!r} and {licence!r}",
                                    field="corpus_licence")
        licences[name] = licence
    names = {spec.name for spec in specs}
    unknown = sorted(set(licences) - names)
    if unknown:
        raise MedlamaInputError(f"--corpus-licence names no source {', '.join(map(repr, unknown))}; the sources are "
                                f"{sorted(names)}", field="corpus_licence")
    return [dataclasses.replace(spec, licence=licences[spec.name]) if spec.name in licences else spec
            for spec in specs]


def run(args: argparse.Namespace) -> int:
    """The command line as settings (checked before anything is read), then :func:`build`."""
    run_settings = settings_from(RunSettings, given_settings(args, RunSettings))
    engine = settings_from(IndexEngine, given_settings(args, IndexEngine), workers=run_settings.num_proc)
    corpora = settings_from(CorpusFlags, given_settings(args, CorpusFlags))
    kind, folder = ("medlama", args.medlama) if args.medlama else ("biolama", args.biolama)
    knowledge = settings_from(KnowledgeSpec, given_settings(args, KnowledgeSpec), kind=kind, folder=folder)
    values = given_settings(args, BuildSettings)
    if values.get("max_docs") == 0:  # --max-docs 0: every document
        values["max_docs"] = None
    settings = settings_from(BuildSettings, values)
    return build(args.out, knowledge, corpora, settings, run_settings, engine, as_json=args.json)


def build(out: Path, knowledge: KnowledgeSpec, corpora: CorpusFlags, settings: BuildSettings, run: RunSettings,
          engine: IndexEngine, *, as_json: bool = False) -> int:
    """Build the sets into ``out`` and print their statistics (a table, or JSON with ``as_json``)."""
    # The export imports datasets, pyarrow and datatrove: loaded when a build runs, not for --help.
    from medlama.datasets.context_variance.export import build_context_variance
    from medlama.datasets.context_variance.index.pipeline import IndexSubmitted

    specs = corpora.specs()
    if not specs:
        raise MedlamaInputError("no corpus given: name at least one with --mimic, --pmc or --corpus")
    # The output is claimed first, as `build medlama` does: a folder that is not ours, or busy, is refused
    # before any input is read; the lock is then held until the folder is written. The inputs it may not be:
    reads = [path for path in [knowledge.folder if knowledge.kind == "medlama" else None,
                               *(corpora.mimic or ()), *(corpora.pmc or ())] if path]

    def announce(kb) -> None:
        # `origin` goes into the card and build_info.json, which are published: the spec's has no local path.
        print(f"{knowledge.origin} ({knowledge.folder}): {len(kb):,} triples, {len(kb.entities):,} entities",
              file=sys.stderr)

    try:  # UMLS provenance: the build infers it from the origin
        result = build_context_variance(
            knowledge, specs, out, settings=settings, num_proc=run.num_proc, index_root=run.index_dir,
            index_engine=engine, progress=progress_enabled(), max_shard_bytes=run.max_shard_mb * 1_000_000,
            reads=reads, on_knowledge=announce)
    except IndexSubmitted as submitted:  # Slurm builds the index; the same command, rerun, builds the sets
        print(f"medlama: {submitted}; nothing written to {out} yet", file=sys.stderr)
        return 0
    if as_json:
        json.dump({"out": str(out), "sources": [dataclasses.asdict(s) for s in result.sources],
                   "configs": result.configs, "default_config": result.default_config}, sys.stdout, indent=2)
        print()
        return 0
    types = result.settings.context_types
    print_table(
        "Context-variance sets",
        ["source", "documents", "triples", "with contexts", "docs used", *types, "negative", "inputs", "records",
         "index"],
        [(s.source, s.documents, s.triples, s.triples_with_context, s.documents_retrieved,
          *(s.sequences.get(t, 0) for t in types),
          sum(v for k, v in s.sequences.items() if k.endswith("_negative")), s.inputs, s.records,
          "reused" if s.index_reused else "built") for s in result.sources],
        caption=f"written to {out} (default config '{result.default_config}'; configs <source>_<type>, "
                "<source>_<type>_negative, <source>, pools)")
    return 0
