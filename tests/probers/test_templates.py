"""Templates as a run dimension (``medlama probe --templates``, ``medlama.probe(templates=...)``) on the real
MedLAMA build, with the bundled encoder (retrieval) and a tiny masked LM (mask-average):

* each template's run is exactly the probe of a file holding that template alone;
* the ensemble is the ranking by the sum of the score arrays of those independent probes (``all_scores``);
* the release set's ``human_prompt`` run is the plain probe (the ``query_human`` column);
* best-of, mean and spread are what the runs' own per-relation acc@k give, recomputed here;
* results.json records which template made which run (the file's SHA-256, the texts), the table shows it,
  ``compare`` pairs each run with the first run of its own template and ``report`` shows the summary.
"""

from __future__ import annotations

import csv
import hashlib
import json
import statistics
from pathlib import Path

import numpy as np
import pytest

import medlama
from medlama.analysis import CompareSettings
from medlama.cli import main
from medlama.reports import ReportSettings, report_record

RELATION, OTHER = "associated_morphology_of", "may_treat"
TEMPLATES = {RELATION: ["[X] is associated morphology of [Y] .", "The morphology of [X] is [Y] ."],
             OTHER: ["[X] may treat [Y] .", "[Y] can be treated with [X] ."]}
LIMIT = 4
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]  # the real MedLAMA build


def write_csv(path, templates):
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["relation", "template"])
        for relation, texts in templates.items():
            writer.writerows([relation, text] for text in texts)
    return path


def write_jsonl(path, templates):
    path.write_text("".join(json.dumps({"relation": r, "template": t}) + "\n" for r, ts in templates.items()
                            for t in ts), encoding="utf-8")
    return path


