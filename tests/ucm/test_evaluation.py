"""``medlama ucm`` end to end on tiny models (JSON, PNG, records), records over cut inputs, loading the sets,
and bad input.

The sets (fixture ``sets``, tests/ucm/conftest.py) come from the corpora and tiny MedLAMA folder of
``tests/helpers/cv_inputs.py``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from medlama.cli import main
from medlama.datasets.context_variance import with_inputs
from medlama.core.errors import MedlamaInputError
from medlama.ucm_eval.evaluation import evaluate_model
from medlama.ucm_eval.rankers import RetrievalRanker, RetrievalRankerSettings
from medlama.ucm_eval.sets import load_sets


# ------------------------------------------------------------------------------------------ end to end
def test_medlama_ucm_end_to_end(sets, tiny_mlm, tiny_encoder, tmp_path, capsys):
    out = tmp_path / "ucm"
    status = main(["ucm", "--sets", str(sets), "--model", str(tiny_mlm), str(tiny_encoder), "--label", "mlm", "enc",
                   "--method", "mask-average", "retrieval",  # mask average named: auto's is mask-predict
                   "--out", str(out), "--records", "--include-first-segment"])
    assert status == 0
    printed = capsys.readouterr().out
    for title in ("Table 1", "Table 2", "Table 3", "UCM_k per relation", "UCM_m by source and context type"):
        assert title in printed
    results = json.loads((out / "results.json").read_text())
    assert (out / "ucm.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    from datasets import concatenate_datasets, load_dataset

    rows = concatenate_datasets([load_dataset(str(sets), s, split="test") for s in ("ehr", "pmc")])
    per_model = sum(len(inputs) - 1 for inputs in rows.with_transform(with_inputs)[:]["inputs"])
    assert len(records) == 2 * per_model
    mlm, enc = results["models"]
    assert (mlm["settings"]["method"], enc["settings"]["method"]) == ("mask-average", "retrieval")
    assert mlm["num_sequences"] == len(rows) and mlm["num_records"] == per_model
    for model in results["models"]:
        mine = [r for r in records if r["model"] == model["label"]]
        for side, negative in (("target", False), ("negative", True)):
            chosen = [r for r in mine if r["negative"] == negative and r["added_is_correct"]]
            signs = [np.sign(r["target_rank_after"] - r["target_rank_before"]) for r in chosen]
            shares = [signs.count(-1) / len(signs), signs.count(0) / len(signs), signs.count(1) / len(signs)]
            got = model[side]
            assert [got["understand"], got["confuse"], got["misunderstand"]] == pytest.approx(shares)
            assert got["num_records_correct"] == len(chosen)
        # acc@k without context = O_t in the top k at input0 (the k = 1 record's "before"), with context = at the
        # last input (the last record's "after"), over the O_t-centred sequences
        target = {}
        for r in mine:
            if not r["negative"]:
                target.setdefault(r["sequence_id"], []).append(r)
        for k in (1, 5):
            without = np.mean([seq[0]["target_rank_before"] <= k for seq in target.values()])
            within = np.mean([seq[-1]["target_rank_after"] <= k for seq in target.values()])
            assert model["accuracy"]["target"]["without_context"][f"acc@{k}"] == pytest.approx(without)
            assert model["accuracy"]["target"]["with_context"][f"acc@{k}"] == pytest.approx(within)
        assert set(model["by_context"]) == {f"{s}/{t}" for s in ("ehr", "pmc") for t in
                                            ("real", "knowledge-only", "knowledge-sorted", "knowledge-random")}
        macro = model["ucm_k_macro"]["target"]
        per_relation = [v for v in model["target"]["per_relation"].values() if v["num_records_correct"]]
        assert macro["understand"] == pytest.approx(np.mean([v["understand"] for v in per_relation]))

    # filters, and the default that leaves out S1's record (its added entity is the centre itself)
    assert main(["ucm", "--sets", str(sets), "--model", str(tiny_encoder), "--sources", "pmc", "--context-types",
                 "real", "--no-negative", "--out", str(tmp_path / "small")]) == 0
    small = json.loads((tmp_path / "small" / "results.json").read_text())["models"][0]
    pmc_real = load_dataset(str(sets), "pmc_real", split="test")
    assert small["num_sequences"] == len(pmc_real) and small["negative"] is None
    assert small["settings"]["skip_first_segment"] is True and small["num_records_truncated"] == 0
    assert small["num_records"] == sum(len(inputs) - 2 for inputs in pmc_real.with_transform(with_inputs)[:]["inputs"])


def test_records_over_cut_inputs_are_left_out_and_counted(sets, tiny_encoder):
    from transformers import AutoTokenizer

    selected = load_sets(sets, negative=False)
    all_inputs = selected.rows.with_transform(with_inputs)[:]["inputs"]
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_encoder))
    lengths = {text: len(tokenizer(text.replace("[Y]", "[MASK]"))["input_ids"])
               for inputs in all_inputs for text in inputs}
    limit = int(np.median(list(lengths.values())))  # cuts about half of the inputs
    ranker = RetrievalRanker(tiny_encoder, RetrievalRankerSettings(query_max_length=limit))
    result = evaluate_model(ranker, selected, label="cut", keep_records=True, skip_first_segment=False,
                            progress=False)
    expected_kept = expected_cut = 0
    for inputs in all_inputs:
        for k in range(1, len(inputs)):
            if lengths[inputs[k - 1]] <= limit and lengths[inputs[k]] <= limit:
                expected_kept += 1
            else:
                expected_cut += 1
    assert expected_kept and expected_cut
    assert (result.num_records, result.num_records_truncated) == (expected_kept, expected_cut)
    assert all(record["whole"] for record in result.records)
    assert result.target["num_records"] == expected_kept


def test_load_sets_and_bad_input(sets, tiny_encoder, tmp_path, capsys):
    selected = load_sets(sets, sources=["ehr"], context_types=["knowledge-only"], relations=["may_treat"])
    assert set(selected.rows["relation"]) == {"may_treat"} and set(selected.rows["source"]) == {"ehr"}
    assert main(["ucm", "--sets", str(tmp_path), "--model", str(tiny_encoder)]) == 2
    assert "not a context-variance folder" in capsys.readouterr().err
    assert main(["ucm", "--sets", str(sets), "--model", str(tiny_encoder), "--sources", "lmc",
                 "--out", str(tmp_path / "o")]) == 2
    assert "unknown source(s) ['lmc']" in capsys.readouterr().err
    assert main(["ucm", "--sets", str(sets), "--model", str(tiny_encoder), "--label", "a", "b"]) == 2
    assert "2 --label values for 1 --model values" in capsys.readouterr().err
    assert main(["ucm", "--sets", str(sets), "--model", str(tiny_encoder), "--relations", "may_cure",
                 "--out", str(tmp_path / "o")]) == 2
    assert "unknown relation(s) ['may_cure']" in capsys.readouterr().err
    assert main(["ucm", "--sets", str(sets), "--model", str(tiny_encoder), "--method", "mask-average",
                 "--out", str(tmp_path / "o")]) == 2
    assert "no MLM head" in capsys.readouterr().err


def test_old_ranker_flag_and_names_are_refused(sets, tiny_mlm, tmp_path, capsys):
    """The pre-release spellings (``--ranker``, ``--method mlm``) are not flags or methods of ``medlama ucm``."""
    small = ["--sets", str(sets), "--model", str(tiny_mlm), "--sources", "pmc", "--context-types", "real",
             "--no-negative"]
    with pytest.raises(SystemExit) as exit_:
        main(["ucm", *small, "--ranker", "mask-average", "--out", str(tmp_path / "old")])
    assert exit_.value.code == 2 and "unrecognized arguments: --ranker" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["ucm", *small, "--method", "mlm", "--out", str(tmp_path / "old")])
    assert exit_.value.code == 2 and "invalid choice: 'mlm'" in capsys.readouterr().err
    assert not (tmp_path / "old").exists()


def test_ucm_help_shows_every_default(capsys):
    with pytest.raises(SystemExit):
        main(["ucm", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for shown in ("--method", "(default: auto)", "--ks K [K ...]", "(default: 1 5)", "--max-tokens N",
                  "(default: none)", "--pooling {cls,mean}", "(default: cls)", "--distance {l2,cosine}",
                  "(default: l2)", "mask-predict: queries decoded together (x beam size rows per forward pass) (default: 16); mask-average: "
                  "queries per forward pass (one row each, per candidate length) (default: 32); retrieval: texts per "
                  "forward pass (default: 64)", "--no-negative",
                  "--include-first-segment", "--records"):
        assert shown in text
    assert "--ranker" not in text and "mlm" not in text.replace("--model", "")


def test_results_carry_share_intervals_and_provenance(sets, tiny_encoder, tmp_path, capsys):
    from medlama.core.intervals import bootstrap_shares_ci
    from medlama.ucm_eval.scores import SHARES, record_label

    out = tmp_path / "ucm-ci"
    assert main(["ucm", "--sets", str(sets), "--model", str(tiny_encoder), "--out", str(out), "--records"]) == 0
    capsys.readouterr()
    results = json.loads((out / "results.json").read_text())
    model = results["models"][0]
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    for side, negative in (("target", False), ("negative", True)):
        labels = [label for r in records if r["negative"] == negative and (label := record_label(r))]
        expected = bootstrap_shares_ci(labels, SHARES)
        for share in SHARES:
            assert model["intervals"][side][share] == (list(expected[share]) if expected[share] else None)
            if model["intervals"][side][share] and model[side][share] is not None:
                low, high = model["intervals"][side][share]
                assert low <= model[side][share] <= high
    provenance = results["provenance"]
    assert set(provenance) >= {"versions", "date", "command", "device", "data", "models", "settings"}
    assert provenance["models"][0]["name"] == tiny_encoder.name and len(provenance["models"][0]["sha256"]) == 64
    assert provenance["data"]["dataset"] == "context-variance" and len(provenance["data"]["folder_sha256"]) == 64
    assert str(tiny_encoder) not in json.dumps(provenance)


def test_python_api_ucm_equals_the_command(sets, tiny_encoder, tmp_path, capsys):
    import medlama

    assert main(["ucm", "--sets", str(sets), "--model", str(tiny_encoder), "--method", "retrieval",
                 "--out", str(tmp_path / "cli")]) == 0
    capsys.readouterr()
    cli = json.loads((tmp_path / "cli" / "results.json").read_text())["models"][0]
    result = medlama.ucm(sets, tiny_encoder, method="retrieval")
    assert result.target == cli["target"] and result.accuracy == cli["accuracy"]
    assert result.intervals == cli["intervals"]
    # out=: written as the command writes it, and only over an earlier UCM output
    medlama.ucm(sets, tiny_encoder, method="retrieval", out=tmp_path / "cli")  # the command's own output
    assert json.loads((tmp_path / "cli" / "results.json").read_text())["models"][0]["target"] == cli["target"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(MedlamaInputError, match="mine"):
        medlama.ucm(sets, tiny_encoder, method="retrieval", out=mine)
    assert (mine / "notes.txt").read_text() == "keep me" and not (mine / "results.json").exists()
