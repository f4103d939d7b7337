"""OptiPrompt: learned prompts trained per relation, decoded by mask predict, refused where they do not belong.

The model is ``tiny_facts``' tiny BERT that knows its facts in one phrasing; the BioLAMA folder's manual prompts
use another, so the manual prompts score 0 and learned prompts that find the phrasing score well above."""

from __future__ import annotations

import json

import pytest

import medlama
from medlama.cli import main
from medlama.core.errors import MedlamaInputError

pytestmark = pytest.mark.usefixtures("one_thread")

DECODING = {"max_masks": 2}  # BioLAMA's decoding (confidence fill, beam 5), up to 2 masks: the objects are one token
FAST = dict(batch_size=4, decoding=DECODING)


@pytest.fixture(scope="module")
def facts(tmp_path_factory, one_thread):
    from tiny_facts import build_fact_folder, train_fact_model  # tests/helpers (pytest pythonpath)

    root = tmp_path_factory.mktemp("facts")
    return train_fact_model(root / "model", steps=300), build_fact_folder(root)


def probe(model, data, *, prompts=None, split="test", relations=None):
    """``medlama.probe`` of BioLAMA's ``split`` (a QuerySet, as the API takes one) with mask predict."""
    from medlama.runs.queries import QuerySource, load_queries

    queries = load_queries(QuerySource(dataset="biolama", data=data, split=split,
                                       relations=tuple(relations) if relations else None))
    return medlama.probe(str(model), queries, dataset="biolama", method="mask-predict", preset="biolama",
                         settings=DECODING, prompts=prompts)


def test_with_no_training_the_manual_init_decodes_exactly_the_manual_prompts(facts, tmp_path):
    model, data = facts
    trained = medlama.optiprompt(model, data, tmp_path / "prompts", epochs=0, **FAST)
    for relation in trained.record["relations"].values():  # "[X] needs [Y] ." / "[X] causes [Y] ."
        assert relation["template"] == "[X] [V1] [Y] [V2]"
        assert relation["dev_curve"] == [relation["manual_dev_acc@1"]] and relation["best_epoch"] == 0
    manual, learned = probe(model, data), probe(model, data, prompts=tmp_path / "prompts")
    assert len(manual.ranking.names) == 8
    assert learned.ranking.names == manual.ranking.names  # every query, every answer, in order
    assert learned.ranking.scores == manual.ranking.scores  # to the last bit
    note = learned.settings["learned_prompts"]
    assert note["identity"] == trained.identity and note["training"]["epochs"] == 0
    assert note["base"]["model_sha256"] == trained.record["base"]["model_sha256"]
    assert "learned_prompts" not in manual.settings

    command = ["probe", "--dataset", "biolama", "--data", str(data), "--method", "mask-predict", "--model",
               str(model), "--preset", "biolama", "--max-masks", "2"]
    assert main([*command, "--out", str(tmp_path / "manual")]) == 0
    assert main([*command, "--prompts", str(tmp_path / "prompts"), "--out", str(tmp_path / "learned")]) == 0
    written = json.loads((tmp_path / "learned" / "results.json").read_text())
    assert trained.identity in json.dumps(written) and '"epochs": 0' in json.dumps(written)
    compared = medlama.compare(tmp_path / "manual", tmp_path / "learned")  # the same queries, another run
    assert json.dumps(compared).count("wikidata_P1") >= 2


def test_learned_prompts_raise_dev_and_test_acc_well_above_the_manual_prompts(facts, tmp_path):
    model, data = facts
    trained = medlama.optiprompt(model, data, tmp_path / "prompts", lr=3e-2, epochs=6, **FAST)
    curves = {name: rel["dev_curve"] for name, rel in trained.record["relations"].items()}
    assert all(len(curve) == 7 for curve in curves.values())
    assert all(rel["manual_dev_acc@1"] == 0 for rel in trained.record["relations"].values())
    assert curves["wikidata_P1"][0] == 0 and max(curves["wikidata_P1"]) == 1.0
    for rel in trained.record["relations"].values():
        assert rel["dev_acc@1"] == max(rel["dev_curve"]) == rel["dev_curve"][rel["best_epoch"]]
    manual, learned = probe(model, data), probe(model, data, prompts=tmp_path / "prompts")
    assert manual.acc(1) == 0 and learned.acc(1) >= 0.5
    card = (tmp_path / "prompts" / "README.md").read_text()
    assert "wikidata_P1" in card and trained.identity in card
    record = json.loads((tmp_path / "prompts" / "prompts.json").read_text())
    assert record["training"]["lr"] == 3e-2 and record["decoding"]["init"] == "confidence"
    made = record["provenance"]  # when, how and where, for a folder meant to be pushed and reused
    assert made["date"].startswith("20") and made["device"]["device"] == "cpu" and made["command"]
    assert str(tmp_path) not in json.dumps(record)  # no local path in what may be pushed


