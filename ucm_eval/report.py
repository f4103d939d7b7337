"""The UCM report: the paper's tables 1-3 and two breakdowns on the terminal, ``ucm.png``, ``results.json``
and (on request) ``records.jsonl``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from medlama.runs.outputs import RESULTS_FILE
from medlama.runs.plots import save_figure
from medlama.ucm_eval.scores import SHARES, ModelResult
from medlama.ucm_eval.sets import ContextSets
from medlama.core.atomic import atomic_write_text
from medlama.core.display import print_table
from medlama.core.provenance import folder_hash, provenance
from medlama.core.public_paths import with_public_model
from medlama.runs.result import is_bundled as _is_bundled  # the probe reports' rule for the bundled encoder


def _f(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_tables(results: Sequence[ModelResult], ks: Sequence[int]) -> None:
    """Tables 1-3, UCM_k per relation (up to three models) and UCM_m by source and context type."""

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
    import matplotlib  # loaded when a plot is drawn: not by `medlama ucm`'s argument checks

    matplotlib.use("Agg")
    # matplotlib loads when this runs, not when the CLI parses its flags
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
    return save_figure(fig, path, dpi=120)


def write_outputs(results: Sequence[ModelResult], sets: ContextSets, out: str | Path, ks: Sequence[int], *,
                  records: bool = False) -> list[Path]:
    """``results.json``, ``ucm.png`` and, with ``records``, ``records.jsonl`` (one line per record and model)."""

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
               "models": [r.to_json() for r in results],
               "provenance": _provenance(results, sets)}
    written = [out / RESULTS_FILE]
    atomic_write_text(written[0], json.dumps(payload, indent=2, ensure_ascii=False, default=_plain) + "\n")
    written.append(plot(results, out / "ucm.png", ks))
    if records:
        lines = (json.dumps({"model": r.label, **record}, ensure_ascii=False) for r in results for record in r.records)
        atomic_write_text(out / "records.jsonl", "\n".join(lines) + "\n")
        written.append(out / "records.jsonl")
    return written


def _provenance(results: Sequence[ModelResult], sets: ContextSets) -> dict:
    """The provenance block (:mod:`medlama.core.provenance`): versions, the sets (their build's origin and settings,
    a hash of the folder), each model's identity, every model's settings, command, date and device."""

    models = [None if _is_bundled(m := r.settings.get("model")) else m for r in results]
    settings = {r.label: with_public_model(r.settings) for r in results}
    data = {"dataset": "context-variance", "origin": sets.info.get("origin"), "selection": sets.selection,
            "folder_sha256": folder_hash(sets.directory)}
    return provenance(settings=settings, data=data, models=models)


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
