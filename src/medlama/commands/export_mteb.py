"""``medlama export mteb --data DIR --out DIR``: MedLAMA in MTEB's retrieval layout (one subset per relation).

See :mod:`medlama.integrations.mteb.export` for the layout; in Python, ``medlama.mteb_task(...)`` gives MTEB
the same task without writing anything.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from medlama.commands.flags import add_command
from medlama.integrations.mteb.export import describe, export_mteb


def register(formats) -> None:
    parser = add_command(formats, "mteb", run,
                         help="MedLAMA in MTEB's retrieval layout (corpus, queries, qrels per relation)")
    parser.add_argument("--data", type=Path, default=None,
                        help="the built MedLAMA folder (medlama build medlama --out DIR), a push-dataset dry run or "
                             "a Hub dataset id; default: the build kept in the cache")
    parser.add_argument("--out", required=True, type=Path,
                        help="output folder (new, empty, or an earlier export, which is replaced)")
    parser.add_argument("--config", default="hard", choices=("hard", "full"),
                        help="MedLAMA query set (default: %(default)s)")
    parser.add_argument("--relations", nargs="+", metavar="REL", help="export only these relations (default: all)")
    parser.add_argument("--mask-token", metavar="TOKEN", default=None,
                        help="what fills the queries' object slot, e.g. [MASK] for BERT-like models (default: the "
                             "neutral blank ___; medlama.mteb_task fills it with each model's own mask token)")


def run(args: argparse.Namespace) -> int:
    """Write MedLAMA as MTEB retrieval data: one subset per relation, its candidate pool as corpus, its queries, every
    gold name as relevant (BEIR files plus a README whose configs MTEB 2.x loads). The names derive from the UMLS
    Metathesaurus: share the folder only gated."""

    data = str(args.data) if args.data is not None else None
    record = export_mteb(data, args.out, config=args.config, relations=args.relations, mask_token=args.mask_token)
    print(describe(record, args.out))
    return 0
