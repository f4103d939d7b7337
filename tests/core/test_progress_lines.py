"""Off a terminal, inside the block the ``medlama`` command runs in (``showing``), a long loop still says where
it is in plain lines: no bar is drawn, but a log is not silenced unless silence was asked for (``--no-progress``,
or ``TQDM_DISABLE`` set by the user before the run)."""

from __future__ import annotations

from medlama.core import progress


def lines(capsys) -> list[str]:
    list(progress.bar(range(2), desc="candidates", unit="batch"))
    return capsys.readouterr().err.splitlines()


def test_a_log_under_the_command_gets_plain_lines_unless_silence_was_asked(monkeypatch, capsys):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setenv("MEDLAMA_LOG_INTERVAL", "0")
    with progress.showing(None) as on:  # the command without --progress/--no-progress; stderr is no terminal
        assert on is False
        said = lines(capsys)
        assert [line.split(" (")[0] for line in said] == ["medlama: candidates: 1/2 batches",
                                                          "medlama: candidates: 2/2 batches"]
        with progress.showing(None):  # a block inside it (the Python API's) keeps the decision
            assert len(lines(capsys)) == 2
    with progress.showing(False):  # --no-progress
        assert lines(capsys) == []
        with progress.showing(None):
            assert lines(capsys) == []
    monkeypatch.setenv("TQDM_DISABLE", "1")  # the user's
    with progress.showing(None):
        assert lines(capsys) == []
    assert lines(capsys) == []
