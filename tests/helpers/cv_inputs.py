"""The tiny inputs of the context-variance tests: a MedLAMA-shaped folder, MIMIC-III notes and a PMC article.

Used by the build tests (``tests/datasets/context_variance``), the UCM tests and the publishing tests;
importable as ``cv_inputs`` because ``tests/helpers`` is on pytest's ``pythonpath``. The corpora are read
by the project's own loaders; the folder has the schema and configs ``medlama build medlama`` writes.
"""

from __future__ import annotations

import csv
from pathlib import Path

from medlama.loaders.mimic_notes import MIMIC_COLUMNS

FINDING, TREAT = "disease_may_have_finding", "may_treat"
PROMPTS = {FINDING: "[X] may have finding [Y] .", TREAT: "[X] may treat [Y] ."}
# (id, relation, head cui, head name, [(answer cui, answer name)], is_hard)
ROWS = [
    (f"{FINDING}-0001", FINDING, "C001", "asthma", [("C101", "wheeze"), ("C102", "cough")], True),
    (f"{FINDING}-0002", FINDING, "C002", "influenza",
     [("C103", "fever"), ("C102", "cough"), ("C106", "runny nose"), ("C107", "shortness of breath")], True),
    (f"{FINDING}-0003", FINDING, "C003", "gastritis", [("C104", "heartburn"), ("C105", "nausea")], False),
    # the head is one of its own answers (MedLAMA has such rows); "dyspnea" names C107 differently
    (f"{FINDING}-0004", FINDING, "C004", "pneumonia", [("C004", "pneumonia"), ("C107", "dyspnea")], True),
    (f"{TREAT}-0001", TREAT, "C201", "salbutamol", [("C001", "asthma")], True),
    (f"{TREAT}-0002", TREAT, "C202", "oseltamivir", [("C002", "influenza")], True),
]
NOTES = [
    "Asthma flare. The patient reports wheeze and cough at night, no rash, mild heartburn. "
    "Given salbutamol for asthma.",
    "Influenza: fever, cough, runny nose and dyspnea.",
    "Nothing to see here.",
    "Pneumonia with dyspnea; nausea since Monday.",
]
ARTICLE = """<?xml version="1.0" encoding="UTF-8"?>
<article><front><article-meta>
  <article-id pub-id-type="pmc">1234567</article-id>
  <title-group><article-title>Oseltamivir in influenza</article-title></title-group>
  <abstract><p>Oseltamivir is used for influenza. Patients with influenza had fever and nausea,
  some a cough.</p></abstract>
</article-meta></front>
<body><p>No heartburn was reported.</p></body></article>
"""


def write_medlama_folder(root: Path, rows: list[tuple] | None = None, prompts: dict[str, str] | None = None) -> Path:
    """A MedLAMA-shaped folder (configs ``hard`` and ``full``, split ``test``, the builder's schema) of ``rows``
    (default :data:`ROWS`; as they are: id, relation, head cui, head name, answers, is_hard) with ``prompts``
    (default :data:`PROMPTS`)."""
    from datasets import Dataset

    from medlama.datasets.medlama import features as medlama_features

    root.mkdir(parents=True, exist_ok=True)
    prompts = PROMPTS if prompts is None else prompts
    rows = [{"id": i, "relation": rel, "head_cui": head, "head_name": name, "answer_cuis": [c for c, _ in answers],
             "answer_names": [n for _, n in answers], "answer_count": len(answers),
             "query_human": prompts[rel].replace("[X]", name), "query_default": prompts[rel].replace("[X]", name),
             "avg_match": 0.0, "avg_rouge_l": 0.0, "is_hard": hard}
            for i, rel, head, name, answers, hard in (ROWS if rows is None else rows)]
    for config, subset in (("full", rows), ("hard", [r for r in rows if r["is_hard"]])):
        (root / "data" / config).mkdir(parents=True, exist_ok=True)
        Dataset.from_list(subset, features=medlama_features()).to_parquet(str(root / "data" / config / "all.parquet"))
    (root / "README.md").write_text(
        "---\nconfigs:\n" + "".join(f"- config_name: {c}\n  data_files:\n  - split: test\n"
                                    f"    path: data/{c}/*.parquet\n" for c in ("hard", "full"))
        + "---\n# tiny MedLAMA\n", encoding="utf-8")
    return root


