"""Figure 4 of Rewire-then-Probe: acc@k over rewiring steps, the mean over the rewiring corpora with its
standard deviation shaded, for the micro average and the top relations (the paper: 10 corpora, acc@1, the top 9
relations).

The numbers are those ``medlama recipe --probe-checkpoints`` recorded in its ``results.json`` (``checkpoints``:
per corpus, each checkpoint's acc@k overall and per relation); step 0 is the un-rewired model, the recipe's
first run. A sweep point's folder (``medlama sweep``'s ``points/<key>``) is read alike. The same aggregation (:func:`series`) draws the sweep's figure (:mod:`medlama.figures.sweep_plot`),
whose points record their checkpoints alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from medlama.core.errors import MedlamaInputError
from medlama.figures.output import STD_METHOD, check_png, read_record, source_record, subplots, write_figure
from medlama.figures.settings import POINT_FILE, SWEEP_FILE
from medlama.runs.outputs import RESULTS_FILE
from medlama.runs.tables import sample_mean_std

#: What the figure's panels beside the micro average are, as the record says it.
TOP_RULE = "the relations with the highest mean acc@k over the corpora at the last step all corpora reached"


def check_mapping(value: object, where: str, *, file: Path) -> dict:
    """``value`` if it is a JSON object or absent (``{}``); a hand-edited record with another type there is refused
    (``where``: the field, for the message)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MedlamaInputError(f"{where}: a JSON object expected, not {type(value).__name__}", file=file)
    return value


def check_step_record(record: object, where: str, *, file: Path) -> dict:
    """One probe's record (:func:`~medlama.runs.result.step_record`) whose intervals and per-relation table,
    where recorded, are JSON objects (``where``: which probe, for the message)."""
    record = check_mapping(record, where, file=file)
    check_mapping(record.get("intervals"), f"{where}, `intervals`", file=file)
    for relation, row in check_mapping(record.get("per_relation"), f"{where}, `per_relation`", file=file).items():
        check_mapping(row, f"{where}, `per_relation` {relation!r}", file=file)
    return record


def check_entries(entries: object, k: int, *, file: Path) -> list[dict]:
    """The per-corpus checkpoint records of a recipe or sweep point, each with acc@``k`` at every step (and, where
    recorded, its per-relation table and intervals as JSON objects)."""
    if not isinstance(entries, list) or not entries:
        raise MedlamaInputError("no checkpoint probes recorded: run `medlama recipe --probe-checkpoints` (or "
                                "`medlama sweep`) to record acc@k at each rewiring step", file=file)
    for entry in entries:
        steps = entry.get("steps") if isinstance(entry, dict) else None
        if not isinstance(steps, dict) or not steps:
            raise MedlamaInputError("a corpus without checkpoint probes (`steps` expected)", file=file)
        for step, record in steps.items():
            if not str(step).isdigit() or not isinstance(record, dict) or not isinstance(record.get(f"acc@{k}"),
                                                                                          (int, float)):
                raise MedlamaInputError(f"corpus {entry.get('corpus')!r}, step {step!r}: no acc@{k} recorded (the "
                                        "run scored other cut-offs; give --k one of them)", file=file)
            check_step_record(record, f"corpus {entry.get('corpus')!r}, step {step!r}", file=file)
    if not common_steps(entries):
        raise MedlamaInputError("the corpora share no checkpoint step: nothing can be averaged over them", file=file)
    return entries


def common_steps(entries: Sequence[dict]) -> list[int]:
    """The steps every corpus reached, in order (a corpus still rewiring is not averaged where it is missing)."""
    return sorted(set.intersection(*({int(step) for step in entry["steps"]} for entry in entries)))


def _value(record: dict, key: str, relation: str | None) -> float | None:
    if relation is None:
        return record.get(key)
    return ((record.get("per_relation") or {}).get(relation) or {}).get(key)


def _interval(record: dict, key: str, relation: str | None) -> list[float] | None:
    """The recorded bootstrap interval of a micro acc@k (none per relation, nor for a macro average)."""
    found = (record.get("intervals") or {}).get(key) if relation is None else None
    return list(found) if isinstance(found, (list, tuple)) and len(found) == 2 else None


