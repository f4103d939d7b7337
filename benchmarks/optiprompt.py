"""OptiPrompt training time of one relation (:func:`medlama.trainers.optiprompt.trainer.train_relation`, the code
``medlama optiprompt`` runs per relation), on a randomly initialised BERT (random weights time the same as
trained ones; the numbers it learns are meaningless).

The relation is synthetic, BioLAMA-sized by default (UMLS has about 500 train and 130 dev triples per
relation): ``--train`` (subject, object) pairs whose objects are 1 to 3 random word pieces, ``--dev`` queries,
manual template ``[X] is associated with [Y] .`` (5 prompt vectors). Training is BioLAMA's (batch 16, lr
3e-3, ``--epochs``); the dev decoding before the first epoch and after each is mask predict with BioLAMA's
settings (beam 5, up to 10 masks, confidence fill). Printed (and with ``--json``, as JSON): the whole call,
the training steps alone and the dev decodings alone, in seconds, with the device and sizes.

    python benchmarks/optiprompt.py                                # CPU, a small BERT (hidden 128, 2 layers)
    python benchmarks/optiprompt.py --size base --device cuda      # BERT-base size (hidden 768, 12 layers)
    python benchmarks/optiprompt.py --size base --device cuda --epochs 10 --train 500 --dev 130 --json

Needs only torch, transformers and safetensors (the GPU machines' image has them; it has neither
``datasets`` nor ``evaluate`` nor medlama itself): medlama is imported from this checkout by pyproject's
``package-dir`` map, installed or not (its ``core``, ``probers`` and ``trainers.optiprompt.trainer`` modules, which
import no ``datasets``, ``evaluate``, ``faiss`` or ``spacy``; ``tqdm`` and ``numpy`` come with them), the
tokenizer is made here (a WordPiece vocabulary of 30,522 made-up words, BERT's size), and the dev acc@1 is
counted here from mask predict's answers (lower-cased exact match) rather than by medlama's ``evaluate``
metric module: the decoding timed is the one ``medlama optiprompt`` runs. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]


def use_this_checkout() -> None:
    """Import ``medlama`` and its parts from this checkout (pyproject's ``package-dir``), installed or not."""
    import importlib.abc
    import importlib.util
    import tomllib

    folders = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            folder = ROOT / folders[""] / "medlama" if fullname == "medlama" else (
                ROOT / folders[fullname] if fullname in folders else None)
            if folder is None:
                return None
            return importlib.util.spec_from_file_location(fullname, folder / "__init__.py",
                                                          submodule_search_locations=[str(folder)])

    sys.meta_path.insert(0, Finder())

SIZES = {"small": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512),
         "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)}
TEMPLATE = "[X] is associated with [Y] ."


def made_up_tokenizer(seed: int, size: int = 30522):
    """A lower-casing WordPiece tokenizer of ``size`` pieces: the special tokens, the template's words and
    made-up words of 4 to 9 letters."""
    from transformers import BertTokenizerFast

    rng = random.Random(seed)
    words = dict.fromkeys(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *TEMPLATE.split()[1:-2]])
    while len(words) < size:
        words["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 9)))] = None
    return BertTokenizerFast(vocab={word: i for i, word in enumerate(words)}, do_lower_case=True)


def random_model(folder: Path, size: str, seed: int) -> Path:
    """A random BERT masked LM of ``size`` with :func:`made_up_tokenizer`, saved in ``folder``."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    tokenizer = made_up_tokenizer(seed)
    torch.manual_seed(seed)
    BertForMaskedLM(BertConfig(vocab_size=tokenizer.vocab_size, max_position_embeddings=512,
                               **SIZES[size])).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def synthetic_relation(tokenizer, train: int, dev: int, seed: int):
    """Train rows (``query``, ``obj_labels``) and dev queries of a made-up relation from whole-word pieces."""
    from medlama.probers.query_set import QuerySet

    rng = random.Random(seed)
    words = [w for w, i in tokenizer.get_vocab().items() if i > 100]

    def row():
        subject = " ".join(rng.sample(words, rng.randint(1, 3)))
        return TEMPLATE.replace("[X]", subject), " ".join(rng.sample(words, rng.randint(1, 3)))

    rows = [row() for _ in range(train)]
    train_rows = {"query": [q for q, _ in rows], "obj_labels": [[o] for _, o in rows]}
    dev_rows = [row() for _ in range(dev)]
    queries = QuerySet(ids=[f"d{i}" for i in range(dev)], relations=["bench_R1"] * dev,
                       texts=[q for q, _ in dev_rows], gold=[[o] for _, o in dev_rows],
                       candidates=sorted({o for _, o in dev_rows}), name="bench dev", info={"split": "dev"})
    return train_rows, queries


def measure(args: argparse.Namespace) -> dict:
    import torch

    use_this_checkout()
    from medlama.probers.mask_predict import PRESETS, MaskPredictProber
    from medlama.trainers.optiprompt import trainer as optiprompt  # dev_accuracy is looked up there
    from medlama.trainers.optiprompt.trainer import OptiPromptSettings, train_relation

    with tempfile.TemporaryDirectory() as tmp:
        model = random_model(Path(tmp) / "model", args.size, args.seed)
        loaded = time.perf_counter()
        settings = OptiPromptSettings(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, seed=args.seed)
        decoding = replace(PRESETS["biolama"], batch_size=args.batch_size, max_masks=args.max_masks)
        prober = MaskPredictProber(str(model), decoding, device=args.device)
        load_seconds = time.perf_counter() - loaded
        train_rows, dev = synthetic_relation(prober.lm.tokenizer, args.train, args.dev, args.seed)
        decoding_seconds: list[float] = []
        real = optiprompt.dev_accuracy

        def timed(prober, queries, prompt):  # the dev decodings, timed apart from the training steps
            if prober.lm.device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            prober.use_prompts(None if prompt is None else {prompt.relation: prompt})
            try:
                answers = prober.decode(queries)  # what medlama's dev_accuracy ranks, then scores
            finally:
                prober.use_prompts(None)
            out = sum(bool(a) and a[0][0].lower() in {g.lower() for g in gold}
                      for a, gold in zip(answers, queries.gold)) / len(queries)
            if prober.lm.device.type == "cuda":
                torch.cuda.synchronize()
            decoding_seconds.append(time.perf_counter() - start)
            return out

        optiprompt.dev_accuracy = timed
        try:
            start = time.perf_counter()
            outcome = train_relation(prober, "bench_R1", TEMPLATE, train_rows, dev, settings, progress=False)
            whole = time.perf_counter() - start
        finally:
            optiprompt.dev_accuracy = real
    decoding = sum(decoding_seconds)
    return {"size": args.size, **SIZES[args.size], "device": str(prober.lm.device),
            "gpu": torch.cuda.get_device_name(0) if prober.lm.device.type == "cuda" else None,
            "train_pairs": outcome.examples, "dev_queries": len(dev), "epochs": args.epochs,
            "batch_size": args.batch_size, "steps": outcome.steps, "max_masks": args.max_masks,
            "model_load_seconds": round(load_seconds, 3), "whole_seconds": round(whole, 3),
            "training_seconds": round(whole - decoding, 3), "dev_decoding_seconds": round(decoding, 3),
            "dev_decodings": len(decoding_seconds),
            "seconds_per_step": round((whole - decoding) / max(1, outcome.steps), 4),
            "torch": torch.__version__}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--device", default=None, help="cpu, cuda, ... (default: CUDA when there is one)")
    parser.add_argument("--train", type=int, default=None, help="train pairs (default: 500 base, 64 small)")
    parser.add_argument("--dev", type=int, default=None, help="dev queries (default: 130 base, 16 small)")
    parser.add_argument("--epochs", type=int, default=None, help="epochs (default: 10 base, 1 small)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--max-masks", type=int, default=None, help="dev decoding masks (default: 10 base, 3 small)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the record as JSON")
    args = parser.parse_args(argv)
    base = args.size == "base"
    for name, big, small in (("train", 500, 64), ("dev", 130, 16), ("epochs", 10, 1), ("max_masks", 10, 3)):
        if getattr(args, name) is None:
            setattr(args, name, big if base else small)
    record = measure(args)
    if args.json:
        json.dump(record, sys.stdout, indent=2)
        print()
    else:
        print(f"OptiPrompt, one relation, {args.size} BERT on {record['device']} ({record['gpu'] or 'CPU'}): "
              f"{record['train_pairs']} pairs x {record['epochs']} epochs = {record['steps']} steps of "
              f"{record['batch_size']}; {record['dev_decodings']} dev decodings of {record['dev_queries']} queries "
              f"(up to {record['max_masks']} masks)")
        print(f"  whole: {record['whole_seconds']:.2f} s = training {record['training_seconds']:.2f} s "
              f"({record['seconds_per_step'] * 1000:.1f} ms/step) + dev decoding {record['dev_decoding_seconds']:.2f} s"
              f"; model load {record['model_load_seconds']:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
