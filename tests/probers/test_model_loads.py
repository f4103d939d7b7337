"""A probe loads each model once: with learned prompts (``mask-predict --prompts``, whose base model is checked
before any ranking by the loaded model itself) and with templates (``--templates``: every template of a model
ranked by the one prober). And a templates probe into ``--out`` resumes as a plain probe does: killed after its
first template, the same command ranks only the templates left and writes what an uninterrupted run writes;
a rerun with other templates is refused, naming them. Loads are counted at ``from_pretrained``
(``tests/helpers/model_loads.py``); tiny BERTs on the 6-query MedLAMA-shaped folder (tests/probers/conftest.py)."""

from __future__ import annotations

import json
import shutil

import pytest

import cv_inputs  # tests/helpers (pytest pythonpath)
import medlama
from medlama.cli import main
from medlama.core.resume import flatten, work_folder
from medlama.probers.mask_predict import MaskPredictProber
from medlama.probers.retrieval import RetrievalProber

from model_loads import ModelLoads  # tests/helpers
from shard_calls import RankCalls, shard_files  # tests/helpers

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)

FINDING, TREAT = cv_inputs.FINDING, cv_inputs.TREAT
THREE = {FINDING: ["[X] may have finding [Y] .", "[X] shows [Y] .", "A sign of [X] is [Y] ."],
         TREAT: ["[X] may treat [Y] .", "[X] treats [Y] .", "[Y] is treated with [X] ."]}