@pytest.fixture(scope="module", autouse=True)
def candidate_vectors_once():
    """The templates' probes rank the same candidates with the same encoder: their vectors are encoded once and
    served from the embedding cache after (the cache itself is tested in test_embedding_cache.py)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEDLAMA_EMBEDDING_CACHE", "1")
        yield


@pytest.fixture(scope="module")
def tiny_mlm(make_tiny_bert):
    return make_tiny_bert("templates-mlm", mlm=True)


@pytest.fixture(scope="module", params=["retrieval", "mask-average"])
def swept(request, medlama_dir, tiny_mlm, tmp_path_factory):
    """``(method, model, results of the two-template probe, [results of each template's file alone])``."""
    method = request.param
    model = None if method == "retrieval" else str(tiny_mlm)
    folder = tmp_path_factory.mktemp(f"templates-{method}")
    options = dict(method=method, relations=[RELATION, OTHER], limit=LIMIT, log_all_scores=True)
    both = medlama.probe(model, medlama_dir, templates=write_csv(folder / "both.csv", TEMPLATES), **options)
    alone = [medlama.probe(model, medlama_dir, templates=write_jsonl(
        folder / f"t{j}.jsonl", {r: [ts[j]] for r, ts in TEMPLATES.items()}), **options) for j in range(2)]
    return method, model, both, alone


def test_each_template_run_is_the_probe_of_that_template_alone(swept):
    method, model, both, alone = swept
    label = "bundled" if method == "retrieval" else Path(model).name
    assert [r.label for r in both] == [f"{label} T1", f"{label} T2", f"{label} ensemble"]
    for j, (swept_run, (single, single_ensemble)) in enumerate(zip(both, alone)):
        assert single.label == f"{label} T1"
        assert swept_run.predictions == single.predictions and swept_run.metrics == single.metrics
        for a, b in zip(swept_run.ranking.pools, single.ranking.pools):
            np.testing.assert_array_equal(a.scores, b.scores)
        record = swept_run.data["template"]
        assert record["name"] == f"T{j + 1}" and record["set"] == "both.csv"
        assert record["per_relation"] == {r: ts[j] for r, ts in TEMPLATES.items()}
        # the texts fed to the model are the template's (its words around [X] and [Y])
        for text, relation in zip(swept_run.ranking.inputs, swept_run.relations):
            words = TEMPLATES[relation][j].replace("[Y]", "[X]").split("[X]")
            assert all(part.strip() in text for part in words)
        assert single_ensemble.predictions == single.predictions  # the ensemble of one template is itself


def test_the_ensemble_ranks_by_the_sum_of_independent_score_arrays(swept):
    _, _, both, alone = swept
    ensemble = both[-1]
    singles = [single for single, _ in alone]
    hits = {k: [] for k in ensemble.ks}
    for q, gold in enumerate(ensemble.gold):
        candidates = list(singles[0].ranking.pools[q].candidates)
        assert all(list(s.ranking.pools[q].candidates) == candidates for s in singles)
        total = sum(np.asarray(s.ranking.pools[q].scores, dtype=np.float64) for s in singles)
        order = sorted(range(len(candidates)), key=lambda i: (-total[i], i))  # ties: pool order
        names = [candidates[i] for i in order[:len(ensemble.predictions[q])]]
        assert ensemble.predictions[q] == names
        np.testing.assert_allclose(ensemble.ranking.pools[q].scores, total)
        for k in ensemble.ks:
            hits[k].append(any(name in gold for name in names[:k]))
    for k in ensemble.ks:
        assert ensemble.acc(k) == pytest.approx(sum(hits[k]) / len(hits[k]))


def test_the_summary_is_what_the_runs_per_relation_give(swept):
    _, _, both, _ = swept
    summary = both[0].extra["templates"]
    assert all(r.extra["templates"] == summary for r in both)
    runs = both[:2]
    per = [r.per_relation() for r in runs]
    relations = sorted(per[0])
    n = {rel: per[0][rel]["queries"] for rel in relations}
    total = sum(n.values())
    for k in runs[0].ks:
        best = {rel: max(p[rel][f"acc@{k}"] for p in per) for rel in relations}
        mean = {rel: statistics.fmean(p[rel][f"acc@{k}"] for p in per) for rel in relations}
        assert summary["best_of"][f"acc@{k}"] == pytest.approx(sum(n[r] * best[r] for r in relations) / total)
        assert summary["best_of"][f"acc@{k}_macro"] == pytest.approx(statistics.fmean(best.values()))
        assert summary["mean"][f"acc@{k}"] == pytest.approx(statistics.fmean(r.acc(k) for r in runs))
        assert summary["mean"][f"acc@{k}_macro"] == pytest.approx(statistics.fmean(mean.values()))
        assert summary["ensemble"][f"acc@{k}"] == both[-1].acc(k)
        for rel in relations:
            values = [p[rel][f"acc@{k}"] for p in per]
            assert summary["spread"][rel][f"acc@{k}"] == pytest.approx(
                {"min": min(values), "max": max(values), "std": statistics.stdev(values)})
            chosen = summary["best_of"]["per_relation"][rel][f"acc@{k}"]
            assert chosen["value"] == best[rel] and per[int(chosen["template"][1:]) - 1][rel][f"acc@{k}"] == best[rel]
        assert summary["per_template"]["T2"][f"acc@{k}"] == runs[1].acc(k)
    assert "test set" in summary["best_of"]["caveat"]


def test_the_release_set_is_the_prompt_columns(medlama_dir):
    options = dict(relations=[RELATION, OTHER], limit=LIMIT)
    default, human = medlama.probe(None, medlama_dir, templates="release", **options)
    plain = medlama.probe(None, medlama_dir, **options)  # --prompt-column query_human, the default
    other = medlama.probe(None, medlama.load_medlama("hard", data=medlama_dir), templates="release", **options)
    assert [default.label, human.label] == ["bundled default_prompt", "bundled human_prompt"]
    assert human.predictions == plain.predictions and human.metrics == plain.metrics
    assert human.data["template"] == {"set": "release", "sha256": human.data["template"]["sha256"],
                                      "name": "human_prompt", "column": "query_human"}
    assert other[0].predictions == default.predictions  # a loaded Dataset gives the same queries
    summary = human.extra["templates"]
    assert summary["ensemble"]["run"] is None and "--log-all-scores" in summary["ensemble"]["note"]


def test_probe_compare_and_report_of_template_runs(medlama_dir, make_tiny_bert, tmp_path, capsys):
    file = write_csv(tmp_path / "templates.csv", TEMPLATES)
    tiny = make_tiny_bert("templates-encoder")
    outs = [tmp_path / "bundled", tmp_path / "tiny"]
    for out, model in zip(outs, ([], ["--model", str(tiny)])):
        assert main(["probe", "--data", str(medlama_dir), "--relations", RELATION, OTHER, "--limit", "3",
                     "--templates", str(file), "--log-all-scores", *model, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "bundled: acc@k per template (%), templates.csv" in printed and "best-of (chosen on test)" in printed
    assert "spread of acc@10 across templates per relation" in " ".join(printed.split())
    runs = json.loads((outs[0] / "results.json").read_text())
    assert [r["label"] for r in runs] == ["bundled T1", "bundled T2", "bundled ensemble"]
    sha = hashlib.sha256(file.read_bytes()).hexdigest()
    assert [r["data"]["template"]["sha256"] for r in runs] == [sha] * 3
    assert runs[1]["data"]["template"]["per_relation"] == {r: ts[1] for r, ts in TEMPLATES.items()}
    assert runs[2]["data"]["template"]["of"] == ["T1", "T2"]
    assert runs[0]["extra"]["templates"]["templates"][1] == {"name": "T2", "run": "bundled T2"}

    assert main(["compare", *map(str, outs), "--json", "--resamples", "100"]) == 0
    record = json.loads(capsys.readouterr().out)
    pairs = [(c["run"], c["baseline"]) for c in record["comparisons"]]
    tiny_label = json.loads((outs[1] / "results.json").read_text())[0]["label"].rsplit(" ", 1)[0]
    assert pairs == [("bundled T2", "bundled T1"), ("bundled ensemble", "bundled T1"),
                     (f"{tiny_label} T1", "bundled T1"), (f"{tiny_label} T2", "bundled T2"),
                     (f"{tiny_label} ensemble", "bundled ensemble")]
    assert record["comparisons"][3]["templates"]["run"] == {"set": "templates.csv", "sha256": sha, "name": "T2"}
    assert main(["compare", *map(str, outs), "--resamples", "100"]) == 0
    table = capsys.readouterr().out
    assert "Difference from each run's baseline" in table and "T2 vs T1" in table

    page = tmp_path / "page.html"
    assert main(["report", *map(str, outs), "--out", str(page), "--resamples", "100"]) == 0
    data = report_record(outs, ReportSettings(out=page), CompareSettings(resamples=100))
    assert [t["folder"] for t in data["templates"]] == ["bundled", "tiny"]
    assert data["templates"][0]["summary"] == runs[0]["extra"]["templates"]
    assert [entry["label"] for entry in data["leaderboard"]] == [r["label"] for r in runs] + [
        f"{tiny_label} T1", f"{tiny_label} T2", f"{tiny_label} ensemble"]
