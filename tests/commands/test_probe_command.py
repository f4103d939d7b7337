"""``medlama probe`` on a terminal and in a pipe: progress bars, ``--json``, ``--quiet``, ``--device``,
``--limit``, outputs checked before any work (``--overwrite``), and batch sizes refused with a message."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from medlama.core import progress
from medlama.cli import main
from medlama.probers.query_set import QuerySet
from medlama.probers.registry import METHODS
from probe_outputs import predictions


@pytest.fixture(scope="module")
def tiny_encoder(make_tiny_bert) -> Path:
    return make_tiny_bert("cli-tiny-encoder")


@pytest.fixture
def probe_args(biolama_dir, tiny_encoder):
    def args(out: Path, *more: str) -> list[str]:
        return ["probe", "--dataset", "biolama", "--data", str(biolama_dir), "--config", "umls", "--model",
                str(tiny_encoder), "--batch-size", "4", "--out", str(out), *more]
    return args


def bars(text: str) -> bool:
    """Whether tqdm drew on ``text`` (it redraws with carriage returns and shows a rate)."""
    return "\r" in text or "it/s" in text or "batch/s" in text


# ---------------------------------------------------------------------------------------- progress bars
def test_piped_output_has_no_progress_bars_and_progress_asks_for_them(probe_args, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    assert main(probe_args(tmp_path / "piped")) == 0  # capsys: stderr is not a terminal
    captured = capsys.readouterr()
    assert not bars(captured.err) and not bars(captured.out)
    assert main(probe_args(tmp_path / "asked", "--progress")) == 0
    captured = capsys.readouterr()
    assert bars(captured.err) and "queries" in captured.err and not bars(captured.out)


def test_the_python_api_follows_the_commands_rule(biolama_dir, tiny_encoder, capsys, monkeypatch):
    """``medlama.probe`` into a redirected stderr draws no bars either (one rule for the API and the CLI)."""
    import medlama

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    result = medlama.probe(str(tiny_encoder), data=str(biolama_dir), dataset="biolama", config="umls",
                           settings={"batch_size": 4})
    captured = capsys.readouterr()
    assert result.acc(1) >= 0 and not bars(captured.err) and not bars(captured.out)
    monkeypatch.setattr("sys.stderr", type("OutStream", (), {"__module__": "ipykernel.iostream",
                                                             "isatty": lambda self: False})())
    assert progress.enabled()  # a notebook's stream: bars, drawn as widgets


def test_progress_follows_the_terminal_the_flag_and_tqdm_disable(monkeypatch):
    class Terminal:
        def isatty(self) -> bool:
            return True

        def write(self, text: str) -> int:
            return len(text)

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setattr("sys.stderr", Terminal())
    assert progress.enabled()
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert not progress.enabled()
    with progress.showing(True):  # --progress wins over the environment
        assert progress.enabled()
    monkeypatch.setenv("TQDM_DISABLE", "0")
    assert progress.enabled()


def test_showing_switches_the_libraries_bars_and_puts_them_back(monkeypatch):
    from datasets.utils.logging import is_progress_bar_enabled
    from transformers.utils.logging import is_progress_bar_enabled as transformers_bars

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    before = is_progress_bar_enabled(), transformers_bars()
    with progress.showing(False) as shown:
        assert shown is False and not progress.enabled()
        assert not is_progress_bar_enabled() and not transformers_bars()
        import os

        assert os.environ["TQDM_DISABLE"] == "1"  # for a tqdm imported later, and child processes
    assert (is_progress_bar_enabled(), transformers_bars()) == before
    import os

    assert "TQDM_DISABLE" not in os.environ


def test_showing_gives_bars_that_do_not_say_otherwise_the_choice_as_default(monkeypatch):
    import io

    from tqdm.auto import tqdm

    def drawn(**kwargs) -> str:
        stream = io.StringIO()
        for _ in tqdm(range(3), file=stream, **kwargs):
            pass
        return stream.getvalue()

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    with progress.showing(False):
        assert drawn() == ""  # a library's bar (sentence-transformers' model card, say)
        assert "3/3" in drawn(disable=False)  # one that says otherwise
    assert "3/3" in drawn()
    with progress.showing(True):
        assert "3/3" in drawn()


# ---------------------------------------------------------------------------------------- --json, --quiet
def test_json_prints_the_results_and_nothing_else_on_stdout(probe_args, tmp_path, capsys):
    out = tmp_path / "json"
    assert main(probe_args(out, "--json")) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == json.loads((out / "results.json").read_text())
    assert captured.out == (out / "results.json").read_text()
    assert "acc@1" in captured.err and "wrote" in captured.err  # the tables went to stderr


def test_quiet_prints_nothing(probe_args, tmp_path, capsys):
    assert main(probe_args(tmp_path / "quiet", "--quiet")) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    assert (tmp_path / "quiet" / "results.json").is_file()
    assert main(probe_args(tmp_path / "both", "--quiet", "--json")) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)[0]["query_set"] and captured.err == ""


# ---------------------------------------------------------------------------------------- --limit, --device
def test_limit_probes_the_first_queries_of_each_relation(probe_args, biolama_dir, tmp_path):
    out = tmp_path / "limited"
    assert main(probe_args(out, "--limit", "2")) == 0
    result = json.loads((out / "results.json").read_text())[0]
    rows = predictions(out, result["label"])
    counts = Counter(row["relation"] for row in rows)
    assert counts == {"umls_UR44": 2, "umls_UR116": 2}
    from medlama.runs.biolama_queries import load_biolama_queries

    queries = load_biolama_queries(biolama_dir, "umls")
    assert result["query_set"] == f"{queries.name}[first 2 per relation]" and len(queries) == 8
    first = [i for i, r in enumerate(queries.relations) if queries.relations[:i].count(r) < 2]
    assert [row["id"] for row in rows] == [queries.ids[i] for i in first]


def test_limit_per_relation_keeps_order_and_candidates():
    queries = QuerySet(ids=list("abcde"), relations=["r", "s", "r", "r", "s"], texts=["[Y] ."] * 5,
                       gold=[["x"]] * 5, candidates=["x", "y"], name="q")
    limited = queries.limit_per_relation(1)
    assert limited.ids == ["a", "b"] and limited.candidates == ["x", "y"] and limited.name == "q[first 1 per relation]"
    assert queries.limit_per_relation(3) is queries
    from medlama.core.errors import MedlamaInputError

    with pytest.raises(MedlamaInputError, match="query limit must be an integer >= 1, got 0"):
        queries.limit_per_relation(0)


def test_limit_and_device_words_are_checked_by_the_parser(probe_args, tmp_path, capsys):
    for flags, message in ((["--limit", "0"], "must be >= 1, got 0"), (["--limit", "x"], "'x' is not an integer"),
                           (["--device", "gpu"], "'gpu' is not a device")):
        with pytest.raises(SystemExit) as stop:
            main(probe_args(tmp_path / "o", *flags))
        assert stop.value.code == 2 and message in capsys.readouterr().err


def test_device_reaches_the_prober_and_a_missing_one_is_refused(probe_args, tmp_path, capsys, monkeypatch):
    import torch

    import medlama.probers.registry as registry

    seen = []
    real = registry.make_prober

    def spy(method, model, settings=None, *, device=None):
        seen.append(device)
        return real(method, model, settings, device=device)

    monkeypatch.setattr(registry, "make_prober", spy)
    assert main(probe_args(tmp_path / "cpu", "--device", "cpu")) == 0
    assert seen == ["cpu"]
    if not torch.cuda.is_available():
        capsys.readouterr()
        assert main(probe_args(tmp_path / "gpu", "--device", "cuda:1")) == 2
        assert "--device cuda:1: this machine has no CUDA device" in capsys.readouterr().err
        assert not (tmp_path / "gpu").exists()


# ---------------------------------------------------------------------------------------- outputs
def test_a_rerun_is_refused_before_any_work_unless_overwrite(probe_args, tmp_path, capsys, monkeypatch):
    import medlama.runs.queries as queries_module

    out = tmp_path / "run"
    assert main(probe_args(out)) == 0
    first = (out / "results.json").read_text()
    capsys.readouterr()
    loaded = []
    real = queries_module.load_queries
    monkeypatch.setattr(queries_module, "load_queries", lambda source: loaded.append(1) or real(source))
    assert main(probe_args(out, "--pooling", "mean")) == 2
    err = capsys.readouterr().err
    assert "holds the results of an earlier run; give --overwrite" in err and "Traceback" not in err
    assert loaded == [] and (out / "results.json").read_text() == first
    (out / "notes.png").write_text("a user's file, put there after the run")
    assert main(probe_args(out, "--pooling", "mean", "--overwrite")) == 2  # --overwrite replaces what probe wrote
    err = capsys.readouterr().err
    assert "notes.png" in err and loaded == [] and (out / "notes.png").exists()
    (out / "notes.png").unlink()
    (out / "relations.png").write_text("changed since")  # a file the earlier run wrote: replaced with the rest
    assert main(probe_args(out, "--pooling", "mean", "--overwrite")) == 0
    assert loaded == [1]
    assert json.loads((out / "results.json").read_text())[0]["settings"]["pooling"] == "mean"
    assert (out / "relations.png").read_bytes() != b"changed since"  # the folder is replaced whole


@pytest.mark.parametrize("kind", ["file", "foreign"])
def test_an_out_that_is_not_a_probe_output_is_refused_before_any_work(kind, probe_args, tmp_path, capsys,
                                                                      monkeypatch):
    import medlama.runs.queries as queries_module

    out = tmp_path / "taken"
    if kind == "file":
        out.write_text("mine")
    else:
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    monkeypatch.setattr(queries_module, "load_queries", lambda source: pytest.fail("the probe ran"))
    assert main(probe_args(out, "--overwrite")) == 2
    err = capsys.readouterr().err
    assert ("exists and is not a folder" if kind == "file" else "is not an earlier output of this command") in err
    assert "Traceback" not in err
    assert (out.read_text() if kind == "file" else (out / "notes.txt").read_text()) == "mine"


# ---------------------------------------------------------------------------------------- batch sizes
@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("size", ["0", "-3"])
def test_every_method_refuses_a_batch_size_below_one(method, size, tmp_path, capsys):
    status = main(["probe", "--method", method, "--batch-size", size, "--data", str(tmp_path / "none"),
                   "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert status == 2, err
    assert f"must be >= 1, got {size}" in err and "batch" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_a_piped_medlama_process_draws_no_bars_and_json_is_all_of_stdout(probe_args, tmp_path):
    import os
    import subprocess
    import sys

    env = {key: value for key, value in os.environ.items() if key != "TQDM_DISABLE"}
    out = tmp_path / "piped"
    done = subprocess.run([sys.executable, "-m", "medlama", *probe_args(out, "--limit", "1", "--json")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (out / "results.json").read_text()
    assert not bars(done.stderr) and "acc@k" in done.stderr


def test_a_log_gets_a_plain_progress_line_every_interval(monkeypatch, capsys):
    """Off a terminal, a long loop says where it is in plain lines (no carriage returns), one per interval;
    nothing when silence is asked for, or without a name for the work."""
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setenv("MEDLAMA_LOG_INTERVAL", "0")
    assert list(progress.bar(range(3), desc="candidates", unit="batch")) == [0, 1, 2]
    err = capsys.readouterr().err
    assert err.splitlines() == [f"medlama: candidates: {n}/3 batches " + line.split("batches ")[1]
                                for n, line in zip((1, 2, 3), err.splitlines())] and not bars(err)
    with progress.showing(False):
        list(progress.bar(range(3), desc="candidates"))
    list(progress.bar(range(3)))
    assert capsys.readouterr().err == ""
