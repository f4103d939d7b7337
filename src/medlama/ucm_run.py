"""Score context-variance sets with a model and report UCM: tables 1-3 of the paper, acc@k, JSON, a plot.

For each row of a set built by ``medlama build context-variance`` (one context sequence) the ranker
ranks the row's candidates (its pool without the subject, plus any correct object missing from the
pool) at every input. Ranks are 1-based positions in the ranking of all candidates at that input.

Rank-change records (:func:`sequence_records`): for every input ``k > 0`` of a sequence, one record with

* ``target_rank_before`` / ``target_rank_after``: the rank of the sequence's centre at inputs ``k-1`` and
  ``k`` (``O_t``; for a negative-target sequence the negative target, an ``O_incor``);
* ``added_is_correct`` and ``added_rank_before`` / ``added_rank_after``: the entity ``O_a`` of the
  segment added at ``k`` (at ``k = 1`` that is the centre itself);
* ``correct_ranks_before/after`` and ``incorrect_ranks_before/after``: every ``O_cor`` / ``O_incor``
  present in input ``k-1`` (neither the centre nor ``O_a``), paired before/after, in order of arrival;
* ``triple_id`` and ``relation``.

The record of ``k = 1`` (S1, whose entity is the centre itself) is left out by default: the paper's
O_cor are the *other* entities equally correct for the subject (figure 1: "red entities represents other
entities that are equally correct"), so adding the centre is not an "O_a in O_cor" event. Counting it
would also tilt the control of table 3: on the O_t side S1 adds a correct entity (it would always enter
UCM, as a copy of the target), on the negative side an incorrect one (it never would).
``skip_first_segment=False`` (``medlama ucm --include-first-segment``) keeps it.

Inputs a model cannot see whole (over its length limit: a long note or article) are cut by the ranker,
far context first. A rank change across a cut input is not the effect of the added segment (which may
have been cut away: the change is then 0, a spurious "Confuse"), so a record is kept only when the
model saw both of its inputs whole; the others are counted (``num_records_truncated``). Bound the
contexts at build time (``--max-segments``) to keep more of them.

Every score then comes from the metric modules (``medlama.metrics.load``): UCM (``ucm``) gives UCM_m
(over all records), UCM_k (per relation) and the rank changes of table 1, for O_t-centred and
negative-target-centred sequences side by side (table 3); acc@k (``acc_at_k``) gives top-k accuracy
without context (the centre ``O_t`` in the top k at ``input0``, the prompt alone) and with context (at
the last input, the whole context), over the O_t-centred sequences, micro (over sequences) and macro
(over relations); ``acc_any`` counts a hit when any ``O_cor`` is in the top k, BioLAMA's definition.
Table 2's U / C / M are UCM_k averaged over relations (macro); table 3's are UCM_m.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from medlama.errors import MedlamaInputError

DEFAULT_KS = (1, 5)
#: The metric module's input columns (the records carry a few more, for breakdowns).
UCM_COLUMNS = ("target_rank_before", "target_rank_after", "added_is_correct", "added_rank_before",
               "added_rank_after", "correct_ranks_before", "correct_ranks_after", "incorrect_ranks_before",
               "incorrect_ranks_after", "triple_id", "relation")
SHARES = ("understand", "confuse", "misunderstand")


@lru_cache(maxsize=None)
def _metric(name: str):
    from medlama.metrics import load

    return load(name)


# ------------------------------------------------------------------------------------------ sets
@dataclass
class ContextSets:
    """The selected rows of a built folder, the pools they rank, and the build's description."""

    directory: Path
    rows: object  # datasets.Dataset
    pools: dict[str, tuple[list[str], list[str]]]  # pool id -> (entity ids, names)
    info: dict
    selection: dict