def write_templates(path, templates=THREE):
    path.write_text("relation,template\n" + "".join(f"{r},{t}\n" for r, ts in templates.items() for t in ts),
                    encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def prompted(tmp_path_factory):
    """``(data, prompts, base, twin)``: a BioLAMA-shaped folder, prompts learned for ``base`` and ``twin`` (a copy
    of ``base``: the same weights, config and tokenizer, which the prompts accept)."""
    from tiny_facts import build_fact_folder, train_fact_model  # tests/helpers

    root = tmp_path_factory.mktemp("prompted-loads")
    base = train_fact_model(root / "base", steps=0)
    twin = shutil.copytree(base, root / "twin")
    data = build_fact_folder(root / "facts")
    medlama.optiprompt(base, data, root / "prompts", epochs=0, batch_size=4, decoding={"max_masks": 1})
    return data, root / "prompts", base, twin


@pytest.mark.parametrize("batch", ["4", "auto"])
def test_learned_prompts_load_each_model_once(prompted, tmp_path, monkeypatch, batch):
    data, prompts, base, twin = prompted
    loads = ModelLoads(monkeypatch)
    ranked = RankCalls(monkeypatch, MaskPredictProber)
    assert main(["probe", "--dataset", "biolama", "--data", str(data), "--method", "mask-predict", "--max-masks", "1",
                 "--prompts", str(prompts), "--model", str(base), str(twin), "--label", "a", "b", "--batch-size",
                 batch, "--out", str(tmp_path / "run")]) == 0
    assert loads.of(base) == 1 and loads.of(twin) == 1 and ranked.count > 0
    runs = json.loads((tmp_path / "run" / "results.json").read_text())
    assert [r["label"] for r in runs] == ["a", "b"]
    assert runs[0]["metrics"] == runs[1]["metrics"]  # the same weights, the same prompts
    assert all(r["settings"]["learned_prompts"]["identity"] for r in runs)


def test_learned_prompts_without_out_load_the_model_once(prompted, monkeypatch):
    data, prompts, base, _ = prompted
    loads = ModelLoads(monkeypatch)
    result = medlama.probe(base, data, dataset="biolama", method="mask-predict", settings={"max_masks": 1},
                           prompts=prompts)
    assert loads.of(base) == 1 and result.settings["learned_prompts"]["identity"]


@pytest.mark.parametrize("method", ["retrieval", "mask-average"])
def test_templates_load_each_model_once(make_tiny_bert, medlama_tiny, tmp_path, monkeypatch, method):
    mlm = method != "retrieval"
    first, second = make_tiny_bert(f"loads-a-{method}", mlm=mlm), make_tiny_bert(f"loads-b-{method}", mlm=mlm, seed=1)
    file = write_templates(tmp_path / "three.csv")
    flags = ["probe", "--data", str(medlama_tiny), "--config", "full", "--method", method, "--templates", str(file)]
    loads = ModelLoads(monkeypatch)
    assert main([*flags, "--model", str(first), str(second), "--label", "a", "b", "--out", str(tmp_path / "both")]) == 0
    assert loads.of(first) == 1 and loads.of(second) == 1
    runs = json.loads((tmp_path / "both" / "results.json").read_text())
    assert [r["label"] for r in runs] == ["a T1", "a T2", "a T3", "b T1", "b T2", "b T3"]
    # each template's run is still the probe of that template alone (one model, nothing kept between templates)
    for j in range(3):
        single = write_templates(tmp_path / f"t{j}.csv", {r: [ts[j]] for r, ts in THREE.items()})
        assert main([*flags[:-1], str(single), "--model", str(first), "--label", "a", "--out",
                     str(tmp_path / f"alone{j}")]) == 0
        [alone] = json.loads((tmp_path / f"alone{j}" / "results.json").read_text())
        assert alone["metrics"] == runs[j]["metrics"]


def _without_timing(runs):
    """The runs of a results.json without what says when and how long it ran."""
    for run in runs:
        run.pop("seconds", None)
        run.get("provenance", {}).pop("date", None)
        for key in ("wall_seconds", "processes"):
            run.get("extra", {}).pop(key, None)
    return runs


def test_a_killed_templates_probe_resumes_the_templates_left(make_tiny_bert, medlama_tiny, tmp_path, monkeypatch,
                                                             capsys):
    model = make_tiny_bert("loads-resume")
    file = write_templates(tmp_path / "three.csv")
    flags = ["probe", "--data", str(medlama_tiny), "--config", "full", "--model", str(model), "--label", "a",
             "--templates", str(file), "--log-all-scores"]
    whole = RankCalls(monkeypatch, RetrievalProber)
    assert main([*flags, "--out", str(tmp_path / "whole")]) == 0
    assert whole.count == 3 and not work_folder(tmp_path / "whole").exists()  # one shard per template

    out = tmp_path / "resumed"
    RankCalls(monkeypatch, RetrievalProber, stop_at=2)  # killed in the second template
    assert main([*flags, "--out", str(out)]) == 130
    assert not out.exists() and len(shard_files(out)) == 1  # the first template's ranking is kept

    # other templates: refused, naming what differs; nothing is ranked
    other = write_templates(tmp_path / "other.csv", {r: [ts[0], ts[2], ts[1]] for r, ts in THREE.items()})
    refused = RankCalls(monkeypatch, RetrievalProber)
    capsys.readouterr()
    assert main([*flags[:-3], "--templates", str(other), "--log-all-scores", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("medlama: error: ") and "templates.T2" in err and "--overwrite" in err
    assert refused.count == 0 and len(shard_files(out)) == 1

    loads = ModelLoads(monkeypatch)
    rest = RankCalls(monkeypatch, RetrievalProber)
    assert main([*flags, "--out", str(out)]) == 0
    assert "1 of 3 shards already done" in capsys.readouterr().err
    assert rest.count == 2 and loads.of(model) == 1  # the second and third template, by one load
    assert (out / "predictions.jsonl").read_bytes() == (tmp_path / "whole" / "predictions.jsonl").read_bytes()
    resumed, uninterrupted = (_without_timing(json.loads((folder / "results.json").read_text()))
                              for folder in (out, tmp_path / "whole"))
    assert [r["label"] for r in resumed] == ["a T1", "a T2", "a T3", "a ensemble"]
    for then, now in zip(uninterrupted, resumed):  # each setting that differs named
        assert {k: v for k, v in flatten(now).items() if flatten(then).get(k) != v} == {}, now["label"]
    assert resumed == uninterrupted
    assert not work_folder(out).exists()
