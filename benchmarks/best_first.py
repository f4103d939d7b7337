"""Best-first search vs exhaustive scoring for ``causal-likelihood`` (sum reduction) on MedLAMA's hard set, per
relation: tokens fed through the model, CPU time, how many queries the search handed to exhaustive scoring, and
whether the top-10 lists and the gold's exact ranks are identical (they must be).

Best-first gains depend on a peaked model (random weights spread the probability over every name alike), so
a small GPT-2 (2 layers, hidden 64, a byte-level BPE tokenizer trained here on the same text; nothing is
downloaded) is trained for ``--train-steps`` steps (or ``--train-seconds``) on the cloze sentences of
``--train-config`` with their gold answers filled in (``--train-steps 0``: the untrained, flat model). Then, per
relation, the first ``--queries`` queries are ranked against the relation's own pool (``--candidates relation``)
both ways, as ``medlama probe`` ranks them by default (top-10 and the gold's exact rank): exhaustive
(``CausalLikelihoodProber.scores``, every name) and ``best_first`` with the gold (the same batch size); the tokens
counted are the positions fed through the model, padding included: the prefix and every pass's (the exhaustive
method's shared passes, ``exhaustive_token_forwards``, and the search's own count), the unit of the search's budget.
Times are the process's CPU seconds (steadier than wall time on a shared machine), the least of
``--repeats`` runs of each method (run in turn); loading and training are not timed.

    python benchmarks/best_first.py --data /tmp/medlama            # built there once if missing (minutes)
    python benchmarks/best_first.py --data /tmp/medlama --train-config full --train-steps 300 --queries 8 --threads 1
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
    from medlama.runs.queries import QuerySource, load_queries

    if not (folder / BUILD_INFO).exists():
        write_medlama(folder, source, progress=False)
    return load_queries(QuerySource(data=folder, config="hard", candidates="relation"))


def load_config(folder: Path, config: str):
    """The queries of ``config`` of the built folder (their cloze sentences to train on)."""
    from medlama.runs.queries import QuerySource, load_queries

    return load_queries(QuerySource(data=folder, config=config, candidates="relation"))


def train_model(folder: Path, sentences: list[str], seconds: float, seed: int = 0, steps: int | None = None) -> int:
    """A small GPT-2 trained for ``seconds`` (or ``steps`` steps) on ``sentences``, saved in ``folder``; the steps."""
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
    taken, start = 0, time.perf_counter()
    while taken < steps if steps is not None else time.perf_counter() - start < seconds:
        batch = rng.sample(encoded, 16)
        width = max(map(len, batch))
        ids = torch.tensor([row + [0] * (width - len(row)) for row in batch])
        labels = torch.tensor([row + [-100] * (width - len(row)) for row in batch])
        optimiser.zero_grad()
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimiser.step()
        taken += 1
        if taken % 50 == 0:
            print(f"  step {taken}: loss {loss.item():.3f}", file=sys.stderr)
    model.eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="built MedLAMA folder (built there if missing)")
    parser.add_argument("--source", type=Path, default=Path("/work/shared/data/medlama"), help="MedLAMA release")
    parser.add_argument("--train-seconds", type=float, default=90.0)
    parser.add_argument("--train-steps", type=int, help="train this many steps instead (0: the untrained model)")
    parser.add_argument("--train-config", choices=["hard", "full"], default="hard", help="the cloze sentences trained on")
    parser.add_argument("--queries", type=int, default=6, help="queries per relation")
    parser.add_argument("--batch-size", type=int, default=32, help="rows per forward pass (both methods)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3,
                        help="time each relation this many times, the two methods in turn, and keep each one's least "
                             "CPU time (a shared machine's noise only ever adds time)")
    parser.add_argument("--relations", nargs="+", help="only these relations (default: all)")
    args = parser.parse_args()

    import torch

    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings
    from medlama.probers.causal.search import best_first, exhaustive_token_forwards
    from medlama.probers.mlm import rank_unique

    torch.set_num_threads(args.threads)
    queries = hard_set(args.data, args.source)
    trained_on = queries if args.train_config == "hard" else load_config(args.data, args.train_config)
    sentences = [text.replace(MASK_PLACEHOLDER, answer) for text, gold in zip(trained_on.texts, trained_on.gold)
                 for answer in gold[:3]]
    with tempfile.TemporaryDirectory() as tmp:
        steps = train_model(Path(tmp), sentences, args.train_seconds, steps=args.train_steps)
        print(f"trained {steps} steps on {len(sentences)} sentences ({args.train_config})")
        prober = CausalLikelihoodProber(tmp, LikelihoodSettings(search="exhaustive", batch_size=args.batch_size))
        lm = prober.lm
        print(f"{'relation':45} {'pool':>5} {'tokens ex':>10} {'tokens bf':>10} {'ratio':>6} {'cpu s ex':>8} "
              f"{'cpu s bf':>8} {'ratio':>6} {'switched':>8} same top-10 same ranks")
        totals = [0, 0, 0.0, 0.0, 0, 0]
        for relation, pool in queries.pools.items():
            if args.relations and relation not in args.relations:
                continue
            picked = [i for i, r in enumerate(queries.relations) if r == relation][:args.queries]
            subset = queries.subset(picked)
            pooled = type(subset)(subset.ids, subset.relations, subset.texts, subset.gold, pool)
            ex_time = bf_time = float("inf")
            for repeat in range(max(1, args.repeats)):
                for method in ("exhaustive", "best-first")[::1 if repeat % 2 == 0 else -1]:
                    start = time.process_time()
                    if method == "exhaustive":
                        full = [rank_unique(list(zip(pool, row)), len(pool)) for row in prober.scores(pooled)]
                        ex_time = min(ex_time, time.process_time() - start)
                    else:
                        found = [best_first(lm, text, pool, 10, gold=gold, batch_size=args.batch_size)
                                 for text, gold in zip(subset.texts, subset.gold)]
                        bf_time = min(bf_time, time.process_time() - start)
            ex_tokens = sum(exhaustive_token_forwards(lm, text, pool) for text in subset.texts)
            bf_tokens = sum(result.token_forwards for result in found)
            switched = sum(result.switched for result in found)
            same = all(result.names == order[:10] for result, order in zip(found, full))
            ranks = [next((i + 1 for i, name in enumerate(order) if name in gold), None)
                     for order, gold in zip(full, subset.gold)]
            same_ranks = [result.gold_rank for result in found] == ranks
            totals = [totals[0] + ex_tokens, totals[1] + bf_tokens, totals[2] + ex_time, totals[3] + bf_time,
                      totals[4] + switched, totals[5] + len(picked)]
            print(f"{relation:45} {len(pool):5} {ex_tokens:10} {bf_tokens:10} {ex_tokens / bf_tokens:6.2f} "
                  f"{ex_time:8.2f} {bf_time:8.2f} {ex_time / bf_time:6.2f} {switched:3}/{len(picked):<4} "
                  f"{same!s:11} {same_ranks}", flush=True)
            if not same:
                for result, order, text in zip(found, full, subset.texts):
                    if result.names != order[:10]:
                        print(f"  differs: {text!r}\n    exhaustive {order[:10]}\n    best-first {result.names}")
        print(f"{'all':45} {'':5} {totals[0]:10} {totals[1]:10} {totals[0] / totals[1]:6.2f} {totals[2]:8.2f} "
              f"{totals[3]:8.2f} {totals[2] / totals[3]:6.2f} {totals[4]:3}/{totals[5]:<4}")


if __name__ == "__main__":
    main()
