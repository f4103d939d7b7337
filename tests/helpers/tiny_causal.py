"""Tiny decoder-only causal LMs for the tests, built here with no network: GPT-2 and Llama configurations with
tokenizers trained on a dozen sentences with the ``tokenizers`` library (byte-level BPE for GPT-2,
SentencePiece-style BPE with a BOS for Llama), saved to a folder like a user's checkpoint.

Importable as ``tiny_causal`` (``tests/helpers`` is on pytest's ``pythonpath``); used by the causal prober
tests and the ``medlama probe`` / ``medlama ucm`` command tests of the causal methods.
"""

from __future__ import annotations

import torch

SENTENCES = [
    "aspirin may treat pain .", "aspirin may treat fever .", "aspirin may treat headache .",
    "asthma attack may cause cough .", "asthma may cause cough .", "insulin may treat diabetes .",
    "the cold may cause fever and headache .", "ibuprofen may relieve back pain .",
    "chronic asthma attack treated with inhaler .", "diabetes mellitus may cause kidney disease .",
    "the patient had asthma .", "metformin may treat diabetes mellitus .",
]
NAMES = ["pain", "fever", "headache", "asthma", "asthma attack", "cough", "diabetes", "diabetes mellitus",
         "kidney disease", "back pain"]


def gpt2_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(SENTENCES, trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                                           initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>")


def llama_tokenizer(eos: bool = True):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    specials = ["<unk>", "<s>", "</s>"] if eos else ["<unk>", "<s>"]
    tok.train_from_iterator(SENTENCES, trainers.BpeTrainer(vocab_size=200, special_tokens=specials))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", unk_token="<unk>",
                                   **({"eos_token": "</s>"} if eos else {}))


def save_causal(folder, kind: str, *, eos: bool = True, seed: int = 0, flat: bool = False, positions: int = 64):
    """A tiny ``kind`` ("gpt2" or "llama") model and its tokenizer saved in ``folder``.

    ``flat``: the LM head (GPT-2: tied to the token embeddings) is all zeros, so every logit is exactly 0
    and every next token has log-probability ``-log(vocabulary)``: candidates with as many tokens tie
    exactly (all of them under a mean). ``positions``: the longest input (a real MedLAMA query and a long name,
    tokenised by these small vocabularies, need a few hundred).
    """
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    tokenizer = gpt2_tokenizer() if kind == "gpt2" else llama_tokenizer(eos)
    torch.manual_seed(seed)
    if kind == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=positions, n_embd=32, n_layer=2,
                                           n_head=2, bos_token_id=0, eos_token_id=0))
    else:
        model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                             max_position_embeddings=positions, bos_token_id=1,
                                             eos_token_id=2 if eos else None, tie_word_embeddings=False))
    with torch.no_grad():  # spread the output distribution so that scores are well apart (no near-ties), or flatten it
        weight = model.get_output_embeddings().weight
        weight.zero_() if flat else weight.mul_(60)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def save_mistral(folder):
    """A tiny Mistral with a sliding window (4, shorter than the longest prefix) saved in ``folder``: its cache is
    not plain keys and values, so no rows can be picked from it and every row is scored whole."""
    import torch
    from transformers import MistralConfig, MistralForCausalLM

    tokenizer = llama_tokenizer()
    torch.manual_seed(0)
    model = MistralForCausalLM(MistralConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                             max_position_embeddings=64, sliding_window=4, bos_token_id=1,
                                             eos_token_id=2))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def reference_log_prob(folder, text: str, answer: str) -> float:
    """log P(answer + rest | text before [Y]) from one plain forward pass over the whole tokenised sentence."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    left = text.split("[Y]")[0].rstrip()
    start = len(tokenizer(left)["input_ids"])
    ids = tokenizer(text.replace("[Y]", answer))["input_ids"]
    with torch.no_grad():
        lp = model(torch.tensor([ids])).logits[0].double().log_softmax(-1)
    return sum(lp[t - 1, ids[t]].item() for t in range(start, len(ids)))
