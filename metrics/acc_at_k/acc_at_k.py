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
"""acc@k (top-k accuracy) for cloze-style knowledge probing, as in MedLAMA and BioLAMA.

Self-contained on purpose: this script imports only the standard library, ``datasets`` and ``evaluate``
so that it can be published on the Hugging Face Hub on its own.
"""

import math
import numbers
import re
import string
from collections.abc import Sequence as _AbcSequence

import datasets

import evaluate


_CITATION = """\
@inproceedings{meng-etal-2022-rewire,
    title = "Rewire-then-Probe: A Contrastive Recipe for Probing Biomedical Knowledge of Pre-trained Language Models",
    author = "Meng, Zaiqiao and Liu, Fangyu and Shareghi, Ehsan and Su, Yixuan and Collins, Charlotte and Collier, Nigel",
    booktitle = "Proceedings of the 60th Annual Meeting of the Association for Computational Linguistics (Volume 1: Long Papers)",
    year = "2022",
    publisher = "Association for Computational Linguistics",
}
@inproceedings{sung-etal-2021-language,
    title = "Can Language Models be Biomedical Knowledge Bases?",
    author = "Sung, Mujeen and Lee, Jinhyuk and Yi, Sean and Jeon, Minji and Kim, Sungdong and Kang, Jaewoo",
    booktitle = "Proceedings of the 2021 Conference on Empirical Methods in Natural Language Processing",
    year = "2021",
    publisher = "Association for Computational Linguistics",
}
"""

_DESCRIPTION = """\
acc@k of a probing query is 1 if any of its gold answers is among the first k predictions of the
model's ranked list, else 0. The metric reports, for every requested k, the micro average (over
queries), the macro average (mean of the per-group averages, e.g. over relations, as MedLAMA and
BioLAMA report it), the per-group values, and how many queries had fewer than k predictions.

Predictions are deduplicated before the cut at k (first occurrence kept, after the matching
normalisation), so a gold answer listed twice counts once and a list can never score above 1.
Matching is either exact string equality (the MedLAMA reference) or equality after SQuAD-style
normalisation (BioLAMA: lower case, punctuation and the articles a/an/the removed, whitespace collapsed).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `list` of `str`): per query, the model's predictions, best first.
    references (`list` of `list` of `str`): per query, the gold answers (labels and aliases); any one
        of them counts. Must not be empty.
    groups (`list` of `str`, optional): per query, a group key (e.g. the relation). Leave it out to
        treat all queries as one group; then the macro values equal the micro values.
    k (`int` or `list` of `int`, optional): cut-offs, each >= 1. Defaults to `[1, 5, 10]`.
    match (`str`, optional): `"exact"` (default; exact string equality, as the MedLAMA reference code)
        or `"normalized"` (BioLAMA: lower case, no punctuation, no articles, single spaces).
    known_groups (`list` of `str`, optional): if given, every group key must be one of these;
        an unknown key raises a `ValueError`. Groups listed here but without queries are not reported.
Returns:
    For every k (here 1): `acc@1` (micro), `acc@1_macro`, `short@1` (share of queries with fewer than
    1 distinct prediction) and `num_short@1`; then `num_queries`, `num_groups`, `k`, `match` and
    `groups` (`None` without groups, else `{group: {"acc@1": ..., "short@1": ..., "num_short@1": ...,
    "num_queries": ...}}`).
Examples:
    >>> acc_at_k = evaluate.load("metrics/acc_at_k")
    >>> results = acc_at_k.compute(
    ...     predictions=[["fever", "cough"], ["cough", "Cough", "rash"]],
    ...     references=[["cough"], ["rash"]],
    ...     k=[1, 2],
    ... )
    >>> print(results["acc@1"], results["acc@2"], results["short@2"])
    0.0 0.5 0.0
"""