def write_corpora(root: Path) -> tuple[Path, Path]:
    """``NOTEEVENTS.csv`` (one note flagged ISERROR, skipped) and a folder with one JATS article."""
    root.mkdir(parents=True, exist_ok=True)
    notes = root / "NOTEEVENTS.csv"
    with open(notes, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(MIMIC_COLUMNS)
        for i, text in enumerate(NOTES, 1):
            writer.writerow([i, 100 + i, 200 + i, "2150-01-01", "", "", "Discharge summary", "Report", "", "", text])
        writer.writerow([99, 1, 1, "", "", "", "Nursing", "", "", "1", "Asthma with wheeze, erroneous note."])
    pmc = root / "pmc"
    pmc.mkdir(exist_ok=True)
    (pmc / "PMC1234567.nxml").write_text(ARTICLE, encoding="utf-8")
    return notes, pmc


def write_mimic_iv_jsonl(root: Path) -> Path:
    """The notes as a MIMIC-IV-Note ``discharge.csv`` converted to JSON Lines (its columns as keys): what a user
    who converts MIMIC before reading it with ``--corpus NAME:jsonl:PATH`` has."""
    import json

    root.mkdir(parents=True, exist_ok=True)
    path = root / "notes.jsonl"
    with open(path, "w", encoding="utf-8") as handle:
        for i, text in enumerate(NOTES, 1):
            handle.write(json.dumps({"note_id": f"1000000{i}-DS-{i}", "subject_id": f"1000000{i}",
                                     "hadm_id": f"2000000{i}", "note_type": "DS", "note_seq": i,
                                     "charttime": "2150-01-01 00:00:00", "storetime": "", "text": text}) + "\n")
    return path


def release_rows(release: Path, relation: str, limit: int) -> tuple[list[tuple], dict[str, str]]:
    """The first ``limit`` rows of one relation of the MedLAMA release (``2021AA/<relation>_1000.csv``, its
    ``prompts.csv`` human prompt), as :func:`write_medlama_folder` takes them (all marked hard)."""
    import ast

    with open(release / "prompts.csv", newline="", encoding="utf-8") as handle:
        prompts = {row["pid"]: row["human_prompt"] for row in csv.DictReader(handle)}
    [path] = (release / "2021AA").glob(f"{relation}_1000.csv")
    rows = []
    with open(path, newline="", encoding="utf-8") as handle:
        for number, row in enumerate(csv.DictReader(handle)):
            if number == limit:
                break
            answers = list(zip(ast.literal_eval(row["tail_cuis_list"]), ast.literal_eval(row["tail_names_list"])))
            rows.append((f"{relation}-{number:04d}", relation, row["head_cui"], row["head_name"], answers, True))
    return rows, {relation: prompts[relation]}


def write_probe_folder(root: Path, prompts: dict[str, str] | None = None, rows: list[tuple] | None = None) -> Path:
    """The MedLAMA-shaped folder of :func:`write_medlama_folder` (with ``rows`` and ``prompts``) with its ``full``
    candidate set (heads and answers), as ``medlama probe --data ROOT --config full`` reads it (by default 6
    queries of 2 relations)."""
    from datasets import Dataset

    rows = ROWS if rows is None else rows
    root = write_medlama_folder(root, rows=rows, prompts=prompts)
    names = sorted({row[3] for row in rows} | {name for row in rows for _, name in row[4]})
    (root / "candidates").mkdir()
    Dataset.from_dict({"name": names}).to_parquet(str(root / "candidates" / "full.parquet"))
    readme = (root / "README.md").read_text(encoding="utf-8")
    (root / "README.md").write_text(readme.replace(
        "configs:\n", "configs:\n- config_name: candidates_full\n  data_files:\n  - split: test\n"
                      "    path: candidates/full.parquet\n", 1), encoding="utf-8")
    return root
