"""Best-first search vs exhaustive scoring for ``causal-likelihood`` (sum reduction) on MedLAMA's hard set:
tokens fed through the model, wall time, and the top-10 lists (which must be identical).

Best-first gains depend on a peaked model (random weights spread the probability over every name alike), so
a small GPT-2 (2 layers, hidden 64, a byte-level BPE tokenizer trained here on the same text; nothing is
downloaded) is trained for ``--train-seconds`` on the hard set's cloze sentences with their gold answers
filled in. Then, per relation, the first ``--queries`` queries are ranked against the relation's own pool
(``--candidates relation``) both ways through ``CausalLikelihoodProber`` (``search="exhaustive"``, and
``best_first`` with the same batch size); the tokens counted are the prefix and every fed continuation
token (``exhaustive_token_forwards`` and the search's own count). Loading and training are not timed.

    python benchmarks/best_first.py --data /tmp/medlama            # built there once if missing (minutes)
    python benchmarks/best_first.py --data /tmp/medlama --train-seconds 60 --queries 4 --threads 2
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from medlama.core.defaults import MASK_PLACEHOLDER
from medlama.core.defaults import BUILD_INFO

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")


def hard_set(folder: Path, source: Path):
    """MedLAMA's hard queries with per-relation pools (``folder`` built from ``source`` if it is missing)."""
    from medlama.datasets.medlama_folder import write_medlama
    from medlama.probers.queries import QuerySource, load_queries

    if not (folder / BUILD_INFO).exists():
        write_medlama(folder, source, progress=False)
    return load_queries(QuerySource(data=folder, config="hard", candidates="relation"))


def train_model(folder: Path, sentences: list[str], seconds: float, seed: int = 0) -> int:
    """A small GPT-2 trained for ``seconds`` on ``sentences`` and saved in ``folder``; the steps taken."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from bench_causal import bpe_tokenizer  # benchmarks/, beside this script

    tokenizer = bpe_tokenizer(sentences, 2000)
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=128, n_embd=64, n_layer=2, n_head=4,
                                       bos_token_id=0, eos_token_id=0))
    encoded = [tokenizer(s)["input_ids"][:128] for s in sentences]
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    rng = random.Random(seed)
    model.train()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        batch = rng.sample(encoded, 16)
        width = max(map(len, batch))
        ids = torch.tensor([row + [0] * (width - len(row)) for row in batch])
        labels = torch.tensor([row + [-100] * (width - len(row)) for row in batch])
        optimiser.zero_grad()
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimiser.step()
        steps += 1
        if steps % 50 == 0:
            print(f"  step {steps}: loss {loss.item():.3f}", file=sys.stderr)
    model.eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="built MedLAMA folder (built there if missing)")
    parser.add_argument("--source", type=Path, default=Path("/work/shared/data/medlama"), help="MedLAMA release")
    parser.add_argument("--train-seconds", type=float, default=90.0)
    parser.add_argument("--queries", type=int, default=6, help="queries per relation")
    parser.add_argument("--batch-size", type=int, default=32, help="rows per forward pass (both methods)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--relations", nargs="+", help="only these relations (default: all)")
    args = parser.parse_args()

    import torch

    from medlama.probers.causal import CausalLikelihoodProber, LikelihoodSettings
    from medlama.probers.causal_search import best_first, exhaustive_token_forwards
    from medlama.probers.mlm import rank_unique

    torch.set_num_threads(args.threads)
    queries = hard_set(args.data, args.source)
    sentences = [text.replace(MASK_PLACEHOLDER, answer) for text, gold in zip(queries.texts, queries.gold) for answer in gold[:3]]
    with tempfile.TemporaryDirectory() as tmp:
        steps = train_model(Path(tmp), sentences, args.train_seconds)
        print(f"trained {steps} steps on {len(sentences)} sentences for {args.train_seconds:.0f}s")
        prober = CausalLikelihoodProber(tmp, LikelihoodSettings(search="exhaustive", batch_size=args.batch_size))
        lm = prober.lm
        print(f"{'relation':45} {'pool':>5} {'tokens ex':>10} {'tokens bf':>10} {'ratio':>6} {'time ex':>8} "
              f"{'time bf':>8} {'ratio':>6} same top-10 {'tokens +rank':>12} {'ratio':>6} same ranks")
        totals = [0, 0, 0.0, 0.0, 0]
        for relation, pool in queries.pools.items():
            if args.relations and relation not in args.relations:
                continue
            picked = [i for i, r in enumerate(queries.relations) if r == relation][:args.queries]
            subset = queries.subset(picked)
            start = time.perf_counter()
            exhaustive = [rank_unique(list(zip(pool, row)), 10) for row in prober.scores(
                type(subset)(subset.ids, subset.relations, subset.texts, subset.gold, pool))]
            ex_time = time.perf_counter() - start
            start = time.perf_counter()
            found = [best_first(lm, text, pool, 10, batch_size=args.batch_size) for text in subset.texts]
            bf_time = time.perf_counter() - start
            ex_tokens = sum(exhaustive_token_forwards(lm, text, pool) for text in subset.texts)
            bf_tokens = sum(result.token_forwards for result in found)
            same = all(result.names == names for result, names in zip(found, exhaustive))
            # the cost of the sample log's exact gold rank (the default): the search goes on to the gold
            ranked = [best_first(lm, text, pool, 10, gold=gold, batch_size=args.batch_size)
                      for text, gold in zip(subset.texts, subset.gold)]
            rank_tokens = sum(result.token_forwards for result in ranked)
            full = [rank_unique(list(zip(pool, row)), len(pool)) for row in prober.scores(
                type(subset)(subset.ids, subset.relations, subset.texts, subset.gold, pool))]
            ranks = [next((i + 1 for i, name in enumerate(order) if name in gold), None)
                     for order, gold in zip(full, subset.gold)]
            same_ranks = [result.gold_rank for result in ranked] == ranks
            totals = [totals[0] + ex_tokens, totals[1] + bf_tokens, totals[2] + ex_time, totals[3] + bf_time,
                      totals[4] + rank_tokens]
            print(f"{relation:45} {len(pool):5} {ex_tokens:10} {bf_tokens:10} {ex_tokens / bf_tokens:6.1f} "
                  f"{ex_time:8.2f} {bf_time:8.2f} {ex_time / bf_time:6.1f} {same!s:10} {rank_tokens:12} "
                  f"{ex_tokens / rank_tokens:6.1f} {same_ranks}", flush=True)
            if not same:
                for result, names, text in zip(found, exhaustive, subset.texts):
                    if result.names != names:
                        print(f"  differs: {text!r}\n    exhaustive {names}\n    best-first {result.names}")
        print(f"{'all':45} {'':5} {totals[0]:10} {totals[1]:10} {totals[0] / totals[1]:6.1f} {totals[2]:8.2f} "
              f"{totals[3]:8.2f} {totals[2] / totals[3]:6.1f} {'':10} {totals[4]:12} {totals[0] / totals[4]:6.1f}")


if __name__ == "__main__":
    main()