def load_sets(directory: str | Path, *, sources: Sequence[str] | None = None,
              context_types: Sequence[str] | None = None, negative: bool = True,
              relations: Sequence[str] | None = None) -> ContextSets:
    """Rows of a folder written by ``medlama build context-variance`` (all its sources by default)."""
    from datasets import concatenate_datasets, load_dataset

    from medlama.datasets.medlama import _quiet_datasets

    directory = Path(directory)
    info_path = directory / "build_info.json"
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MedlamaInputError("not a context-variance folder (no build_info.json); run `medlama build "
                                "context-variance --out DIR`", file=directory) from None
    except json.JSONDecodeError as error:
        raise MedlamaInputError(f"unreadable build_info.json: {error}", file=info_path) from None
    if info.get("dataset") != "context-variance":
        raise MedlamaInputError(f"not a context-variance folder (dataset {info.get('dataset')!r})", file=directory)
    built = [s["source"] for s in info["sources"]]
    chosen = list(sources) if sources else built
    unknown = sorted(set(chosen) - set(built))
    if unknown:
        raise MedlamaInputError(f"unknown source(s) {unknown}; this folder has {built}", file=directory)
    types = info["settings"]["context_types"]
    if context_types:
        bad = sorted(set(context_types) - set(types))
        if bad:
            raise MedlamaInputError(f"context type(s) {bad} not built; this folder has {types}", file=directory)
        types = [t for t in types if t in context_types]
    with _quiet_datasets():
        parts = [load_dataset(str(directory), source, split="test") for source in chosen]
        rows = concatenate_datasets(parts) if len(parts) > 1 else parts[0]
        frame = rows.select_columns(["context_type", "negative", "relation"]).to_pandas()
        keep = frame["context_type"].isin(types)
        if not negative:
            keep &= ~frame["negative"]
        if relations:
            bad = sorted(set(relations) - set(frame["relation"]))
            if bad:
                raise MedlamaInputError(f"unknown relation(s) {bad}; known: {sorted(set(frame['relation']))}",
                                        file=directory)
            keep &= frame["relation"].isin(list(relations))
        if not keep.all():
            rows = rows.select(np.flatnonzero(keep.to_numpy()))
        pool_rows = load_dataset(str(directory), "pools", split="test")
    if not len(rows):
        raise MedlamaInputError("no context sequences selected (empty sources, or filters that match nothing)",
                                file=directory)
    pools: dict[str, tuple[list[str], list[str]]] = {}
    for key, entity_id, name in zip(pool_rows["pool_id"], pool_rows["entity_id"], pool_rows["name"]):
        ids, names = pools.setdefault(key, ([], []))
        ids.append(entity_id)
        names.append(name)
    selection = {"sources": chosen, "context_types": types, "negative": negative,
                 "relations": list(relations) if relations else None}
    return ContextSets(directory, rows, pools, info, selection)


# ------------------------------------------------------------------------------------------ ranking
@dataclass
class RankedSequence:
    """One row with the ranks of its candidates at each input."""

    row: dict
    ranks: np.ndarray  # (inputs, candidates), 1-based
    column: dict[str, int]  # entity id -> column of ranks
    candidate_ids: list[str]
    whole: np.ndarray  # (inputs,) bool: the model saw the input whole


