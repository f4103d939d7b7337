"""The shard store of a resumable run: a folder at its place that is not medlama's is never touched, another
command's or another run's shards are refused (naming each setting that differs), a damaged shard is an error
naming its file, and what a shard keeps reads back as it was written."""

from __future__ import annotations

import pytest

from medlama.core.errors import MedlamaInputError
from medlama.core import resume
from medlama.core.resume import ShardStore, check_work_folder, discard_work_folder, work_folder

MANIFEST = {"units": {"gpt2": {"settings": {"reduction": "sum", "layers": (1, 2)}}}, "top_k": 10}


def test_a_store_keeps_its_shards_and_refuses_other_runs(tmp_path):
    out = tmp_path / "out"
    store = ShardStore.open(out, kind="probe", manifest=MANIFEST, overwrite=False)
    items = [["pain", "fever"], {"scores": (1.5, -2.25)}]
    assert store.write({"unit": "gpt2", "start": 0}, items, seconds=1.0) == [["pain", "fever"], {"scores": [1.5, -2.25]}]
    assert store.read({"unit": "gpt2", "start": 0}) == ([["pain", "fever"], {"scores": [1.5, -2.25]}], {"seconds": 1.0})
    assert not store.has({"unit": "gpt2", "start": 2}) and not out.exists()
    assert check_work_folder(out, kind="probe", manifest=MANIFEST, overwrite=False).keep  # the same run: continued
    other = {**MANIFEST, "units": {"gpt2": {"settings": {"reduction": "mean", "layers": (1, 2)}}}}
    with pytest.raises(MedlamaInputError, match=r"units\.gpt2\.settings\.reduction: 'sum' then, 'mean' now.*--overwrite"):
        check_work_folder(out, kind="probe", manifest=other, overwrite=False)
    with pytest.raises(MedlamaInputError, match="`medlama probe`, not `medlama ucm`"):
        check_work_folder(out, kind="ucm", manifest=MANIFEST, overwrite=False)
    ShardStore.open(out, kind="probe", manifest=other, overwrite=True)  # --overwrite: the shards are discarded
    assert not store.has({"unit": "gpt2", "start": 0})


def test_a_damaged_shard_names_its_file(tmp_path):
    store = ShardStore.open(tmp_path / "out", kind="probe", manifest=MANIFEST, overwrite=False)
    store.write({"unit": "a"}, [["x"]])
    (path,) = (work_folder(tmp_path / "out") / "shards").glob("*.jsonl")
    path.write_text(path.read_text().splitlines()[0] + "\n")  # the items cut off
    with pytest.raises(MedlamaInputError, match=f"{path}: a completed shard does not hold what its name says"):
        store.read({"unit": "a"})


def test_a_users_folder_in_its_place_is_never_touched(tmp_path):
    mine = work_folder(tmp_path / "out")
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(MedlamaInputError, match="not a medlama work folder"):
        ShardStore.open(tmp_path / "out", kind="probe", manifest=MANIFEST, overwrite=True)
    discard_work_folder(tmp_path / "out", kind="probe")
    assert (mine / "notes.txt").read_text() == "keep"


def test_a_shard_survives_a_manifest_that_differs_only_in_how_a_number_is_written(tmp_path):
    """The work folder's settings check finds 1 and 1.0 the same: so does what a shard records of its run."""
    from medlama.core.resume import ShardStore

    store = ShardStore.open(tmp_path / "out", kind="probe", manifest={"x": 1, "y": True}, overwrite=False)
    store.write({"unit": "u", "start": 0}, [{"a": 1}])
    again = ShardStore.open(tmp_path / "out", kind="probe", manifest={"x": 1.0, "y": 1}, overwrite=False)
    assert again.read({"unit": "u", "start": 0})[0] == [{"a": 1}]


def test_the_work_folder_check_gives_its_reason_and_the_store_acts_on_it(tmp_path, capsys, monkeypatch):
    """check_work_folder decides once, saying why; ShardStore.open acts on that answer (it does not read the work
    folder again to repeat the decision)."""
    out = tmp_path / "out"
    assert check_work_folder(out, kind="probe", manifest=MANIFEST, overwrite=False) == \
        resume.WorkFolderCheck(False, resume.NONE)
    store = ShardStore.open(out, kind="probe", manifest=MANIFEST, overwrite=False)
    assert check_work_folder(out, kind="probe", manifest=MANIFEST, overwrite=False).reason == resume.NO_SHARD
    store.write({"unit": "gpt2", "start": 0}, [["pain"]])
    assert check_work_folder(out, kind="probe", manifest=MANIFEST, overwrite=False) == \
        resume.WorkFolderCheck(True, resume.SAME)
    assert check_work_folder(out, kind="probe", manifest=MANIFEST, overwrite=True).reason == resume.OVERWRITE
    store.failed(RuntimeError("CUDA out of memory"))
    other = {**MANIFEST, "top_k": 5}
    assert check_work_folder(out, kind="probe", manifest=other, overwrite=False) == \
        resume.WorkFolderCheck(False, resume.FAILED_OTHER, failed="CUDA out of memory")
    capsys.readouterr()
    calls = []
    monkeypatch.setattr(resume, "check_work_folder",
                        lambda *args, **kwargs: calls.append(1) or check_work_folder(*args, **kwargs))
    again = ShardStore.open(out, kind="probe", manifest=other, overwrite=False)
    assert calls == [1] and again.empty()
    assert "starting over" in capsys.readouterr().err
