"""The one label rule wherever a row's name is taken (``probe``, ``ucm``, and the runs ``compare``, ``report``
and ``annotate`` read back): a blank label, or one holding a line break or other control character, would give
a nameless or split row, and is refused as a repeated one is; and ``--resamples`` is bounded, the bound said."""

from __future__ import annotations

import json

import pytest

import medlama
from annotation_runs import write_run
from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.runs.workflow import probe

#: The bound README states (``core.intervals.MAX_RESAMPLES``).
MAX_RESAMPLES = 100_000
BAD = ["", "  ", "a\nb", "a\rb", "tab\there", "bell\x07", "line\u2028sep"]


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("medlama: error: "), err
    return err[0]


@pytest.mark.parametrize("label", BAD)
def test_probe_and_ucm_refuse_the_label_before_any_work(tmp_path, capsys, label):
    # the model and the sets do not exist: the label is refused before either is looked at
    assert main(["probe", "--model", str(tmp_path / "missing"), "--label", label]) == 2
    line = one_error_line(capsys)
    assert f"--label {label!r} " in line and "a row's name must be visible text on one line" in line
    assert main(["ucm", "--sets", str(tmp_path / "none"), "--model", str(tmp_path / "m"), "--label", label]) == 2
    assert f"--label {label!r} " in one_error_line(capsys)
    for call in (lambda: medlama.probe(str(tmp_path / "missing"), label=label),
                 lambda: medlama.ucm(tmp_path / "none", str(tmp_path / "m"), label=label),
                 lambda: probe(object(), None, label=label)):
        with pytest.raises(MedlamaInputError, match="a row's name must be visible text on one line"):
            call()


@pytest.mark.parametrize("label", ["", "a\nb"])
def test_compare_report_and_annotate_refuse_a_run_so_labelled(tmp_path, capsys, label):
    good = write_run(tmp_path / "base", "base")
    bad = write_run(tmp_path / "bad", "rewired")
    # the run's label as an older or hand-edited results.json holds it (its rows carry the same name)
    for name in ("results.json", "predictions.jsonl"):
        file = bad / name
        file.write_text(file.read_text().replace('"rewired"', json.dumps(label)))
    commands = [["compare", str(good), str(bad)], ["report", str(good), str(bad), "--out", str(tmp_path / "r.html")],
                ["annotate", "export", str(good), str(bad), "--out", str(tmp_path / "sheet")]]
    for command in commands:
        assert main(command) == 2, command
        line = one_error_line(capsys)
        assert line.startswith(f"medlama: error: {bad / 'results.json'}: the run label {label!r} "), line
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "sheet").exists()
    with pytest.raises(MedlamaInputError, match="the run label"):
        medlama.compare(good, bad)


@pytest.mark.parametrize("resamples", [MAX_RESAMPLES + 1, 10**8])
def test_resamples_are_bounded_everywhere_they_are_offered(tmp_path, capsys, resamples):
    runs = [write_run(tmp_path / "base", "base"), write_run(tmp_path / "rewired", "rewired")]
    message = f"setting 'resamples' must be at most {MAX_RESAMPLES}, got {resamples}"
    for command in (["compare", *map(str, runs)], ["report", *map(str, runs), "--out", str(tmp_path / "r.html")],
                    ["annotate", "score", str(runs[0]), "--sheet", str(tmp_path / "sheet"), str(tmp_path / "x.csv")]):
        assert main([*command, "--resamples", str(resamples)]) == 2
        assert one_error_line(capsys) == f"medlama: error: {message}"
    for call in (lambda: medlama.compare(*runs, resamples=resamples),
                 lambda: medlama.report(*runs, out=tmp_path / "r.html", resamples=resamples),
                 lambda: medlama.annotate_score(runs[0], sheet=tmp_path / "sheet", ratings=["x.csv"],
                                                resamples=resamples)):
        with pytest.raises(MedlamaInputError, match=message):
            call()
    assert main(["compare", *map(str, runs), "--json", "--resamples", str(MAX_RESAMPLES // 100)]) == 0
    assert json.loads(capsys.readouterr().out)["method"]["settings"]["resamples"] == MAX_RESAMPLES // 100
