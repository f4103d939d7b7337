"""Tiny BERT models for the tests, built here with no network: a random 2-layer BERT (hidden 32, 2 heads, 128
positions) with the bundled encoder's 30k-token vocabulary, as an encoder (``BertModel``, as ``medlama rewire``
saves encoders) or a masked LM (``BertForMaskedLM``), saved to a folder like a user's checkpoint.

Importable as ``tiny_bert`` (``tests/helpers`` is on pytest's ``pythonpath``); the ``make_tiny_bert`` fixture of
``tests/conftest.py`` saves one into a fresh temporary folder.
"""

from __future__ import annotations

from pathlib import Path


def save_tiny_bert(folder: Path, *, mlm: bool = False, layers: int = 2, seed: int = 0) -> Path:
    """A tiny BERT (with an MLM head when ``mlm``) and the bundled encoder's tokenizer saved in ``folder``."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, BertModel

    from medlama.core.defaults import default_model_path

    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=layers,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
    torch.manual_seed(seed)
    (BertForMaskedLM if mlm else BertModel)(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
