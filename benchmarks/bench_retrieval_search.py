"""The retrieval probe's search stage alone, at the whole hard set's size (15,329 queries x 17,532 names, 384
dimensions: all-MiniLM-L6-v2's), on vectors drawn at random (the time does not depend on the values; random
golds rank deep, so nearly every query needs its gold counted, the slow case), timed best of ``--repeat``:

* ``whole matrix``: the top 10 by FAISS and the gold's rank from every float64 score, 256 queries at a time
  (``Ranking.from_pool`` over ``score_matrix`` rows: the exhaustive computation ``rank_pool`` replaced);
* ``rank_pool``: medlama's search (:func:`medlama.probers.faiss_search.rank_pool`) on ``--device``;
* ``plain torch``: a float32 matrix product and ``topk`` a block of queries at a time, no gold ranks;
* with ``--before REV``: ``rank_pool`` as the git revision ``REV`` had it (``probers/faiss_search.py`` read by
  ``git show``), timed in the same rounds: before and after in one run.

The works take turns within each round (:func:`gpu_peers.best_of`, the benchmarks' one best-of timer); ``--clock
cpu`` times this process's CPU seconds rather than wall seconds (a machine shared with other work). Every
``rank_pool`` must give the whole matrix's top lists and gold ranks (checked; the script fails otherwise).

    python benchmarks/bench_retrieval_search.py                       # the hard set's size, CPU
    python benchmarks/bench_retrieval_search.py --queries 4000 --names 6000 --repeat 2 --before HEAD~1
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # gpu_peers beside this file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=15329)
    parser.add_argument("--names", type=int, default=17532)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's own choice)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall seconds, or this process's CPU seconds (a CPU device only)")
    parser.add_argument("--before", metavar="REV", help="also time rank_pool as the git revision REV had it")
    args = parser.parse_args(argv)
    import numpy as np
    import torch

    from gpu_peers import best_of
    from medlama.probers.faiss_search import rank_pool, score_matrix, search
    from medlama.probers.ranking import Ranking

    if args.threads:
        torch.set_num_threads(args.threads)

    rng = np.random.default_rng(0)
    names = rng.normal(size=(args.names, args.dim)).astype(np.float32)
    queries = rng.normal(size=(args.queries, args.dim)).astype(np.float32)
    gold_at = [sorted(rng.choice(args.names, size=1 + q % 3, replace=False).tolist()) for q in range(args.queries)]
    candidates = [str(i) for i in range(args.names)]
    gold = [[candidates[j] for j in row] for row in gold_at]
    device = torch.device(args.device)

    class Rows:  # score_matrix a block of 256 queries at a time, as the prober read them
        def __getitem__(self, q):
            start = q - q % 256
            if getattr(self, "start", None) != start:
                self.start, self.block = start, score_matrix(names, queries[start:start + 256], "l2")
            return self.block[q - start]

    def whole():
        top = [[int(j) for j in row] for row in search(names, queries, 10, "l2")]
        return Ranking.from_pool(gold, candidates, Rows(), top)

    def plain():
        n = torch.from_numpy(names).to(device)
        q = torch.from_numpy(queries).to(device)
        squared = (n * n).sum(1)
        return [(2 * q[s:s + 4096] @ n.T - squared).topk(10, dim=1).indices for s in range(0, len(q), 4096)]

    works = {"whole matrix": whole, "rank_pool": lambda: rank_pool(names, queries, 10, "l2", gold_at, device=device),
             "plain torch": plain}
    if args.before:
        earlier = _module_at(args.before, "probers/faiss_search.py")
        works[f"rank_pool {args.before}"] = lambda: earlier.rank_pool(names, queries, 10, "l2", gold_at, device=device)
    best, results = best_of(device, works, args.repeat, clock=args.clock)
    old = results["whole matrix"]
    same = all(found.top == [[int(n) for n in row] for row in old.names] and found.gold_ranks == old.gold_ranks
               for name, found in results.items() if name.startswith("rank_pool"))
    print(f"{args.queries} queries x {args.names} names x {args.dim} dims on {device} "
          f"({torch.get_num_threads()} torch threads), {args.clock} seconds, best of {args.repeat}:")
    for name, seconds in best.items():
        print(f"  {name:<20}{seconds:8.2f} s")
    print(f"  rank_pool / plain torch {best['rank_pool'] / best['plain torch']:.2f}x; whole matrix / rank_pool "
          f"{best['whole matrix'] / best['rank_pool']:.2f}x; top lists and gold ranks identical: {same}")
    return 0 if same else 1


def _module_at(revision: str, path: str):
    """The module ``path`` of this repository as the git revision ``revision`` had it (imported under a name of
    its own, beside today's)."""
    root = Path(__file__).resolve().parent.parent
    text = subprocess.run(["git", "-C", str(root), "show", f"{revision}:{path}"], check=True, capture_output=True,
                          text=True).stdout
    folder = Path(tempfile.mkdtemp(prefix="bench-retrieval-"))
    (folder / "earlier_faiss_search.py").write_text(text)
    spec = importlib.util.spec_from_file_location("earlier_faiss_search", folder / "earlier_faiss_search.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module

if __name__ == "__main__":
    sys.exit(main())
