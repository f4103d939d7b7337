"""Causal-LM probing throughput (queries/s of each causal method) and memory of KV-cache reuse vs naive scoring.

A randomly initialised causal LM is saved in a temporary folder with a byte-level BPE tokenizer trained
here on the queries and candidate names (by the ``tokenizers`` library, from this synthetic text alone:
nothing is downloaded, so it runs on a machine with no network), then loaded through
``medlama.probers.registry.make_prober`` like a user's checkpoint (loading is not timed). Queries are MedLAMA-style cloze sentences ``<head> may treat [Y] .`` over a
synthetic vocabulary of drug and disease names (no data needed); the candidate set is ``--candidates``
names. Random weights make the answers meaningless: the figures measure the probers' own work.

* default: a tiny GPT-2 (2 layers, hidden 64) on CPU.
* ``--real-size gpt2-medium`` (24 layers, hidden 1024) or ``--real-size llama-1b`` (16 layers, hidden
  2048, GQA 32/8), for a GPU: ``--device cuda --dtype bf16``.

Memory: on a GPU, the peak CUDA memory above the model (``torch.cuda.max_memory_allocated``); on CPU, the
peak resident memory (RSS) above the start of the call, sampled every 0.5 ms (torch's CPU allocator is
invisible to ``tracemalloc``). Both for ``causal-likelihood`` with the KV cache reused and without it
(every full sequence run from scratch).

``--lens``: also ``causal-likelihood --layers`` at every layer (the logit lens, one pass for all of them) beside
the exhaustive search it is to be compared with (both score every candidate).

    python benchmarks/bench_causal.py --threads 1                       # CPU, tiny GPT-2
    python benchmarks/bench_causal.py --real-size gpt2-medium --device cuda --dtype bf16 --queries 64
    python benchmarks/bench_causal.py --real-size llama-1b --device cuda --dtype bf16 --queries 64
    python benchmarks/bench_causal.py --real-size gpt2-medium --dtype bf16 --dry-run   # builds, 2 queries, no timing
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

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

METHODS = ("causal-likelihood", "causal-constrained", "causal-generate")
SYLLABLES = ["as", "pi", "rin", "me", "tor", "fen", "dia", "be", "tes", "card", "io", "my", "path", "neu", "ro",
             "ma", "lin", "ox", "zol", "ide", "thy", "roid", "gas", "tri", "tis", "hep", "at", "ic"]


def names(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out: set[str] = set()
    while len(out) < n:
        words = [("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))) for _ in range(rng.randint(1, 3))]
        out.add(" ".join(words))
    return sorted(out)


def bpe_tokenizer(corpus: list[str], vocab_size: int = 2000):
    """A GPT-2 style byte-level BPE tokenizer trained on ``corpus`` (nothing downloaded)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                        show_progress=False))
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>")


