"""Tiny rewiring runs for tests: a BERT with a 60-word vocabulary (built, saved like a user's checkpoint), a
96-line corpus of those words, and a 4-step configuration (tests/trainers)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch

from medlama.trainers.config import RewireConfig

WORDS = ("the a of and in to with for by on patients cells gene protein expression tumour mice blood "
         "level increased decreased treatment study results showed cancer risk therapy dose response").split()
LINES = [" ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(6 + i % 9)) + f" {i} " for i in range(96)]


def make_tiny_bert(folder: Path, layers: int = 3, mask_token: bool = True) -> Path:
    from transformers import BertConfig, BertModel, BertTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + (["[MASK]"] if mask_token else [])
    vocab = specials + WORDS + [str(d) for d in range(10)] + [f"##{d}" for d in range(10)]
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True,
                                  mask_token="[MASK]" if mask_token else None)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=48, max_position_embeddings=64, hidden_dropout_prob=0.3,
                        attention_probs_dropout_prob=0.3)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_config(model: Path, **overrides) -> RewireConfig:
    settings = dict(model=str(model), steps=4, save_steps=2, batch_size=8, max_length=24, layer=2, logging_steps=1)
    return RewireConfig.preset("paper", **{**settings, **overrides})


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
