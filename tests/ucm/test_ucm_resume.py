"""A killed ``medlama ucm`` continues from the pools it completed: the rerun ranks only the pools left and
writes the records and scores of an uninterrupted run; other settings are refused by name."""

from __future__ import annotations

import json

import pytest

from medlama.cli import main
from medlama.core.resume import work_folder
from medlama.ucm_eval.rankers import RetrievalRanker


def counting(monkeypatch, stop_at: int | None = None, stop: BaseException = KeyboardInterrupt()) -> list[int]:
    """Counts ``RetrievalRanker._scores`` calls (one per block of rows of a pool); the ``stop_at``-th raises
    ``stop`` (default: killed)."""
    calls: list[int] = []
    scores = getattr(RetrievalRanker._scores, "unpatched", RetrievalRanker._scores)

    def counted(ranker, inputs, pool):
        calls.append(len(inputs))
        if len(calls) == stop_at:
            raise stop
        return scores(ranker, inputs, pool)

    counted.unpatched = scores
    monkeypatch.setattr(RetrievalRanker, "_scores", counted)
    return calls


def test_killed_ucm_resumes_the_remaining_pools(sets, tiny_encoder, tmp_path, monkeypatch, capsys):
    flags = ["ucm", "--sets", str(sets), "--model", str(tiny_encoder), "--method", "retrieval", "--records"]
    whole = counting(monkeypatch)
    assert main([*flags, "--out", str(tmp_path / "whole")]) == 0
    assert len(whole) >= 2 and not work_folder(tmp_path / "whole").exists()

    out = tmp_path / "resumed"
    counting(monkeypatch, stop_at=len(whole))  # killed while ranking the last pool
    assert main([*flags, "--out", str(out)]) == 130
    assert not out.exists() and list((work_folder(out) / "shards").glob("*.jsonl"))

    capsys.readouterr()
    assert main([*flags, "--distance", "cosine", "--out", str(out)]) == 2
    assert "distance: 'l2' then, 'cosine' now" in capsys.readouterr().err

    rest = counting(monkeypatch)
    assert main([*flags, "--out", str(out)]) == 0
    assert 1 <= len(rest) < len(whole) and rest == whole[len(whole) - len(rest):]
    assert (out / "records.jsonl").read_bytes() == (tmp_path / "whole" / "records.jsonl").read_bytes()
    strip = lambda model: {k: v for k, v in model.items() if k != "seconds"}  # noqa: E731
    assert [strip(m) for m in json.loads((out / "results.json").read_text())["models"]] == \
        [strip(m) for m in json.loads((tmp_path / "whole" / "results.json").read_text())["models"]]
    assert not work_folder(out).exists()


def test_ucm_stopped_by_an_error_lets_a_corrected_rerun_start_over(sets, tiny_encoder, tmp_path, monkeypatch,
                                                                    capsys):
    """A run that an error stopped (not an interrupt) leaves its completed pools: the same settings continue from
    them, and other settings (the corrected command) start over instead of being refused."""
    flags = ["ucm", "--sets", str(sets), "--model", str(tiny_encoder), "--method", "retrieval", "--records"]
    whole = counting(monkeypatch)
    assert main([*flags, "--out", str(tmp_path / "whole")]) == 0
    out = tmp_path / "out"
    counting(monkeypatch, stop_at=len(whole), stop=RuntimeError("CUDA out of memory"))
    with pytest.raises(RuntimeError, match="out of memory"):
        main([*flags, "--out", str(out)])
    assert not out.exists() and list((work_folder(out) / "shards").glob("*.jsonl"))

    rest = counting(monkeypatch)  # the same settings: continued from the completed pools
    assert main([*flags, "--out", str(out)]) == 0
    assert 1 <= len(rest) < len(whole)
    assert (out / "records.jsonl").read_bytes() == (tmp_path / "whole" / "records.jsonl").read_bytes()

    other = tmp_path / "other"
    counting(monkeypatch, stop_at=len(whole), stop=RuntimeError("CUDA out of memory"))
    with pytest.raises(RuntimeError):
        main([*flags, "--out", str(other)])
    capsys.readouterr()
    again = counting(monkeypatch)  # the corrected command, with other settings: starts over, not refused
    assert main([*flags, "--distance", "cosine", "--out", str(other)]) == 0
    assert len(again) == len(whole)
    assert json.loads((other / "results.json").read_text())["models"][0]["settings"]["distance"] == "cosine"
    assert not work_folder(other).exists()
