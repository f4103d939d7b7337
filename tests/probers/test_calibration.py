"""Calibration of the top-1 prediction (``medlama.runs.calibration``): the confidence is the softmax over the
query's scored pool at the top-1 candidate, the Brier score its top-1 binary form, the ECE 15 equal-width bins.

Checked on real probe outputs (the bundled encoder on a few MedLAMA queries, through ``medlama probe``): each
query's confidence against a softmax of every candidate's score (``scores.parquet`` of the same probe with
``--log-all-scores``, by SciPy), the Brier score against scikit-learn's ``brier_score_loss`` and the ECE
against a loop written here; on masked-likelihood (a tiny BERT) against the softmax of the prober's own
scores; and on synthetic cases: perfectly calibrated (ECE 0, Brier the outcomes' variance), and over-confident.
A method that scores no pool records why there is no calibration, never a number."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.special import softmax
from sklearn.metrics import brier_score_loss

from medlama.cli import main
from medlama.probers.registry import make_prober
from medlama.runs.calibration import BINS, brier_score, expected_calibration_error, reliability
from medlama.runs.queries import QuerySource, load_queries

from browser import browser  # noqa: F401 - tests/helpers: the headless Chromium fixture
from probe_outputs import predictions  # tests/helpers: per-query rows of predictions.jsonl

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)

RELATION = "associated_morphology_of"


def hand_ece(confidences, hits, bins: int = BINS) -> float:
    """ECE written out: bin m holds the confidences in (m/bins, (m+1)/bins] (0 in the first); the sum of each
    bin's share of queries times |its accuracy - its mean confidence|."""
    total, n = 0.0, len(confidences)
    for m in range(bins):
        low, high = m / bins, (m + 1) / bins
        inside = [i for i, c in enumerate(confidences) if (low < c <= high) or (m == 0 and c == 0)]
        if inside:
            accuracy = sum(hits[i] for i in inside) / len(inside)
            confidence = sum(confidences[i] for i in inside) / len(inside)
            total += len(inside) / n * abs(accuracy - confidence)
    return total


@pytest.fixture(scope="module")
def bundled_runs(medlama_dir, tmp_path_factory):
    """The bundled encoder (retrieval) on 25 hard-set queries of one relation against its pool: once ranked by
    the top-k search (its default), once with every candidate's score logged."""
    out = tmp_path_factory.mktemp("calibration")
    flags = ["probe", "--data", str(medlama_dir), "--relations", RELATION, "--candidates", "relation",
             "--limit", "25", "--preset", "cosine"]
    assert main([*flags, "--out", str(out / "top")]) == 0
    assert main([*flags, "--log-all-scores", "--out", str(out / "all")]) == 0
    return out / "top", out / "all"


def test_confidence_brier_and_ece_of_a_real_probe_equal_independent_computations(bundled_runs, capsys):
    top, every = bundled_runs
    (result,) = json.loads((top / "results.json").read_text())
    rows = predictions(top, result["label"])
    table = pd.read_parquet(every / "scores.parquet")
    # the confidence: the softmax of every candidate's score (the logged ones), at the top-1 prediction; retrieval
    # sums the names outside its top from the float32 product it ranks with (about 1e-7 of a score: rel 1e-6)
    for row in rows:
        scores = table[table["id"] == row["id"]]
        probabilities = softmax(scores["score"].to_numpy(dtype=np.float64))
        expected = probabilities[list(scores["candidate"]).index(row["predictions"][0])]
        assert row["confidence"] == pytest.approx(expected, rel=1e-6, abs=1e-12)
    assert [r["confidence"] for r in predictions(every)] == pytest.approx([r["confidence"] for r in rows], rel=1e-6)
    confidences = [row["confidence"] for row in rows]
    hits = [row["hit@1"] for row in rows]
    calibration = result["calibration"]
    assert calibration["queries"] == len(rows) == 25 and calibration["queries_without_confidence"] == 0
    assert calibration["acc@1"] == result["metrics"]["acc@1"]
    assert calibration["mean_confidence"] == pytest.approx(np.mean(confidences), rel=1e-12)
    assert calibration["brier"] == pytest.approx(brier_score_loss(hits, confidences), rel=1e-12, abs=1e-15)
    assert calibration["ece"] == pytest.approx(hand_ece(confidences, hits), rel=1e-12, abs=1e-15)
    assert calibration["per_relation"][RELATION]["ece"] == pytest.approx(calibration["ece"], rel=1e-12)
    assert sum(entry["queries"] for entry in calibration["reliability"]) == 25
    assert len(calibration["reliability"]) == BINS == calibration["method"]["bins"]
    assert "top-1 binary" in calibration["method"]["brier"]
    assert (top / "reliability.png").stat().st_size > 0