def rank_sequences(ranker, sets: ContextSets, *, block_rows: int = 64, progress: str | None = None
                   ) -> Iterator[RankedSequence]:
    """Rank every selected row's candidates at each of its inputs, pool by pool, in blocks of rows.

    Within a pool the rows are taken triple by triple; the distinct inputs of a block are scored in one
    call, and each triple's ``input0`` (shared by all its sequences) is scored once.
    """
    from tqdm.auto import tqdm

    from medlama.probers.context_rankers import ranks_from_scores

    frame = sets.rows.select_columns(["pool_id", "triple_id", "negative", "context_type", "subject_id",
                                      "correct_ids", "correct_names"]).to_pandas()
    frame["position"] = np.arange(len(frame))
    bar = tqdm(total=len(frame), desc=progress, disable=progress is None, unit="sequence", leave=False)
    for key, group in frame.groupby("pool_id", sort=True):
        if key not in sets.pools:
            raise MedlamaInputError(f"pool {key!r} missing from the pools config", file=sets.directory)
        ids, names = list(sets.pools[key][0]), list(sets.pools[key][1])
        where = {entity_id: i for i, entity_id in enumerate(ids)}
        pool_size = len(ids)
        for correct_ids, correct_names in zip(group["correct_ids"], group["correct_names"]):
            for entity_id, name in zip(correct_ids, correct_names):
                if entity_id not in where:  # a correct object outside the pool is a candidate of its triple
                    where[entity_id] = len(ids)
                    ids.append(entity_id)
                    names.append(name)
        # (scores, seen whole) of each triple's input0, the prompt alone: shared by all its rows, scored once
        prompts: dict[str, tuple[np.ndarray, bool]] = {}
        group = group.sort_values(["triple_id", "negative", "context_type", "position"], kind="stable")
        positions = group["position"].tolist()
        for start in range(0, len(positions), block_rows):
            block = sets.rows.select(positions[start:start + block_rows]).to_list()
            unique = list(dict.fromkeys(text for row in block for text in row["inputs"] if text not in prompts))
            scored = {} if not unique else dict(zip(unique, zip(ranker.scores(unique, names),
                                                                ranker.whole(unique, names))))
            for row in block:
                prompt = row["inputs"][0]
                if prompt not in prompts:
                    prompts[prompt] = scored[prompt]
                inputs = [prompts[text] if text in prompts else scored[text] for text in row["inputs"]]
                matrix = np.stack([scores for scores, _ in inputs])
                correct = set(row["correct_ids"])
                keep = [i for i, entity_id in enumerate(ids)
                        if entity_id != row["subject_id"] and (i < pool_size or entity_id in correct)]
                ranks = ranks_from_scores(matrix[:, keep])
                candidate_ids = [ids[i] for i in keep]
                whole = np.array([fits for _, fits in inputs], dtype=bool)
                yield RankedSequence(row, ranks, {entity_id: j for j, entity_id in enumerate(candidate_ids)},
                                     candidate_ids, whole)
                bar.update(1)
    bar.close()


def sequence_records(row: dict, ranks: np.ndarray, column: dict[str, int],
                     whole: Sequence[bool] | None = None) -> list[dict]:
    """The rank-change records of one sequence (see the module docstring), every ``k`` from 1.

    ``whole``: per input, whether the model saw it whole; each record says in ``whole`` whether both of
    its inputs were (None: all were).
    """
    center = row["center_id"]
    correct = set(row["correct_ids"])
    if center not in column:
        raise MedlamaInputError(f"sequence {row['id']!r}: its centre {center!r} is not a candidate")
    records = []
    present: list[str] = []  # pool entities in the previous input, in order of arrival
    for k in range(1, len(row["inputs"])):
        added = row["added_entities"][k]
        if added not in column:
            raise MedlamaInputError(f"sequence {row['id']!r}: added entity {added!r} is not a candidate")
        before, after = ranks[k - 1], ranks[k]
        others = [e for e in present if e != center and e != added]
        good = [column[e] for e in others if e in correct]
        bad = [column[e] for e in others if e not in correct]
        records.append({
            "target_rank_before": int(before[column[center]]), "target_rank_after": int(after[column[center]]),
            "added_is_correct": bool(row["added_is_correct"][k]),
            "added_rank_before": int(before[column[added]]), "added_rank_after": int(after[column[added]]),
            "correct_ranks_before": [int(before[c]) for c in good],
            "correct_ranks_after": [int(after[c]) for c in good],
            "incorrect_ranks_before": [int(before[c]) for c in bad],
            "incorrect_ranks_after": [int(after[c]) for c in bad],
            "triple_id": row["triple_id"], "relation": row["relation"],
            # not metric inputs: for breakdowns and the records file
            "source": row["source"], "context_type": row["context_type"], "negative": bool(row["negative"]),
            "sequence_id": row["id"], "k": k, "added_entity": added, "center_id": center,
            "whole": whole is None or bool(whole[k - 1] and whole[k]),
        })
        if added not in present:
            present.append(added)
    return records


# ------------------------------------------------------------------------------------------ scoring
@dataclass
class ModelResult:
    label: str
    settings: dict
    seconds: float
    num_sequences: int
    num_records: int
    #: records left out because the model saw one of their inputs cut (over its length limit)
    num_records_truncated: int
    target: dict | None
    negative: dict | None
    ucm_k_macro: dict
    accuracy: dict
    by_context: dict
    records: list[dict] = field(default_factory=list, repr=False)

    def to_json(self) -> dict:
        return {key: value for key, value in self.__dict__.items() if key != "records"}


