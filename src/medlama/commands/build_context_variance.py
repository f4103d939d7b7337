"""``medlama build context-variance``: the context-variance sets of a built MedLAMA / BioLAMA folder as a dataset
folder (registered by :mod:`medlama.commands.build`).

This module turns the command line into the library's typed settings and nothing more: the knowledge-base
flags into a :class:`~medlama.datasets.context_variance.settings.KnowledgeSpec`, the row flags into a
:class:`~medlama.datasets.context_variance.settings.BuildSettings` (both made by
:func:`medlama.commands.flags.add_settings_flags` from the fields), and the corpus strings (``--mimic``,
``--pmc``, ``--corpus [NAME:]FORMAT:PATH``, with ``--corpus-licence NAME=LICENCE``) into
:class:`~medlama.datasets.context_variance.settings.CorpusSpec` s.
The build itself is :func:`medlama.datasets.context_variance.export.write_folder` over a
:class:`~medlama.datasets.context_variance.builder.ContextVarianceBuilder`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from medlama.commands.flags import add_settings_flags, given_settings


def register(builders) -> None:
    """Add the ``context-variance`` parser to ``medlama build``'s sub-parsers."""
    from medlama.datasets.context_variance.index_engine import IndexEngine
    from medlama.datasets.context_variance.settings import BuildSettings, KnowledgeSpec
    from medlama.loaders.corpora import ON_BAD_RECORD

    parser = builders.add_parser(
        "context-variance", help="context-variance probing sets (EHR / PMC / other corpora) for UCM",
        description="Build context-variance sets (Yao et al. 2023): triples of a built MedLAMA or BioLAMA folder, "
                    "contexts retrieved from corpora (MIMIC-III / MIMIC-IV notes CSV, PMC JATS XML / text, JSON Lines, "
                    "plain text), cut into segments around the target, in every context type with its "
                    "negative-target counterpart. Each corpus is indexed once and the index reused.")
    parser.add_argument("--out", required=True, type=Path, help="output folder; load it with medlama.datasets.folders.load_config(OUT, 'ehr_real')")
    kb = parser.add_mutually_exclusive_group(required=True)
    kb.add_argument("--medlama", type=Path, metavar="DIR", help="a built MedLAMA folder (pool: the relation's answers) "
                                                                "(default: none; give --medlama or --biolama)")
    kb.add_argument("--biolama", type=Path, metavar="DIR", help="a built BioLAMA folder (pool: the object type's "
                                                                "entities) (default: none)")
    add_settings_flags(parser, KnowledgeSpec)
    corpora = parser.add_argument_group("corpora (at least one)")
    corpora.add_argument("--mimic", nargs="+", metavar="PATH",
                         help="MIMIC notes: MIMIC-III NOTEEVENTS.csv[.gz] or MIMIC-IV-Note discharge.csv[.gz] / "
                              "radiology.csv[.gz] (source 'ehr') (default: none)")
    corpora.add_argument("--pmc", nargs="+", metavar="PATH", help="PMC articles, .xml/.nxml/.txt or folders (source "
                                                                  "'pmc') (default: none)")
    corpora.add_argument("--corpus", action="append", metavar="[NAME:]FORMAT:PATH",
                         help="another corpus, e.g. pubmed:text:sentences.txt (formats mimic, pmc, jsonl, text); "
                              "repeat for more files or corpora (default: none)")
    corpora.add_argument("--corpus-licence", action="append", metavar="NAME=LICENCE",
                         help="declare the licence of source NAME (an SPDX id such as CC-BY-4.0, or text), recorded "
                              "in build_info.json and the card; repeat for more sources. A source left undeclared is "
                              "'unknown' and the set is then pushed only --private; MIMIC notes (read with --mimic, or "
                              "JSON Lines / text carrying MIMIC's columns) are PhysioNet-licensed and cannot be "
                              "declared otherwise (default: none)")
    corpora.add_argument("--categories", nargs="+", metavar="CATEGORY",
                         help="MIMIC: only notes of these categories (e.g. 'Discharge summary'; "
                                                                     "default: all)")
    corpora.add_argument("--text-per", choices=["line", "file"], default="line",
                         help="text corpora: one document per line (default) or per file")
    corpora.add_argument("--text-field", default="text", help="JSON Lines: the text field (default: text)")
    corpora.add_argument("--on-bad-record", choices=ON_BAD_RECORD, default="error",
                         help="MIMIC: a record the CSV does not hold cleanly (an unterminated quote, a wrong field "
                              "count) stops the build naming its file and line (error, the default), or is left "
                              "out and counted on stderr (skip)")
    add_settings_flags(parser, BuildSettings, title="contexts")
    parser.add_argument("--num-proc", type=int, default=1, help="processes for indexing and building contexts "
                                                                            "(default: %(default)s)")
    parser.add_argument("--index-dir", type=Path, help="where corpus indexes are kept and reused (default: "
                                                       "$MEDLAMA_CACHE/cv-index, else ~/.cache/medlama/cv-index; "
                                                       "with --executor slurm, a folder the nodes share)")
    parser.add_argument("--max-shard-mb", type=int, default=500, metavar="MB",
                        help="a data file is closed at this size (megabytes) and the rows go on in its next shard "
                             "(default: %(default)s, the datasets Hub's shard size)")
    add_settings_flags(parser, IndexEngine, title="index engine (datatrove; --num-proc: local and Ray workers)")
    parser.add_argument("--json", action="store_true", help="print the statistics as JSON")
    parser.set_defaults(func=run)


