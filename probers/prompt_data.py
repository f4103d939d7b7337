"""What learned prompts were trained and selected on, kept in their folder so that a probe can tell when it asks
them facts they have seen (:mod:`medlama.probers.learned_prompts` reads it back).

A split's record (:func:`split_record`): its name, its rows, a ``sha256`` over its rows (relation, query,
object labels; the rows sorted, so the order they were read in does not matter: the fingerprint results
record) and ``facts``: per relation, the sorted keys of its (subject, object label) pairs (:func:`fact_key`: 16
hex digits of a SHA-256 over the relation, the subject and the label, lower-cased and trimmed, so that another
build of the same release, or one with other casing, still matches). Keys, not the facts: a prompts folder meant
for the Hub carries no copy of the data.

:func:`overlap` counts the probed queries whose relation, subject and one of whose gold answers form a key of a
split: those facts were in the prompts' training (or selection) data.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any


def fact_key(relation: str, subject: str, label: str) -> str:
    """The key of one fact (see the module docstring)."""
    text = "\0".join((relation, " ".join(subject.lower().split()), " ".join(label.lower().split())))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def split_record(split: str, rows: Mapping[str, Mapping[str, Sequence[Any]]],
                 subject: Callable[[str, str], str]) -> dict:
    """The record of ``split`` from ``rows`` (``{relation: {"query": [...], "obj_labels": [[...], ...]}}``);
    ``subject(relation, query)`` is the subject of a query."""
    lines, facts = [], {}
    for relation, columns in sorted(rows.items()):
        keys = set()
        for query, labels in zip(columns["query"], columns["obj_labels"]):
            lines.append(json.dumps([relation, query, sorted(labels)], ensure_ascii=False))
            name = subject(relation, query)
            keys.update(fact_key(relation, name, label) for label in labels if label.strip())
        facts[relation] = sorted(keys)
    digest = hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()
    return {"split": split, "rows": len(lines), "sha256": digest, "facts": facts}


def fingerprint(record: Mapping[str, Any]) -> dict:
    """A split's record without its keys (what results record of it)."""
    return {key: value for key, value in record.items() if key != "facts"}


def check_record(record: Any) -> None:
    """Raise ``ValueError`` unless ``record`` is a split's record (see :func:`split_record`)."""
    facts = record.get("facts") if isinstance(record, dict) else None
    if not (isinstance(facts, dict) and isinstance(record.get("sha256"), str) and isinstance(record.get("split"), str)
            and all(isinstance(keys, list) for keys in facts.values())):
        raise ValueError("no record of the data its prompts were trained on (written by an earlier medlama: train "
                         "them again)")


def overlap(record: Mapping[str, Any], queries: Iterable[tuple[str, str, Sequence[str]]]) -> list[tuple[str, str]]:
    """``(relation, subject)`` of each query ``(relation, subject, gold answers)`` one of whose facts is in the
    split of ``record``."""
    known = {relation: set(keys) for relation, keys in record["facts"].items()}
    found = []
    for relation, subject, gold in queries:
        keys = known.get(relation)
        if keys and any(fact_key(relation, subject, answer) in keys for answer in gold):
            found.append((relation, subject))
    return found
