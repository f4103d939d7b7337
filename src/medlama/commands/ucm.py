"""``medlama ucm``: score context-variance sets with models; UCM tables 1-3, acc@k, JSON and a plot."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "ucm", help="UCM of models on context-variance sets: rank changes, UCM_k / UCM_m, acc@k with and "
                    "without context",
        description="Rank every pool entity at the mask of each incremental context input of a set built by "
                    "`medlama build context-variance`, with a masked LM (mask average over the pool) or an "
                    "encoder (retrieval, as Contrastive-Probe), and report the paper's tables 1-3. Writes "
                    "OUT/results.json and OUT/ucm.png. Without --model, the bundled all-MiniLM-L6-v2 encoder.")
    parser.add_argument("--sets", required=True, type=Path, help="folder written by medlama build context-variance")
    parser.add_argument("--model", nargs="+", help="model folders (default: the bundled encoder)")
    parser.add_argument("--label", nargs="+", help="names for the models in tables and plots")
    parser.add_argument("--ranker", nargs="+", default=["auto"], choices=["auto", "mlm", "retrieval"],
                        help="mlm: mask average with the MLM head; retrieval: [CLS] distance to the pool names; "
                             "auto (default): mlm when the model has an MLM head. One value, or one per model")
    parser.add_argument("--sources", nargs="+", metavar="SOURCE", help="score only these sources (default: all)")
    parser.add_argument("--context-types", nargs="+", metavar="TYPE",
                        help="score only these context types (real, knowledge-only, knowledge-sorted, "
                             "knowledge-random)")
    parser.add_argument("--relations", nargs="+", metavar="REL", help="score only these relations")
    parser.add_argument("--no-negative", action="store_true", help="skip the negative-target sequences")
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 5], metavar="K",
                        help="acc@k cut-offs (default: 1 5, as table 2)")
    parser.add_argument("--max-tokens", type=int, metavar="N", help="mlm: most masks per name (default: the longest)")
    parser.add_argument("--layer", type=int, help="retrieval: hidden layer (default: the last)")
    parser.add_argument("--pooling", choices=["cls", "mean"], help="retrieval: pooling (default: cls)")
    parser.add_argument("--distance", choices=["l2", "cosine"], help="retrieval: distance (default: l2)")
    parser.add_argument("--batch-size", type=int, help="inputs per forward pass")
    parser.add_argument("--include-first-segment", action="store_true",
                        help="also count each sequence's first record (input1 adds S1, whose entity is the centre "
                             "itself; left out by default, see medlama.ucm_run)")
    parser.add_argument("--records", action="store_true",
                        help="also write OUT/records.jsonl (every rank-change record)")
    parser.add_argument("--out", type=Path, default=Path("out/ucm"), help="folder for results.json and ucm.png")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from medlama.defaults import default_model_path
    from medlama.errors import MedlamaInputError
    from medlama.probers.context_rankers import make_ranker
    from medlama.ucm_run import run_ucm

    models = args.model or [str(default_model_path())]
    labels = args.label or (["bundled"] if not args.model else [Path(m).name or m for m in models])
    if len(labels) != len(models):
        raise MedlamaInputError(f"{len(labels)} --label values for {len(models)} --model values")
    kinds = args.ranker if len(args.ranker) > 1 else args.ranker * len(models)
    if len(kinds) != len(models):
        raise MedlamaInputError(f"{len(args.ranker)} --ranker values for {len(models)} --model values")
    if not (args.sets / "build_info.json").is_file():
        raise MedlamaInputError("not a context-variance folder (no build_info.json); run `medlama build "
                                "context-variance --out DIR`", file=args.sets)
    rankers = [(label, make_ranker(kind, model, max_tokens=args.max_tokens, layer=args.layer,
                                   pooling=args.pooling, distance=args.distance, batch_size=args.batch_size))
               for label, kind, model in zip(labels, kinds, models)]
    results, written = run_ucm(rankers, args.sets, args.out, ks=args.ks, sources=args.sources,
                               context_types=args.context_types, negative=not args.no_negative,
                               relations=args.relations, records=args.records,
                               skip_first_segment=not args.include_first_segment)
    for result in results:
        cut = (f" ({result.num_records_truncated:,} more left out: an input over the model's length limit)"
               if result.num_records_truncated else "")
        print(f"{result.label}: {result.settings.get('method')} ranker, {result.num_sequences:,} sequences, "
              f"{result.num_records:,} records{cut}, {result.seconds:.1f} s")
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0
