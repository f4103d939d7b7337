"""What a prompts folder and a learned-prompt probe record must be true: a folder edited or cut short after
training is refused, the base model includes its config, the data the prompts were trained and selected on is
fingerprinted and its facts are not probed again unseen, and a probe of the split that chose the epochs says
so. Each case runs through ``medlama probe`` / ``medlama optiprompt`` or their Python API."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from transformers import AutoModelForMaskedLM, AutoTokenizer

import medlama
from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.core.loaded import LoadedModel
from medlama.probers import learned_prompts, mlm
from medlama.probers.learned_prompts import PromptSet
from tiny_facts import build_fact_folder, train_fact_model  # tests/helpers (pytest pythonpath)

pytestmark = pytest.mark.usefixtures("one_thread")

DECODING = {"max_masks": 2}
FAST = dict(batch_size=4, decoding=DECODING)
#: the facts' splits rotated: this build's test split holds the first four subjects, the train split of the
#: default build (tiny_facts.SPLITS) that the prompts are trained on
ROTATED = ["test"] * 4 + ["train"] * 8 + ["dev"] * 4


@pytest.fixture(scope="module")
def trained(tmp_path_factory, one_thread):
    root = tmp_path_factory.mktemp("records")
    model, data = train_fact_model(root / "model", steps=300), build_fact_folder(root)
    prompts = medlama.optiprompt(model, data, root / "prompts", epochs=0, **FAST)
    return model, data, prompts


def probe_command(model, data, prompts, out, *more):
    return ["probe", "--dataset", "biolama", "--data", str(data), "--method", "mask-predict", "--model", str(model),
            "--preset", "biolama", "--max-masks", "2", "--prompts", str(prompts), "--out", str(out), *more]


def error_of(capsys, args) -> str:
    status = main(args)
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1 and err.startswith("medlama: error: "), err
    return err


def copy(prompts, tmp_path, name="copy"):
    return shutil.copytree(prompts.path, tmp_path / name)


def test_a_prompts_json_edited_after_training_is_refused_naming_it(trained, tmp_path, capsys):
    model, data, prompts = trained
    for edit in ({"best_epoch": 7}, {"dev_acc@1": 0.9}, {"dev_acc@1": 1.0}):  # the last one keeps the file's size
        folder = copy(prompts, tmp_path, f"edited-{len(list(tmp_path.iterdir()))}")
        record = json.loads((folder / "prompts.json").read_text())
        record["relations"]["wikidata_P1"].update(edit)
        (folder / "prompts.json").write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
        err = error_of(capsys, probe_command(model, data, folder, tmp_path / "out"))
        assert f"{folder / 'prompts.json'}: changed since `medlama optiprompt` wrote it" in err
        assert not (tmp_path / "out" / "results.json").exists()
        with pytest.raises(MedlamaInputError, match="changed since"):  # the API as strictly
            medlama.probe(str(model), str(data), dataset="biolama", method="mask-predict", prompts=folder)


def test_a_truncated_vectors_file_is_one_error_naming_it(trained, tmp_path, capsys):
    model, data, prompts = trained
    for keep_record in (True, False):  # with the ownership record, and as a copy without its hidden files
        folder = copy(prompts, tmp_path, f"cut-{keep_record}")
        if not keep_record:
            (folder / ".medlama-output.json").unlink()
        vectors = folder / "vectors" / "wikidata_P1.safetensors"
        vectors.write_bytes(vectors.read_bytes()[:200])
        err = error_of(capsys, probe_command(model, data, folder, tmp_path / "out"))
        assert f"{vectors}: a damaged prompts folder" in err and "truncated" in err


def test_the_seed_is_bounded_to_what_torch_takes(trained, tmp_path, capsys):
    model, data, _ = trained
    with pytest.raises(MedlamaInputError, match="setting 'seed' must be at most 18446744073709551615"):
        medlama.optiprompt(model, data, tmp_path / "api", seed=2**64, epochs=0, **FAST)
    with pytest.raises(MedlamaInputError, match="setting 'seed' must be at least 0"):
        medlama.optiprompt(model, data, tmp_path / "api", seed=-1, epochs=0, **FAST)
    err = error_of(capsys, ["optiprompt", "--model", str(model), "--data", str(data), "--out", str(tmp_path / "cli"),
                            "--seed", str(2**70), "--epochs", "0"])
    assert "seed" in err and not (tmp_path / "cli").exists()
    largest = medlama.optiprompt(model, data, tmp_path / "largest", seed=2**64 - 1, epochs=0, relations=["P1"],
                                 **FAST)
    assert largest.record["training"]["seed"] == 2**64 - 1


def test_hub_prompts_that_cannot_be_fetched_are_named(trained, tmp_path, capsys):
    model, data, _ = trained  # the tests run offline: nothing can be fetched
    err = error_of(capsys, probe_command(model, data, "someone/no-such-prompts", tmp_path / "out"))
    assert err.startswith("medlama: error: someone/no-such-prompts: cannot fetch the learned prompts from the Hub")
    assert str(tmp_path / "out") not in err


def test_the_same_weights_under_another_config_are_another_model(trained, tmp_path, capsys):
    model, data, prompts = trained
    other = shutil.copytree(model, tmp_path / "relu")
    config = json.loads((other / "config.json").read_text())
    config["hidden_act"] = "relu"
    (other / "config.json").write_text(json.dumps(config))
    err = error_of(capsys, probe_command(other, data, prompts.path, tmp_path / "out"))
    assert "these prompts were trained for another config" in err and "model and" not in err
    assert prompts.record["base"]["config_sha256"] in (prompts.path / "README.md").read_text()


def test_training_data_is_fingerprinted_and_its_facts_are_not_probed_unseen(trained, tmp_path, capsys):
    model, data, prompts = trained
    train = prompts.record["training_data"]["train"]
    assert train["split"] == "train" and train["rows"] == 16 and len(train["sha256"]) == 64
    assert sum(map(len, train["facts"].values())) == 16 and prompts.record["training_data"]["dev"]["rows"] == 8

    assert main(probe_command(model, data, prompts.path, tmp_path / "same")) == 0  # the build it was trained on
    capsys.readouterr()
    note = json.loads((tmp_path / "same" / "results.json").read_text())[0]["settings"]["learned_prompts"]
    assert note["training_data"]["train"] == {k: v for k, v in train.items() if k != "facts"}
    assert note["probed"]["train_overlap"]["queries"] == 0 and note["probed"]["split"] == "test"

    rotated = build_fact_folder(tmp_path / "rotated", splits=ROTATED)
    err = error_of(capsys, probe_command(model, rotated, prompts.path, tmp_path / "out"))
    assert "8 of the 8 probed queries ask facts these prompts were trained on" in err
    assert train["sha256"][:12] in err and "--allow-train-overlap" in err and str(prompts.path) in err
    with pytest.raises(MedlamaInputError, match="8 of the 8 probed queries"):
        medlama.probe(str(model), str(rotated), dataset="biolama", method="mask-predict", prompts=prompts.path)

    assert main(probe_command(model, rotated, prompts.path, tmp_path / "allowed", "--allow-train-overlap")) == 0
    assert "8 probed queries ask facts these prompts were trained on" in capsys.readouterr().err
    note = json.loads((tmp_path / "allowed" / "results.json").read_text())[0]["settings"]["learned_prompts"]
    assert note["probed"]["train_overlap"] == {"queries": 8, "first": ["wikidata_P1", "apple"], "allowed": True}
    result = medlama.probe(str(model), str(rotated), dataset="biolama", method="mask-predict", prompts=prompts.path,
                           settings={**DECODING, "allow_train_overlap": True})  # the API's setting
    assert result.settings["learned_prompts"]["probed"]["train_overlap"]["allowed"] is True


def test_probing_the_split_that_chose_the_epochs_is_warned_and_recorded(trained, tmp_path, capsys):
    model, data, prompts = trained
    err = error_of(capsys, probe_command(model, data, prompts.path, tmp_path / "train", "--split", "train"))
    assert "trained on the 'train' split" in err and "dev" not in err
    assert main(probe_command(model, data, prompts.path, tmp_path / "dev", "--split", "dev")) == 0
    err = capsys.readouterr().err
    assert "medlama: warning: these prompts' epochs were chosen by acc@1 on the 'dev' split" in err
    probed = json.loads((tmp_path / "dev" / "results.json").read_text())[0]["settings"]["learned_prompts"]["probed"]
    assert probed["split"] == "dev" and probed["selected_on_this_split"] is True


def test_a_probe_reads_the_prompts_once_and_a_model_in_memory_is_hashed_once(trained, tmp_path, monkeypatch):
    model, data, prompts = trained
    reads, read = [], PromptSet._read.__func__
    monkeypatch.setattr(PromptSet, "_read", classmethod(lambda cls, path: reads.append(path) or read(cls, path)))
    learned_prompts._READ.clear()
    assert main(probe_command(model, data, prompts.path, tmp_path / "out")) == 0  # checks, prober, resume record
    assert reads == [prompts.path]

    hashed = []

    class Counting:  # hashlib as mlm sees it, counting the digests begun
        @staticmethod
        def sha256(*args):
            hashed.append(1)
            return hashlib.sha256(*args)

    monkeypatch.setattr(mlm, "hashlib", Counting)
    loaded = LoadedModel(AutoModelForMaskedLM.from_pretrained(model).eval(), AutoTokenizer.from_pretrained(model))
    first = mlm.MaskedLM(loaded).weights_sha256()
    assert mlm.MaskedLM(loaded).weights_sha256() == first and len(hashed) == 1  # another MaskedLM, the same model
    assert first == prompts.record["base"]["model_sha256"]
    with __import__("torch").no_grad():
        loaded.model.get_input_embeddings().weight[0, 0] += 1  # changed in place: hashed again, and it differs
    assert mlm.MaskedLM(loaded).weights_sha256() != first and len(hashed) == 2
