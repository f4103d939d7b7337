"""A tiny BERT that knows facts in one phrasing, and a BioLAMA folder whose manual prompts use another (for
OptiPrompt's tests).

Two relations over the same 16 subjects: ``P1`` maps each subject to a colour, ``P2`` to an animal. The model
(a 2-layer BERT, hidden 32, no dropout, with its own word-level vocabulary of the facts' words, so that it
trains in a second) is trained for a few hundred steps on ``<subject> causes <colour> .`` and
``<subject> needs <animal> .`` only, the object masked. The manual prompts swap the phrasings (``P1``:
``[X] needs [Y] .``, ``P2``: ``[X] causes [Y] .``), so the manual prompts decode the other relation's
objects (acc@1 0), and a learned prompt that finds the right phrasing decodes the right ones. Splits: 8
subjects train, 4 dev, 4 test.
"""

from __future__ import annotations

import json
from pathlib import Path

SUBJECTS = "apple banana cherry grape lemon mango melon peach pear plum lime olive onion garlic pepper carrot".split()
COLOURS = "red blue green yellow black white pink brown gray orange purple gold silver violet golden dark".split()
ANIMALS = "dog cat horse cow sheep goat pig duck fox wolf bear lion tiger deer rabbit mouse".split()
#: relation -> (phrasing the model learns, manual template of the folder, objects)
RELATIONS = {"P1": ("causes", "[X] needs [Y] .", COLOURS), "P2": ("needs", "[X] causes [Y] .", ANIMALS)}
SPLITS = ["train"] * 8 + ["dev"] * 4 + ["test"] * 4


SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
FILLER = "the a of is to by in on with for and it".split()


def save_fact_tokenizer(folder: Path):
    """A lower-casing WordPiece tokenizer whose vocabulary is the facts' words (and a few fillers)."""
    from transformers import BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    words = dict.fromkeys([*SPECIAL, ".", "causes", "needs", *FILLER, *SUBJECTS, *COLOURS, *ANIMALS])
    tokenizer = BertTokenizerFast(vocab={word: i for i, word in enumerate(words)}, do_lower_case=True)
    tokenizer.save_pretrained(folder)
    return tokenizer


def train_fact_model(folder: Path, *, steps: int = 300, seed: int = 0) -> Path:
    """Save a tiny masked LM after ``steps`` of training on the facts (object masked) in ``folder`` (no
    steps: the random model)."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    tokenizer = save_fact_tokenizer(folder)
    torch.manual_seed(seed)
    model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                                       num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    sentences, golds = [], []
    for _, (phrase, _, objects) in RELATIONS.items():
        for subject, obj in zip(SUBJECTS, objects):
            ids = tokenizer(f"{subject} {phrase} {obj} .")["input_ids"]
            (gold,) = tokenizer(obj, add_special_tokens=False)["input_ids"]  # one token each
            at = ids.index(gold)
            ids[at] = tokenizer.mask_token_id
            sentences.append(ids)
            golds.append((at, gold))
    length = max(map(len, sentences))
    ids = torch.tensor([s + [tokenizer.pad_token_id] * (length - len(s)) for s in sentences])
    mask = (ids != tokenizer.pad_token_id).long()
    labels = torch.full_like(ids, -100)
    for row, (at, gold) in enumerate(golds):
        labels[row, at] = gold
    torch.manual_seed(seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimiser.step()
        optimiser.zero_grad()
    model.eval()
    model.save_pretrained(folder)
    return folder


def write_fact_release(root: Path, relations=RELATIONS, splits=SPLITS) -> Path:
    """The facts as a BioLAMA release (``wikidata`` source) under ``root/data``; returns ``root``. ``splits``:
    each subject's split, or ``{relation: splits}``."""
    base = root / "data" / "wikidata"
    for name in ("meta", "prompts", "entities"):
        (base / name).mkdir(parents=True, exist_ok=True)
    (base / "prompts" / "manual.jsonl").write_text(
        "".join(json.dumps({"relation": rel, "template": t}) + "\n" for rel, (_, t, _) in relations.items()))
    (base / "meta" / "relations.json").write_text(json.dumps(sorted(relations)))
    (base / "entities" / "entities.txt").write_text("placeholder\n")
    for rel, (_, _, objects) in relations.items():
        parts = splits[rel] if isinstance(splits, dict) else splits
        for split in ("train", "dev", "test"):
            lines = [json.dumps({"uuid": f"Q{i}-{rel}", "predicate_id": rel, "sub_uri": f"Q{i}", "sub_label": s,
                                 "sub_type": "Q1", "sub_aliases": [], "obj_uris": [f"Q{100 + i}"], "obj_labels": [o],
                                 "obj_types": ["Q2"], "obj_aliases": [[]]})
                     for i, (s, o, part) in enumerate(zip(SUBJECTS, objects, parts)) if part == split]
            path = base / "triples_processed" / rel / f"{split}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(line + "\n" for line in lines))
    return root


def build_fact_folder(root: Path, **release) -> Path:
    """``medlama build biolama`` of :func:`write_fact_release` (``release``: its options) into ``root/built``."""
    from medlama.datasets.biolama_folder import write_biolama

    write_fact_release(root / "release", **release)
    write_biolama(root / "built", root / "release", sources=("wikidata",), progress=False, verify_checksums=False)
    return root / "built"
