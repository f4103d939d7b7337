"""Kept fault cases of learned prompts (``medlama optiprompt``, ``medlama probe --prompts``): each bad input is fed
to the command as a user runs it (``python -m medlama`` in a subprocess) and must be one ``medlama: error:`` line
naming what is wrong (or, where the run may go on, a warning and a record), never a traceback nor a silently
wrong record."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from refusals import error_line, medlama_here  # tests/helpers: the CLI's main, in this process

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]


@pytest.fixture(scope="module")
def world(tmp_path_factory, one_thread):
    import medlama
    from tiny_facts import build_fact_folder, train_fact_model  # tests/helpers (pytest pythonpath)

    root = tmp_path_factory.mktemp("learned-faults")
    model, data = train_fact_model(root / "model", steps=300), build_fact_folder(root)
    medlama.optiprompt(model, data, root / "prompts", epochs=0, batch_size=4, decoding={"max_masks": 2})
    return root


def medlama(*args) -> subprocess.CompletedProcess:
    """``medlama ARGS`` through the CLI's main in this process (tests/helpers/refusals.py; offline, as
    tests/conftest.py sets the environment)."""
    return medlama_here(*args)


def probe(root: Path, prompts, out, *more, data=None, model=None):
    return medlama("probe", "--dataset", "biolama", "--data", data or root / "built", "--method", "mask-predict",
                   "--model", model or root / "model", "--preset", "biolama", "--max-masks", "2", "--prompts", prompts,
                   "--out", out, *more)


def one_error(run: subprocess.CompletedProcess) -> str:
    """The refusal's one line, alone on stderr."""
    return error_line(run, alone=True)


def edited_record(root: Path, tmp: Path) -> tuple[Path, str]:
    folder = shutil.copytree(root / "prompts", tmp / "edited")
    record = json.loads((folder / "prompts.json").read_text())
    record["relations"]["wikidata_P1"]["best_epoch"] = 7
    (folder / "prompts.json").write_text(json.dumps(record, indent=2) + "\n")
    return folder, f"{folder / 'prompts.json'}: changed since `medlama optiprompt` wrote it"


def truncated_vectors(root: Path, tmp: Path) -> tuple[Path, str]:
    folder = shutil.copytree(root / "prompts", tmp / "cut")
    vectors = folder / "vectors" / "wikidata_P2.safetensors"
    vectors.write_bytes(vectors.read_bytes()[:100])
    return folder, f"{vectors}: a damaged prompts folder"


def missing_hub_prompts(root: Path, tmp: Path) -> tuple[str, str]:
    return "someone/no-such-prompts", "someone/no-such-prompts: cannot fetch the learned prompts from the Hub"


@pytest.mark.parametrize("bad", [edited_record, truncated_vectors, missing_hub_prompts])
def test_a_bad_prompts_folder_is_one_error_naming_it(world, tmp_path, bad):
    prompts, said = bad(world, tmp_path)
    error = one_error(probe(world, prompts, tmp_path / "out"))
    assert said in error and not (tmp_path / "out").exists()


def test_a_seed_past_64_bits_is_refused(world, tmp_path):
    error = one_error(medlama("optiprompt", "--model", world / "model", "--data", world / "built", "--out",
                              tmp_path / "out", "--seed", 2**64, "--epochs", "0"))
    assert "setting 'seed' must be at most 18446744073709551615" in error


def test_a_base_model_under_another_config_is_refused(world, tmp_path):
    other = shutil.copytree(world / "model", tmp_path / "gelu-new")
    config = json.loads((other / "config.json").read_text())
    config["hidden_act"] = "gelu_new"
    (other / "config.json").write_text(json.dumps(config))
    assert "trained for another config" in one_error(probe(world, world / "prompts", tmp_path / "out", model=other))


def test_another_build_whose_test_split_holds_training_facts(world, tmp_path):
    from tiny_facts import build_fact_folder

    rotated = build_fact_folder(tmp_path / "rotated", splits=["test"] * 4 + ["train"] * 8 + ["dev"] * 4)
    error = one_error(probe(world, world / "prompts", tmp_path / "out", data=rotated))
    assert "8 of the 8 probed queries ask facts these prompts were trained on" in error
    run = probe(world, world / "prompts", tmp_path / "out", "--allow-train-overlap", data=rotated)
    assert run.returncode == 0 and "medlama: warning: 8 probed queries ask facts" in run.stderr
    note = json.loads((tmp_path / "out" / "results.json").read_text())[0]["settings"]["learned_prompts"]
    assert note["probed"]["train_overlap"]["queries"] == 8 and note["training_data"]["train"]["rows"] == 16


def test_the_dev_split_is_warned_and_recorded(world, tmp_path):
    run = probe(world, world / "prompts", tmp_path / "out", "--split", "dev")
    assert run.returncode == 0 and "medlama: warning: these prompts' epochs were chosen" in run.stderr
    note = json.loads((tmp_path / "out" / "results.json").read_text())[0]["settings"]["learned_prompts"]
    assert note["probed"]["selected_on_this_split"] is True
    assert "probe the test split" in one_error(probe(world, world / "prompts", tmp_path / "t", "--split", "train"))
