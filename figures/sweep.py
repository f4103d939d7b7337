"""The sweep driver of Rewire-then-Probe's appendix (figure 9, A.2-A.3, table 8): rewire then probe over a grid
of learning rate, tau, mask ratio and corpus size, every point on every corpus, probing each checkpoint.

Layout of the output folder (owned by ``sweep``; an interrupted or extended sweep resumes there):

* ``sweep.json``: the plan every point shares (model, corpora and their SHA-256, steps, batch, probe settings,
  data identity), the grid asked for, the un-rewired model's probe (step 0) and the finished points;
* ``points/<key>/point.json``: one finished grid point (its settings, its rewiring config, per corpus each
  checkpoint's acc@k overall and per relation, and provenance); ``points/<key>/rewired-<i>-<corpus>``: its models.

A point whose ``point.json`` is there is not rerun; a rewiring interrupted mid-point resumes from its last
checkpoint (:func:`medlama.trainers.trainer.rewire`). A rerun with another plan is refused (its points would not
be comparable), naming what differs; a rerun with a larger grid runs only the new points.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from medlama.core.atomic import lock_directory, write_owner
from medlama.core.checksums import sha256_of
from medlama.core.errors import MedlamaInputError
from medlama.core.models import resolve_model
from medlama.core.provenance import model_identity, provenance
from medlama.core.settings import as_dict
from medlama.figures.output import read_record
from medlama.runs.result import step_record
from medlama.figures.settings import AXES, POINT_FILE, SWEEP_FILE, SWEEP_KIND, SweepSettings, point_key
from medlama.runs.outputs import write_results
from medlama.probers.query_set import QuerySet
from medlama.probers.retrieval import RetrievalSettings
from medlama.runs.model_probe import probe_checkpoints, probe_model
from medlama.trainers.config import QUICK_PRESET, RewireConfig

__all__ = ["run_sweep"]

def _plan(settings: SweepSettings, queries: QuerySet, probe_settings: RetrievalSettings) -> dict:
    """What every point shares; a resumed sweep must share it."""
    shared = {key: value for key, value in as_dict(settings).items() if key not in {name for name, _, _ in AXES}}
    shared["corpus"] = [{"name": Path(c).name, "sha256": sha256_of(c)} for c in settings.corpus]
    shared["model"] = model_identity(settings.model)  # by content (a local path means nothing elsewhere)
    return {"sweep": shared, "probe": as_dict(probe_settings), "data": queries.info, "query_set": queries.name,
            "queries": len(queries)}


def _check_plan(out: Path, plan: dict) -> dict | None:
    """The earlier ``sweep.json`` of ``out`` (none: a new sweep); one with another plan is refused."""
    if not (out / SWEEP_FILE).is_file():
        return None
    earlier = read_record(out / SWEEP_FILE, what="the sweep's record")
    before = (earlier or {}).get("plan") or {}
    for part in ("sweep", "probe", "data", "query_set", "queries"):
        old, new = before.get(part), plan[part]
        if isinstance(old, dict) and isinstance(new, dict):
            differ = sorted(key for key in {*old, *new} if old.get(key) != new.get(key))
        else:
            differ = [] if old == new else [part]
        if differ:
            raise MedlamaInputError(f"this sweep was run with another {part} setting ({', '.join(differ)}); its "
                                    "points would not be comparable: give the same settings to extend it, or "
                                    "another --out", file=out / SWEEP_FILE)
    return earlier


def run_sweep(settings: SweepSettings, queries: QuerySet, out: str | Path, *,
              probe_settings: RetrievalSettings, device: str | None = None, argv: Sequence[str] | None = None,
              progress: Callable[[str], None] = print) -> dict:
    """Run every grid point of ``settings`` not yet finished in ``out`` (module docstring); returns the sweep's
    record (``sweep.json``), whose ``points`` name every finished point's folder."""
    # trainers.trainer loads (it imports sentence_transformers, torch) when a sweep runs, not when this is imported
    from medlama.trainers.trainer import rewire

    out = Path(out)
    points = settings.points()
    configs = {point_key(p): settings.config(p) for p in points}  # every point checked before any work
    plan = _plan(settings, queries, probe_settings)
    with lock_directory(out):
        earlier = _check_plan(out, plan)
        write_owner(out, SWEEP_KIND)
        base = (earlier or {}).get("base")
        if base is None:
            progress(f"probing the un-rewired model (step 0) on {queries.name} ({len(queries):,} queries)")
            base = step_record(probe_model("retrieval", resolve_model(settings.model), probe_settings, queries,
                                           label="un-rewired", device=device))
        done = [key for key in (earlier or {}).get("points", []) if (out / "points" / key / POINT_FILE).is_file()]
        record = {"plan": plan, "grid": {name: list(getattr(settings, name)) for name, _, _ in AXES},
                  "base": base, "points": done}
        write_results(out / SWEEP_FILE, {**record, "provenance": provenance(settings=plan, models=[], argv=argv)})
        for index, point in enumerate(points, start=1):
            key = point_key(point)
            if (out / "points" / key / POINT_FILE).is_file():
                progress(f"[{index}/{len(points)}] {key}: finished earlier, kept")
                record["points"] = sorted({*record["points"], key})
                continue
            _run_point(point, configs[key], settings, queries, out / "points" / key, rewire=rewire,
                       probe_settings=probe_settings, device=device, argv=argv,
                       progress=lambda text: progress(f"[{index}/{len(points)}] {key}: {text}"))
            record["points"] = sorted({*record["points"], key})
            write_results(out / SWEEP_FILE, {**record, "provenance": provenance(settings=plan, models=[], argv=argv)})
    return record


def _run_point(point: dict, config: RewireConfig, settings: SweepSettings, queries: QuerySet, folder: Path, *,
               rewire, probe_settings: RetrievalSettings, device: str | None, argv: Sequence[str] | None,
               progress: Callable[[str], None]) -> Path:
    entries = []
    for index, corpus in enumerate(settings.corpus):
        target = folder / f"rewired-{index}-{Path(corpus).name}"
        progress(f"rewiring on {Path(corpus).name}")
        started = time.perf_counter()
        rewired = rewire(corpus, target, config, preset=QUICK_PRESET)
        seconds = time.perf_counter() - started
        steps = {str(step): step_record(probed) for step, probed in
                 probe_checkpoints(rewired.path, probe_settings, queries, name=Path(corpus).name, device=device,
                                   progress=progress).items()}
        entries.append({"corpus": Path(corpus).name, "rewire_seconds": round(seconds, 3), "steps": steps})
    record = {"point": point, "key": point_key(point), "rewire_config": config.to_dict(),
              "checkpoints": entries,
              "provenance": provenance(settings={"point": point, "rewire": config.to_dict(),
                                                 "probe": as_dict(probe_settings)},
                                       data=queries.info, models=[], argv=argv)}
    return write_results(folder / POINT_FILE, record)  # last: a point.json means the point is finished
