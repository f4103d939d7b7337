"""Probing throughput: queries per second of every method, printed as a table.

Queries are real MedLAMA hard-set queries (human prompt, ``[X]`` filled with the head name), read straight
from the release CSVs; the candidate set is every answer and head name of the relations used, as the
reference builds it. Models:

* ``retrieval`` on the bundled all-MiniLM-L6-v2 encoder (and on the tiny encoder);
* ``mask-average`` and ``mask-predict`` (the paper's two X-FACTR settings) on a tiny BERT masked LM
  (hidden 32, 2 layers) with the bundled model's 30k-token vocabulary;
* ``generative`` on a tiny T5 and a tiny BART (d_model 32, 1 + 1 layers) whose tokenizer is a unigram
  model made from the same vocabulary (T5 with ``<extra_id_*>`` sentinels, BART with a ``<mask>`` token).

The tiny models are random, so their answers are meaningless: the figures measure the probers' own work
(tokenisation, batching, decoding, ranking) plus small forward passes. Models are built in a temporary
folder and loaded through the probers like a user's checkpoint; loading is not timed, but the work each
``rank`` call does once for all queries is (retrieval: encoding every candidate; mask average:
tokenising them), so small ``--queries`` understate those two methods' rate.

    python benchmarks/bench_probers.py                       # 200 queries of every relation
    python benchmarks/bench_probers.py --queries 1000 --threads 1
    python benchmarks/bench_probers.py --methods mask-average --max-tokens 10
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from medlama.core.defaults import SUBJECT_PLACEHOLDER

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

DEFAULT_SOURCE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "medlama"
METHODS = ("retrieval", "mask-average", "mask-predict", "generative")


def load_queries(source: Path, limit: int):
    """Every k-th hard query of all relations (``limit`` in all) and the candidate names of those relations."""
    import pandas as pd

    from medlama.probers.query_set import QuerySet

    prompts = pd.read_csv(source / "prompts.csv").set_index("pid")["human_prompt"].to_dict()
    rows, names = [], set()
    for path in sorted((source / "2021AA").glob("*_hard.csv")):
        frame = pd.read_csv(path)
        for _, row in frame.iterrows():
            answers = row["tail_names"].split(" || ")
            names.update(answers)
            names.add(row["head_name"])
            rows.append((row["rel"], prompts[row["rel"]].replace(SUBJECT_PLACEHOLDER, row["head_name"]), answers))
    step = max(1, len(rows) // limit)
    picked = rows[::step][:limit]
    return QuerySet([f"q{i}" for i in range(len(picked))], [r for r, _, _ in picked], [t for _, t, _ in picked],
                    [g for _, _, g in picked], sorted(names), name="hard-sample")


def unigram_pieces(tokenizer) -> list[str]:
    """A unigram vocabulary from a WordPiece one: words get the sentencepiece space mark, ``##`` pieces lose it."""
    pieces, seen = [], set()
    for word, _ in sorted(tokenizer.get_vocab().items(), key=lambda item: item[1]):
        if word.startswith("[") and word.endswith("]"):
            continue
        piece = word[2:] if word.startswith("##") else "\u2581" + word
        if piece not in seen:
            seen.add(piece)
            pieces.append(piece)
    return pieces