def build_model(folder: Path, size: str, corpus: list[str]) -> None:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    tokenizer = bpe_tokenizer(corpus)
    # Real models have ~50k-128k rows of output embeddings: pad the vocabulary so the head costs the same.
    vocab = {"tiny": len(tokenizer), "gpt2-medium": 50257, "llama-1b": 128256}[size]
    torch.manual_seed(0)
    if size == "tiny":
        model = GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_positions=256, n_embd=64, n_layer=2, n_head=2,
                                                   bos_token_id=0, eos_token_id=0))
    elif size == "gpt2-medium":
        model = GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_positions=1024, n_embd=1024, n_layer=24, n_head=16))
    else:
        model = LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=2048, intermediate_size=8192,
                                             num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                                             max_position_embeddings=2048, tie_word_embeddings=True))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def memory_run(prober, queries, device: str) -> tuple[float, str]:
    """Seconds and peak memory of ``prober.scores(queries)``."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        start = time.perf_counter()
        prober.scores(queries)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        return seconds, f"peak CUDA {(torch.cuda.max_memory_allocated() - base) / 2**20:.1f} MiB above the model"
    import threading

    page = os.sysconf("SC_PAGE_SIZE")

    def rss() -> int:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * page

    base, peak, running = rss(), [0], [True]

    def sample() -> None:  # torch's CPU allocator is invisible to tracemalloc: sample the RSS instead
        while running[0]:
            peak[0] = max(peak[0], rss())
            time.sleep(0.0005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    start = time.perf_counter()
    prober.scores(queries)
    seconds = time.perf_counter() - start
    running[0] = False
    sampler.join()
    return seconds, f"peak RSS {(peak[0] - base) / 2**20:.1f} MiB above the start"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real-size", choices=["gpt2-medium", "llama-1b"], default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--beams", type=int, default=10, help="num_beams of the constrained and generate methods")
    parser.add_argument("--batch-size", type=int, default=200, help="candidate continuations per forward pass")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--lens", action="store_true", help="also the logit lens at every layer (--layers) against "
                                                            "exhaustive causal-likelihood")
    parser.add_argument("--dry-run", action="store_true",
                        help="check that the model builds and every method runs: 2 queries, 5 candidates, 2 beams, "
                             "no memory comparison")
    args = parser.parse_args(argv)
    if args.dry_run:
        args.queries, args.candidates, args.beams = min(args.queries, 2), min(args.candidates, 5), min(args.beams, 2)

    import torch

    from medlama.probers.query_set import QuerySet
    from medlama.probers.registry import make_prober

    if args.threads:
        torch.set_num_threads(args.threads)
    size = args.real_size or "tiny"
    pool = names(args.candidates, 0)
    heads = names(args.queries, 1)
    texts = [f"{head} may treat [Y] ." for head in heads]
    queries = QuerySet([f"q{i}" for i in range(len(texts))], ["may_treat"] * len(texts), texts,
                       [[pool[i % len(pool)]] for i in range(len(texts))], pool, "synthetic")
    corpus = [t.replace(MASK_PLACEHOLDER, pool[i % len(pool)]) for i, t in enumerate(texts)] + pool
    print(f"model {size} ({args.dtype} on {args.device}), {len(texts)} queries, {len(pool)} candidates, "
          f"torch threads {torch.get_num_threads()}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / size
        build_model(folder, size, corpus)
        common = {"dtype": args.dtype}
        rows = []
        for method in args.methods:
            values = dict(common)
            if method == "causal-likelihood":
                values["batch_size"] = args.batch_size
            else:
                values["num_beams"] = args.beams
            prober = make_prober(method, folder, values, device=args.device)
            prober.rank(queries.subset(range(min(2, len(texts)))), top_k=10)  # warm-up
            start = time.perf_counter()
            prober.rank(queries, top_k=10)
            seconds = time.perf_counter() - start
            rows.append((method, seconds, len(texts) / seconds))
            del prober
        if args.lens:  # every candidate scored both ways: at the last layer, and at every layer from one pass
            import json

            depth = json.loads((folder / "config.json").read_text())
            depth = depth.get("num_hidden_layers") or depth.get("n_layer")
            for name, extra in (("likelihood exhaustive", {"search": "exhaustive"}),
                                (f"lens, {depth + 1} layers", {"layers": tuple(range(depth + 1))})):
                prober = make_prober("causal-likelihood", folder, {**common, "batch_size": args.batch_size, **extra},
                                     device=args.device)
                prober.rank(queries.subset(range(min(2, len(texts)))), top_k=10)  # warm-up
                start = time.perf_counter()
                if "layers" in extra:
                    prober.rank_layers_scored(queries, top_k=10)
                else:
                    prober.rank(queries, top_k=10)
                seconds = time.perf_counter() - start
                rows.append((name, seconds, len(texts) / seconds))
                del prober
        print(f"{'method':<22}{'seconds':>10}{'queries/s':>12}")
        for method, seconds, rate in rows:
            print(f"{method:<22}{seconds:>10.2f}{rate:>12.2f}")

        if args.dry_run:
            print("dry run: the model builds offline and every method runs")
            return 0
        subset = queries.subset(range(min(8, len(texts))))
        print(f"\ncausal-likelihood memory, {len(subset)} queries x {len(pool)} candidates:")
        for cache in (True, False):
            prober = make_prober("causal-likelihood", folder, {"batch_size": args.batch_size, "kv_cache": cache,
                                                               "dtype": args.dtype}, device=args.device)
            prober.scores(subset.subset([0]))  # warm-up
            seconds, memory = memory_run(prober, subset, args.device)
            print(f"  kv_cache={str(cache):<6} {len(subset) / seconds:8.2f} queries/s  {memory}")
            del prober
    return 0


if __name__ == "__main__":
    sys.exit(main())