def parse_corpus(spec: str, **options):
    """A :class:`CorpusSpec` from ``NAME:FORMAT:PATH`` (e.g. ``pubmed:text:sentences.txt``; read so whenever the
    second part is a format, even with a NAME that is a format name too) or ``FORMAT:PATH``."""
    from medlama.datasets.context_variance.settings import CorpusSpec
    from medlama.core.errors import MedlamaInputError
    from medlama.loaders.corpora import FORMATS

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


def corpus_specs(args: argparse.Namespace) -> list:
    """The corpora named by ``--mimic``, ``--pmc`` and ``--corpus``, with the reader options that apply."""
    from medlama.datasets.context_variance.settings import CorpusSpec

    specs = []
    if args.mimic:
        categories = tuple(args.categories) if args.categories else None
        specs.append(CorpusSpec.make(args.mimic, "mimic", categories=categories, on_bad_record=args.on_bad_record))
    if args.pmc:
        specs.append(CorpusSpec.make(args.pmc, "pmc"))
    for spec in args.corpus or ():
        options = {}
        fmt = parse_corpus(spec).format
        if fmt == "text":
            options["per"] = args.text_per
        elif fmt == "jsonl" and args.text_field != "text":
            options["text_field"] = args.text_field
        elif fmt == "mimic":
            options["on_bad_record"] = args.on_bad_record
            if args.categories:
                options["categories"] = tuple(args.categories)
        specs.append(parse_corpus(spec, **options))
    return _with_licences(specs, args.corpus_licence or ())


def _with_licences(specs: list, declarations) -> list:
    """``specs`` with the licences ``--corpus-licence NAME=LICENCE`` declares; a name no source has, a
    declaration without ``=`` or one source declared twice differently is an error."""
    import dataclasses

    from medlama.core.errors import MedlamaInputError

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
    from medlama.core.atomic import claim_directory
    from medlama.core.errors import MedlamaInputError
    from medlama.datasets.context_variance.export import KIND

    if args.max_shard_mb < 1:
        raise MedlamaInputError(f"--max-shard-mb must be at least 1, not {args.max_shard_mb}", field="max_shard_mb")

    # The output first, as `build medlama` does: a folder that is not ours, or busy, is refused before any
    # input is read; the lock is then held until the folder is written.
    reads = [path for path in [args.medlama, *(args.mimic or []), *(args.pmc or [])] if path]
    with claim_directory(args.out, marker="build_info.json", kind=KIND, reads=reads):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from medlama.datasets.context_variance.builder import ContextVarianceBuilder
    from medlama.datasets.context_variance.export import write_folder
    from medlama.datasets.context_variance.index_engine import IndexEngine, IndexSubmitted
    from medlama.datasets.context_variance.settings import BuildSettings, KnowledgeSpec
    from medlama.core.display import print_table
    from medlama.core.errors import MedlamaInputError
    from medlama.core.progress import enabled as progress_enabled
    from medlama.core.settings import settings_from

    engine = settings_from(IndexEngine, given_settings(args, IndexEngine), workers=args.num_proc)
    engine.check_available()  # before anything is read
    specs = corpus_specs(args)
    if not specs:
        raise MedlamaInputError("no corpus given: name at least one with --mimic, --pmc or --corpus")
    kind, folder = ("medlama", args.medlama) if args.medlama else ("biolama", args.biolama)
    knowledge = settings_from(KnowledgeSpec, given_settings(args, KnowledgeSpec), kind=kind, folder=folder)
    values = given_settings(args, BuildSettings)
    if values.get("max_docs") == 0:  # --max-docs 0: every document
        values["max_docs"] = None
    settings = settings_from(BuildSettings, values)
    builder = ContextVarianceBuilder(knowledge=knowledge, corpora=tuple(specs), settings=settings,
                                     index_root=args.index_dir, num_proc=args.num_proc, index_engine=engine,
                                     progress=progress_enabled())
    kb = builder.knowledge_base()
    print(f"{knowledge.origin} ({folder}): {len(kb):,} triples, {len(kb.entities):,} entities", file=sys.stderr)
    # `origin` goes into the card and build_info.json, which are published: the spec's has no local path.
    try:  # UMLS provenance: the builder infers it from the origin
        build = write_folder(builder, args.out, max_shard_bytes=args.max_shard_mb * 1_000_000)
    except IndexSubmitted as submitted:  # Slurm builds the index; the same command, rerun, builds the sets
        print(f"medlama: {submitted}; nothing written to {args.out} yet", file=sys.stderr)
        return 0
    if args.json:
        json.dump({"out": str(args.out), "sources": [asdict(s) for s in build.sources],
                   "configs": build.configs, "default_config": build.default_config}, sys.stdout, indent=2)
        print()
        return 0
    types = build.settings.context_types
    print_table(
        "Context-variance sets",
        ["source", "documents", "triples", "with contexts", "docs used", *types, "negative", "inputs", "records",
         "index"],
        [(s.source, s.documents, s.triples, s.triples_with_context, s.documents_retrieved,
          *(s.sequences.get(t, 0) for t in types),
          sum(v for k, v in s.sequences.items() if k.endswith("_negative")), s.inputs, s.records,
          "reused" if s.index_reused else "built") for s in build.sources],
        caption=f"written to {args.out} (default config '{build.default_config}'; configs <source>_<type>, "
                "<source>_<type>_negative, <source>, pools)")
    return 0
