"""Two small probe runs written by hand for the annotation tests, and ratings of their sheet given by hand.

Run ``base`` and run ``rewired`` predict three names for each of two queries (one relation each); the sheet
pools them into 4 + 5 = 9 predictions. The names hold markup and quotes, which the page and the sheet must show
as written and never run.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

MARKUP = '<img src=x onerror="window.__pwned=1">'
SCRIPT = "</script><script>window.__pwned=2</script>"
QUERIES = {
    "q1": {"relation": "may_treat", "input": f"aspirin may treat [Y] {SCRIPT}", "gold": ["pain", "fever"]},
    "q2": {"relation": "has_finding", "input": 'influenza has finding [Y] "quoted" & <b>bold</b>',
           "gold": ["cough", MARKUP]},
}
PREDICTIONS = {
    "base": {"q1": ["pain", "headache", '"rash" & <i>itch</i>'], "q2": ["sneeze", MARKUP, "fatigue"]},
    "rewired": {"q1": ["headache", "nausea", "pain"], "q2": ["cough", "sneeze", "=1+1"]},
}
#: Each rater's level for each (query, prediction) of the sheet.
RATINGS = {
    "alice": {("q1", "pain"): 5, ("q1", "headache"): 4, ("q1", '"rash" & <i>itch</i>'): 1, ("q1", "nausea"): 5,
              ("q2", "sneeze"): 2, ("q2", MARKUP): 3, ("q2", "fatigue"): 1, ("q2", "cough"): 5, ("q2", "=1+1"): 5},
    "bob": {("q1", "pain"): 5, ("q1", "headache"): 5, ("q1", '"rash" & <i>itch</i>'): 2, ("q1", "nausea"): 4,
            ("q2", "sneeze"): 1, ("q2", MARKUP): 5, ("q2", "fatigue"): 1, ("q2", "cough"): 4, ("q2", "=1+1"): 3},
    "carol": {("q1", "pain"): 4, ("q1", "headache"): 3, ("q1", '"rash" & <i>itch</i>'): 1, ("q1", "nausea"): 3,
              ("q2", "sneeze"): 2, ("q2", MARKUP): 5, ("q2", "fatigue"): 2, ("q2", "cough"): 5, ("q2", "=1+1"): 1},
}


def write_run(folder: Path, label: str, ks=(1, 3), *, predictions: dict[str, list[str]] | None = None) -> Path:
    """``folder`` as `medlama probe` lays out one run: ``results.json`` and ``predictions.jsonl`` (hits exact);
    ``predictions``: each query's names (default: :data:`PREDICTIONS` of ``label``)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = {"dataset": "medlama", "config": "hard", "fingerprint": "hand-made", "candidates": {"rule": "evaluated"}}
    (folder / "results.json").write_text(json.dumps([{"label": label, "metrics": {"k": list(ks), "match": "exact"},
                                                      "settings": {"method": "hand"}, "data": data}]))
    rows = []
    for qid, query in QUERIES.items():
        names = (predictions or PREDICTIONS[label])[qid]
        rows.append({"run": label, "id": qid, "relation": query["relation"], "gold": query["gold"],
                     "predictions": names, "input": query["input"],
                     **{f"hit@{k}": any(p in query["gold"] for p in names[:k]) for k in ks}})
    (folder / "predictions.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def write_runs(root: Path) -> list[Path]:
    return [write_run(root / "base", "base"), write_run(root / "rewired", "rewired")]


def rated_sheet(sheet_folder: Path, file: Path, rating) -> Path:
    """``sheet.csv`` with every row rated ``rating(row)``, saved to ``file`` as a spreadsheet saves it."""
    with open(sheet_folder / "sheet.csv", encoding="utf-8", newline="") as handle:
        table = list(csv.DictReader(handle))
    for row in table:
        row["rating"] = rating(row)
    with open(file, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    return file