def test_the_same_seed_gives_identical_prompts_and_a_killed_run_resumes_at_the_next_relation(facts, tmp_path,
                                                                                             monkeypatch):
    from medlama.trainers.optiprompt import run as optiprompt_run

    model, data = facts
    options = dict(epochs=2, lr=3e-2, init="random", prompt_tokens=2, **FAST)
    whole = medlama.optiprompt(model, data, tmp_path / "a", **options)
    again = medlama.optiprompt(model, data, tmp_path / "b", **options)
    assert again.identity == whole.identity
    other = medlama.optiprompt(model, data, tmp_path / "c", **{**options, "seed": 1})
    assert other.identity != whole.identity

    trained, real = [], optiprompt_run.train_relation

    def killed_at_the_second(prober, name, *args, **kwargs):
        trained.append(name)
        if len(trained) == 2:
            raise KeyboardInterrupt
        return real(prober, name, *args, **kwargs)

    monkeypatch.setattr(optiprompt_run, "train_relation", killed_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        medlama.optiprompt(model, data, tmp_path / "d", **options)
    assert not (tmp_path / "d" / "prompts.json").exists()
    trained.clear()
    resumed = medlama.optiprompt(model, data, tmp_path / "d", **options)
    assert trained == ["wikidata_P2"] and resumed.identity == whole.identity
    with pytest.raises(MedlamaInputError, match="earlier run"):
        medlama.optiprompt(model, data, tmp_path / "d", **options)


def test_bad_inputs_are_one_clear_error(facts, tiny_bert, tmp_path, capsys):
    from tiny_causal import save_causal
    from tiny_facts import build_fact_folder, train_fact_model

    model, data = facts
    with pytest.raises(MedlamaInputError, match="no MLM head"):  # an encoder-only model
        medlama.optiprompt(tiny_bert, data, tmp_path / "x", epochs=0, **FAST)
    with pytest.raises(MedlamaInputError, match="decoder-only causal LM"):
        medlama.optiprompt(save_causal(tmp_path / "gpt2", "gpt2"), data, tmp_path / "x", epochs=0, **FAST)
    with pytest.raises(MedlamaInputError, match="relation 'P9' has no rows in the 'train' split"):
        medlama.optiprompt(model, data, tmp_path / "x", relations=["P9"], epochs=0, **FAST)
    no_dev = build_fact_folder(tmp_path / "no-dev", splits={"P1": ["train"] * 12 + ["test"] * 4,
                                                            "P2": ["train", "dev", "test", "test"] * 4})
    with pytest.raises(MedlamaInputError, match=r"relation 'wikidata_P1' has no rows in the 'dev' split"):
        medlama.optiprompt(model, no_dev, tmp_path / "x", epochs=0, **FAST)
    assert not (tmp_path / "x").exists()

    medlama.optiprompt(model, data, tmp_path / "p1", relations=["P1"], epochs=0, **FAST)
    with pytest.raises(MedlamaInputError, match=r"no learned prompt for relation\(s\) wikidata_P2"):
        probe(model, data, prompts=tmp_path / "p1")
    with pytest.raises(MedlamaInputError, match="trained on the 'train' split"):
        probe(model, data, prompts=tmp_path / "p1", split="train", relations=["P1"])
    other = train_fact_model(tmp_path / "other", steps=0, seed=1)
    with pytest.raises(MedlamaInputError, match="trained for another model"):
        probe(other, data, prompts=tmp_path / "p1", relations=["P1"])
    with pytest.raises(MedlamaInputError, match="decoded by mask-predict"):
        medlama.probe(str(model), str(data), dataset="biolama", method="mask-average", prompts=tmp_path / "p1")

    status = main(["optiprompt", "--model", str(model), "--data", str(data), "--out", str(tmp_path / "cli"),
                   "--relations", "P1", "--epochs", "0", "--decode-max-masks", "1", "--batch-size", "4"])
    assert status == 0 and "OptiPrompt: dev acc@1" in capsys.readouterr().out
    status = main(["probe", "--dataset", "biolama", "--data", str(data), "--method", "mask-predict", "--model",
                   str(model), "--prompts", str(tmp_path / "cli"), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("medlama: error: ") and "no learned prompt for relation(s) wikidata_P2" in err
    status = main(["optiprompt", "--model", str(model), "--data", str(data), "--out", str(tmp_path / "cli2"),
                   "--lr", "-1"])
    assert status == 2 and "medlama: error:" in capsys.readouterr().err
