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
    parser.add_argument("--source", type=Path, help="a MedLAMA release: the hard set's queries and names encoded by "
                                                    "the bundled encoder (--preset) rather than random vectors")
    parser.add_argument("--per-relation", type=int, help="with --source: each relation's first queries only")
    parser.add_argument("--candidates", type=int, help="with --source: the pool's first names (and the answers)")
    parser.add_argument("--preset", choices=("reference", "sentence-transformers"), default="reference",
                        help="with --source: the retrieval preset that encodes and ranks (its distance)")
    args = parser.parse_args(argv)
    import numpy as np
    import torch

    from gpu_peers import best_of
    from medlama.probers.faiss_search import rank_pool, score_matrix, search
    from medlama.probers.ranking import Ranking, gold_indices

    device = torch.device(args.device)
    if args.source:
        names, queries, candidates, gold, distance = _encoded(args)
        gold_at = gold_indices(gold, candidates)
    else:
        rng = np.random.default_rng(0)
        names = rng.normal(size=(args.names, args.dim)).astype(np.float32)
        queries = rng.normal(size=(args.queries, args.dim)).astype(np.float32)
        gold_at = [sorted(rng.choice(args.names, size=1 + q % 3, replace=False).tolist())
                   for q in range(args.queries)]
        candidates = [str(i) for i in range(args.names)]
        gold = [[candidates[j] for j in row] for row in gold_at]
        distance = "l2"
    if args.threads:  # after encoding: the encoder sets its own
        torch.set_num_threads(args.threads)

    class Rows:  # score_matrix a block of 256 queries at a time, as the prober read them
        def __getitem__(self, q):
            start = q - q % 256
            if getattr(self, "start", None) != start:
                self.start, self.block = start, score_matrix(names, queries[start:start + 256], distance)
            return self.block[q - start]

    def whole():
        top = [[int(j) for j in row] for row in search(names, queries, 10, distance)]
        return Ranking.from_pool(gold, candidates, Rows(), top)

    def plain():
        n = torch.from_numpy(names).to(device)
        q = torch.from_numpy(queries).to(device)
        if distance == "cosine":  # unit vectors: the product is the cosine
            n, q = torch.nn.functional.normalize(n, dim=1), torch.nn.functional.normalize(q, dim=1)
        squared = (n * n).sum(1) if distance == "l2" else torch.zeros(len(n), device=device)
        return [(2 * q[s:s + 4096] @ n.T - squared).topk(10, dim=1).indices for s in range(0, len(q), 4096)]

    works = {"whole matrix": whole,
             "rank_pool": lambda: rank_pool(names, queries, 10, distance, gold_at, device=device),
             "plain torch": plain}
    if args.before:
        earlier = _module_at(args.before, "probers/faiss_search.py")
        works[f"rank_pool {args.before}"] = \
            lambda: earlier.rank_pool(names, queries, 10, distance, gold_at, device=device)
    best, results = best_of(device, works, args.repeat, clock=args.clock)
    old = results["whole matrix"]
    same = all([[candidates[j] for j in row] for row in found.top] == old.names
               and found.gold_ranks == old.gold_ranks
               for name, found in results.items() if name.startswith("rank_pool"))
    what = f"the hard set's first {args.per_relation} per relation, {args.preset} preset ({distance})" \
        if args.source else "random vectors"
    print(f"{len(queries)} queries x {len(names)} names x {names.shape[1]} dims ({what}) on {device} "
          f"({torch.get_num_threads()} torch threads), {args.clock} seconds, best of {args.repeat}:")
    for name, seconds in best.items():
        print(f"  {name:<20}{seconds:8.3f} s")
    print(f"  rank_pool / plain torch {best['rank_pool'] / best['plain torch']:.2f}x; whole matrix / rank_pool "
          f"{best['whole matrix'] / best['rank_pool']:.2f}x; top lists and gold ranks identical: {same}")
    return 0 if same else 1


def _encoded(args):
    """The hard set's names and queries (``--source``, ``--per-relation``, ``--candidates``) encoded by the bundled
    encoder with ``--preset``: (names, queries, candidates, gold, distance)."""
    from gpu_retrieval import _preset_fields, hard_set
    from medlama.core.defaults import default_model_path
    from medlama.probers.registry import make_prober

    query_set = hard_set(args.source, args.per_relation, args.candidates)
    prober = make_prober("retrieval", str(default_model_path()), _preset_fields(args.preset), device=args.device)
    settings, layer = prober.settings_, prober.encoder.layers[0]
    names = prober.encoder.encode(query_set.candidates, settings.name_max_length)[layer]
    queries = prober.encoder.encode(query_set.with_mask(prober.encoder.mask_token), settings.query_max_length)[layer]
    return names, queries, list(query_set.candidates), query_set.gold, settings.distance


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
