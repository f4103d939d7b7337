"""The ``medlama build context-variance`` sub-builder (registered by :mod:`medlama.commands.build`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(builders) -> None:
    """Add the ``context-variance`` parser to ``medlama build``'s sub-parsers."""
    parser = builders.add_parser(
        "context-variance", help="context-variance probing sets (EHR / PMC / other corpora) for UCM",
        description="Build context-variance sets (Yao et al. 2023): triples of a built MedLAMA or BioLAMA folder, "
                    "contexts retrieved from corpora (MIMIC-III NOTEEVENTS.csv, PMC JATS XML / text, JSON Lines, "
                    "plain text), cut into segments around the target, in every context type with its "
                    "negative-target counterpart. Each corpus is indexed once and the index reused.")
    parser.add_argument("--out", required=True, type=Path, help="output folder; load_dataset(OUT, 'ehr_real')")
    kb = parser.add_mutually_exclusive_group(required=True)
    kb.add_argument("--medlama", type=Path, metavar="DIR", help="a built MedLAMA folder (pool: the relation's answers)")
    kb.add_argument("--biolama", type=Path, metavar="DIR", help="a built BioLAMA folder (pool: the object type's "
                                                                "entities)")
    parser.add_argument("--config", help="rows to use: MedLAMA hard (default) or full; BioLAMA all (default), a "
                                         "source or <source>_<PID>")
    parser.add_argument("--split", default="test", help="BioLAMA split (default: test)")
    parser.add_argument("--relations", nargs="+", metavar="REL", help="only these relations")
    parser.add_argument("--limit", type=int, metavar="N", help="only the first N rows of each relation")
    parser.add_argument("--prompt-column", default="query_human", choices=["query_human", "query_default"],
                        help="MedLAMA prompt (default: query_human)")
    corpora = parser.add_argument_group("corpora (at least one)")
    corpora.add_argument("--mimic", nargs="+", metavar="PATH", help="MIMIC-III NOTEEVENTS.csv[.gz] (source 'ehr')")
    corpora.add_argument("--pmc", nargs="+", metavar="PATH", help="PMC articles, .xml/.nxml/.txt or folders (source "
                                                                  "'pmc')")
    corpora.add_argument("--corpus", action="append", metavar="[NAME:]FORMAT:PATH",
                         help="another corpus, e.g. pubmed:text:sentences.txt (formats mimic, pmc, jsonl, text); "
                              "repeat for more files or corpora")
    corpora.add_argument("--categories", nargs="+", metavar="CATEGORY",
                         help="MIMIC: only notes of these categories (e.g. 'Discharge summary')")
    corpora.add_argument("--text-per", choices=["line", "file"], default="line",
                         help="text corpora: one document per line (default) or per file")
    corpora.add_argument("--text-field", default="text", help="JSON Lines: the text field (default: text)")
    parser.add_argument("--context-types", nargs="+", metavar="TYPE",
                        help="real, knowledge-only, knowledge-sorted, knowledge-random (default: all four)")
    parser.add_argument("--no-negative", action="store_true", help="leave out the negative-target contexts")
    parser.add_argument("--max-docs", type=int, default=10, metavar="N",
                        help="documents per triple and corpus, a seeded random sample when more (default 10; 0: all)")
    parser.add_argument("--max-segments", type=int, metavar="N", help="keep S1..SN of each context (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the document sample and knowledge-random")
    parser.add_argument("--random-mode", choices=["shuffle", "insert"], default="shuffle",
                        help="knowledge-random layout: shuffle (figure 2, default) or insert")
    parser.add_argument("--num-proc", type=int, default=1, help="processes for indexing and building contexts")
    parser.add_argument("--index-dir", type=Path, help="where corpus indexes are kept and reused (default: "
                                                       "$MEDLAMA_CACHE/cv-index, else ~/.cache/medlama/cv-index)")
    parser.add_argument("--json", action="store_true", help="print the statistics as JSON")
    parser.set_defaults(func=run)


def corpus_specs(args: argparse.Namespace) -> list:
    from medlama.datasets.context_variance.builder import CorpusSpec

    specs = []
    if args.mimic:
        categories = tuple(args.categories) if args.categories else None
        specs.append(CorpusSpec.make(args.mimic, "mimic", categories=categories))
    if args.pmc:
        specs.append(CorpusSpec.make(args.pmc, "pmc"))
    for spec in args.corpus or ():
        options = {}
        fmt = CorpusSpec.parse(spec).format
        if fmt == "text":
            options["per"] = args.text_per
        elif fmt == "jsonl" and args.text_field != "text":
            options["text_field"] = args.text_field
        elif fmt == "mimic" and args.categories:
            options["categories"] = tuple(args.categories)
        specs.append(CorpusSpec.parse(spec, **options))
    return specs


def run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from medlama.datasets.context_variance.builder import BuildSettings, build_context_variance
    from medlama.datasets.context_variance.kb_adapters import knowledge_base_from_biolama, knowledge_base_from_medlama
    from medlama.datasets.context_variance.segmentation import CONTEXT_TYPES
    from medlama.display import print_table
    from medlama.errors import MedlamaInputError

    specs = corpus_specs(args)
    if not specs:
        raise MedlamaInputError("no corpus given: name at least one with --mimic, --pmc or --corpus")
    if args.limit is not None and args.limit < 1:
        raise MedlamaInputError(f"--limit must be >= 1, got {args.limit}")
    settings = BuildSettings(context_types=tuple(args.context_types or CONTEXT_TYPES), negative=not args.no_negative,
                             max_docs=args.max_docs or None, seed=args.seed, max_segments=args.max_segments,
                             random_mode=args.random_mode).check()
    # `origin` goes into the card and build_info.json, which are published: no local path in it.
    if args.medlama:
        config = args.config or "hard"
        kb = knowledge_base_from_medlama(args.medlama, config, relations=args.relations,
                                         prompt_column=args.prompt_column, limit=args.limit)
        origin, folder = f"MedLAMA `{config}`", args.medlama
    else:
        config = args.config or "all"
        kb = knowledge_base_from_biolama(args.biolama, config, split=args.split, relations=args.relations,
                                         limit=args.limit)
        origin, folder = f"BioLAMA `{config}`, split `{args.split}`", args.biolama
    print(f"{origin} ({folder}): {len(kb):,} triples, {len(kb.entities):,} entities", file=sys.stderr)
    build = build_context_variance(kb, specs, args.out, settings=settings, num_proc=args.num_proc,
                                   index_root=args.index_dir, origin=origin)  # UMLS provenance: the builder infers it from these
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
