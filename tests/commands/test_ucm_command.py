"""``medlama ucm``: ``--json``, ``--quiet``, ``--limit`` (first N triples per relation), ``--device``, reruns
(``--overwrite``), outputs checked before any work, and batch sizes refused with a message."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from datasets import concatenate_datasets, load_dataset

from medlama.cli import main
from medlama.ucm_eval.sets import load_sets



@pytest.fixture(scope="module")
def tiny_encoder(make_tiny_bert) -> Path:
    return make_tiny_bert("ucm-cli-tiny-encoder", seed=1)


def test_load_sets_limit_keeps_the_first_triples_of_each_relation(sets):
    every = load_sets(sets)
    limited = load_sets(sets, limit=1)
    frame = every.rows.select_columns(["relation", "triple_id"]).to_pandas()
    firsts = frame.drop_duplicates().groupby("relation", sort=False).head(1)
    expected = set(map(tuple, firsts.to_numpy()))
    got = limited.rows.select_columns(["relation", "triple_id"]).to_pandas()
    assert set(map(tuple, got.drop_duplicates().to_numpy())) == expected
    assert len(got) == frame.apply(tuple, axis=1).isin(expected).sum() < len(frame)
    assert limited.selection["limit_triples_per_relation"] == 1


def test_ucm_json_quiet_limit_device_and_reruns(sets, tiny_encoder, tmp_path, capsys, monkeypatch):
    import medlama.ucm_eval.rankers as rankers

    common = ["ucm", "--sets", str(sets), "--model", str(tiny_encoder), "--method", "retrieval", "--batch-size", "8"]
    out = tmp_path / "ucm"
    devices = []
    real = rankers.make_ranker
    monkeypatch.setattr(rankers, "make_ranker", lambda *a, device=None, **k: devices.append(device) or real(
        *a, device=device, **k))
    assert main([*common, "--out", str(out), "--json", "--limit", "1", "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    assert captured.out == (out / "results.json").read_text()
    results = json.loads(captured.out)
    assert "Table 1" in captured.err and devices == ["cpu"]
    assert "\r" not in captured.err and "sequence/s" not in captured.err  # no progress bars in a pipe
    assert results["selection"]["limit_triples_per_relation"] == 1
    assert results["models"][0]["num_sequences"] == len(load_sets(sets, limit=1).rows)
    assert sorted(p.name for p in out.iterdir()) == [".medlama-output.json", "results.json", "ucm.png"]

    # a rerun is refused before any model loads; --overwrite replaces the folder whole
    monkeypatch.setattr(rankers, "make_ranker", lambda *a, **k: pytest.fail("the ucm ran"))
    assert main([*common, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "give --overwrite" in err and "Traceback" not in err
    monkeypatch.setattr(rankers, "make_ranker", real)
    assert main([*common, "--out", str(out), "--overwrite", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    again = json.loads((out / "results.json").read_text())
    assert "limit_triples_per_relation" not in again["selection"]
    every = concatenate_datasets([load_dataset(str(sets), s, split="test") for s in ("ehr", "pmc")])
    assert again["models"][0]["num_sequences"] == len(every)


def test_ucm_refuses_bad_outputs_and_batch_sizes_before_any_work(sets, tiny_encoder, tmp_path, capsys,
                                                                  monkeypatch):
    import medlama.ucm_eval.rankers as rankers

    monkeypatch.setattr(rankers, "make_ranker", lambda *a, **k: pytest.fail("the ucm ran"))
    common = ["ucm", "--sets", str(sets), "--model", str(tiny_encoder)]
    afile = tmp_path / "afile"
    afile.write_text("mine")
    assert main([*common, "--out", str(afile), "--overwrite"]) == 2
    assert "exists and is not a folder" in capsys.readouterr().err and afile.read_text() == "mine"
    for method in ("mask-average", "retrieval", "auto"):
        for size in ("0", "-1"):
            assert main([*common, "--method", method, "--batch-size", size, "--out", str(tmp_path / "o")]) == 2
            err = capsys.readouterr().err
            assert re.search(rf"batch.size'? must be (>= 1|at least 1), got {size}", err), err
            assert "Traceback" not in err
    assert main([*common, "--limit", "0", "--out", str(tmp_path / "o")]) == 2
    assert re.search(r"limit'? must be (>= 1|at least 1), got 0", capsys.readouterr().err)
    assert not (tmp_path / "o").exists()