def ucm(records: Sequence[dict]) -> dict | None:
    """The UCM module's result on ``records`` (``None`` when there are none)."""
    if not records:
        return None
    columns = {name: [record[name] for record in records] for name in UCM_COLUMNS}
    return _metric("ucm").compute(**columns)


def ucm_k_macro(result: dict | None) -> dict:
    """Table 2's U / C / M: the mean over relations of UCM_k (relations with a correct-O_a record)."""
    out = {share: None for share in SHARES}
    out["num_relations"] = 0
    if not result or not result.get("per_relation"):
        return out
    defined = [entry for entry in result["per_relation"].values() if entry["num_records_correct"]]
    out["num_relations"] = len(defined)
    if defined:
        for share in SHARES:
            out[share] = float(np.mean([entry[share] for entry in defined]))
    return out


def accuracy(sequences: Sequence[tuple[dict, list[str], list[str]]], ks: Sequence[int]) -> dict:
    """acc@k without (``input0``) and with (last input) context, through the acc@k module.

    ``sequences``: (row, top candidates at input0, top candidates at the last input) of O_t-centred rows.
    """
    if not sequences:
        return {}
    module = _metric("acc_at_k")
    relations = [row["relation"] for row, _, _ in sequences]
    out = {}
    for name, references in (("target", [[row["target_id"]] for row, _, _ in sequences]),
                             ("any_correct", [list(row["correct_ids"]) for row, _, _ in sequences])):
        for when, index in (("without_context", 1), ("with_context", 2)):
            predictions = [list(item[index]) for item in sequences]
            result = module.compute(predictions=predictions, references=references, groups=relations, k=list(ks))
            out.setdefault(name, {})[when] = result
    return out


def evaluate_model(ranker, sets: ContextSets, *, label: str, ks: Sequence[int] = DEFAULT_KS,
                   keep_records: bool = False, skip_first_segment: bool = True, progress: bool = True
                   ) -> ModelResult:
    """Rank, build the records, and score them with the UCM and acc@k modules.

    ``skip_first_segment`` (default) leaves out each sequence's first record (input1: S1, whose entity is
    the centre itself), so that UCM only counts segments that bring another entity (module docstring).
    Records over an input the model saw cut are left out and counted.
    """
    started = time.perf_counter()
    top = max(ks)
    records: list[dict] = []
    acc_rows = []
    count = truncated = 0
    for ranked in rank_sequences(ranker, sets, progress=label if progress else None):
        count += 1
        new = sequence_records(ranked.row, ranked.ranks, ranked.column, ranked.whole)
        for record in new[1:] if skip_first_segment else new:
            if record["whole"]:
                records.append(record)
            else:
                truncated += 1
        if not ranked.row["negative"]:
            firsts = [[ranked.candidate_ids[j] for j in np.argsort(ranked.ranks[i], kind="stable")[:top]]
                      for i in (0, -1)]
            acc_rows.append(({"relation": ranked.row["relation"], "target_id": ranked.row["target_id"],
                              "correct_ids": ranked.row["correct_ids"]}, firsts[0], firsts[1]))
    seconds = time.perf_counter() - started
    target = [r for r in records if not r["negative"]]
    negative = [r for r in records if r["negative"]]
    target_result, negative_result = ucm(target), ucm(negative)
    by_context = {}
    for key in sorted({(r["source"], r["context_type"]) for r in records}):
        entry = {}
        for side, chosen in (("target", target), ("negative", negative)):
            result = ucm([r for r in chosen if (r["source"], r["context_type"]) == key])
            entry[side] = None if result is None else {
                **{share: result[share] for share in SHARES},
                "num_records_correct": result["num_records_correct"], "num_records": result["num_records"]}
        by_context[f"{key[0]}/{key[1]}"] = entry
    return ModelResult(label=label, settings={**ranker.settings(), "skip_first_segment": skip_first_segment},
                       seconds=round(seconds, 3), num_sequences=count, num_records=len(records),
                       num_records_truncated=truncated, target=target_result, negative=negative_result,
                       ucm_k_macro={"target": ucm_k_macro(target_result), "negative": ucm_k_macro(negative_result)},
                       accuracy=accuracy(acc_rows, ks), by_context=by_context,
                       records=records if keep_records else [])


