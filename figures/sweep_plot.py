"""Figure 9 and appendix A.2-A.3 of Rewire-then-Probe, from a sweep's records (:mod:`medlama.figures.sweep`):
acc@k over rewiring steps, one line per value of a swept setting (mask ratio, learning rate, tau, corpus size),
the mean over the corpora with its standard deviation shaded.

One column of panels per setting that took more than one value; its other settings are held at their reference
value (the first value given for each), so every line of a panel differs in that setting alone; the record names
the reference. Rows: acc@1 and acc@10 (micro). Step 0 is the un-rewired model.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from medlama.core.errors import MedlamaInputError
from medlama.figures.output import STD_METHOD, check_png, read_record, source_record, subplots, write_figure
from medlama.figures.steps import check_entries, check_mapping, check_step_record, draw_series, series
from medlama.figures.settings import AXES, POINT_FILE, SWEEP_FILE

#: The names the panels give the settings.
LABELS = {"learning_rate": "learning rate", "tau": "tau", "mask_ratio": "mask ratio", "corpus_size": "corpus size"}


def load_sweep(folder: Path, ks: Sequence[int]) -> tuple[dict, list[dict], list[dict]]:
    """The sweep's record, its finished points' records and the files they came from."""
    record = read_record(Path(folder) / SWEEP_FILE, what="the output folder of `medlama sweep`")
    if not isinstance(record, dict) or not isinstance(record.get("points"), list):
        raise MedlamaInputError("not the sweep.json of `medlama sweep`", file=Path(folder) / SWEEP_FILE)
    for field in ("grid", "plan"):
        check_mapping(record.get(field), f"`{field}`", file=Path(folder) / SWEEP_FILE)
    check_step_record(record.get("base"), "`base`", file=Path(folder) / SWEEP_FILE)
    points, sources = [], [source_record(Path(folder) / SWEEP_FILE, record)]
    for key in record["points"]:
        file = Path(folder) / "points" / str(key) / POINT_FILE
        point = read_record(file, what="a finished point of the sweep (rerun `medlama sweep` to finish it)")
        settings = point.get("point") if isinstance(point, dict) else None
        if not isinstance(settings, dict) or any(not isinstance(settings.get(n), (int, float)) for n, _, _ in AXES):
            raise MedlamaInputError(f"not a sweep point's record (`point` with {', '.join(n for n, _, _ in AXES)} "
                                    "expected)", file=file)
        for k in ks:
            check_entries(point.get("checkpoints") if isinstance(point, dict) else None, k, file=file)
        points.append(point)
        sources.append(source_record(file))
    if not points:
        raise MedlamaInputError("no finished point yet: run `medlama sweep` into it first", file=Path(folder) / SWEEP_FILE)
    return record, points, sources


def panels(record: dict, points: Sequence[dict]) -> tuple[dict, list[str]]:
    """The reference point (each setting's first value that a finished point has) and the swept settings."""
    grid = record.get("grid") or {}
    reference = {}
    for name, _, _ in AXES:
        have = [p["point"][name] for p in points]
        reference[name] = next((v for v in grid.get(name, []) if v in have), have[0])
    swept = [name for name, _, _ in AXES if len({p["point"][name] for p in points}) > 1] or ["mask_ratio"]
    return reference, swept


def sweep_figure(folder: Path, out: Path, *, ks: Sequence[int] = (1, 10), overwrite: bool = False,
                 argv: Sequence[str] | None = None) -> tuple[Path, Path]:
    """Draw figure 9 / A.2-A.3 from the sweep in ``folder`` into ``out`` (PNG) and its JSON (an existing figure
    is refused unless ``overwrite``)."""
    check_png(Path(out), overwrite=overwrite)
    record, points, sources = load_sweep(folder, ks)
    reference, swept = panels(record, points)
    base = record.get("base")
    fig, axes = subplots(len(ks), len(swept), width=max(6.0, 4.6 * len(swept)), height=3.2 * len(ks))
    data: dict = {"reference": reference, "spread": STD_METHOD, "query_set": (record.get("plan") or {}).get("query_set"),
                  "panels": {}}
    for column, name in enumerate(swept):
        lines = [p for p in points if all(p["point"][o] == reference[o] for o, _, _ in AXES if o != name)]
        lines.sort(key=lambda p: p["point"][name])
        data["panels"][name] = {}
        for row, k in enumerate(ks):
            ax = axes[row][column]
            key = f"acc@{k}"
            drawn = data["panels"][name].setdefault(key, {})
            for point in lines:
                values = series(point["checkpoints"], key, base=base)
                drawn[f"{point['point'][name]:g}"] = {"key": point["key"], "corpora": len(point["checkpoints"]),
                                                      "series": values}
                draw_series(ax, values, label=f"{LABELS[name]} {point['point'][name]:g}")
            ax.set_xlabel("rewiring step", fontsize=8)
            ax.set_ylabel(f"{key} (%)", fontsize=8)
            ax.set_title(f"{LABELS[name]} ({key})", fontsize=9)
            ax.legend(fontsize=7)
    corpora = {len(p["checkpoints"]) for p in points}
    fixed = ", ".join(f"{LABELS[n]} {reference[n]:g}" for n, _, _ in AXES)
    caption = (f"{data['query_set']}: acc@k over rewiring steps for each swept setting (columns), the others held at "
               f"the reference point ({fixed}); lines: mean over {'/'.join(map(str, sorted(corpora)))} corpora, "
               f"shaded: {STD_METHOD}; step 0 is the un-rewired model.")
    title = (f"{data['query_set']}\nsweep over {', '.join(LABELS[n] for n in swept)} "
             f"(mean ± std over {'/'.join(map(str, sorted(corpora)))} corpora)")
    return write_figure(fig, out, figure="rewire-then-probe figure 9 / appendix A.2-A.3", title=title,
                        caption=caption, data=data, sources=sources, settings={"ks": list(ks)}, argv=argv)
