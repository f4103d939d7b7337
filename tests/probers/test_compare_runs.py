"""``medlama compare`` refuses runs it cannot pair: runs on data worded differently (another prompt text, the
same queries and gold answers), whatever the data's origin (a built folder, a ``push-dataset`` dry run, a Hub
snapshot, a loaded Dataset), and a folder whose per-query hits contradict its own predictions."""

from __future__ import annotations

import json

import pytest

from cv_inputs import FINDING, TREAT, write_probe_folder  # tests/helpers (pytest pythonpath)
from probe_outputs import toy_queries, toy_result

from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.analysis import CompareSettings, compare_runs, load_runs
from medlama.runs.queries import queries_from

#: The same relations asked in other words: the queries, gold answers and pool stay the same.
OTHER_PROMPTS = {FINDING: "[X] is often seen with [Y] .", TREAT: "[X] is a treatment of [Y] ."}
QUICK = CompareSettings(resamples=100)


def probed(queries, out, label: str, seed: int):
    """``out`` holding one run on ``queries``, written by the probe's writer (without its plots: quicker)."""
    from medlama.runs.outputs import write_probe_results

    out.mkdir()
    write_probe_results(out, [toy_result(queries, label, 0.5, seed)])
    return out


def assert_paired_only_on_the_same_data(same, other, tmp_path, what: str) -> None:
    """Runs on ``same`` (a query set of the first run's data) compare; on ``other`` (reworded) they are refused."""
    first, second, third = (tmp_path / "runs" / name for name in ("first", "same", "other"))
    (tmp_path / "runs").mkdir()
    probed(same[0], first, "first", 1)
    probed(same[1], second, "same", 2)
    probed(other, third, "other", 3)
    assert compare_runs(load_runs([first, second]), QUICK)["queries"] == 6
    with pytest.raises(MedlamaInputError, match=f"'first' .* and 'other' .* differ in their {what}"):
        compare_runs(load_runs([first, third]), QUICK)


def test_runs_on_folders_of_other_prompt_text_are_refused(tmp_path):
    a, b = write_probe_folder(tmp_path / "a"), write_probe_folder(tmp_path / "b")
    other = write_probe_folder(tmp_path / "c", prompts=OTHER_PROMPTS)
    assert_paired_only_on_the_same_data([queries_from(a, config="full"), queries_from(b, config="full")],
                                        queries_from(other, config="full"), tmp_path, r"data files \(SHA-256\)")


def test_runs_on_dry_run_trees_of_other_prompt_text_are_refused(tmp_path):
    def dry_run(name, prompts=None):
        folder = tmp_path / name
        write_probe_folder(folder / "medlama", prompts=prompts)
        (folder / "manifest.json").write_text(json.dumps({"repo_id": "someone/medlama", "repo_type": "dataset"}))
        return queries_from(folder, config="full")

    same = [dry_run("a"), dry_run("b")]
    assert same[0].info["id"] == "someone/medlama"
    assert_paired_only_on_the_same_data(same, dry_run("c", OTHER_PROMPTS), tmp_path, r"data files \(SHA-256\)")


def test_runs_on_hub_revisions_of_other_prompt_text_are_refused(tmp_path, monkeypatch):
    from medlama.datasets import folders

    snapshots = {"v1": write_probe_folder(tmp_path / "v1"), "v2": write_probe_folder(tmp_path / "v2"),
                 "v3": write_probe_folder(tmp_path / "v3", prompts=OTHER_PROMPTS)}
    monkeypatch.setattr(folders, "_snapshot", lambda repo_id, revision: (snapshots[revision], f"commit-{revision}"))
    hub = [queries_from(f"someone/medlama@{revision}", config="full") for revision in snapshots]
    assert hub[0].info["kind"] == "hub" and hub[0].info["revision"] == "commit-v1"
    assert_paired_only_on_the_same_data(hub[:2], hub[2], tmp_path, r"data files \(SHA-256\)")


