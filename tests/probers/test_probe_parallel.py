"""``torchrun --nproc_per_node 2 -m medlama probe`` on CPU (gloo): each process ranks its share of the shards,
the main process alone prints and writes OUT, and the predictions are those of one process, byte for byte."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from medlama.cli import main
from medlama.core.resume import work_folder

import cv_inputs  # tests/helpers (pytest pythonpath): a MedLAMA-shaped folder of 6 queries, 2 relations
from tiny_causal import save_causal  # tests/helpers: tiny causal LMs with locally trained tokenizers

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)


def test_two_processes_give_the_one_process_predictions(tmp_path):
    model = save_causal(tmp_path / "gpt2", "gpt2")
    folder = cv_inputs.write_probe_folder(tmp_path / "queries")  # not "medlama": cwd is on the path
    flags = ["probe", "--data", str(folder), "--config", "full", "--model", str(model), "--method",
             "causal-likelihood"]  # one shard per relation: one for each process
    assert main([*flags, "--out", str(tmp_path / "one")]) == 0
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MEDLAMA_PROGRESS": "0"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           "-m", "medlama", *flags, "--device", "cpu", "--out", str(tmp_path / "two")],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("wrote ") == 1 and done.stdout.count("full: 6 queries") == 1  # the main process only
    assert (tmp_path / "two" / "predictions.jsonl").read_bytes() == (tmp_path / "one" / "predictions.jsonl").read_bytes()
    assert not work_folder(tmp_path / "two").exists()
    import json

    one, two = (json.loads((tmp_path / name / "results.json").read_text())[0] for name in ("one", "two"))
    assert (one["extra"]["processes"], two["extra"]["processes"]) == (1, 2)  # and how long it took on the clock:
    assert all(isinstance(run["extra"]["wall_seconds"], float) and run["extra"]["wall_seconds"] > 0 for run in (one, two))


def test_argument_errors_are_raised_by_every_process(tmp_path):
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           "-m", "medlama", "probe", "--ks", "0", "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300,
                          cwd=tmp_path)
    # the first process to say it ends the job (torchrun stops the others and reports exit status 2, with a
    # traceback of its own); which one, and whether the other said it first, depends on timing
    assert done.returncode != 0 and done.stderr.count("medlama: error: every ks value must be >= 1") >= 1
    assert "exitcode  : 2" in done.stderr and "medlama/cli.py" not in done.stderr
    assert not (tmp_path / "o").exists()
    # so each process alone: the second one refuses too, before it would wait for the first at a rendezvous
    second = {**os.environ, "OMP_NUM_THREADS": "1", "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2",
              "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    alone = subprocess.run([sys.executable, "-m", "medlama", "probe", "--ks", "0", "--out", str(tmp_path / "o")],
                           capture_output=True, text=True, env=second, timeout=300, cwd=tmp_path)
    assert alone.returncode == 2 and alone.stderr.strip() == "medlama: error: every ks value must be >= 1, got [0]"
