"""Only the command that wrote an output folder replaces it, and a second writer is told at once that the
folder is busy, for every folder writer outside probe/ucm/recipe."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from medlama.core.atomic import OWNER_NAME, lock_directory, owner_kind, write_owner
from medlama.cli import main
from locks import lock_held_elsewhere  # tests/helpers

BUILDS = {  # command -> the arguments after --out DIR (a source that does not exist: the check comes first)
    "build medlama": ["build", "medlama", "--source", "/nonexistent/medlama-release"],
    "build biolama": ["build", "biolama", "--source", "/nonexistent/biolama-release"],
    "build context-variance": ["build", "context-variance", "--medlama", "/nonexistent/medlama",
                               "--corpus", "x:text:/nonexistent/notes.txt"],
}


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def earlier_output(folder: Path, kind: str | None) -> Path:
    folder.mkdir(parents=True)
    (folder / "build_info.json").write_text("{}")
    (folder / "README.md").write_text("someone's work")
    if kind is not None:
        write_owner(folder, kind)
    return folder


def run(command: str, out: Path, capsys) -> str:
    words = BUILDS[command]
    status = main([*words[:2], "--out", str(out), *words[2:]])
    err = capsys.readouterr().err
    assert status == 2, err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("command", list(BUILDS))
def test_hand_written_build_info_is_not_replaced(tmp_path, capsys, command):
    out = earlier_output(tmp_path / "out", None)  # `{}` by hand, or a folder of an earlier version
    before = snapshot(out)
    err = run(command, out, capsys)
    assert f"no readable {OWNER_NAME}" in err and "nothing was changed" in err
    assert snapshot(out) == before


@pytest.mark.parametrize("command", list(BUILDS))
@pytest.mark.parametrize("owner", [*BUILDS, "rewire", "push-dataset"])
def test_only_the_writing_command_replaces_a_folder(tmp_path, capsys, command, owner):
    out = earlier_output(tmp_path / "out", owner)
    before = snapshot(out)
    err = run(command, out, capsys)
    if owner == command:  # allowed: the build got as far as its (missing) input
        assert "/nonexistent/" in err
    else:
        assert f"written by `medlama {owner}`" in err and f"not `medlama {command}`" in err
        assert snapshot(out) == before


@pytest.mark.parametrize("command", list(BUILDS))
def test_a_second_writer_is_told_the_folder_is_busy(tmp_path, capsys, command):
    out = earlier_output(tmp_path / "out", command)
    before = snapshot(out)
    with lock_held_elsewhere(out) as holder:
        err = run(command, out, capsys)
        assert "is writing this output folder right now" in err and f"pid {holder.pid}" in err
        assert "/nonexistent/" not in err  # told before any work
    assert snapshot(out) == before


def test_the_lock_is_held_over_the_whole_build(tmp_path, monkeypatch):
    # While the (slow) build runs, before any staging folder exists, another writer is already refused.
    import medlama.datasets.medlama_folder as folder_module
    from medlama.core.errors import MedlamaInputError

    out = tmp_path / "out"
    seen = []

    def build_medlama(source, **options):
        result: list = []
        thread = threading.Thread(target=lambda: result.append(_try_lock(out)))
        thread.start()
        thread.join()
        seen.append(result[0])
        raise MedlamaInputError("stop here")

    monkeypatch.setattr(folder_module, "build_medlama", build_medlama)
    with pytest.raises(MedlamaInputError, match="stop here"):
        folder_module.write_medlama(out, "unused")
    assert seen == ["busy"]
    assert _try_lock(out) == "free"  # released afterwards


def _try_lock(out: Path) -> str:
    from medlama.core.errors import MedlamaInputError

    try:
        with lock_directory(out):
            return "free"
    except MedlamaInputError:
        return "busy"


def test_push_dry_runs_record_their_command_and_upload_no_hidden_file(tmp_path, make_tiny_bert):
    from sentence_transformers import SentenceTransformer

    from medlama.core.errors import MedlamaInputError
    from medlama.publishing.hub import push_metric, push_model

    model = tmp_path / "model"
    SentenceTransformer(str(make_tiny_bert("owned-bert")), device="cpu").save(str(model))
    write_owner(model, "rewire", files=True)  # as a rewire output holds it (with its files recorded)
    dry = tmp_path / "dry"
    manifest = push_model(model, "someone/model", dry_run=dry)
    assert owner_kind(dry) == "push-model"
    names = [entry["path"] for entry in manifest["files"]]
    assert names and not any(name.startswith(".") or "/." in name for name in names)
    assert not any(p.name.startswith(".") for p in (dry / "files").rglob("*"))
    push_model(model, "someone/model", dry_run=dry)  # the same command replaces it
    with pytest.raises(MedlamaInputError, match="written by `medlama push-model`"):
        push_metric("acc_at_k", "someone/acc", dry_run=dry)
    assert json.loads((dry / "manifest.json").read_text())["repo_type"] == "model"