def test_masked_likelihood_confidence_is_the_softmax_of_its_scores(make_tiny_bert, medlama_tiny, tmp_path):
    model = make_tiny_bert("calibration-mlm", mlm=True)
    out = tmp_path / "pll"
    assert main(["probe", "--data", str(medlama_tiny), "--config", "full", "--model", str(model), "--device", "cpu",
                 "--method", "masked-likelihood", "--out", str(out)]) == 0
    queries = load_queries(QuerySource(data=str(medlama_tiny), config="full"))
    scores = make_prober("masked-likelihood", model, device="cpu").scores(queries)
    rows = predictions(out)
    for row, query_scores in zip(rows, scores):
        top = list(queries.candidates).index(row["predictions"][0])
        assert row["confidence"] == pytest.approx(softmax(query_scores)[top], rel=1e-9)
    (result,) = json.loads((out / "results.json").read_text())
    hits = [row["hit@1"] for row in rows]
    assert result["calibration"]["brier"] == pytest.approx(brier_score_loss(hits, [r["confidence"] for r in rows]))


def test_a_perfectly_calibrated_set_has_no_calibration_error():
    # in every bin, the share of hits is exactly the confidence (no confidence on a bin edge)
    confidences, hits = [], []
    for confidence, n in ((0.1, 20), (0.25, 40), (0.5, 10), (0.8, 30), (1.0, 5)):
        confidences += [confidence] * n
        hits += [True] * round(confidence * n) + [False] * (n - round(confidence * n))
    assert expected_calibration_error(confidences, hits) == pytest.approx(0.0, abs=1e-12)
    assert hand_ece(confidences, hits) == pytest.approx(0.0, abs=1e-12)
    variance = np.mean([c * (1 - c) for c in confidences])  # a calibrated forecast's Brier: the outcomes' variance
    assert brier_score(confidences, hits) == pytest.approx(variance, rel=1e-12)
    assert brier_score(confidences, hits) == pytest.approx(brier_score_loss(hits, confidences), rel=1e-12)
    # over-confident: 0.9 everywhere, half right
    assert expected_calibration_error([0.9] * 10, [True, False] * 5) == pytest.approx(0.4)
    assert [b["queries"] for b in reliability([0.0, 1 / 15 + 1e-9, 1.0], [False, True, True])][:2] == [1, 1]


def test_random_confidences_equal_the_hand_loop_and_sklearn():
    rng = np.random.default_rng(7)
    confidences = rng.random(500)
    hits = rng.random(500) < confidences ** 2
    assert expected_calibration_error(confidences, hits) == pytest.approx(hand_ece(confidences, hits), rel=1e-12)
    assert brier_score(confidences, hits) == pytest.approx(brier_score_loss(hits, confidences), rel=1e-12)


def test_a_method_without_pool_scores_records_why(tiny_gpt2, medlama_tiny, tmp_path, capsys):
    """causal-constrained decodes its answers, and causal-likelihood's best-first search scores only the
    candidates it reaches: no softmax over the pool, so no number, and the reason recorded and printed; the
    exhaustive search scores every candidate and has its calibration."""
    flags = ["probe", "--data", str(medlama_tiny), "--config", "full", "--model", str(tiny_gpt2)]
    for method, extra, why in (("causal-constrained", [], "does not score every candidate"),
                               ("causal-likelihood", ["--search", "best-first"], "--search exhaustive")):
        out = tmp_path / method
        assert main([*flags, "--method", method, *extra, "--out", str(out)]) == 0
        (result,) = json.loads((out / "results.json").read_text())
        assert set(result["calibration"]) == {"absent"} and why in result["calibration"]["absent"]
        assert all("confidence" not in row for row in predictions(out))
        assert not (out / "reliability.png").exists()
        assert why in capsys.readouterr().out.replace("\n", " ")
    out = tmp_path / "exhaustive"
    assert main([*flags, "--method", "causal-likelihood", "--search", "exhaustive", "--out", str(out)]) == 0
    (result,) = json.loads((out / "results.json").read_text())
    assert math.isfinite(result["calibration"]["ece"]) and (out / "reliability.png").exists()


@pytest.fixture(scope="module")
def two_pll_runs(make_tiny_bert, medlama_tiny, tmp_path_factory):
    """masked-likelihood with two PLL variants on the same queries: two calibrated runs to compare."""
    model = make_tiny_bert("calibration-compare", mlm=True)
    out = tmp_path_factory.mktemp("calibration-compare")
    for variant in ("original", "sentence-l2r"):
        assert main(["probe", "--data", str(medlama_tiny), "--config", "full", "--model", str(model), "--device",
                     "cpu", "--method", "masked-likelihood", "--pll", variant, "--label", variant,
                     "--out", str(out / variant)]) == 0
    return out / "original", out / "sentence-l2r"


