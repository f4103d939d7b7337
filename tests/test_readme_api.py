"""The README's Python API example, run verbatim (the block after ``<!-- python-api -->``).

The only thing the test supplies is ``$MEDLAMA_DATA``: the session's MedLAMA build (the example's
documented way to name a built folder; unset, it would use the cache's build)."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def readme_block(marker: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(rf"<!-- {marker} -->\n```python\n(.*?)```", text, re.S)
    assert match, f"no python block after <!-- {marker} --> in README.md"
    return match.group(1)


def test_readme_python_api_example(medlama_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MEDLAMA_DATA", str(medlama_dir))
    monkeypatch.chdir(tmp_path)
    exec(compile(readme_block("python-api"), "README.md:python-api", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out
    assert re.search(r"hard\[may_treat\]\[first 200 per relation\]: acc@10 = \d+\.\d\d% \(95% CI \d+\.\d\d-\d+\.\d\d, 200 queries\)", printed)
    assert "hit@10" in printed
    runs = json.loads((tmp_path / "out/api-may_treat/results.json").read_text())
    assert len(runs) == 1  # the layout of `medlama probe --out`: a list of runs
    results = runs[0]
    assert results["metrics"]["num_queries"] == 200
    low, high = results["intervals"]["acc@10"]
    assert low <= results["metrics"]["acc@10"] <= high
    provenance = results["provenance"]
    assert provenance["data"]["release_commit"] and provenance["data"]["limit_per_relation"] == 200
    assert provenance["model"]["id"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert str(tmp_path) not in json.dumps(results) and str(medlama_dir) not in json.dumps(provenance)
    lines = (tmp_path / "out/api-may_treat/predictions.jsonl").read_text().splitlines()
    assert len(lines) == 200 and set(json.loads(lines[0])) >= {"id", "gold", "predictions", "hit@1", "hit@10"}


def test_the_public_functions_read_well_in_help():
    """``help(medlama.probe)`` and the others show plain names, never raw Sphinx roles (``:class:`~...```)."""
    import re

    import medlama

    for name in medlama.__all__:
        doc = getattr(medlama, name).__doc__ or ""
        assert not re.search(r":(class|func|mod|meth|data|attr|exc):`", doc), name
