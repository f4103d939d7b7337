"""``--data`` / ``QuerySource.data`` takes what ``load_dataset`` reads: a built folder, a ``push-dataset`` dry run,
or a Hub dataset id (fetched with ``huggingface_hub.snapshot_download``, stood in for here by a local copy of
the pushed tree: no network). Config names of the folder (``hard_may_treat``) select a relation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub.errors import LocalEntryNotFoundError

from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.runs.queries import QuerySource, load_medlama_queries, load_queries
from medlama.publishing.hub import push_dataset
from probe_outputs import predictions

COMMIT = "0123456789abcdef0123456789abcdef01234567"
RELATION = "may_treat"


def same_queries(a, b) -> bool:
    return (a.ids, a.relations, a.texts, a.gold, a.candidates, a.name) == (b.ids, b.relations, b.texts, b.gold,
                                                                        b.candidates, b.name)


@pytest.fixture(scope="module")
def pushed(medlama_dir, tmp_path_factory) -> Path:
    """The dry run of ``push-dataset`` of the session's MedLAMA build (the folder holding manifest.json)."""
    dry = tmp_path_factory.mktemp("pushed") / "dry"
    push_dataset(medlama_dir, "someone/medlama", dry_run=dry)
    return dry


@pytest.fixture
def hub(pushed, tmp_path, monkeypatch):
    """``snapshot_download`` answering from a local copy laid out as the Hugging Face cache lays it out."""
    snapshot = tmp_path / "hub" / "datasets--someone--medlama" / "snapshots" / COMMIT
    shutil.copytree(pushed / "medlama", snapshot)
    calls = []

    def snapshot_download(repo_id, *, repo_type=None, revision=None, **kwargs):
        calls.append((repo_id, repo_type, revision))
        if repo_id != "someone/medlama":
            raise LocalEntryNotFoundError("not cached")
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    return calls


def test_hub_id_gives_the_queries_of_the_folder_and_records_the_revision(medlama_dir, hub):
    local = load_queries(QuerySource(data=medlama_dir, relations=(RELATION,)))
    remote = load_queries(QuerySource(data=Path("someone/medlama"), relations=(RELATION,)))
    assert same_queries(local, remote) and len(remote) == 977
    assert hub == [("someone/medlama", "dataset", None)]
    assert (remote.info["kind"], remote.info["id"], remote.info["revision"]) == ("hub", "someone/medlama", COMMIT)
    assert remote.info["config"] == "hard" and remote.info["relations"] == [RELATION]
    assert local.info["kind"] == "folder" and local.info["revision"] is None
    assert local.info["release_commit"] == remote.info["release_commit"] and len(local.info["release_commit"]) == 40
    assert len(remote.info["sha256"]) == 64 and str(medlama_dir) not in json.dumps(local.info)
    load_medlama_queries("someone/medlama@v1", "full", relations=[RELATION])  # a revision goes to the Hub call
    assert hub[-1] == ("someone/medlama", "dataset", "v1")


def test_push_dataset_dry_run_folder_is_data(medlama_dir, pushed):
    local = load_queries(QuerySource(data=medlama_dir, config="full", relations=(RELATION,)))
    for data in (pushed, pushed / "medlama"):  # the dry-run folder, or the tree in it
        queries = load_queries(QuerySource(data=data, config="full", relations=(RELATION,)))
        assert same_queries(local, queries)
    assert load_queries(QuerySource(data=pushed, relations=(RELATION,))).info["id"] == "someone/medlama"


def test_config_names_of_the_dataset_select_a_relation(medlama_dir):
    by_flag = load_queries(QuerySource(data=medlama_dir, config="hard", relations=(RELATION,)))
    by_config = load_queries(QuerySource(data=medlama_dir, config=f"hard_{RELATION}"))
    assert same_queries(by_flag, by_config)
    assert same_queries(by_config, load_queries(QuerySource(data=medlama_dir, config=f"hard_{RELATION}",
                                                            relations=(RELATION,))))
    with pytest.raises(MedlamaInputError, match=r"unknown MedLAMA config 'hard_may_cure'; this dataset has "
                                                r"\['full', 'full_associated_morphology_of'.*'hard_occurs_after'\]"):
        load_queries(QuerySource(data=medlama_dir, config="hard_may_cure"))
    with pytest.raises(MedlamaInputError, match=r"unknown MedLAMA config 'easy'; choose from \['hard', 'full'\] or "
                                                "hard_<relation>"):
        load_queries(QuerySource(data=medlama_dir, config="easy"))
    with pytest.raises(MedlamaInputError, match="config 'hard_may_treat' already selects the relation 'may_treat'"):
        load_queries(QuerySource(data=medlama_dir, config="hard_may_treat", relations=("may_prevent",)))


def test_what_is_neither_folder_nor_hub_id(tmp_path, monkeypatch):
    with pytest.raises(MedlamaInputError, match="no such dataset folder, and not a Hub dataset id"):
        load_queries(QuerySource(data=tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(MedlamaInputError, match=r"not a built dataset folder \(no README.md\)"):
        load_queries(QuerySource(data=tmp_path / "empty"))
    # The real snapshot_download, offline (conftest): a clear error, and no network.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MedlamaInputError, match="someone/never-pushed is not in the local Hugging Face cache"):
        load_queries(QuerySource(data=Path("someone/never-pushed")))


def test_cli_probes_a_hub_dataset(hub, make_tiny_bert, tmp_path, capsys):
    model = make_tiny_bert("tiny-bert-hub")
    out = tmp_path / "probe"
    assert main(["probe", "--data", "someone/medlama", "--config", "hard_may_treat", "--model", str(model),
                 "--out", str(out)]) == 0
    result = json.loads((out / "results.json").read_text())[0]
    assert result["query_set"] == "hard[may_treat]" and len(predictions(out)) == 977
    assert result["provenance"]["data"]["revision"] == COMMIT


def test_python_api_probes_a_hub_dataset_as_the_cli(hub, pushed, medlama_dir, make_tiny_bert, tmp_path):
    """``medlama.probe(data=<Hub id>)`` and ``medlama.load_medlama(data=<Hub id>)`` go through the CLI's route:
    the revision reaches the Hub call and the commit it resolved to is recorded."""
    import medlama

    model = str(make_tiny_bert("tiny-bert-hub-api"))
    remote = medlama.probe(model, "someone/medlama@v1", config=f"hard_{RELATION}", limit=20)
    assert hub[-1] == ("someone/medlama", "dataset", "v1")
    local = medlama.probe(model, medlama_dir, relations=[RELATION], limit=20)
    assert remote.ids == local.ids and remote.predictions == local.predictions and len(remote.ids) == 20
    assert (remote.data["kind"], remote.data["id"], remote.data["revision"]) == ("hub", "someone/medlama", COMMIT)
    provenance = json.loads((remote.save(tmp_path / "run") / "results.json").read_text())[0]["provenance"]
    assert provenance["data"]["revision"] == COMMIT and provenance["data"]["release_commit"]
    rows = medlama.load_medlama("hard", data="someone/medlama", relations=[RELATION])
    assert hub[-1] == ("someone/medlama", "dataset", None)
    assert rows["id"] == medlama.load_medlama("hard", data=medlama_dir, relations=[RELATION])["id"]
    assert len(medlama.load_medlama(f"hard_{RELATION}", data=pushed)) == len(rows) == 977  # a dry-run folder
    with pytest.raises(MedlamaInputError, match="not in the local Hugging Face cache"):
        medlama.probe(model, "someone/other")
