"""Reading a probe's output folder in tests: per-query predictions are in ``predictions.jsonl``, not in
``results.json``."""

from __future__ import annotations

import json
from pathlib import Path


def predictions(out: Path, run: str | None = None) -> list[dict]:
    """The rows of ``out/predictions.jsonl`` (of the run labelled ``run``, when given)."""
    rows = [json.loads(line) for line in (Path(out) / "predictions.jsonl").read_text().splitlines()]
    return [row for row in rows if run is None or row["run"] == run]