# ------------------------------------------------------------------------------------------ output
def _f(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_tables(results: Sequence[ModelResult], ks: Sequence[int]) -> None:
    from medlama.display import print_table

    rows = []
    for r in results:
        change = (r.target or {}).get("rank_change") or {}
        row = [r.label]
        for split in ("added_correct", "added_incorrect"):
            entry = change.get(split) or {}
            row += [_f(entry.get(kind), 2) for kind in ("target", "added", "correct", "incorrect")]
        rows.append(row)
    print_table("Table 1: mean rank change (O_t-centred sequences)",
                ["model"] + [f"{side} {kind}" for side in ("O_a∈O_cor:", "O_a∈O_incor:")
                             for kind in ("O_t", "O_a", "O_cor", "O_incor")], rows,
                caption="rank after - rank before; negative = moved up")
    rows = []
    for r in results:
        acc = r.accuracy.get("target", {})
        row = [r.label]
        for when in ("without_context", "with_context"):
            row += [_f(acc.get(when, {}).get(f"acc@{k}")) for k in ks]
        macro = r.ucm_k_macro["target"]
        row += [_f(macro[share]) for share in SHARES]
        rows.append(row)
    print_table("Table 2: top-k accuracy vs UCM_k",
                ["model"] + [f"no ctx acc@{k}" for k in ks] + [f"ctx acc@{k}" for k in ks] + ["U", "C", "M"], rows,
                caption="acc: O_t in the top k at input0 (no context) / at the last input, over O_t-centred "
                        "sequences; U/C/M: UCM_k averaged over relations")
    rows = []
    for r in results:
        row = [r.label]
        for side in (r.target, r.negative):
            row += [_f(side[share]) if side else "-" for share in SHARES]
        row += [(r.target or {}).get("num_records_correct", 0), (r.negative or {}).get("num_records_correct", 0)]
        rows.append(row)
    print_table("Table 3: UCM_m, O_t vs negative target as centre",
                ["model", "U", "C", "M", "neg U", "neg C", "neg M", "records", "neg records"], rows,
                caption="records: those whose added entity is correct (the UCM denominator)")
    if results and results[0].target and results[0].target.get("per_relation") and len(results) <= 3:
        relations = sorted(results[0].target["per_relation"])
        rows = []
        for relation in relations:
            row = [relation]
            for r in results:
                entry = ((r.target or {}).get("per_relation") or {}).get(relation) or {}
                row += [_f(entry.get(share)) for share in SHARES] + [entry.get("num_triples") or 0]
            rows.append(row)
        print_table("UCM_k per relation (O_t-centred)",
                    ["relation"] + [f"{r.label} {c}" for r in results for c in ("U", "C", "M", "triples")], rows)
    rows = []
    for r in results:
        for key, entry in r.by_context.items():
            row = [f"{r.label} {key}"]
            for side in ("target", "negative"):
                row += [_f(entry[side][share]) if entry[side] else "-" for share in SHARES]
            rows.append(row)
    if rows:
        print_table("UCM_m by source and context type", ["model source/context", "U", "C", "M", "neg U",
                                                         "neg C", "neg M"], rows)


def plot(results: Sequence[ModelResult], path: str | Path, ks: Sequence[int]) -> Path:
    """UCM_m with O_t and negative target as centre (stacked bars) and acc@k without / with context."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    labels, bars = [], []
    for r in results:
        for name, side in (("O_t", r.target), ("neg", r.negative)):
            labels.append(f"{r.label}\n{name}")
            bars.append([side[s] if side and side[s] is not None else 0.0 for s in SHARES])
    values = np.array(bars) if bars else np.zeros((0, 3))
    x = np.arange(len(labels))
    bottom = np.zeros(len(labels))
    for column, (share, colour) in enumerate(zip(SHARES, ("tab:green", "tab:gray", "tab:red"))):
        left.bar(x, values[:, column], bottom=bottom, label=share, color=colour)
        bottom += values[:, column]
    left.set_xticks(x, labels, fontsize=8)
    left.set_ylim(0, 1)
    left.set_title("UCM_m")
    left.legend(fontsize=8)
    width = 0.8 / max(1, 2 * len(ks))
    x = np.arange(len(results))
    offset = 0
    for when in ("without_context", "with_context"):
        for k in ks:
            heights = [(r.accuracy.get("target", {}).get(when, {}) or {}).get(f"acc@{k}") or 0.0 for r in results]
            right.bar(x + offset * width, heights, width, label=f"acc@{k} {when.replace('_', ' ')}")
            offset += 1
    right.set_xticks(x + width * (offset - 1) / 2, [r.label for r in results], fontsize=8)
    right.set_ylim(0, 1)
    right.set_title("top-k accuracy of O_t")
    right.legend(fontsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.tight_layout()
    fig.savefig(tmp, dpi=120)
    tmp.replace(path)
    plt.close(fig)
    return path


def write_outputs(results: Sequence[ModelResult], sets: ContextSets, out: str | Path, ks: Sequence[int], *,
                  records: bool = False) -> list[Path]:
    """``results.json``, ``ucm.png`` and, with ``records``, ``records.jsonl`` (one line per record and model)."""
    from medlama.atomic import atomic_write_text

    out = Path(out)
    payload = {"sets": str(sets.directory), "selection": sets.selection, "origin": sets.info.get("origin"),
               "build_settings": sets.info.get("settings"), "ks": list(ks),
               "definitions": {
                   "rank": "1-based position among the row's candidates at that input",
                   "acc_without_context": "centre O_t in the top k at input0 (the prompt alone)",
                   "acc_with_context": "centre O_t in the top k at the last input (the whole context, as far as "
                                       "it fits the model)",
                   "records": "one per added segment S2.. (S1 too with include_first_segment), over inputs the "
                              "model saw whole; num_records_truncated counts the others",
                   "acc_any_correct": "any correct object in the top k (BioLAMA's definition)",
                   "ucm_m": "top-level understand/confuse/misunderstand of 'target' and 'negative'",
                   "ucm_k": "per_relation; ucm_k_macro = their mean over relations"},
               "models": [r.to_json() for r in results]}
    written = [out / "results.json"]
    atomic_write_text(written[0], json.dumps(payload, indent=2, ensure_ascii=False, default=_plain) + "\n")
    written.append(plot(results, out / "ucm.png", ks))
    if records:
        lines = (json.dumps({"model": r.label, **record}, ensure_ascii=False) for r in results for record in r.records)
        atomic_write_text(out / "records.jsonl", "\n".join(lines) + "\n")
        written.append(out / "records.jsonl")
    return written


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def run_ucm(rankers: Sequence[tuple[str, object]], sets_dir: str | Path, out: str | Path, *,
            ks: Sequence[int] = DEFAULT_KS, sources: Sequence[str] | None = None,
            context_types: Sequence[str] | None = None, negative: bool = True,
            relations: Sequence[str] | None = None, records: bool = False, skip_first_segment: bool = True,
            show: bool = True, progress: bool = True) -> tuple[list[ModelResult], list[Path]]:
    """Score the sets with each ``(label, ranker)``; print tables 1-3 and write JSON and the plot."""
    ks = tuple(sorted(set(ks)))
    if not ks or ks[0] < 1:
        raise MedlamaInputError(f"every k must be >= 1, got {list(ks)}")
    sets = load_sets(sets_dir, sources=sources, context_types=context_types, negative=negative, relations=relations)
    results = [evaluate_model(ranker, sets, label=label, ks=ks, keep_records=records,
                              skip_first_segment=skip_first_segment, progress=progress)
               for label, ranker in rankers]
    if show:
        print_tables(results, ks)
    return results, write_outputs(results, sets, out, ks, records=records)
