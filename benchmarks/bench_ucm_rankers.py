"""UCM ranking throughput of a masked LM: the paper's ranker (``mask-predict``, BioLAMA's X-FACTR confidence
decoding: beam 5, answers of 1-10 tokens) against ``mask-average`` (every pool name scored), in context inputs
per second, printed as a table.

Inputs are incremental contexts as ``medlama ucm`` feeds them: a prompt after 0, 1, 2, ... PubMed sentences
of the released elicit corpus (each input one sentence longer). The pool is the first ``--pool`` answer names
of MedLAMA's ``may_treat`` relation. The default model is a random tiny BERT masked LM (hidden 32, 2 layers)
with the bundled model's 30k-token vocabulary, so the figures measure the rankers' own work (decoding rounds,
batching) plus small forward passes; ``--model`` times a real one.

    python benchmarks/bench_ucm_rankers.py
    python benchmarks/bench_ucm_rankers.py --inputs 16 --pool 500 --threads 1
    python benchmarks/bench_ucm_rankers.py --model path/to/bert-mlm
"""

from __future__ import annotations

import argparse
import csv
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
PROMPT = "aspirin might treat [Y] ."


def tiny_mlm(folder: Path) -> Path:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from medlama.core.defaults import default_model_path

    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512)
    torch.manual_seed(0)
    BertForMaskedLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def pool_names(count: int) -> list[str]:
    with open(SHARED / "medlama" / "2021AA" / "may_treat_1000.csv", newline="", encoding="utf-8") as handle:
        names = [name.strip() for row in csv.DictReader(handle) for name in row["tail_names"].split("||")]
    return list(dict.fromkeys(names))[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a masked LM folder (default: a random tiny BERT)")
    parser.add_argument("--inputs", type=int, default=8, help="context inputs per sequence (default: 8)")
    parser.add_argument("--pool", type=int, default=200, help="pool names (default: 200)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default: 2)")
    args = parser.parse_args()

    import torch

    from medlama.ucm_eval.rankers import make_ranker

    torch.set_num_threads(args.threads)
    lines = (SHARED / "elicit_corpora" / "pubmed_sents_no_punkt_10k_0").read_text(encoding="utf-8").splitlines()
    inputs = [" ".join(line.strip() for line in lines[:i]) + (" " if i else "") + PROMPT for i in range(args.inputs)]
    pool = pool_names(args.pool)
    with tempfile.TemporaryDirectory() as folder:
        model = args.model or tiny_mlm(Path(folder) / "tiny-mlm")
        print(f"{len(inputs)} inputs, {len(pool)} pool names, {args.threads} threads, model "
              f"{'tiny random BERT' if args.model is None else args.model}")
        print(f"{'ranker':<14}{'seconds':>10}{'inputs/s':>12}")
        for method in ("mask-predict", "mask-average"):
            ranker = make_ranker(method, model, device="cpu")
            ranker.scores(inputs[:1], pool)  # warm-up: first forward pass and tokenisation caches
            started = time.perf_counter()
            ranker.scores(inputs[1:], pool)
            seconds = time.perf_counter() - started
            print(f"{method:<14}{seconds:>10.2f}{(len(inputs) - 1) / seconds:>12.2f}")


if __name__ == "__main__":
    main()
