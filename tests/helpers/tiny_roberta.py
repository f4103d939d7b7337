"""A tiny RoBERTa-style masked LM with a byte-level BPE tokenizer trained here (no network), and a BioLAMA
folder whose manual templates are glued to their punctuation (``[X] causes [Y].``, ``[X]'s colour is [Y].``):
where a byte-level BPE reads ``.`` and `` .`` as different tokens (WordPiece does not).

Importable as ``tiny_roberta`` (``tests/helpers`` is on pytest's ``pythonpath``).
"""

from __future__ import annotations

from pathlib import Path

from tiny_facts import ANIMALS, COLOURS, SUBJECTS, build_fact_folder

#: relation -> (unused phrasing, manual template, objects), as tiny_facts.RELATIONS
GLUED = {"P1": ("causes", "[X] causes [Y].", COLOURS), "P2": ("colour", "[X]'s colour is [Y].", ANIMALS)}
SPECIAL = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def save_tiny_roberta(folder: Path, *, seed: int = 0) -> Path:
    """A random 2-layer RoBERTa masked LM (its output spread so that scores are well apart) and a byte-level BPE
    tokenizer trained on the facts' sentences, saved in ``folder`` like a user's checkpoint."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaForMaskedLM, RobertaTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    sentences = [f"{s} causes {c}. {s}'s colour is {a}. the {s} and the {c} {a} ."
                 for s, c, a in zip(SUBJECTS, COLOURS, ANIMALS)]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(sentences, vocab_size=400, min_frequency=1, special_tokens=SPECIAL)
    bpe.save_model(str(folder))
    tokenizer = RobertaTokenizerFast(str(folder / "vocab.json"), str(folder / "merges.txt"))
    tokenizer.save_pretrained(folder)
    torch.manual_seed(seed)
    model = RobertaForMaskedLM(RobertaConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                                             num_attention_heads=2, intermediate_size=64, max_position_embeddings=70,
                                             pad_token_id=tokenizer.pad_token_id, bos_token_id=0, eos_token_id=2,
                                             hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    with torch.no_grad():
        model.lm_head.decoder.weight.mul_(1.0)  # tied to the input embeddings: left as they are
        model.lm_head.dense.weight.mul_(20)
    model.eval().save_pretrained(folder)
    return folder


def build_glued_folder(root: Path) -> Path:
    """``medlama build biolama`` of the facts with :data:`GLUED`'s templates, into ``root/built``."""
    return build_fact_folder(root, relations=GLUED)
