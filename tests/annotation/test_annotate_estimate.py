"""``medlama annotate estimate``: the whole run's expert acc@k by prediction-powered inference, checked against
ppi_py (Angelopoulos et al.'s own library) and a hand computation, and its intervals' coverage by simulation;
``annotate export --strategy`` and the probabilities it records."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import medlama
from annotation_runs import rated_sheet
from estimate_runs import write_scored_run
from medlama.analysis.runs import Run
from medlama.annotation.design import capped_probabilities, systematic_sample, uncertainty_sample
from medlama.annotation.estimate import stratified_estimate, weighted_estimate
from medlama.annotation.sheet import sample_queries
from medlama.cli import main
from medlama.core.errors import MedlamaInputError


def expert(row: dict) -> str:
    """A rater who accepts every gold answer and every ``near-`` name of the may_treat queries."""
    name = row["prediction"]
    return "5" if name.startswith("gold-") or (name.startswith("near-") and "may_treat" in name) else "2"


@pytest.fixture
def rated(tmp_path):
    run = write_scored_run(tmp_path / "run")
    assert main(["annotate", "export", str(run), "--out", str(tmp_path / "sheet"), "--queries", "10", "--k", "3"]) == 0
    return run, tmp_path / "sheet", rated_sheet(tmp_path / "sheet", tmp_path / "alice.csv", expert)


def test_the_estimate_is_ppi_by_relation(rated, capsys):
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

    run, sheet, ratings = rated
    assert main(["annotate", "estimate", str(run), "--sheet", str(sheet), str(ratings), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    rows = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    manifest = json.loads((sheet / "manifest.json").read_text())
    rated_ids = [q["id"] for q in manifest["queries"]]
    assert manifest["sampling"]["strategy"] == "stratified" and manifest["sampling"]["population"] == 50
    assert manifest["sampling"]["inclusion"] == [5 / 30 if i.startswith("may_treat") else 5 / 20 for i in rated_ids]
    entry = record["runs"]["run"]["alice"]
    assert (entry["design"], entry["population"], entry["rated"]) == ("stratified", 50, 10)
    for c in (1, 3):
        total = se2 = 0.0
        for relation, size in (("may_treat", 30), ("may_prevent", 20)):
            mine = [r for r in rows if r["relation"] == relation]
            f_all = np.array([r["gold"][0] in r["predictions"][:c] for r in mine], dtype=float)
            sample = [r for r in mine if r["id"] in rated_ids]
            f = np.array([r["gold"][0] in r["predictions"][:c] for r in sample], dtype=float)
            y = np.array([any(expert({"prediction": p}) == "5" for p in r["predictions"][:c]) for r in sample],
                         dtype=float)
            theta = float(ppi_mean_pointestimate(y, f, f_all, lam=1)[0])
            low, high = ppi_mean_ci(y, f, f_all, alpha=0.05, lam=1)
            total += size / 50 * theta
            se2 += (size / 50) ** 2 * ((high[0] - low[0]) / (2 * 1.959963984540054)) ** 2
        assert entry["acc"][str(c)]["value"] == pytest.approx(total)
        assert entry["acc"][str(c)]["se"] == pytest.approx(se2 ** 0.5)
    assert record["level"] == 0.95 and record["method"]["design"] == "stratified"
    assert record["inputs"]["ratings"][0]["sha256"]


def test_one_relation_is_ppi_itself():
    from ppi_py import ppi_mean_ci

    rng = np.random.default_rng(3)
    f = (rng.uniform(size=200) < 0.3).astype(float)
    rated = sorted(rng.choice(200, size=40, replace=False).tolist())
    y = np.where(rng.uniform(size=40) < 0.2, 1 - f[rated], f[rated])
    found = stratified_estimate(f, ["r"] * 200, rated, y, level=0.9)
    low, high = ppi_mean_ci(y, f[rated], f, alpha=0.1, lam=1)
    assert found.interval == pytest.approx((max(0, low[0]), min(1, high[0])))


def test_the_table(rated, capsys):
    run, sheet, ratings = rated
    assert main(["annotate", "estimate", str(run), "--sheet", str(sheet), str(ratings), "--level", "0.9"]) == 0
    out = capsys.readouterr().out
    assert "90% CLT intervals" in out and "stratified sheet: 10 of 50 queries rated" in out


def test_the_api_is_the_command(rated, capsys):
    run, sheet, ratings = rated
    assert main(["annotate", "estimate", str(run), "--sheet", str(sheet), str(ratings), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    record = medlama.annotate_estimate(run, sheet=sheet, ratings=[ratings])
    assert record["runs"] == printed["runs"]


def test_a_relation_with_one_rated_query_is_refused(tmp_path):
    run = write_scored_run(tmp_path / "run")
    medlama.annotate_export(run, out=tmp_path / "sheet", queries=3, k=3)
    ratings = rated_sheet(tmp_path / "sheet", tmp_path / "alice.csv", expert)
    with pytest.raises(MedlamaInputError, match="1 rated query of .*needs 2 or more in every relation"):
        medlama.annotate_estimate(run, sheet=tmp_path / "sheet", ratings=[ratings])


def test_the_uncertainty_sheet_records_its_probabilities(tmp_path):
    run = write_scored_run(tmp_path / "run")
    manifest = medlama.annotate_export(run, out=tmp_path / "sheet", queries=12, k=3, strategy="uncertainty")
    sampling = manifest["sampling"]
    assert sampling["strategy"] == "uncertainty" and len(sampling["inclusion"]) == 12
    assert all(0 < p <= 1 for p in sampling["inclusion"])
    ratings = rated_sheet(tmp_path / "sheet", tmp_path / "alice.csv", expert)
    record = medlama.annotate_estimate(run, sheet=tmp_path / "sheet", ratings=[ratings])
    assert record["runs"]["run"]["alice"]["design"] == "uncertainty"


def test_capped_probabilities_sum_to_the_sample_and_stay_proportional():
    pi = capped_probabilities([10, 1, 1, 1, 1], 3)
    assert pi.sum() == pytest.approx(3) and pi[0] == 1 and pi[1:] == pytest.approx([0.5] * 4)


def test_systematic_sampling_draws_each_unit_with_its_probability():
    pi = capped_probabilities(np.arange(1, 21, dtype=float), 6)
    rng = np.random.default_rng(0)
    counts = np.zeros(20)
    for _ in range(4000):
        drawn = systematic_sample(pi, rng)
        assert len(drawn) == 6 == len(set(drawn))
        counts[drawn] += 1
    # each unit's draws within 4.5 binomial standard deviations of 4000 pi
    assert np.all(np.abs(counts - 4000 * pi) <= 4.5 * np.sqrt(4000 * pi * (1 - pi)) + 1)


REPETITIONS, LEVEL = 500, 0.95
#: The covering intervals of 500 at 95% lie in 475 -/+ 3.5 binomial standard deviations (4.87) unless the
#: coverage is off; seeded, so the count is the same on every machine.
COVERED = (458, 492)


def test_stratified_intervals_cover_at_the_stated_level():
    sizes, p, q = {"a": 300, "b": 200, "c": 100}, {"a": 0.2, "b": 0.4, "c": 0.6}, {"a": 0.1, "b": 0.3, "c": 0.2}
    strata = [name for name, size in sizes.items() for _ in range(size)]
    truth = sum(size / 600 * (p[h] * 0.9 + (1 - p[h]) * q[h]) for h, size in sizes.items())
    rng = np.random.default_rng(2023)
    covered = 0
    for rep in range(REPETITIONS):
        f = np.array([rng.uniform() < p[h] for h in strata], dtype=float)
        y_all = np.where(f == 1, rng.uniform(size=600) < 0.9, rng.uniform(size=600) < np.array([q[h] for h in strata]))
        rated = sample_queries(strata, 60, seed=rep)
        low, high = stratified_estimate(f, strata, rated, y_all[rated].astype(float), LEVEL).interval
        covered += low <= truth <= high
    assert COVERED[0] <= covered <= COVERED[1], covered


def test_uncertainty_intervals_cover_at_the_stated_level(tmp_path):
    rng = np.random.default_rng(2024)
    covered = 0
    for rep in range(REPETITIONS):
        f = (rng.uniform(size=600) < 0.3).astype(float)
        u = rng.uniform(0.01, 0.99, size=600)
        flip = rng.uniform(size=600) < 0.5 * u  # the expert disagrees with UMLS more where the model is unsure
        y_all = np.where(flip, 1 - f, f)
        run = Run("run", tmp_path, {}, ids=[str(i) for i in range(600)], relations=["r"] * 600,
                  rows=[{"scores": [float(np.log(1 - x)), float(np.log(x))]} for x in u])
        picked, pi = uncertainty_sample(run, list(range(600)), 60, seed=rep)
        low, high = weighted_estimate(f, picked, y_all[picked], [pi[i] for i in picked], LEVEL).interval
        covered += low <= 0.3 + 0.4 * 0.25 <= high  # E[Y] = p + (1 - 2p) E[flip], E[flip] = 1/4
    assert COVERED[0] <= covered <= COVERED[1], covered
