"""The models and queries the model parts of ``gpu.py`` run: randomly initialised models built from configs (the
real models' shapes, or tiny ones on a CPU), tokenizers trained here, synthetic queries over drug-like names."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import (BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                          PreTrainedTokenizerFast)

from medlama.core.models import torch_dtype
from medlama.probers.query_set import QuerySet

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_causal beside this file, also when imported
from bench_causal import bpe_tokenizer, names  # noqa: E402 - after the path it needs

#: Model shapes: full size (GPU) and small (CPU, CI).
CAUSAL = {"llama-1b": dict(kind="llama", hidden=2048, layers=16, heads=32, kv_heads=8, inner=8192, vocab=128256),
          "gpt2": dict(kind="gpt2", hidden=768, layers=12, heads=12, kv_heads=12, inner=3072, vocab=50257),
          "llama-tiny": dict(kind="llama", hidden=64, layers=2, heads=4, kv_heads=2, inner=128, vocab=None),
          "gpt2-tiny": dict(kind="gpt2", hidden=64, layers=2, heads=2, kv_heads=2, inner=256, vocab=None)}
MASKED = {"bert-base": dict(hidden=768, layers=12, heads=12, inner=3072, vocab=30522),
          "bert-tiny": dict(hidden=64, layers=2, heads=2, inner=128, vocab=None)}



def synthetic_queries(queries: int, candidates: int):
    pool, heads = names(candidates, 0), names(queries, 1)
    texts = [f"{head} may treat [Y] ." for head in heads]
    gold = [[pool[i % len(pool)]] for i in range(len(texts))]
    corpus = [text.replace("[Y]", answer[0]) for text, answer in zip(texts, gold)] + pool
    return QuerySet([f"q{i}" for i in range(len(texts))], ["may_treat"] * len(texts), texts, gold, pool,
                    "synthetic"), corpus


def build_causal(folder: Path, size: str, corpus: list[str], device, dtype: str) -> None:
    shape = CAUSAL[size]
    tokenizer = bpe_tokenizer(corpus)
    vocab = shape["vocab"] or len(tokenizer)
    torch.manual_seed(0)
    with torch.device(device):  # random initialisation on the GPU when there is one (seconds, not minutes)
        if shape["kind"] == "gpt2":
            model = GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_positions=1024, n_embd=shape["hidden"],
                                               n_layer=shape["layers"], n_head=shape["heads"],
                                               n_inner=shape["inner"], bos_token_id=0, eos_token_id=0))
        else:
            model = LlamaForCausalLM(LlamaConfig(
                vocab_size=vocab, hidden_size=shape["hidden"], intermediate_size=shape["inner"],
                num_hidden_layers=shape["layers"], num_attention_heads=shape["heads"],
                num_key_value_heads=shape["kv_heads"], max_position_embeddings=2048, tie_word_embeddings=True,
                bos_token_id=0, eos_token_id=0))
    model.to(torch_dtype(dtype)).save_pretrained(folder)  # saved as it is loaded: half the bytes in bf16
    tokenizer.save_pretrained(folder)


def wordpiece_tokenizer(corpus: list[str], vocab_size: int = 2000):
    """A BERT-style WordPiece tokenizer trained on ``corpus`` (nothing downloaded)."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(corpus, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials,
                                                                               show_progress=False))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[(token, tok.token_to_id(token)) for token in ("[CLS]", "[SEP]")])
    tok.decoder = decoders.WordPiece()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=512)


def build_masked(folder: Path, size: str, corpus: list[str], device) -> None:
    shape = MASKED[size]  # saved in fp32: the masked LM loads in fp32, then casts
    tokenizer = wordpiece_tokenizer(corpus)
    torch.manual_seed(0)
    with torch.device(device):
        model = BertForMaskedLM(BertConfig(vocab_size=shape["vocab"] or len(tokenizer), hidden_size=shape["hidden"],
                                           num_hidden_layers=shape["layers"], num_attention_heads=shape["heads"],
                                           intermediate_size=shape["inner"], max_position_embeddings=512))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
