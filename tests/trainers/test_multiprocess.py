"""Rewiring on two processes (``torchrun --nproc_per_node 2`` on CPU, gloo) is rewiring on one.

The model is a tiny random BERT in float64, so that summing in another order (two halves, then an
all-reduce) changes the numbers by ~1e-13 instead of ~1e-6: in float32, Adam turns such rounding in
near-zero gradients into weight differences of up to ~3e-4 (measured), which would hide a real error.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from medlama.cli import main

LOSS_TOLERANCE = 1e-9  # absolute, per logged step
GRAD_NORM_TOLERANCE = 1e-9  # relative, per logged step
WEIGHT_TOLERANCE = 1e-8  # absolute, every weight of the final model (3 steps at lr 1e-3 move them ~2e-3)

#: Logs every os.replace (how checkpoints and the final folder are put in place) with the process rank.
SITECUSTOMIZE = """
import json, os
_replace = os.replace
def _logged_replace(src, dst, *args, **kwargs):
    with open(os.environ["MEDLAMA_TEST_REPLACE_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps([os.environ.get("RANK"), os.fspath(src), os.fspath(dst)]) + "\\n")
    return _replace(src, dst, *args, **kwargs)
os.replace = _logged_replace
"""

WORDS = ("the a of and in to with for by on patients cells gene protein expression tumour mice blood level "
         "increased decreased treatment study results showed cancer risk therapy dose response").split()


def _losses(out: Path) -> list[tuple[int, float, float]]:
    state = json.loads((out / "checkpoints" / "checkpoint-3" / "trainer_state.json").read_text())
    return [(h["step"], h["loss"], h["grad_norm"]) for h in state["log_history"] if "loss" in h]


@pytest.mark.slow
def test_two_cpu_processes_train_exactly_as_one(make_tiny_bert, tmp_path):
    from safetensors.torch import load_file
    from transformers import BertModel

    model = make_tiny_bert("tiny-bert-mp")
    BertModel.from_pretrained(model).double().save_pretrained(model)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(" ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(6 + i % 9)) + f" {i}\n"
                              for i in range(64)), encoding="utf-8")
    flags = ["--corpus", str(corpus), "--model", str(model), "--steps", "3", "--save-steps", "2",
             "--batch-size", "8", "--max-length", "24", "--logging-steps", "1", "--dropout", "0", "--lr", "1e-3"]
    # (dropout 0: dropout masks drawn for one batch of 8 cannot equal those drawn for two slices of 4)

    assert main(["rewire", *flags, "--out", str(tmp_path / "one")]) == 0

    hook, log = tmp_path / "hook", tmp_path / "replaced.jsonl"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")])),
           "MEDLAMA_TEST_REPLACE_LOG": str(log), "OMP_NUM_THREADS": "1"}
    two = tmp_path / "two"
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          "-m", "medlama", "rewire", *flags, "--out", str(two)],
                         env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]

    # the same loss and gradient norm at every step, and the same final weights
    one_losses, two_losses = _losses(tmp_path / "one"), _losses(two)
    assert [s for s, _, _ in two_losses] == [s for s, _, _ in one_losses] == [1, 2, 3]
    for (_, loss_1, norm_1), (_, loss_2, norm_2) in zip(one_losses, two_losses, strict=True):
        assert loss_2 == pytest.approx(loss_1, abs=LOSS_TOLERANCE)
        assert norm_2 == pytest.approx(norm_1, rel=GRAD_NORM_TOLERANCE)
    one_weights, two_weights = load_file(tmp_path / "one" / "model.safetensors"), load_file(two / "model.safetensors")
    initial = load_file(model / "model.safetensors")
    assert set(one_weights) == set(two_weights)
    moved = max((one_weights[k] - initial[k]).abs().max().item() for k in one_weights if k in initial)
    assert moved > 1000 * WEIGHT_TOLERANCE  # the comparison below can tell a wrong update from a right one
    for name, tensor in two_weights.items():
        assert (tensor - one_weights[name]).abs().max().item() <= WEIGHT_TOLERANCE, name

    # really two processes (each saved its own RNG state), and rank 0 alone put every folder in place, once
    record = json.loads((two / "rewire_config.json").read_text())
    assert record["training"]["world_size"] == 2 and record["config"] == json.loads(
        (tmp_path / "one" / "rewire_config.json").read_text())["config"]
    for step in (2, 3):
        checkpoint = two / "checkpoints" / f"checkpoint-{step}"
        assert (checkpoint / "rng_state_0.pth").is_file() and (checkpoint / "rng_state_1.pth").is_file()
    assert sorted(p.name for p in (two / "checkpoints").iterdir()) == ["checkpoint-2", "checkpoint-3",
                                                                      "rewire_config.json"]
    replaced = [json.loads(line) for line in log.read_text().splitlines()]
    ours = [(rank, Path(dst)) for rank, _src, dst in replaced if str(two) in str(Path(dst).resolve())
            or str(two) in dst]
    assert {rank for rank, _ in ours} == {"0"}
    placed = [dst.resolve() for _, dst in ours]
    for folder in (two / "checkpoints" / "checkpoint-2", two / "checkpoints" / "checkpoint-3", two):
        assert placed.count(folder.resolve()) == 1, folder
    assert run.stdout.count("rewired ") == 1  # one report, from rank 0


@pytest.mark.slow
def test_with_dropout_two_processes_train_validly_but_not_identically(make_tiny_bert, tmp_path):
    """The condition the README states: with dropout on, each process draws its slice's dropout masks, so two
    processes train a step as validly as one (the same batches, a finite loss) but not to the same numbers."""
    model = make_tiny_bert("tiny-bert-mp-dropout")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(" ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(6 + i % 9)) + f" {i}\n"
                              for i in range(64)), encoding="utf-8")
    flags = ["--corpus", str(corpus), "--model", str(model), "--steps", "1", "--save-steps", "1", "--batch-size",
             "8", "--max-length", "24", "--logging-steps", "1", "--dropout", "0.3", "--lr", "1e-3"]
    assert main(["rewire", *flags, "--out", str(tmp_path / "one")]) == 0
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          "-m", "medlama", "rewire", *flags, "--out", str(tmp_path / "two")],
                         env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    state = lambda out: json.loads((out / "checkpoints" / "checkpoint-1" / "trainer_state.json").read_text())  # noqa: E731
    (one,), (two,) = ([h["loss"] for h in state(tmp_path / name)["log_history"] if "loss" in h]
                      for name in ("one", "two"))
    assert math.isfinite(one) and math.isfinite(two) and abs(one - two) > 1e3 * LOSS_TOLERANCE