def test_runs_on_datasets_of_other_prompt_text_are_refused(tmp_path):
    from medlama.datasets.folders import load_config

    a, other = write_probe_folder(tmp_path / "a"), write_probe_folder(tmp_path / "c", prompts=OTHER_PROMPTS)
    # a Dataset's fingerprint is of its files where they lie: the same data is one folder loaded twice
    loaded = [queries_from(load_config(folder, "full"), candidates="config") for folder in (a, a, other)]
    assert loaded[0].info["fingerprint"]
    assert_paired_only_on_the_same_data(loaded[:2], loaded[2], tmp_path, "data fingerprint")


def test_a_run_without_any_identity_of_its_data_is_refused(tmp_path):
    queries = toy_queries()
    queries.info.pop("fingerprint")
    first, second = probed(toy_queries(), tmp_path / "first", "first", 1), probed(queries, tmp_path / "x", "x", 2)
    with pytest.raises(MedlamaInputError, match="run 'x' .* records no identity of its data"):
        compare_runs(load_runs([first, second]), QUICK)


def test_hits_swapped_by_hand_are_refused_naming_the_file_and_line(tmp_path, capsys):
    first, edited = probed(toy_queries(), tmp_path / "first", "first", 1), probed(toy_queries(), tmp_path / "b", "b", 2)
    file = edited / "predictions.jsonl"
    rows = [json.loads(line) for line in file.read_text().splitlines()]
    hit, miss = (next(i for i, row in enumerate(rows) if row["hit@1"] is value) for value in (True, False))
    rows[hit]["hit@1"], rows[miss]["hit@1"] = False, True  # the mean (and results.json's acc@1) unchanged
    file.write_text("".join(json.dumps(row) + "\n" for row in rows))
    line = min(hit, miss) + 1
    with pytest.raises(MedlamaInputError, match=rf"predictions.jsonl, row {line}: run 'b': query .* records hit@1 = "
                                                "(true|false), but its predictions and gold answers give"):
        load_runs([first, edited])
    assert main(["compare", str(first), str(edited), "--json"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("medlama: error:") and f"{file}, row {line}" in error


def test_hits_beyond_the_kept_predictions_are_checked_only_where_they_can_be(tmp_path):
    """A row keeps the top 10: hit@20 may be true with no gold among them, never false with one."""
    from medlama.runs.scores import score
    from medlama.runs.outputs import write_probe_results
    queries = toy_queries()
    for label, seed in (("first", 1), ("b", 2)):
        result = toy_result(queries, label, 0.5, seed)
        result.metrics = score(queries, result.predictions, ks=(1, 5, 10, 20))
        (tmp_path / label).mkdir()
        write_probe_results(tmp_path / label, [result])
    assert load_runs([tmp_path / "first", tmp_path / "b"])[1].ks == [1, 5, 10, 20]
    file = tmp_path / "b" / "predictions.jsonl"
    rows = [json.loads(line) for line in file.read_text().splitlines()]
    miss = next(i for i, row in enumerate(rows) if not row["hit@20"])
    found = next(i for i, row in enumerate(rows) if row["hit@10"] and i > miss)
    rows[miss]["hit@20"], rows[found]["hit@20"] = True, False  # the first may be (its gold beyond the top 10)
    file.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(MedlamaInputError, match=rf"row {found + 1}: run 'b': .* hit@20 = false"):
        load_runs([tmp_path / "first", tmp_path / "b"])


def test_a_file_changed_since_the_probe_wrote_it_is_refused(tmp_path):
    queries = toy_queries()
    first = tmp_path / "first"
    toy_result(queries, "first", 0.5, 1).save(first)  # as `medlama probe` writes it: with its ownership record
    for name in ("results.json", "predictions.jsonl"):
        edited = tmp_path / name.split(".")[0]
        toy_result(queries, "b", 0.5, 2).save(edited)
        assert len(load_runs([first, edited])) == 2
        file = edited / name
        text = file.read_text()
        # an edit compare does not read (the model's input of one query; the command line recorded)
        file.write_text(text.replace('"input": null', '"input": "edited"', 1) if name == "predictions.jsonl"
                        else text.replace('"command": ', '"command": "edited", "was": ', 1))
        assert file.read_text() != text
        with pytest.raises(MedlamaInputError, match=rf"{name}: changed since `medlama probe` wrote it"):
            load_runs([first, edited])
