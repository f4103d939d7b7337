# Copyright 2024 The medlama authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""Understand-Confuse-Misunderstand (UCM) and rank changes for context-variance probing (Yao et al., 2023).

Self-contained on purpose: this script imports only the standard library, ``datasets`` and ``evaluate``
so that it can be published on the Hugging Face Hub on its own.
"""

import math
import numbers
from collections.abc import Sequence as _AbcSequence

import datasets

import evaluate


_CITATION = """\
@inproceedings{yao-etal-2023-context-variance,
    title = "Context Variance Evaluation of Pretrained Language Models for Prompt-based Biomedical Knowledge Probing",
    author = "Yao, Zonghai and Cao, Yi and Yang, Zhichao and Yu, Hong",
    booktitle = "AMIA Joint Summits on Translational Science Proceedings (AMIA 2023 Informatics Summit)",
    year = "2023",
}
"""

_DESCRIPTION = """\
Context-variance probing adds a retrieved context to a cloze prompt one segment at a time; each new
segment brings exactly one new entity O_a, which is either a correct object of the triple's subject and
relation (O_cor) or not (O_incor). After every segment the rank of the target object O_t at the [MASK]
position is compared with its rank before the segment: the rank change RC = rank after - rank before
(negative: O_t moved up).

UCM keeps the records whose O_a is correct and reports the share with RC(O_t) < 0 (Understand),
= 0 (Confuse) and > 0 (Misunderstand): per relation (UCM_k) and over all records (UCM_m). The metric
also reports the mean rank changes of O_t, O_a, the other correct objects and the incorrect objects,
split by whether O_a is correct (table 1 of the paper), with the number of records behind every value.
"""

_KWARGS_DESCRIPTION = """
One record per added context segment. Required columns:
    target_rank_before (`list` of `int`): rank (1 = top) of O_t before the segment was added.
    target_rank_after (`list` of `int`): rank of O_t after the segment was added.
    added_is_correct (`list` of `bool`): whether the newly added entity O_a is a correct object.
Optional columns (leave a column out, or give `None` for a single record, when not known):
    added_rank_before, added_rank_after (`list` of `int`): ranks of O_a before and after.
    correct_ranks_before, correct_ranks_after (`list` of `list` of `int`): ranks of the correct objects
        (other than O_t and O_a) already in the context, before and after; paired element by element.
    incorrect_ranks_before, incorrect_ranks_after (`list` of `list` of `int`): likewise for the
        incorrect objects already in the context.
    triple_id (`list` of `str`): id of the triple the record belongs to (counted in `num_triples`).
    relation (`list` of `str`): relation of the triple; gives the per-relation UCM_k in `per_relation`.
Compute argument:
    known_relations (`list` of `str`, optional): every relation must be one of these.
Returns:
    understand, confuse, misunderstand (`float` or `None`): UCM_m shares over the records whose O_a is
        correct; `None` when there is no such record.
    num_understand, num_confuse, num_misunderstand, num_records, num_records_correct (`int`).
    num_triples (`int` or `None`): distinct triple ids, `None` without `triple_id`.
    per_relation (`dict` or `None`): UCM_k, `{relation: {the same keys as above}}`.
    rank_change (`dict`): `{"added_correct": {...}, "added_incorrect": {...}}`, each with the mean rank
        changes `target`, `added`, `correct`, `incorrect` (`None` when no record contributes) and the
        record counts `num_target`, `num_added`, `num_correct`, `num_incorrect`.
Examples:
    >>> ucm = evaluate.load("metrics/ucm")
    >>> results = ucm.compute(
    ...     target_rank_before=[2, 5, 3],
    ...     target_rank_after=[1, 5, 4],
    ...     added_is_correct=[True, True, False],
    ... )
    >>> print(results["understand"], results["confuse"], results["misunderstand"])
    0.5 0.5 0.0