_DEFAULT_K = (1, 5, 10)
_MATCH_MODES = ("exact", "normalized")
# Filled in for a batch added without groups; a group key given by the user may never be empty.
_NO_GROUP = ""

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text):
    """SQuAD-style normalisation: lower case, drop punctuation, drop articles, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _identity(text):
    return text


def _is_list_like(obj):
    """A list, tuple or array (numpy, torch...), but not a string."""
    if isinstance(obj, (str, bytes)):
        return False
    return isinstance(obj, _AbcSequence) or (hasattr(obj, "tolist") and hasattr(obj, "__len__"))


def _as_list(obj):
    return obj.tolist() if hasattr(obj, "tolist") else list(obj)


def _check_k(k):
    """The sorted, distinct cut-offs of ``k`` (an int or a list of ints, each >= 1)."""
    if k is None:
        return list(_DEFAULT_K)
    values = _as_list(k) if _is_list_like(k) else [k]
    if not values:
        raise ValueError("acc_at_k: `k` is empty; give an int >= 1 or a list of them, e.g. k=[1, 5, 10].")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError(f"acc_at_k: every k must be an int >= 1, got {value!r} in k={k!r}.")
        if value < 1:
            raise ValueError(f"acc_at_k: every k must be >= 1, got {value} in k={k!r}.")
    return sorted({int(value) for value in values})


def _check_match(match):
    if match not in _MATCH_MODES:
        raise ValueError(f"acc_at_k: unknown match mode {match!r}; use one of {list(_MATCH_MODES)}.")
    return normalize_answer if match == "normalized" else _identity


def _check_known_groups(known_groups):
    if known_groups is None:
        return None
    if not _is_list_like(known_groups):
        raise ValueError(f"acc_at_k: `known_groups` must be a list of group keys, got {known_groups!r}.")
    known = _as_list(known_groups)
    for position, name in enumerate(known):
        if not isinstance(name, str) or not name:
            raise ValueError(f"acc_at_k: known_groups[{position}] must be a non-empty string, got {name!r}.")
    return set(known)


def _check_groups_known(groups, known):
    for index, group in enumerate(groups):
        if group not in known:
            raise ValueError(f"acc_at_k: unknown group {group!r} at groups[{index}]; known groups: {sorted(known)}.")


def _check_columns(predictions, references, groups, offset=0):
    """Check the shape and types of a batch of queries; ``groups`` is None when not given.

    Raises a ValueError naming the offending field and query index (``offset`` + position in the batch).
    """
    for name, column in (("predictions", predictions), ("references", references), ("groups", groups)):
        if column is not None and not _is_list_like(column):
            raise ValueError(
                f"acc_at_k: `{name}` must be a list with one entry per query, got {type(column).__name__}."
            )
    if predictions is None or references is None:
        missing = [name for name, col in (("predictions", predictions), ("references", references)) if col is None]
        raise ValueError(
            f"acc_at_k: {' and '.join(missing)} missing; both `predictions` and `references` are required."
        )
    lengths = {"predictions": len(predictions), "references": len(references)}
    if groups is not None:
        lengths["groups"] = len(groups)
    if len(set(lengths.values())) > 1:
        described = ", ".join(f"{n} queries in `{name}`" for name, n in lengths.items())
        raise ValueError(
            f"acc_at_k: length mismatch: {described}. Give one ranked prediction list, one gold list "
            "(and one group key, if groups are used) per query."
        )
    for position, (preds, golds) in enumerate(zip(predictions, references)):
        index = offset + position
        if not _is_list_like(preds):
            raise ValueError(
                f"acc_at_k: predictions[{index}] must be a list of strings (the ranked predictions of one query), "
                f"got {type(preds).__name__}: {preds!r}."
            )
        for rank, pred in enumerate(preds):
            if not isinstance(pred, str):
                raise ValueError(f"acc_at_k: predictions[{index}][{rank}] must be a string, got {pred!r}.")
        if not _is_list_like(golds):
            raise ValueError(
                f"acc_at_k: references[{index}] must be a list of gold strings, got {type(golds).__name__}: {golds!r}."
            )
        if len(golds) == 0:
            raise ValueError(
                f"acc_at_k: references[{index}] is an empty gold list; every query needs at least one gold answer."
            )
        for position_gold, gold in enumerate(golds):
            if not isinstance(gold, str):
                raise ValueError(f"acc_at_k: references[{index}][{position_gold}] must be a string, got {gold!r}.")
    if groups is not None:
        for position, group in enumerate(groups):
            if not isinstance(group, str) or not group:
                raise ValueError(
                    f"acc_at_k: groups[{offset + position}] must be a non-empty string (e.g. the relation), "
                    f"got {group!r}."
                )


def _gold_keys(golds, key, index, match):
    """The matching keys of one query's gold answers; empty keys are dropped, and none left is an error."""
    gold_keys = {key(gold) for gold in golds}
    gold_keys.discard("")
    if not gold_keys:
        raise ValueError(
            f"acc_at_k: references[{index}] has no usable gold answer under match={match!r}: "
            f"{list(golds)!r} all become empty strings"
            + (" after normalisation (try match='exact')." if match == "normalized" else ".")
        )
    return gold_keys