def build_models(folder: Path) -> dict[str, Path]:
    import torch
    from transformers import (AutoTokenizer, BartConfig, BartForConditionalGeneration, BertConfig, BertForMaskedLM,
                              BertModel, T5Config, T5ForConditionalGeneration, T5Tokenizer)

    from medlama.core.defaults import default_model_path

    torch.manual_seed(0)
    bert_tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    config = BertConfig(vocab_size=bert_tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=512)
    paths = {"bundled": default_model_path()}
    for name, model in (("tiny-mlm", BertForMaskedLM(config)), ("tiny-encoder", BertModel(config))):
        model.save_pretrained(folder / name)
        bert_tokenizer.save_pretrained(folder / name)
        paths[name] = folder / name
    specials = ["<pad>", "</s>", "<unk>"]
    vocab = [(piece, -float(len(piece))) for piece in specials + unigram_pieces(bert_tokenizer)]
    t5_tokenizer = T5Tokenizer(vocab=vocab, extra_ids=100)
    t5 = T5ForConditionalGeneration(T5Config(vocab_size=len(t5_tokenizer), d_model=32, d_ff=64, num_layers=1,
                                             num_heads=2, d_kv=16, decoder_start_token_id=0, pad_token_id=0,
                                             eos_token_id=1))
    t5.save_pretrained(folder / "tiny-t5")
    t5_tokenizer.save_pretrained(folder / "tiny-t5")
    bart_tokenizer = T5Tokenizer(vocab=vocab, extra_ids=0, mask_token="<mask>", bos_token="<s>")
    bart = BartForConditionalGeneration(BartConfig(
        vocab_size=len(bart_tokenizer), d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=256,
        pad_token_id=bart_tokenizer.pad_token_id, eos_token_id=bart_tokenizer.eos_token_id,
        bos_token_id=bart_tokenizer.bos_token_id, decoder_start_token_id=bart_tokenizer.eos_token_id,
        forced_eos_token_id=bart_tokenizer.eos_token_id))
    bart.save_pretrained(folder / "tiny-bart")
    bart_tokenizer.save_pretrained(folder / "tiny-bart")
    paths["tiny-t5"], paths["tiny-bart"] = folder / "tiny-t5", folder / "tiny-bart"
    return paths


def runs(paths: dict[str, Path], methods, max_tokens: int | None, top_k: int):
    """(method, setting label, model label, prober factory) to time."""
    from medlama.probers.registry import make_prober, settings_for

    table = []
    if "retrieval" in methods:
        for model in ("bundled", "tiny-encoder"):
            table.append(("retrieval", "reference", model, lambda m=model: make_prober("retrieval", paths[m])))
    if "mask-average" in methods:
        label = f"max tokens {max_tokens}" if max_tokens else "all lengths"
        table.append(("mask-average", label, "tiny-mlm", lambda: make_prober(
            "mask-average", paths["tiny-mlm"], {"max_tokens": max_tokens})))
    if "mask-predict" in methods:
        for preset in ("paper", "paper-order+order"):
            table.append(("mask-predict", preset, "tiny-mlm", lambda p=preset: make_prober(
                "mask-predict", paths["tiny-mlm"], settings_for("mask-predict", preset=p))))
    if "generative" in methods:
        for model in ("tiny-t5", "tiny-bart"):
            table.append(("generative", f"beams {top_k}", model, lambda m=model: make_prober(
                "generative", paths[m], {"max_answer_tokens": 16})))
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="MedLAMA release folder")
    parser.add_argument("--queries", type=int, default=200, help="queries to probe (default: %(default)s)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--max-tokens", type=int, help="mask-average cap (default: none, the longest candidate)")
    parser.add_argument("--top-k", type=int, default=10, help="predictions per query (default: %(default)s)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    args = parser.parse_args(argv)

    import torch
    from transformers.utils import logging as hf_logging

    from medlama.core.display import print_table

    hf_logging.set_verbosity_error()
    if args.threads:
        torch.set_num_threads(args.threads)
    queries = load_queries(args.source, args.queries)
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, {device}, load "
          f"{os.getloadavg()[0]:.2f}; {len(queries)} queries, {len(queries.candidates):,} candidates",
          file=sys.stderr)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = build_models(Path(tmp))
        for method, setting, model, make in runs(paths, args.methods, args.max_tokens, args.top_k):
            prober = make()
            if args.threads:
                torch.set_num_threads(args.threads)  # the retrieval encoder sets its own count
            wall, cpu = time.perf_counter(), time.process_time()
            predictions = prober.rank(queries, top_k=args.top_k)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            answered = sum(1 for p in predictions if p) / len(predictions)
            rows.append([method, setting, model, len(queries), f"{wall:.2f}", f"{cpu:.2f}",
                         f"{len(queries) / wall:.1f}", f"{100 * answered:.0f}%"])
            print(f"{method} {setting} {model}: {len(queries) / wall:.1f} queries/s", file=sys.stderr, flush=True)
    print_table("probing throughput", ["method", "setting", "model", "queries", "wall s", "CPU s", "queries/s",
                                       "with answers"], rows,
                caption=f"{len(queries.candidates):,} candidates, top {args.top_k}, {torch.get_num_threads()} "
                        f"threads on {device}; tiny models are random (speed only)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