def series(entries: Sequence[dict], key: str, *, relation: str | None = None, base: dict | None = None) -> list[dict]:
    """``[{"step", "mean", "std", "values", "interval"}, ...]`` of ``key`` (``acc@1``, ``acc@10_macro``...) over
    the corpora at each common step (of ``relation``, or overall), led by step 0, the un-rewired model ``base``.
    ``std``: over the corpora (none for one value); ``interval``: with one value, its recorded 95% bootstrap
    interval over queries (micro acc@k only), the spread there is then."""
    out = []
    if base is not None and _value(base, key, relation) is not None:
        out.append({"step": 0, "mean": _value(base, key, relation), "std": None, "values": [_value(base, key, relation)],
                    "interval": _interval(base, key, relation)})
    for step in common_steps(entries):
        records = [entry["steps"][str(step)] for entry in entries]
        values = [_value(record, key, relation) for record in records]
        if any(v is None for v in values):
            continue
        mean, std = sample_mean_std(values)
        out.append({"step": step, "mean": mean, "std": std, "values": values,
                    "interval": _interval(records[0], key, relation) if len(records) == 1 else None})
    return out


def top_relations(entries: Sequence[dict], key: str, top: int) -> list[str]:
    """The ``top`` relations by :data:`TOP_RULE` (ties broken by name)."""
    last = str(common_steps(entries)[-1])
    relations = sorted(set.intersection(*(set(entry["steps"][last].get("per_relation") or {}) for entry in entries)))
    means = {rel: sample_mean_std([_value(entry["steps"][last], key, rel) for entry in entries])[0]
             for rel in relations}
    return sorted(relations, key=lambda rel: (-means[rel], rel))[:top]


def draw_series(ax, points: Sequence[dict], *, label: str | None = None, color=None) -> None:
    """A mean line in percent with its spread shaded: the standard deviation over corpora, or for a single value
    its bootstrap interval (where recorded)."""
    steps = [p["step"] for p in points]
    means = [100 * p["mean"] for p in points]
    line, = ax.plot(steps, means, marker="o", markersize=3, label=label, color=color)
    low = [100 * (p["mean"] - p["std"]) if p["std"] is not None else 100 * (p.get("interval") or [p["mean"]] * 2)[0]
           for p in points]
    high = [100 * (p["mean"] + p["std"]) if p["std"] is not None else 100 * (p.get("interval") or [p["mean"]] * 2)[1]
            for p in points]
    ax.fill_between(steps, low, high, alpha=0.25, color=line.get_color(), linewidth=0)
    ax.set_xticks(sorted(set(steps)) if len(set(steps)) <= 12 else ax.get_xticks())  # steps are whole numbers
    ax.set_ylim(bottom=0)


def _model_key(identity: object) -> object:
    """What names a base model across machines: a folder's content hash, a Hub id with its revision."""
    if not isinstance(identity, dict):
        return identity
    return identity.get("sha256") or (identity.get("id"), identity.get("revision"))


def _read_run(folder: Path) -> tuple[Path, dict, dict | None, dict]:
    """``(file, record, step-0 record, what must agree)`` of a recipe output or of a sweep point's folder
    (``points/<key>``: its ``point.json``, with step 0, the query set and the base model from the sweep's
    ``sweep.json``). What must agree, to average the folders' corpora: the query set, the data, the base model (by
    content) and the rewiring config (its model aside, compared by content; the corpus is what varies)."""
    if (folder / POINT_FILE).is_file():
        file = folder / POINT_FILE
        record = read_record(file, what="a finished point of `medlama sweep`")
        sweep = read_record(folder.parent.parent / SWEEP_FILE, what="the sweep the point belongs to")
        if not isinstance(record, dict) or not isinstance(sweep, dict):
            raise MedlamaInputError("not the record of a sweep point", file=file)
        plan = check_mapping(sweep.get("plan"), "`plan`", file=folder.parent.parent / SWEEP_FILE)
        base = check_step_record(sweep.get("base"), "`base`", file=folder.parent.parent / SWEEP_FILE) or None
        query_set, data = plan.get("query_set"), check_mapping(plan.get("data"), "`plan.data`", file=file)
        model = check_mapping(plan.get("sweep"), "`plan.sweep`", file=file).get("model")
    else:
        file = folder / RESULTS_FILE
        record = read_record(file, what="the output folder of `medlama recipe --probe-checkpoints` (or a sweep point)")
        if not isinstance(record, dict) or not isinstance(record.get("runs"), list):
            raise MedlamaInputError("not the results.json of `medlama recipe`", file=file)
        first = check_mapping(record["runs"][0] if record["runs"] else None, "runs[0]", file=file)
        base = ({**check_mapping(first.get("metrics"), "runs[0].metrics", file=file),
                 "intervals": check_mapping(first.get("intervals"), "runs[0].intervals", file=file),
                 "per_relation": check_mapping(first.get("per_relation"), "runs[0].per_relation", file=file)}
                if first else None)
        provenance = check_mapping(record.get("provenance"), "`provenance`", file=file)
        query_set, data = record.get("query_set"), check_mapping(provenance.get("data"), "`provenance.data`", file=file)
        models = provenance.get("models")
        model = models[0] if isinstance(models, list) and models else None
    config = {key: value for key, value in check_mapping(record.get("rewire_config"), "`rewire_config`",
                                                         file=file).items() if key != "model"}
    agree = {"query set": query_set, "data": data.get("sha256") or data.get("fingerprint"),
             "base model": _model_key(model), "rewiring config": config}
    return file, record, base, agree


