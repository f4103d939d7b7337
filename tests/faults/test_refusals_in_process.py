"""A refused command gives the same lines and exit status whether it runs as ``python -m medlama ...`` in a
fresh interpreter or through the CLI's ``main`` in the test process (``tests/helpers/refusals.py``'s
``medlama_here``, which the fault cases use where the message is the point): one refusal of each kind, the
parser's, one before any work and one after reading a run, compared line for line."""

from __future__ import annotations

import pytest

from annotation_runs import write_run  # tests/helpers (pytest pythonpath)
from refusals import error_line, medlama, medlama_here


@pytest.mark.parametrize("case", ["parser", "before any work", "after reading a run"])
def test_a_refusal_reads_the_same_in_process_and_in_a_fresh_interpreter(tmp_path, case):
    if case == "parser":
        words = ["probe", "--data", tmp_path / "never-read", "--top-k", "0", "--out", tmp_path / "o"]
    elif case == "before any work":
        words = ["consistency", tmp_path / "nowhere"]
    else:
        run = write_run(tmp_path / "run", "base")
        words = ["annotate", "export", run, "--out", tmp_path / "sheet", "--queries", "2", "--strategy", "uncertainty"]
    fresh, here = medlama(*words, cwd=tmp_path), medlama_here(*words, cwd=tmp_path)
    assert (here.returncode, here.stdout, here.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    if case != "parser":  # the parser's own line reads 'medlama probe: error: argument --top-k: ...'
        assert error_line(here) == error_line(fresh)
    assert sorted(p.name for p in tmp_path.iterdir()) == (["run"] if case == "after reading a run" else [])


def test_a_warning_and_an_uncaught_exception_reach_the_captured_stderr(monkeypatch):
    """What a fresh interpreter would print besides the error line shows in ``medlama_here``'s stderr too, so a
    check that the line stands alone on stderr stays as strict in process."""
    import warnings

    import medlama.cli

    def warns_then_fails(argv):
        warnings.warn("a UserWarning the command raised", UserWarning)
        raise RuntimeError("a bug")

    monkeypatch.setattr(medlama.cli, "main", warns_then_fails)
    result = medlama_here("list")
    assert result.returncode == 1
    assert "UserWarning: a UserWarning the command raised" in result.stderr
    assert "Traceback" in result.stderr and "RuntimeError: a bug" in result.stderr