def _score_query(preds, golds, key, index, match):
    """Return (rank of the first hit among the deduplicated predictions or None, number of distinct predictions)."""
    gold_keys = _gold_keys(golds, key, index, match)
    seen = set()
    first_hit = None
    for pred in preds:
        pred_key = key(pred)
        if pred_key in seen:
            continue
        seen.add(pred_key)
        if first_hit is None and pred_key in gold_keys:
            first_hit = len(seen)
    return first_hit, len(seen)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class AccAtK(evaluate.Metric):
    """acc@k with micro and macro (per-group) averages and a count of short prediction lists."""

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Sequence(datasets.Value("string")),
                    "references": datasets.Sequence(datasets.Value("string")),
                    "groups": datasets.Value("string"),
                }
            ),
            codebase_urls=["https://github.com/cambridgeltl/medlama", "https://github.com/dmis-lab/BioLAMA"],
            reference_urls=["https://arxiv.org/abs/2110.08173", "https://arxiv.org/abs/2109.07154"],
        )

    # evaluate stores one row per query with every feature column, so a missing optional `groups`
    # column is filled in here (and a given one checked) before evaluate sees the batch. evaluate.combine
    # looks up every declared feature among its caller's inputs: there, give `groups` (one key for all
    # queries when there are no groups), as the metric card says.

    def add_batch(self, *, predictions=None, references=None, groups=None, **kwargs):
        """Add a batch of queries: `predictions`, `references` and optionally `groups` (one entry per query)."""
        if kwargs:
            raise ValueError(
                f"acc_at_k: unexpected inputs {sorted(kwargs)}; the inputs are `predictions`, `references` and "
                "optionally `groups` (compute arguments such as `k` and `match` go to `compute`)."
            )
        _check_columns(predictions, references, groups, offset=len(self))
        return self._store(predictions, references, groups)

    def _store(self, predictions, references, groups):
        """Store a checked batch (with the empty group key for every query when `groups` is left out)."""
        if groups is None:
            groups = [_NO_GROUP] * len(predictions)
        return super().add_batch(predictions=predictions, references=references, groups=groups)

    def add(self, *, prediction=None, reference=None, groups=None, **kwargs):
        """Add one query: `prediction` (ranked list of str), `reference` (gold list), optionally `groups` (its key)."""
        if prediction is None and reference is None and set(kwargs) <= {"predictions", "references"}:
            # evaluate.combine(...).add passes the query under the column names
            prediction, reference = kwargs.pop("predictions", None), kwargs.pop("references", None)
        if kwargs:
            raise ValueError(f"acc_at_k: unexpected inputs {sorted(kwargs)} for `add`.")
        batch = (None if prediction is None else [prediction], None if reference is None else [reference],
                 None if groups is None else [groups])
        _check_columns(*batch, offset=len(self))
        return self._store(*batch)

    def compute(self, *, predictions=None, references=None, groups=None, **kwargs):
        """Compute acc@k over the queries given here and/or added before with `add`/`add_batch`."""
        # Check the compute arguments before anything is stored, so a bad call leaves no data behind.
        unknown = sorted(set(kwargs) - {"k", "match", "known_groups"})
        if unknown:
            raise ValueError(
                f"acc_at_k: unknown arguments {unknown}; the inputs are `predictions`, `references`, `groups` and "
                "the compute arguments `k`, `match`, `known_groups`."
            )
        _check_k(kwargs.get("k"))
        match = kwargs.get("match", "exact")
        key = _check_match(match)
        known = _check_known_groups(kwargs.get("known_groups"))
        if predictions is None and references is None:
            if groups is not None:
                raise ValueError("acc_at_k: `groups` given without `predictions` and `references`.")
            return super().compute(**kwargs)
        _check_columns(predictions, references, groups, offset=len(self))
        for position, golds in enumerate(references):
            _gold_keys(golds, key, len(self) + position, match)
        if known is not None and groups is not None:
            _check_groups_known(_as_list(groups), known)
        self._store(predictions, references, groups)  # checked above: stored as it is
        return super().compute(**kwargs)

    def _compute(self, predictions, references, groups, k=None, match="exact", known_groups=None):
        cutoffs = _check_k(k)
        key = _check_match(match)
        known = _check_known_groups(known_groups)
        num_queries = len(predictions)
        if num_queries == 0:
            raise ValueError("acc_at_k: no queries to score.")

        grouped = any(group != _NO_GROUP for group in groups)
        if grouped:
            for index, group in enumerate(groups):
                if group == _NO_GROUP:
                    raise ValueError(
                        f"acc_at_k: query {index} has no group key while others have one; give `groups` for every "
                        "query or for none."
                    )
            if known is not None:
                _check_groups_known(groups, known)
        elif known is not None:
            raise ValueError("acc_at_k: `known_groups` given but the queries have no `groups`.")

        # Per group (a single implicit one without groups): query count, hits per k, short lists per k.
        stats = {}
        for index, (preds, golds, group) in enumerate(zip(predictions, references, groups)):
            first_hit, num_distinct = _score_query(preds, golds, key, index, match)
            entry = stats.setdefault(group, {"n": 0, "hits": [0] * len(cutoffs), "short": [0] * len(cutoffs)})
            entry["n"] += 1
            for position, cutoff in enumerate(cutoffs):
                if first_hit is not None and first_hit <= cutoff:
                    entry["hits"][position] += 1
                if num_distinct < cutoff:
                    entry["short"][position] += 1

        results = {}
        for position, cutoff in enumerate(cutoffs):
            hits = sum(entry["hits"][position] for entry in stats.values())
            short = sum(entry["short"][position] for entry in stats.values())
            per_group = [entry["hits"][position] / entry["n"] for entry in stats.values()]
            results[f"acc@{cutoff}"] = hits / num_queries
            # fsum is exact, so the macro value does not depend on the order of the queries.
            results[f"acc@{cutoff}_macro"] = math.fsum(per_group) / len(per_group)
            results[f"short@{cutoff}"] = short / num_queries
            results[f"num_short@{cutoff}"] = short
        results["num_queries"] = num_queries
        results["num_groups"] = len(stats)
        results["k"] = cutoffs
        results["match"] = match
        if grouped:
            per_group_results = {}
            for group in sorted(stats):
                entry = stats[group]
                values = {}
                for position, cutoff in enumerate(cutoffs):
                    values[f"acc@{cutoff}"] = entry["hits"][position] / entry["n"]
                    values[f"short@{cutoff}"] = entry["short"][position] / entry["n"]
                    values[f"num_short@{cutoff}"] = entry["short"][position]
                values["num_queries"] = entry["n"]
                per_group_results[group] = values
            results["groups"] = per_group_results
        else:
            results["groups"] = None
        return results
