"""A tiny T5 for the tests, built here with no network: one layer (d_model 16) and a SentencePiece-style
tokenizer over a dozen pieces, with ``extra_ids`` sentinel tokens (``<extra_id_0>``...), saved to a folder like a
user's checkpoint. Importable as ``tiny_t5`` (``tests/helpers`` is on pytest's ``pythonpath``)."""

from __future__ import annotations

T5_PIECES = ["<pad>", "</s>", "<unk>", "▁aspirin", "▁may", "▁treat", "▁pain", "▁fever", "▁head", "ache", "▁back",
             "▁.", "▁the", "▁cold", "▁relieve", "▁chronic"]


def save_t5(folder, extra_ids: int = 3):
    """The tiny T5 and its tokenizer saved in ``folder``."""
    import torch
    from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer

    tokenizer = T5Tokenizer(vocab=[(piece, -float(i)) for i, piece in enumerate(T5_PIECES)], extra_ids=extra_ids)
    config = T5Config(vocab_size=len(tokenizer), d_model=16, d_ff=32, num_layers=1, num_heads=2, d_kv=8,
                      decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    torch.manual_seed(0)
    T5ForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