def test_compare_gives_the_paired_bootstrap_difference_of_brier_and_ece(two_pll_runs, capsys):
    """The differences equal the two runs' own numbers subtracted; the Brier interval is the percentile
    bootstrap of the per-query differences, the ECE interval the same resamples binned again for both runs
    (both recomputed here from the rows, with the seed's draws)."""
    assert main(["compare", *map(str, two_pll_runs), "--json", "--resamples", "300", "--seed", "3"]) == 0
    record = json.loads(capsys.readouterr().out)["calibration"]
    rows = {folder.name: {r["id"]: r for r in predictions(folder)} for folder in two_pll_runs}
    ids = sorted(rows["original"])
    conf = {name: np.array([rows[name][q]["confidence"] for q in ids]) for name in rows}
    hits = {name: np.array([rows[name][q]["hit@1"] for q in ids], dtype=float) for name in rows}
    for entry, name in zip(record["leaderboard"], ("original", "sentence-l2r")):
        (result,) = json.loads((two_pll_runs[0].parent / name / "results.json").read_text())
        assert entry["brier"]["value"] == pytest.approx(result["calibration"]["brier"], rel=1e-12)
        assert entry["ece"]["value"] == pytest.approx(result["calibration"]["ece"], rel=1e-12, abs=1e-15)
    (diff,) = record["comparisons"]
    assert (diff["baseline"], diff["run"], diff["queries"]) == ("original", "sentence-l2r", len(ids))
    delta = (conf["sentence-l2r"] - hits["sentence-l2r"]) ** 2 - (conf["original"] - hits["original"]) ** 2
    assert diff["brier"]["difference"] == pytest.approx(delta.mean(), rel=1e-12, abs=1e-15)
    rng = np.random.default_rng(3)
    brier_means = [delta[rng.integers(0, len(ids), size=len(ids))].mean() for _ in range(300)]
    assert diff["brier"]["interval"] == pytest.approx(list(np.percentile(brier_means, [2.5, 97.5])), rel=1e-12)
    rng = np.random.default_rng(3)
    ece_differences = []
    for _ in range(300):
        picks = rng.integers(0, len(ids), size=len(ids))
        ece_differences.append(hand_ece(conf["sentence-l2r"][picks], hits["sentence-l2r"][picks])
                               - hand_ece(conf["original"][picks], hits["original"][picks]))
    assert diff["ece"]["difference"] == pytest.approx(
        hand_ece(conf["sentence-l2r"], hits["sentence-l2r"]) - hand_ece(conf["original"], hits["original"]), abs=1e-12)
    assert diff["ece"]["interval"] == pytest.approx(list(np.percentile(ece_differences, [2.5, 97.5])), abs=1e-12)
    assert "top-1 binary" in record["method"]["brier"]
    assert main(["compare", *map(str, two_pll_runs)]) == 0
    assert "Calibration: difference from original" in capsys.readouterr().out


def test_the_report_page_shows_compares_calibration(two_pll_runs, tmp_path, browser):
    """``medlama report``'s page carries compare's calibration record and shows it: each run's Brier and ECE
    with their intervals, and the paired differences."""
    import re

    from browser import wait_for  # tests/helpers
    from medlama.analysis import CompareSettings, compare_runs, load_runs

    page = tmp_path / "page.html"
    assert main(["report", *map(str, two_pll_runs), "--out", str(page), "--resamples", "100"]) == 0
    data = json.loads(re.search(r'<script type="application/json" id="page-data">(.*?)</script>',
                                page.read_text(), re.S).group(1))
    record = compare_runs(load_runs(two_pll_runs), CompareSettings(resamples=100))["calibration"]
    assert data["calibration"] == record
    browser.get(page.as_uri())
    wait_for(browser, lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "true")
    cells = browser.execute_script("return ['calibration', 'calibration-differences'].map((id) => Array.from("
                                   "document.querySelectorAll('#' + id + ' tr')).slice(1).map((tr) => "
                                   "Array.from(tr.cells).map((td) => td.textContent)))")
    for row, entry in zip(cells[0], record["leaderboard"], strict=True):
        brier, (low, high) = entry["brier"]["value"], entry["brier"]["interval"]
        assert row[0] == entry["label"] and row[2] == f"{brier:.4f} [{low:.4f}, {high:.4f}]"
    (row,) = cells[1]
    assert row[0] == "sentence-l2r" and row[3].startswith(f"{record['comparisons'][0]['ece']['difference']:+.4f}")
