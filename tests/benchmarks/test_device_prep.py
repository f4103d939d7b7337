"""``benchmarks/device/``: the GPU measurement prepared here and run in one call there. No network: the wheels are
made here (a zip with a METADATA file), the size check reads a git repository made here, and ``measure.py``'s
argument handling and budget run with a stand-in interpreter (the real run is ``dry_run.py``'s, by hand)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from scripts import DEVICE, script  # tests/helpers

MEASURE = DEVICE / "measure.py"


@pytest.fixture(scope="module")
def prepare():
    return script("prepare", DEVICE)  # benchmarks/device/prepare.py


def make_wheel(folder: Path, name: str, version: str, requires: list[str] = (), pad: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + \
        "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"{name.replace('-', '_')}-{version}.dist-info/METADATA", metadata)
        if pad:
            archive.writestr("pad.bin", os.urandom(pad))  # incompressible: the file is as large as asked
    return wheel


def test_closure_names_each_unmet_requirement(prepare, tmp_path):
    wheels = [make_wheel(tmp_path, "peer", "1.0", ["helper>=2", "stdlib-backport; python_version < '3.9'",
                                                   "plotting; extra == 'plots'", "numpy>=3", "torch>=2",
                                                   "left-out", "absent"]),
              make_wheel(tmp_path, "helper", "1.5")]
    pins = prepare.Pins(fetch={"peer": "1.0", "helper": "1.5"}, skipped={"left-out": "not imported"})
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["peer>=1", "pyarrow>=15"]\n')
    problems, notes = prepare.check_closure(wheels, {"numpy": "2.5.2", "torch": None, "pyarrow": None}, pins,
                                            root=tmp_path)
    assert problems == ["peer-1.0-py3-none-any.whl needs helper>=2; the wheel is 1.5",
                        "peer-1.0-py3-none-any.whl needs numpy>=3; the image has 2.5.2",
                        "peer-1.0-py3-none-any.whl needs absent: neither fetched, in image.txt, nor a !absent line "
                        "of wheels.txt"]
    assert notes == ["medlama needs pyarrow>=15: in the image, version not known here",
                     "peer-1.0-py3-none-any.whl needs torch>=2: in the image, version not known here"]


def test_a_pinned_wheel_not_fetched_is_a_problem(prepare, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = []\n')
    problems, _ = prepare.check_closure([], {}, prepare.Pins(fetch={"lm-eval": "0.4.13"}), root=tmp_path)
    assert problems == ["not fetched: lm-eval (run prepare.py without --check)"]


def test_the_pins_cover_every_requirement_of_medlama(prepare, tmp_path):
    """A dependency added to pyproject.toml needs a wheel, an image package or a reason in wheels.txt."""
    pins = prepare.read_pins(DEVICE / "wheels.txt")
    image = prepare.read_image(DEVICE / "image.txt")
    wheels = [make_wheel(tmp_path, name, version) for name, version in pins.fetch.items()]
    problems, _ = prepare.check_closure(wheels, image, pins)
    assert problems == []
    assert not set(pins.fetch) & set(image), "a wheel of an image package would replace the image's version"


def git_repo(root: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitignore").write_text("/.whl/\n/.gpudata/\n/ignored.bin\n")
    (root / "tracked.txt").write_bytes(b"x" * 1000)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    (root / "untracked.txt").write_bytes(b"y" * 500)
    (root / "ignored.bin").write_bytes(b"z" * 10**6)  # ignored and not carried: does not travel
    return root


def test_what_travels_is_counted_as_the_run_tool_counts_it(prepare, tmp_path):
    root = git_repo(tmp_path / "repo")
    make_wheel(root / ".whl", "peer", "1.0", pad=3000)
    (root / ".gpudata" / "medlama").mkdir(parents=True)
    (root / ".gpudata" / "medlama" / "prompts.csv").write_bytes(b"p" * 200)
    sizes = prepare.travelling_bytes(root)
    assert sizes["working tree"] == 1000 + 500 + len((root / ".gitignore").read_bytes())
    assert sizes[".gpudata"] == 200
    assert sizes[".whl"] == (root / ".whl" / "peer-1.0-py3-none-any.whl").stat().st_size > 3000
    assert prepare.check_size({"working tree": 2**20, ".whl": 2**20}, 64).endswith("together 2.0 of 64 MiB")
    with pytest.raises(prepare.PrepError, match=r"over the limit: working tree 40\.0 MiB, \.whl 30\.0 MiB; "
                                                r"together 70\.0 of 64 MiB"):
        prepare.check_size({"working tree": 40 * 2**20, ".whl": 30 * 2**20})


def test_prepare_check_refuses_a_set_over_the_limit_in_one_line(prepare, tmp_path, monkeypatch, capsys):
    root = git_repo(tmp_path / "repo")
    (root / "pyproject.toml").write_text('[project]\ndependencies = []\n')
    pins = tmp_path / "pins"
    pins.mkdir()
    (pins / "wheels.txt").write_text("peer==1.0  # the peer\n")
    (pins / "image.txt").write_text("torch==2.11.0\n")
    make_wheel(root / ".whl", "peer", "1.0", ["torch>=2"], pad=200_000)
    for needed in ("medlama/prompts.csv", "minilm/config.json"):
        (root / ".gpudata" / needed).parent.mkdir(parents=True, exist_ok=True)
        (root / ".gpudata" / needed).write_text("x")
    monkeypatch.setattr(prepare, "ROOT", root)
    monkeypatch.setattr(prepare, "HERE", pins)
    monkeypatch.setattr(prepare, "project_requirements", lambda root=root: [])
    assert prepare.main(["--check", "--limit-mib", "64"]) == 0
    assert "together 0.2 of 64 MiB" in capsys.readouterr().out
    assert prepare.main(["--check", "--limit-mib", "0.1"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("prepare: error: what travels is over the limit: working tree")
    assert error[0].endswith("of 0.1 MiB")
    (pins / "wheels.txt").write_text("peer==1.0\nlm-eval\n")
    assert prepare.main(["--check"]) == 2
    assert capsys.readouterr().err == (f"prepare: error: {pins / 'wheels.txt'}, line 2: 'lm-eval' is neither "
                                       "name==version nor !name\n")


def measure(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(MEASURE), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=60)


@pytest.fixture
def carried(tmp_path):
    wheels, data = tmp_path / "whl", tmp_path / "data"
    make_wheel(wheels, "peer", "1.0")
    for needed in ("medlama/prompts.csv", "minilm/config.json"):
        (data / needed).parent.mkdir(parents=True, exist_ok=True)
        (data / needed).write_text("x")
    return ["--wheels", str(wheels), "--data", str(data)]


@pytest.mark.parametrize(("given", "expected"), [
    (["--steps", "causal,masked"], "unknown --steps causal; choose from causal-llama-1b, causal-gpt2, masked, "
                                   "retrieval, mask-predict, rewire, optiprompt"),
    (["--steps", ","], "unknown --steps (none); choose from"),
    (["--budget-s", "0"], "--budget-s 0: must be > 0"),
    (["--repeats", "0"], "--repeats 0: must be >= 1"),
])
def test_measure_refuses_bad_arguments_in_one_line(carried, tmp_path, given, expected):
    done = measure(*carried, "--out", str(tmp_path / "out"), *given)
    assert done.returncode == 2
    assert done.stderr.startswith(f"measure: error: {expected}") and done.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()  # checked before anything is written or installed


def test_measure_names_what_was_not_carried(carried, tmp_path):
    done = measure("--out", str(tmp_path / "out"), "--wheels", str(tmp_path / "none"), *carried[2:])
    assert done.returncode == 2
    assert done.stderr == (f"measure: error: --wheels {tmp_path / 'none'}: no wheels there (run "
                           "benchmarks/device/prepare.py here, and name .whl in the call's carry)\n")
    done = measure("--out", str(tmp_path / "out"), *carried[:2], "--data", str(tmp_path))
    assert done.stderr == (f"measure: error: --data {tmp_path}: no medlama/prompts.csv (run "
                           "benchmarks/device/prepare.py here, and name .gpudata in the call's carry)\n")
    env = {key: value for key, value in os.environ.items() if key != "OUT"}
    done = subprocess.run([sys.executable, str(MEASURE), *carried], capture_output=True, text=True, env=env)
    assert done.returncode == 2 and done.stderr == "measure: error: no --out given and $OUT is not set\n"


def test_measure_commands_are_the_issue_sizes_on_the_gpu_and_tiny_on_the_cpu(carried, tmp_path):
    module = script("measure", DEVICE)
    gpu = module.parse([*carried, "--out", str(tmp_path)])
    dry = module.parse([*carried, "--out", str(tmp_path), "--cpu-dry-run"])
    enc = tmp_path / "enc"
    line = lambda args, name: " ".join(module.step_command(name, args, enc, tmp_path / "x.json")[1:])  # noqa: E731
    assert line(gpu, "causal-llama-1b").endswith("gpu.py --parts causal --causal-models llama-1b --device cuda "
                                                 f"--repeats 2 --json {tmp_path / 'x.json'}")
    assert line(dry, "causal-llama-1b").endswith("--causal-models llama-tiny --device cpu --small --threads 1 "
                                                 f"--repeats 2 --json {tmp_path / 'x.json'}")
    data = Path(carried[3])
    assert f"--parts retrieval --encoder {enc} --source {data / 'medlama'} --device cuda --repeats" in \
        line(gpu, "retrieval")
    assert line(gpu, "rewire").endswith(f"--parts rewire --encoder {enc} --device cuda --repeats 2 --json "
                                        f"{tmp_path / 'x.json'}")
    assert line(gpu, "optiprompt").endswith("optiprompt.py --size base --epochs 10 --train 500 --dev 130 "
                                            "--device cuda --json")


def test_measure_skips_what_the_budget_cannot_hold_and_records_it(carried, tmp_path):
    """A stand-in interpreter (installs and probes nothing): the budget leaves no step its estimate, so every
    step is skipped with the reason, and the failed probe is a problem (exit 1), all in $OUT's files."""
    stand_in = tmp_path / "python"
    stand_in.write_text("#!/bin/sh\nexit 0\n")
    stand_in.chmod(0o755)
    done = measure(*carried, "--python", str(stand_in), "--budget-s", "20", env={"OUT": str(tmp_path / "out")})
    assert done.returncode == 1, done.stderr
    record = json.loads((tmp_path / "out" / "gpu.json").read_text())
    assert [step["step"] for step in record["steps"]] == ["causal-llama-1b", "causal-gpt2", "masked", "retrieval",
                                                          "mask-predict", "rewire", "optiprompt"]
    assert all(step["skipped"].startswith(f"estimated {step['estimate_s']} s, ") for step in record["steps"])
    assert record["problems"] == ["the environment probe failed (exit 0): see log.txt"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["gpu.json", "log.txt", "table.txt"]


def test_optiprompt_record_and_its_dev_share():
    module = script("measure", DEVICE)
    record = {"whole_seconds": 40.0, "training_seconds": 10.0, "dev_decoding_seconds": 30.0, "steps": 320,
              "dev_decodings": 11, "dev_queries": 130, "max_masks": 10, "note": {"a": 1}}
    output = "a warning {not json}\n" + json.dumps(record, indent=2) + "\n"
    parsed = module.optiprompt_record(output)
    assert parsed["dev_decoding_share"] == 0.75 and parsed["note"] == {"a": 1}
    assert module.optiprompt_line(parsed).endswith("dev decoding 75.0% of the relation")


def test_the_dry_runs_site_holds_the_image_and_nothing_the_wheels_bring(tmp_path):
    """The dry run proves the wheel set only if its site lacks what the wheels bring: torch imports there,
    lm-eval, lm-pub-quiz and datasets (carried as wheels) do not."""
    dry_run, prepare = script("dry_run", DEVICE), script("prepare", DEVICE)
    image = set(prepare.read_image(DEVICE / "image.txt"))
    names = dry_run.image_closure(image)
    assert {"torch", "transformers", "sentence-transformers"} <= names
    assert not names & {"lm-eval", "lm-pub-quiz", "datasets", "dill", "multiprocess", "faiss-cpu", "medlama"}
    python = dry_run.shaped_site(tmp_path / "env", names)
    probe = "import importlib.util as u; print([u.find_spec(m) is not None for m in " \
            "('torch', 'lm_eval', 'lm_pub_quiz', 'datasets', 'medlama')])"
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.stdout.strip() == "[True, False, False, False, False]", done.stderr


def test_gpu_rewire_part_trains_the_encoder_given(tmp_path, monkeypatch):
    """On a machine without the bundled encoder's package, ``gpu.py --encoder`` serves the rewire part too: its
    training (and the peer's, from the same config) gets that folder."""
    import torch

    monkeypatch.syspath_prepend(str(DEVICE.parent))
    import gpu
    import gpu_rewire

    seen = {}

    class Stop(Exception):
        pass

    def rewire(corpus, out, config, **kwargs):
        seen["model"] = config.model
        raise Stop

    monkeypatch.setattr(gpu_rewire, "rewire", rewire)
    args = gpu.parse(["--parts", "rewire", "--encoder", str(tmp_path / "encoder"), "--device", "cpu"])
    args.small = True
    with pytest.raises(Stop):
        gpu_rewire.rewire_part(args, torch.device("cpu"), "fp32")
    assert seen["model"] == str(tmp_path / "encoder")
