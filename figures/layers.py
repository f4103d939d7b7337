"""Figure 7 of Rewire-then-Probe: acc@k of each layer on each relation, as a map (one per model probed).

The numbers come from a ``medlama probe --layers`` output: each layer is a run of its ``results.json`` (its
settings name the ``layer``) and its per-query hits are in ``predictions.jsonl``, read and checked by
:func:`medlama.analysis.runs.load_runs` (a hand-edited hit is refused). Each cell is the share of the
relation's queries with a gold answer in the top k, with its 95% percentile-bootstrap interval over those queries
(:func:`medlama.core.intervals.bootstrap_group_cis`) in the figure's JSON; the last column is the micro average.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from medlama.core.errors import MedlamaInputError
from medlama.core.intervals import DEFAULT_LEVEL, DEFAULT_RESAMPLES, DEFAULT_SEED, bootstrap_group_cis, bootstrap_mean_ci
from medlama.figures.output import check_png, source_record, subplots, write_figure
from medlama.analysis.runs import load_runs
from medlama.runs.outputs import RESULTS_FILE

#: How every cell's interval is computed, as the record says it.
INTERVAL = {"kind": "percentile bootstrap over the relation's queries", "level": DEFAULT_LEVEL,
            "resamples": DEFAULT_RESAMPLES, "seed": DEFAULT_SEED}


def layer_maps(folders: Sequence[Path], k: int) -> dict[str, dict]:
    """``{model: {"layers": [...], "relations": [...], "acc": [[...]], "intervals": [[...]], "queries": {...}}}``
    of the layer runs in ``folders`` (rows: layers in order; columns: relations, then ``micro``)."""
    # a layer sweep's runs are labelled "<model> L<layer>" (a plain run records its one layer too, -1)
    runs = [run for run in load_runs(folders, at_least=1, purpose="a layer map")
            if isinstance(layer := (run.record.get("settings") or {}).get("layer"), int)
            and run.label.endswith(f" L{layer}")]
    if not runs:
        raise MedlamaInputError("no run probed a chosen layer: give the output of `medlama probe --layers ...`",
                                file=Path(folders[0]) / RESULTS_FILE)
    models: dict[str, dict[int, object]] = {}
    for run in runs:
        layer = run.record["settings"]["layer"]
        model = run.label[:-len(f" L{layer}")]
        if k not in run.hits:
            raise MedlamaInputError(f"run {run.label!r} scored acc@{sorted(run.hits)} but not acc@{k}; give --k one of "
                                    "them", file=run.folder / RESULTS_FILE)
        if layer in models.setdefault(model, {}):
            raise MedlamaInputError(f"two runs of model {model!r} probed layer {layer}", file=run.folder / RESULTS_FILE)
        models[model][layer] = run
    maps = {}
    for model, by_layer in models.items():
        layers = sorted(by_layer)
        relations = sorted(set(by_layer[layers[0]].relations))
        acc, intervals = [], []
        for layer in layers:
            run = by_layer[layer]
            if sorted(set(run.relations)) != relations:
                raise MedlamaInputError(f"run {run.label!r} probed other relations than layer {layers[0]}",
                                        file=run.folder / RESULTS_FILE)
            hits = run.hits[k].astype(float)
            labels = np.asarray(run.relations, dtype=object)
            cis = bootstrap_group_cis(hits, run.relations)
            acc.append([float(hits[labels == rel].mean()) for rel in relations] + [float(hits.mean())])
            intervals.append([list(cis[rel]) if cis[rel] else None for rel in relations]
                             + [list(ci) if (ci := bootstrap_mean_ci(hits)) else None])
        first = by_layer[layers[0]]
        maps[model] = {"layers": layers, "relations": relations + ["micro"], "acc": acc, "intervals": intervals,
                       "queries": {rel: first.relations.count(rel) for rel in relations} | {"micro": len(first.ids)}}
    return maps


def layers_figure(folders: Sequence[Path], out: Path, *, k: int = 1, overwrite: bool = False,
                  argv: Sequence[str] | None = None) -> tuple[Path, Path]:
    """Draw figure 7 from ``medlama probe --layers`` outputs into ``out`` (PNG) and its JSON (an existing figure
    is refused unless ``overwrite``)."""
    check_png(Path(out), overwrite=overwrite)
    maps = layer_maps(folders, k)
    columns = max(len(m["relations"]) for m in maps.values())
    fig, axes = subplots(len(maps), 1, width=max(7.0, 0.55 * columns + 3),
                         height=sum(1.2 + 0.35 * len(m["layers"]) for m in maps.values()) + 2.5)
    for ax, (model, entry) in zip(axes.flat, maps.items()):
        values = 100 * np.asarray(entry["acc"])
        image = ax.imshow(values, aspect="auto", cmap="viridis", vmin=0)
        for (row, column), value in np.ndenumerate(values):
            ax.text(column, row, f"{value:.1f}", ha="center", va="center", fontsize=6,
                    color="white" if value < values.max() / 2 else "black")
        ax.set_yticks(range(len(entry["layers"])), [str(layer) for layer in entry["layers"]], fontsize=7)
        ax.set_xticks(range(len(entry["relations"])), entry["relations"], rotation=60, ha="right", fontsize=6)
        ax.set_ylabel("layer")
        ax.set_title(model, fontsize=8)
        fig.colorbar(image, ax=ax, label=f"acc@{k} (%)")
    caption = (f"acc@{k} of each layer (rows) on each relation (columns; the last is the micro average over "
               f"queries); each cell's 95% bootstrap interval over its queries is in the figure's JSON.")
    sources = [source_record(Path(folder) / RESULTS_FILE) for folder in folders]
    return write_figure(fig, out, figure="rewire-then-probe figure 7", title=f"acc@{k} per layer and relation",
                        caption=caption, data={"k": k, "interval": INTERVAL, "models": maps}, sources=sources,
                        settings={"k": k}, argv=argv)