"""

_REQUIRED = ("target_rank_before", "target_rank_after", "added_is_correct")
_RANK_PAIRS = (("added_rank_before", "added_rank_after"),)
_LIST_PAIRS = (
    ("correct_ranks_before", "correct_ranks_after"),
    ("incorrect_ranks_before", "incorrect_ranks_after"),
)
_STRINGS = ("triple_id", "relation")
_COLUMNS = (
    _REQUIRED
    + tuple(name for pair in _RANK_PAIRS for name in pair)
    + tuple(name for pair in _LIST_PAIRS for name in pair)
    + _STRINGS
)
# Filled in for a string column that was left out; a value given by the user may never be empty.
_NOT_GIVEN = ""


def _is_list_like(obj):
    """A list, tuple or array (numpy, torch...), but not a string."""
    if isinstance(obj, (str, bytes)):
        return False
    return isinstance(obj, _AbcSequence) or (hasattr(obj, "tolist") and hasattr(obj, "__len__"))


def _as_list(obj):
    return obj.tolist() if hasattr(obj, "tolist") else list(obj)


def _is_bool(value):
    return isinstance(value, bool) or (hasattr(value, "dtype") and getattr(value.dtype, "kind", None) == "b")


# Ranks are stored as int64 (the features below); a larger one would fail deep inside pyarrow.
_MAX_RANK = 2**63 - 1


def _check_rank(value, where):
    if _is_bool(value) or not isinstance(value, numbers.Integral):
        raise ValueError(f"ucm: {where} must be an int rank (1 = top), got {value!r}.")
    if value < 1:
        raise ValueError(f"ucm: {where} is {value}; ranks start at 1 (1 = top).")
    if value > _MAX_RANK:
        raise ValueError(f"ucm: {where} is {value}, more than the largest rank the metric stores (2**63 - 1).")


def _check_records(columns, num_records, offset=0):
    """Check every record of ``columns`` (a dict of equally long lists; absent optional columns hold None
    or, for string columns, the internal not-given marker). Messages name the column and record index."""
    for position in range(num_records):
        index = offset + position
        for name in ("target_rank_before", "target_rank_after"):
            value = columns[name][position]
            if value is None:
                raise ValueError(f"ucm: {name}[{index}] is missing; the target ranks are required for every record.")
            _check_rank(value, f"{name}[{index}]")
        flag = columns["added_is_correct"][position]
        if not _is_bool(flag):
            raise ValueError(f"ucm: added_is_correct[{index}] must be True or False, got {flag!r}.")
        for before_name, after_name in _RANK_PAIRS:
            before, after = columns[before_name][position], columns[after_name][position]
            if (before is None) != (after is None):
                given, missing = (before_name, after_name) if after is None else (after_name, before_name)
                raise ValueError(f"ucm: record {index} has {given} but no {missing}; give both or neither.")
            if before is not None:
                _check_rank(before, f"{before_name}[{index}]")
                _check_rank(after, f"{after_name}[{index}]")
        for before_name, after_name in _LIST_PAIRS:
            before, after = columns[before_name][position], columns[after_name][position]
            if (before is None) != (after is None):
                given, missing = (before_name, after_name) if after is None else (after_name, before_name)
                raise ValueError(f"ucm: record {index} has {given} but no {missing}; give both or neither.")
            if before is None:
                continue
            for name, ranks in ((before_name, before), (after_name, after)):
                if not _is_list_like(ranks):
                    raise ValueError(f"ucm: {name}[{index}] must be a list of int ranks, got {ranks!r}.")
            before, after = _as_list(before), _as_list(after)
            if len(before) != len(after):
                raise ValueError(
                    f"ucm: record {index}: {before_name} has {len(before)} ranks but {after_name} has {len(after)}; "
                    "the lists are paired element by element (same entities, same order)."
                )
            for name, ranks in ((before_name, before), (after_name, after)):
                for position_rank, value in enumerate(ranks):
                    _check_rank(value, f"{name}[{index}][{position_rank}]")


def _check_strings(name, values, offset=0):
    for position, value in enumerate(values):
        if not isinstance(value, str) or not value:
            raise ValueError(f"ucm: {name}[{offset + position}] must be a non-empty string, got {value!r}.")


def _check_known_relations(known_relations):
    if known_relations is None:
        return None
    if not _is_list_like(known_relations):
        raise ValueError(f"ucm: `known_relations` must be a list of relation names, got {known_relations!r}.")
    known = _as_list(known_relations)
    _check_strings("known_relations", known)
    return set(known)


def _check_relations_known(relations, known):
    for index, relation in enumerate(relations):
        if relation not in known:
            raise ValueError(f"ucm: unknown relation {relation!r} at relation[{index}]; known: {sorted(known)}.")


def _prepare_batch(columns, offset):
    """Check a batch given by the user and fill in the optional columns it leaves out."""
    unknown = sorted(set(columns) - set(_COLUMNS))
    if unknown:
        raise ValueError(f"ucm: unknown inputs {unknown}; the columns are {list(_COLUMNS)}.")
    given = {name: value for name, value in columns.items() if value is not None}
    missing = [name for name in _REQUIRED if name not in given]
    if missing:
        raise ValueError(f"ucm: required columns missing: {missing} (required: {list(_REQUIRED)}).")
    for name, value in given.items():
        if not _is_list_like(value):
            raise ValueError(f"ucm: `{name}` must be a list with one entry per record, got {type(value).__name__}.")
    given = {name: _as_list(value) for name, value in given.items()}
    lengths = {name: len(value) for name, value in given.items()}
    if len(set(lengths.values())) > 1:
        described = ", ".join(f"{n} in `{name}`" for name, n in lengths.items())
        raise ValueError(f"ucm: length mismatch between columns: {described}. Every column has one entry per record.")
    num_records = lengths["target_rank_before"]
    for name in _STRINGS:
        if name in given:
            _check_strings(name, given[name], offset)
    filled = {}
    for name in _COLUMNS:
        if name in given:
            filled[name] = given[name]
        else:
            filled[name] = [_NOT_GIVEN if name in _STRINGS else None] * num_records
    _check_records(filled, num_records, offset)
    return filled


def _mean(values):
    # fsum is exact, so the mean does not depend on the order of the records.
    return math.fsum(values) / len(values) if values else None


def _shares(signs):
    """UCM shares and counts from a list of signs (-1 understand, 0 confuse, +1 misunderstand)."""
    counts = {"understand": signs.count(-1), "confuse": signs.count(0), "misunderstand": signs.count(1)}
    total = len(signs)
    out = {name: (count / total if total else None) for name, count in counts.items()}
    out.update({f"num_{name}": count for name, count in counts.items()})
    out["num_records_correct"] = total
    return out


def _sign(value):
    return (value > 0) - (value < 0)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class UCM(evaluate.Metric):
    """Understand / Confuse / Misunderstand shares and table-1 rank changes for context-variance probing."""

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "target_rank_before": datasets.Value("int64"),
                    "target_rank_after": datasets.Value("int64"),
                    "added_is_correct": datasets.Value("bool"),
                    "added_rank_before": datasets.Value("int64"),
                    "added_rank_after": datasets.Value("int64"),
                    "correct_ranks_before": datasets.Sequence(datasets.Value("int64")),
                    "correct_ranks_after": datasets.Sequence(datasets.Value("int64")),
                    "incorrect_ranks_before": datasets.Sequence(datasets.Value("int64")),
                    "incorrect_ranks_after": datasets.Sequence(datasets.Value("int64")),
                    "triple_id": datasets.Value("string"),
                    "relation": datasets.Value("string"),
                }
            ),
        )

    # evaluate stores every feature column for every record, so the optional columns a batch leaves
    # out are filled in here (None, or an internal marker for strings) after the batch is checked.

    def add_batch(self, **columns):
        """Add a batch of records (one per added context segment), as columns of equal length."""
        for name in ("predictions", "references"):
            if columns.get(name) is None:
                columns.pop(name, None)
        return super().add_batch(**_prepare_batch(columns, offset=len(self)))

    def add(self, **record):
        """Add one record: one value per column (`target_rank_before=2, target_rank_after=1, ...`)."""
        for name in ("prediction", "reference"):
            if record.get(name) is None:
                record.pop(name, None)
        batch = {name: (None if value is None else [value]) for name, value in record.items()}
        filled = _prepare_batch(batch, offset=len(self))
        return super().add(**{name: values[0] for name, values in filled.items()})

    def compute(self, **kwargs):
        """Compute UCM over the records given here and/or added before with `add`/`add_batch`."""
        columns = {name: kwargs.pop(name) for name in list(kwargs) if name in _COLUMNS}
        for name in ("predictions", "references"):
            if kwargs.get(name) is None:
                kwargs.pop(name, None)
        unknown = sorted(set(kwargs) - {"known_relations"})
        if unknown:
            raise ValueError(
                f"ucm: unknown arguments {unknown}; the columns are {list(_COLUMNS)} and the only compute "
                "argument is `known_relations`."
            )
        known = _check_known_relations(kwargs.get("known_relations"))
        if any(value is not None for value in columns.values()):
            relations = columns.get("relation")
            if known is not None and relations is not None and _is_list_like(relations):
                # Checked before the records are stored, so that a bad call leaves nothing behind.
                _check_relations_known(_as_list(relations), known)
            self.add_batch(**columns)
        return super().compute(**kwargs)

    def _compute(self, known_relations=None, **columns):
        known = _check_known_relations(known_relations)
        num_records = len(columns["target_rank_before"])
        if num_records == 0:
            raise ValueError("ucm: no records to score.")
        _check_records(columns, num_records)

        given_strings = {}
        for name in _STRINGS:
            values = columns[name]
            present = [value != _NOT_GIVEN for value in values]
            if any(present) and not all(present):
                index = present.index(False)
                raise ValueError(
                    f"ucm: record {index} has no {name} while other records have one; give `{name}` for every "
                    "record or for none."
                )
            given_strings[name] = all(present)
        relations = columns["relation"] if given_strings["relation"] else None
        triple_ids = columns["triple_id"] if given_strings["triple_id"] else None
        if known is not None:
            if relations is None:
                raise ValueError("ucm: `known_relations` given but the records have no `relation` column.")
            _check_relations_known(relations, known)
        if relations is not None and triple_ids is not None:
            relation_of = {}
            for index, (triple_id, relation) in enumerate(zip(triple_ids, relations)):
                if relation_of.setdefault(triple_id, relation) != relation:
                    raise ValueError(
                        f"ucm: triple {triple_id!r} has relation {relation_of[triple_id]!r} and, at record {index}, "
                        f"{relation!r}; a triple belongs to one relation."
                    )

        signs_all = []
        signs_by_relation = {}
        changes = {
            split: {"target": [], "added": [], "correct": [], "incorrect": []}
            for split in ("added_correct", "added_incorrect")
        }
        for index in range(num_records):
            target_change = columns["target_rank_after"][index] - columns["target_rank_before"][index]
            is_correct = bool(columns["added_is_correct"][index])
            split = changes["added_correct" if is_correct else "added_incorrect"]
            split["target"].append(target_change)
            if columns["added_rank_before"][index] is not None:
                split["added"].append(columns["added_rank_after"][index] - columns["added_rank_before"][index])
            for kind in ("correct", "incorrect"):
                before = columns[f"{kind}_ranks_before"][index]
                after = columns[f"{kind}_ranks_after"][index]
                if before:  # None (not given) or [] (no such entity in the context yet): nothing to average
                    split[kind].append(math.fsum(a - b for a, b in zip(after, before)) / len(before))
            if relations is not None:
                signs_by_relation.setdefault(relations[index], [])
            if is_correct:
                signs_all.append(_sign(target_change))
                if relations is not None:
                    signs_by_relation[relations[index]].append(_sign(target_change))

        results = _shares(signs_all)
        results["num_records"] = num_records
        results["num_triples"] = len(set(triple_ids)) if triple_ids is not None else None
        if relations is None:
            results["per_relation"] = None
        else:
            per_relation = {}
            for relation in sorted(signs_by_relation):
                entry = _shares(signs_by_relation[relation])
                entry["num_records"] = sum(1 for value in relations if value == relation)
                entry["num_triples"] = (
                    len({t for t, r in zip(triple_ids, relations) if r == relation}) if triple_ids is not None else None
                )
                per_relation[relation] = entry
            results["per_relation"] = per_relation
        results["rank_change"] = {
            split: {
                **{kind: _mean(values) for kind, values in groups.items()},
                **{f"num_{kind}": len(values) for kind, values in groups.items()},
            }
            for split, groups in changes.items()
        }
        return results
