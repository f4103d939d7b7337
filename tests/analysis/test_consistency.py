"""Inverse consistency (``medlama consistency``): counts checked by hand on a run the test writes, the
intervals against the bootstrap they name, the declared pairs against the release, and a real probe of the
MedLAMA build with the bundled encoder."""

from __future__ import annotations

import ast
import csv
import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import medlama
from browser import browser, wait_for  # noqa: F401 - tests/helpers: the fixture and its wait
from consistency_runs import EXPECTED, R, R_INV, write_fact_run
from medlama.cli import main
from medlama.core.intervals import bootstrap_mean_ci
from medlama.loaders.medlama_release import INVERSE_PAIRS

PAIR = f"{R} <-> {R_INV}"


def test_the_counts_are_the_hand_counted_ones(tmp_path, capsys):
    run = write_fact_run(tmp_path / "run")
    assert main(["consistency", str(run), "--json", "--resamples", "200"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record == json.loads((run / "consistency.json").read_text())  # printed is what was written
    (only,) = record["runs"]
    assert only["pairs"] == [PAIR] and only["not_probed"] == ["disease_mapped_to_gene <-> gene_associated_with_disease"]
    assert [(f["subject"], f["object"]) for f in only["facts"]] == [("G1", "P1"), ("G2", "P2"), ("G3", "P3")]
    for k, counts in EXPECTED.items():
        entry = only["by_k"][str(k)][PAIR]
        assert entry == only["by_k"][str(k)]["all"]  # one pair probed: all is that pair
        assert entry["facts"] == 3
        assert {name: entry[name]["count"] for name in counts} == counts
        assert all(entry[name]["value"] == pytest.approx(count / 3) for name, count in counts.items())
    k1, k3 = only["by_k"]["1"][PAIR], only["by_k"]["3"][PAIR]
    # right in r at k=1: G1 only, and its product's query misses it at 1: P(r'|r) = 0/1; P(r|r') = 0/2
    assert (k1["backward_given_forward"]["count"], k1["backward_given_forward"]["of"]) == (0, 1)
    assert k1["backward_given_forward"]["interval"] is None  # one fact: no interval
    assert (k1["forward_given_backward"]["count"], k1["forward_given_backward"]["of"]) == (0, 2)
    assert (k3["backward_given_forward"]["count"], k3["backward_given_forward"]["of"]) == (2, 2)
    assert (k3["forward_given_backward"]["count"], k3["forward_given_backward"]["of"]) == (2, 3)


def test_intervals_are_the_seeded_bootstrap_of_the_facts(tmp_path):
    run = write_fact_run(tmp_path / "run")
    record = medlama.consistency(run, resamples=300, seed=7, level=0.9)
    entry = record["runs"][0]["by_k"]["3"]["all"]
    options = {"resamples": 300, "seed": 7, "level": 0.9}
    assert entry["both"]["interval"] == list(bootstrap_mean_ci([1.0, 1.0, 0.0], **options))
    assert entry["forward_given_backward"]["interval"] == list(bootstrap_mean_ci([1.0, 1.0, 0.0], **options))
    assert record["method"]["settings"] == options
    assert record["inputs"][0]["predictions_sha256"]


def test_the_terminal_table(tmp_path, capsys):
    run = write_fact_run(tmp_path / "run")
    assert main(["consistency", str(run), "--out", str(tmp_path / "c.json"), "--resamples", "100"]) == 0
    out = capsys.readouterr()
    assert "at k = 3" in out.out and "(2/3)" in out.out and "100.0 [100.0, 100.0] (2/2)" in out.out
    assert not (run / "consistency.json").exists() and (tmp_path / "c.json").is_file()
    assert f"wrote {tmp_path / 'c.json'}" in out.err


def test_an_earlier_record_is_kept_unless_overwrite(tmp_path):
    run = write_fact_run(tmp_path / "run")
    medlama.consistency(run, resamples=100)
    with pytest.raises(medlama.core.errors.MedlamaInputError, match="exists; give --overwrite"):
        medlama.consistency(run, resamples=100)
    assert medlama.consistency(run, resamples=100, overwrite=True)["runs"][0]["by_k"]["1"]["all"]["facts"] == 3


def test_the_api_refuses_a_misspelt_setting(tmp_path):
    run = write_fact_run(tmp_path / "run")
    with pytest.raises(medlama.core.errors.MedlamaInputError, match="resamples"):
        medlama.consistency(run, resample=100)


def _release_facts(release: Path) -> dict[str, set[tuple[str, str]]]:
    facts: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for file in sorted((release / "2021AA").glob("*_1000.csv")):
        with open(file, encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle):
                for tail in ast.literal_eval(row["tail_cuis_list"]):
                    if tail != row["head_cui"]:
                        facts[row["rel"]].add((row["head_cui"], tail))
    return facts


def test_the_declared_pairs_are_the_release_s_reversed_facts(medlama_source):
    """Every two distinct relations sharing a reversed fact are declared, and nothing else is."""
    facts = _release_facts(medlama_source)
    shared = {(r, q) for r in facts for q in facts if r < q and facts[r] & {(o, s) for s, o in facts[q]}}
    assert shared == {tuple(sorted(pair)) for pair in INVERSE_PAIRS}


def test_the_card_lists_the_pairs(medlama_dir):
    card = (medlama_dir / "README.md").read_text(encoding="utf-8")
    for forward, backward in INVERSE_PAIRS:
        assert f"`{forward}` <-> `{backward}`" in card


@pytest.mark.slow
def test_a_real_probe_of_both_directions(medlama_dir, tmp_path, capsys):
    """The bundled encoder probes the gene <-> gene product pair of the hard set; the facts paired are the
    hard set's reversed facts (counted here from the built folder), and each outcome is what the rows say."""
    from datasets import load_dataset

    out = tmp_path / "probe"
    assert main(["probe", "--data", str(medlama_dir), "--relations", R, R_INV, "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert all({"head_cui", "head_name", "answer_cuis"} <= set(row) for row in rows)
    data = load_dataset(str(medlama_dir), "hard", split="test")
    by_key = defaultdict(list)  # a concept asked under two of its names has two queries
    for query in data:
        if query["relation"] in (R, R_INV):
            by_key[(query["relation"], query["head_cui"])].append(query)
    expected = sorted((s, o, q["id"], p["id"]) for (rel, s), queries in list(by_key.items()) if rel == R
                      for q in queries for o in q["answer_cuis"] if o != s for p in by_key.get((R_INV, o), ())
                      if s in p["answer_cuis"])
    record = medlama.consistency(out, resamples=200)
    (run,) = record["runs"]
    assert sorted((f["subject"], f["object"], f["forward_query"], f["backward_query"]) for f in run["facts"]) == \
        expected and expected
    top = {row["id"]: row["predictions"] for row in rows}
    for k in run["ks"]:
        right = np.array([[f["object_name"] in top[f["forward_query"]][:k], f["subject_name"] in
                           top[f["backward_query"]][:k]] for f in run["facts"]])
        entry = run["by_k"][str(k)][PAIR]
        assert entry["both"]["count"] == int((right[:, 0] & right[:, 1]).sum())
        assert entry["neither"]["count"] == int((~right[:, 0] & ~right[:, 1]).sum())
        assert entry["forward"]["count"] == int(right[:, 0].sum())
        assert [f[f"right@{k}"] for f in run["facts"]] == right.tolist()


PAGE_DATA = re.compile(r'<script type="application/json" id="page-data">(.*?)</script>', re.S)


def test_the_report_page_shows_the_run_s_record(tmp_path):
    run = write_fact_run(tmp_path / "run")
    plain = medlama.report(run, out=tmp_path / "plain.html", resamples=100)
    assert json.loads(PAGE_DATA.search(plain.read_text()).group(1))["consistency"] == []
    record = medlama.consistency(run, resamples=100)
    page = medlama.report(run, out=tmp_path / "page.html", resamples=100)
    shown = json.loads(PAGE_DATA.search(page.read_text()).group(1))["consistency"]
    assert [entry["label"] for entry in shown] == ["run"]
    assert shown[0]["by_k"] == record["runs"][0]["by_k"]
    assert 'id="consistency-section"' in page.read_text()


def test_the_report_refuses_a_record_of_other_predictions(tmp_path):
    run = write_fact_run(tmp_path / "run")
    medlama.consistency(run, resamples=100)
    write_fact_run(run, drop="input")  # the run's rows change after the record was written
    with pytest.raises(medlama.core.errors.MedlamaInputError, match="consistency.json: the consistency record is of "
                                                                    "other predictions"):
        medlama.report(run, out=tmp_path / "page.html", resamples=100)


def test_the_page_draws_the_section_in_a_browser(tmp_path, browser):
    run = write_fact_run(tmp_path / "run")
    bare = medlama.report(run, out=tmp_path / "bare.html", resamples=100)
    medlama.consistency(run, resamples=100)
    page = medlama.report(run, out=tmp_path / "page.html", resamples=100)
    browser.get(bare.as_uri())
    wait_for(browser, lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "true")
    assert not browser.find_elements("id", "consistency-section")  # no record: no section
    browser.get(page.as_uri())
    wait_for(browser, lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "true")
    rows = browser.execute_script("return Array.from(document.querySelectorAll('#consistency tr')).map("
                                  "(tr) => Array.from(tr.children).map((c) => c.textContent));")
    assert rows[0][:4] == ["run", "k", "pair", "facts"]
    by_k = {(row[1], row[2]): row for row in rows[1:]}
    assert set(by_k) == {(k, p) for k in ("1", "3") for p in (PAIR, "all")}
    assert by_k[("3", PAIR)][3] == "3" and by_k[("3", PAIR)][4].endswith("(2/3)")  # both: 2 of 3
    assert by_k[("3", PAIR)][8].startswith("100.00") and by_k[("3", PAIR)][8].endswith("(2/2)")  # P(r'|r)
    assert by_k[("1", PAIR)][8] == "0.00 (0/1)"  # one fact conditioned on: no interval
