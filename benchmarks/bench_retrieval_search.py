"""The retrieval probe's search stage alone, at the whole hard set's size (15,329 queries x 17,532 names, 384
dimensions: all-MiniLM-L6-v2's), on vectors drawn at random (the time does not depend on the values; random
golds rank deep, so nearly every query needs its gold counted, the slow case), timed best of ``--repeat``:

* ``whole matrix``: the top 10 by FAISS and the gold's rank from every float64 score, 256 queries at a time
  (``Ranking.from_pool`` over ``score_matrix`` rows: the exhaustive computation ``rank_pool`` replaced);
* ``rank_pool``: medlama's search (:func:`medlama.probers.faiss_search.rank_pool`) on ``--device``;
* ``plain torch``: a float32 matrix product and ``topk`` a block of queries at a time, no gold ranks.

The first two must give the same top lists and gold ranks (checked; the script fails otherwise).

    python benchmarks/bench_retrieval_search.py                       # the hard set's size, CPU
    python benchmarks/bench_retrieval_search.py --queries 2000 --names 3000 --repeat 1
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=15329)
    parser.add_argument("--names", type=int, default=17532)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    import numpy as np
    import torch

    from medlama.probers.faiss_search import rank_pool, score_matrix, search
    from medlama.probers.ranking import Ranking

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
    best, results = {name: float("inf") for name in works}, {}
    for _ in range(args.repeat):
        for name, work in works.items():
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            results[name] = work()
            if device.type == "cuda":
                torch.cuda.synchronize()
            best[name] = min(best[name], time.perf_counter() - start)
    old, new = results["whole matrix"], results["rank_pool"]
    same = new.top == [[int(n) for n in row] for row in old.names] \
        and new.gold_ranks == old.gold_ranks
    print(f"{args.queries} queries x {args.names} names x {args.dim} dims on {device} "
          f"({torch.get_num_threads()} torch threads), best of {args.repeat}:")
    for name, seconds in best.items():
        print(f"  {name:<14}{seconds:8.2f} s")
    print(f"  rank_pool / plain torch {best['rank_pool'] / best['plain torch']:.2f}x; whole matrix / rank_pool "
          f"{best['whole matrix'] / best['rank_pool']:.2f}x; top lists and gold ranks identical: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