def load_recipe(folders: Sequence[Path], k: int) -> tuple[list[dict], dict | None, list[dict], str]:
    """The checkpoint records of the recipe outputs (or sweep points) ``folders``, one or more of the same
    queries, the un-rewired model's record (step 0), each record file as a source, and the query set's name.
    A folder whose query set, data, base model or rewiring config (:func:`_read_run`) differs from the first's is
    refused, naming both folders and the field: only the corpus may differ among what is averaged."""
    entries, sources, base, first_agree, first_folder = [], [], None, None, None
    for folder in map(Path, folders):
        file, record, first, agree = _read_run(folder)
        if first_agree is None:
            first_agree, first_folder = agree, folder
        for field, value in agree.items():
            if value != first_agree[field]:
                shown = (", ".join(sorted(k for k in {*value, *first_agree[field]}
                                          if value.get(k) != first_agree[field].get(k)))
                         if field == "rewiring config" else f"{value} against {first_agree[field]}")
                raise MedlamaInputError(f"another {field} than {first_folder}'s ({shown}): its corpora cannot be "
                                        "averaged with the others; draw each apart", file=file)
        entries += check_entries(record.get("checkpoints"), k, file=file)
        base = base if base is not None else first
        sources.append(source_record(file, record))
    return entries, base, sources, str(first_agree["query set"])


def steps_figure(folders: Sequence[Path], out: Path, *, k: int = 1, top: int = 9, overwrite: bool = False,
                 argv: Sequence[str] | None = None) -> tuple[Path, Path]:
    """Draw figure 4 from recipe outputs into ``out`` (PNG) and its JSON (an existing figure is refused unless
    ``overwrite``)."""
    check_png(Path(out), overwrite=overwrite)
    entries, base, sources, query_set = load_recipe(folders, k)
    key = f"acc@{k}"
    relations = top_relations(entries, key, top)
    panels = {"micro average": series(entries, key, base=base)}
    panels.update({rel: series(entries, key, relation=rel, base=base) for rel in relations})
    columns = min(5, len(panels))
    rows = -(-len(panels) // columns)
    fig, axes = subplots(rows, columns, width=3.2 * columns, height=2.6 * rows)
    for ax, (name, points) in zip(axes.flat, panels.items()):
        draw_series(ax, points)
        ax.set_title(name, fontsize=8)
        ax.set_xlabel("rewiring step", fontsize=7)
        ax.set_ylabel(f"{key} (%)", fontsize=7)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    corpora = len(entries)
    caption = (f"{query_set}: {key} over rewiring steps, mean over {corpora} rewiring corpora (shaded: {STD_METHOD}); "
               f"step 0 is the un-rewired model; panels: the micro average and {TOP_RULE.replace('acc@k', key)} "
               f"(top {len(relations)}).")
    data = {"k": k, "query_set": query_set, "corpora": [entry.get("corpus") for entry in entries],
            "spread": STD_METHOD, "top_rule": TOP_RULE, "panels": panels}
    return write_figure(fig, out, figure="rewire-then-probe figure 4",
                        title=f"{query_set}\n{key} over rewiring steps, mean ± std over {corpora} corpora",
                        caption=caption, data=data, sources=sources, settings={"k": k, "top": top}, argv=argv)
