"""Atomic folder and file writes; a folder that is not an earlier output is never replaced."""

import pytest

from medlama.core.atomic import atomic_directory, atomic_write_text, check_replaceable
from medlama.cli import main
from medlama.core.errors import MedlamaInputError

MARKER = "info.json"


def snapshot(folder):
    """Every path under ``folder`` with its bytes (None for a folder): equal snapshots, equal trees."""
    return {str(p.relative_to(folder)): (None if p.is_dir() else p.read_bytes()) for p in sorted(folder.rglob("*"))}


@pytest.fixture
def foreign(tmp_path):
    """A user's folder: files and a subfolder, no marker."""
    folder = tmp_path / "project"
    (folder / "src").mkdir(parents=True)
    (folder / "notes.txt").write_text("my notes")
    (folder / "src" / "main.py").write_bytes(b"print('hi')\n")
    return folder


def test_directory_replaced_only_on_success(tmp_path):
    target = tmp_path / "out"
    with atomic_directory(target, marker=MARKER) as staging:
        (staging / MARKER).write_text("first")
    assert (target / MARKER).read_text() == "first"
    with pytest.raises(RuntimeError):
        with atomic_directory(target, marker=MARKER) as staging:
            (staging / MARKER).write_text("second")
            raise RuntimeError("interrupted")
    assert (target / MARKER).read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging folder, and the lock file is gone
    with atomic_directory(target, marker=MARKER) as staging:
        (staging / "b.txt").write_text("third")
    assert sorted(p.name for p in target.iterdir()) == ["b.txt"]


def killed_staging(parent, target_name, pid, *, start=0, host=None, old=None):
    """The staging folder a run killed with SIGKILL leaves beside ``target_name``: its marker, its ``new/``
    and (``old``: the previous output's marker text) the previous output it had moved aside."""
    import json

    from medlama.core.atomic import STAGING_MARKER, _host

    host = host or _host()
    folder = parent / f".{target_name}.tmp-{pid}+{start}+{host}+abcd1234"
    (folder / "new").mkdir(parents=True)
    (folder / "new" / "part").write_text("x")
    (folder / STAGING_MARKER).write_text(json.dumps({"medlama": "staging", "target": target_name, "pid": pid,
                                                     "start": start, "host": host}))
    if old is not None:
        (folder / "old").mkdir()
        (folder / "old" / MARKER).write_text(old)
    return folder


def test_stale_staging_from_a_killed_run_is_cleaned(tmp_path):
    stale = killed_staging(tmp_path, "out", dead_pid())
    with atomic_directory(tmp_path / "out", marker=MARKER) as staging:
        (staging / "x").write_text("x")
    assert not stale.exists()


@pytest.mark.parametrize("name", [".out.tmp-abc123", ".out.tmp-old-{dead}+0+{host}", ".out.tmp-{dead}+0+{host}+x"])
def test_a_users_folder_named_like_a_leftover_is_never_touched(tmp_path, name):
    # Only a marker inside proves a staging folder medlama's; a name pattern never does (even one naming a
    # process of this host that is gone).
    from medlama.core.atomic import _host

    users = tmp_path / name.format(dead=dead_pid(), host=_host())
    (users / "data").mkdir(parents=True)
    (users / "data" / "keep.txt").write_text("mine")
    with pytest.raises(RuntimeError):
        with atomic_directory(tmp_path / "out", marker=MARKER):  # out missing: an "old-" name is not put back
            raise RuntimeError("stop")
    assert not (tmp_path / "out").exists()
    assert (users / "data" / "keep.txt").read_text() == "mine"
    with atomic_directory(tmp_path / "out", marker=MARKER) as staging:
        (staging / MARKER).write_text("x")
    assert (users / "data" / "keep.txt").read_text() == "mine"


def test_foreign_folder_refused_before_the_block_runs(foreign):
    before = snapshot(foreign.parent)
    ran = False
    with pytest.raises(MedlamaInputError) as error:
        with atomic_directory(foreign, marker=MARKER):
            ran = True
    message = str(error.value)
    assert message.startswith(f"{foreign}: ") and f"no {MARKER}" in message and "nothing was changed" in message
    assert not ran  # refused on entry: no work is done only to be thrown away
    assert snapshot(foreign.parent) == before  # byte for byte, and no staging folder beside it


def test_folder_filled_while_the_block_ran_is_not_replaced(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    with pytest.raises(MedlamaInputError, match="no info.json"):
        with atomic_directory(target, marker=MARKER) as staging:
            (staging / MARKER).write_text("new")
            (target / "added meanwhile.txt").write_text("keep me")
    assert snapshot(tmp_path) == {"out": None, "out/added meanwhile.txt": b"keep me"}


def test_file_in_the_way_refused(tmp_path):
    path = tmp_path / "out"
    path.write_text("a file")
    with pytest.raises(MedlamaInputError, match="exists and is not a folder"):
        with atomic_directory(path, marker=MARKER):
            pass
    assert path.read_text() == "a file"


@pytest.mark.parametrize("marker", [MARKER, "checkpoints/rewire_config.json"])
def test_empty_folder_and_earlier_output_replaced(tmp_path, marker):
    empty = tmp_path / "empty"
    empty.mkdir()
    with atomic_directory(empty, marker=marker) as staging:
        (staging / "new.txt").write_text("new")
    assert snapshot(empty) == {"new.txt": b"new"}

    earlier = tmp_path / "earlier"
    (earlier / marker).parent.mkdir(parents=True)
    (earlier / marker).write_text("{}")
    (earlier / "old.txt").write_text("old")
    check_replaceable(earlier, marker=marker)
    with atomic_directory(earlier, marker=marker) as staging:
        (staging / "new.txt").write_text("new")
    assert snapshot(earlier) == {"new.txt": b"new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["earlier", "empty"]


def test_build_refuses_a_users_folder(foreign, monkeypatch, capsys):
    # `medlama build medlama --out .` in a project folder: refused before the release is even read.
    monkeypatch.chdir(foreign)
    before = snapshot(foreign.parent)
    status = main(["build", "medlama", "--out", ".", "--source", str(foreign.parent / "no-such-release")])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith(f"medlama: error: {foreign}: ") and "is the current directory" in err
    assert "nothing was changed" in err and "Traceback" not in err
    assert snapshot(foreign.parent) == before


def test_write_text(tmp_path):
    path = tmp_path / "sub" / "f.json"
    atomic_write_text(path, "{}")
    assert path.read_text() == "{}"
    assert [p.name for p in path.parent.iterdir()] == ["f.json"]


# --- two writers, one folder ----------------------------------------------------------------------

# A writer whose staging phase lasts until the test says so: it signals once it is inside the block,
# then writes PARTS files and waits for the "go" file, so that two writers surely overlap.
WRITER = r"""
import sys, time
from pathlib import Path
from medlama.core.atomic import atomic_directory
from medlama.core.errors import MedlamaInputError

target, started, go = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
try:
    with atomic_directory(target, marker="info.json") as staging:
        for i in range(40):
            (staging / f"part-{i:02d}").write_text(str(i))
        started.touch()
        deadline = time.monotonic() + 60
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        (staging / "info.json").write_text(sys.argv[4])
except MedlamaInputError as error:
    print(error)
    sys.exit(3)
"""


def start_writer(tmp_path, target, name):
    import subprocess
    import sys

    started = tmp_path / f"{name}.started"
    process = subprocess.Popen([sys.executable, "-c", WRITER, str(target), str(started), str(tmp_path / "go"), name],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return process, started


def test_two_writers_one_succeeds_the_other_is_told_the_folder_is_busy(tmp_path):
    import time

    target = tmp_path / "out"
    writers = [start_writer(tmp_path, target, name) for name in ("first", "second")]
    deadline = time.monotonic() + 60
    # Until one writer is inside its block and the other has given up (or, before the fix, both are in).
    while time.monotonic() < deadline:
        inside = [process for process, started in writers if started.exists()]
        done = [process for process, _ in writers if process.poll() is not None]
        if len(inside) == 2 or (len(inside) == 1 and done):
            break
        time.sleep(0.02)
    (tmp_path / "go").touch()
    results = [(process.wait(60), process.stdout.read(), started.exists()) for process, started in writers]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 3], results  # exactly one succeeds
    winner = next(index for index, (code, _, _) in enumerate(results) if code == 0)
    loser_code, message, loser_started = results[1 - winner]
    assert not loser_started  # refused on entry, before any work
    # The holder's pid is named when the lock file already holds it (it is written just after locking).
    assert f"{target}: another medlama run" in message
    assert "(pid" not in message or f"(pid {writers[winner][0].pid} on " in message
    assert "is writing this output folder" in message and "nothing was changed" in message
    # The result is complete: every part and the marker of the winner, nothing of the loser.
    assert sorted(p.name for p in target.iterdir()) == ["info.json"] + [f"part-{i:02d}" for i in range(40)]
    assert (target / "info.json").read_text() == ("first", "second")[winner]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no lock file left


def dead_pid():
    """The pid of a process that has exited and been reaped."""
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_only_staging_folders_of_dead_runs_are_cleaned(tmp_path):
    import subprocess
    import sys

    from medlama.core.atomic import _tag

    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead_staging = killed_staging(tmp_path, "out", dead_pid())
        live_staging = killed_staging(tmp_path, "out", live.pid, start=int(_tag(live.pid).split("+")[1]))
        other_host = killed_staging(tmp_path, "out", 1, start=1, host="another-host.example")
        with atomic_directory(tmp_path / "out", marker=MARKER) as staging:
            (staging / MARKER).write_text("new")
        assert not dead_staging.exists()
        assert (live_staging / "new" / "part").read_text() == "x"  # its owner still runs
        assert (other_host / "new" / "part").read_text() == "x"  # cannot be checked from here: kept
    finally:
        live.kill()
        live.wait()


def test_a_reused_pid_is_not_the_owner(tmp_path):
    # Same pid as a live process but another start time: the owner is gone, the pid was reused.
    from medlama.core.atomic import _tag

    pid, start, host = _tag().split("+")
    stale = killed_staging(tmp_path, "out", int(pid), start=int(start) + 1 if int(start) else 0)
    with atomic_directory(tmp_path / "out", marker=MARKER) as staging:
        (staging / MARKER).write_text("x")
    assert stale.exists() == (int(start) == 0)  # where start times cannot be read, a live pid is kept


def test_previous_output_put_back_after_a_kill_during_the_swap(tmp_path, capsys):
    # Killed after moving the old output aside and before moving the new one in.
    backup = killed_staging(tmp_path, "out", dead_pid(), old="previous")
    with pytest.raises(RuntimeError):
        with atomic_directory(tmp_path / "out", marker=MARKER):
            raise RuntimeError("interrupted again")
    assert (tmp_path / "out" / MARKER).read_text() == "previous"
    assert not backup.exists()
    assert "put back the previous output" in capsys.readouterr().err


def test_lock_is_reentrant_in_one_thread_and_refuses_another_thread(tmp_path):
    import threading

    from medlama.core.atomic import lock_directory

    target = tmp_path / "out"
    errors = []
    with lock_directory(target):
        with atomic_directory(target, marker=MARKER) as staging:  # a command holding the lock over its run
            (staging / MARKER).write_text("x")

        def other():
            try:
                with lock_directory(target):
                    pass
            except MedlamaInputError as error:
                errors.append(str(error))

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert len(errors) == 1 and "is writing this output folder" in errors[0]
    with lock_directory(target):  # released: free again
        pass


# --- which command wrote a folder -------------------------------------------------------------------


def test_kind_is_recorded_and_only_the_same_kind_replaces(tmp_path):
    from medlama.core.atomic import OWNER_NAME, owner_kind

    target = tmp_path / "out"
    with atomic_directory(target, marker="build_info.json", kind="build biolama") as staging:
        (staging / "build_info.json").write_text("{}")
    assert owner_kind(target) == "build biolama"
    assert sorted(p.name for p in target.iterdir()) == [OWNER_NAME, "build_info.json"]
    before = snapshot(tmp_path)
    with pytest.raises(MedlamaInputError) as error:
        with atomic_directory(target, marker="build_info.json", kind="build medlama"):
            pytest.fail("the block must not run")
    message = str(error.value)
    assert message.startswith(f"{target}: ") and "`medlama build biolama`" in message
    assert "not `medlama build medlama`" in message and "nothing was changed" in message
    assert snapshot(tmp_path) == before
    with atomic_directory(target, marker="build_info.json", kind="build biolama") as staging:
        (staging / "build_info.json").write_text('{"again": 1}')
    assert (target / "build_info.json").read_text() == '{"again": 1}'


@pytest.mark.parametrize("record", [None, "{}", "not json", '{"kind": ""}'])
def test_marker_without_ownership_record_refused_when_kind_given(tmp_path, record):
    # `{}` written by hand as build_info.json, or a folder of an earlier version: not replaced.
    from medlama.core.atomic import OWNER_NAME

    target = tmp_path / "out"
    target.mkdir()
    (target / "build_info.json").write_text("{}")
    if record is not None:
        (target / OWNER_NAME).write_text(record)
    before = snapshot(tmp_path)
    with pytest.raises(MedlamaInputError, match="written by hand or by an earlier medlama version") as error:
        check_replaceable(target, marker="build_info.json", kind="build medlama")
    assert "delete it, or choose a new folder" in str(error.value)
    with pytest.raises(MedlamaInputError, match="no readable"):
        with atomic_directory(target, marker="build_info.json", kind="build medlama"):
            pytest.fail("the block must not run")
    assert snapshot(tmp_path) == before
    check_replaceable(target, marker="build_info.json")  # without a kind: the marker alone, as before


# --- a command replaces only what it wrote ----------------------------------------------------------


def refusal(target, *, marker, kind, match=None, **options) -> str:
    """The message :func:`atomic_directory` refuses ``target`` with, on entry (its block never runs)."""
    with pytest.raises(MedlamaInputError, match=match) as error:
        with atomic_directory(target, marker=marker, kind=kind, **options):
            pytest.fail("the block must not run")
    return str(error.value)


def test_rebuild_stops_at_entries_it_did_not_write(tmp_path):
    from medlama.core.atomic import OWNER_NAME

    target = tmp_path / "medlama"
    with atomic_directory(target, marker="build_info.json", kind="build medlama") as staging:
        (staging / "build_info.json").write_text("{}")
        (staging / "data").mkdir()
        (staging / "data" / "hard.parquet").write_bytes(b"rows")
    # A probe output written into the build folder (`--out medlama/run1`) and the user's notes.
    with atomic_directory(target / "run1", marker="results.json", kind="probe") as staging:
        (staging / "results.json").write_text("{}")
    (target / "notes.txt").write_text("my notes")
    before = snapshot(tmp_path)
    message = refusal(target, marker="build_info.json", kind="build medlama")
    assert message.startswith(f"{target}: ") and "2 entries that `medlama build medlama` did not write" in message
    assert "notes.txt, run1/" in message and "nothing was changed" in message
    assert snapshot(tmp_path) == before
    # Once they are moved out, the rebuild replaces what it wrote.
    (target / "notes.txt").unlink()
    import shutil

    shutil.rmtree(target / "run1")
    with atomic_directory(target, marker="build_info.json", kind="build medlama") as staging:
        (staging / "build_info.json").write_text('{"again": 1}')
    assert sorted(p.name for p in target.iterdir()) == [OWNER_NAME, "build_info.json"]


def test_build_command_names_a_users_file_in_its_folder(tmp_path, biolama_release_dir, capsys):
    out = tmp_path / "biolama"
    assert main(["build", "biolama", "--source", str(biolama_release_dir), "--out", str(out)]) == 0
    (out / "notes.txt").write_text("my notes")
    capsys.readouterr()
    before = snapshot(tmp_path)
    assert main(["build", "biolama", "--source", str(biolama_release_dir), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"medlama: error: {out}: ") and "did not write and would delete: notes.txt;" in err
    assert snapshot(tmp_path) == before


def test_an_earlier_record_of_the_same_command_keeps_its_entries(tmp_path):
    # rewire records its ownership again when it resumes; the entries of its finished output stay listed.
    from medlama.core.atomic import write_owner

    target = tmp_path / "out"
    with atomic_directory(target, marker=MARKER, kind="rewire") as staging:
        (staging / MARKER).write_text("x")
        (staging / "model.safetensors").write_bytes(b"w")
    write_owner(target, "rewire", entries=["checkpoints"])
    (target / "checkpoints").mkdir()
    with atomic_directory(target, marker=MARKER, kind="rewire") as staging:
        (staging / MARKER).write_text("y")
    assert (target / MARKER).read_text() == "y"


# --- the output's place: not the current directory, not around the inputs ----------------------------


def test_out_dot_in_an_earlier_output_is_refused(tmp_path, monkeypatch):
    import os

    target = tmp_path / "out"
    with atomic_directory(target, marker=MARKER, kind="probe") as staging:
        (staging / MARKER).write_text("x")
    inode = os.stat(target).st_ino
    for here in (target, target / "sub"):  # the folder itself, or a folder inside it
        here.mkdir(exist_ok=True)
        monkeypatch.chdir(here)
        message = refusal(".." if here != target else ".", marker=MARKER, kind="probe", match="the current directory")
        assert message.startswith(f"{target}: ")
        assert os.stat(target).st_ino == inode and os.stat(".").st_nlink > 0  # the shell's folder still exists
        (target / "sub").rmdir() if here != target else None


def test_out_around_what_the_run_reads_is_refused(tmp_path):
    target = tmp_path / "out"
    with atomic_directory(target, marker=MARKER, kind="probe") as staging:
        (staging / MARKER).write_text("x")
        (staging / "model").mkdir()
    for read in (target, target / "model"):
        message = refusal(target, marker=MARKER, kind="probe", match="which this run reads", reads=[read])
        assert message.startswith(f"{target}: ") and str(read) in message
    assert (target / "model").is_dir()


def test_build_refuses_an_out_holding_its_source(tmp_path, biolama_release_dir, capsys):
    import shutil

    out = tmp_path / "biolama"
    assert main(["build", "biolama", "--source", str(biolama_release_dir), "--out", str(out)]) == 0
    source = shutil.copytree(biolama_release_dir, out / "release")
    capsys.readouterr()
    assert main(["build", "biolama", "--source", str(source), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"medlama: error: {out}: the output folder contains {source}, which this run reads")
    assert (source / "data").is_dir()


# --- permissions follow the umask ---------------------------------------------------------------------


@pytest.mark.parametrize("mask", [0o022, 0o027], ids=["umask-022", "umask-027"])
def test_outputs_follow_the_umask(tmp_path, mask):
    import os
    import stat

    from medlama.core.atomic import OWNER_NAME

    previous = os.umask(mask)
    try:
        target = tmp_path / "out"
        with atomic_directory(target, marker="results.json", kind="probe") as staging:
            atomic_write_text(staging / "results.json", "{}")
            atomic_write_text(staging / "plots" / "relations.png", "png")
        atomic_write_text(tmp_path / "alone.json", "{}")
    finally:
        os.umask(previous)
    modes = {p.relative_to(tmp_path).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in tmp_path.rglob("*")}
    folders, files = 0o777 & ~mask, 0o666 & ~mask
    assert modes == {"out": folders, "out/plots": folders, "out/results.json": files, "out/plots/relations.png": files,
                     f"out/{OWNER_NAME}": files, "alone.json": files}


# --- the lock file ------------------------------------------------------------------------------------


def test_lock_file_is_removed_and_the_lock_still_excludes(tmp_path):
    from locks import lock_held_elsewhere  # tests/helpers

    from medlama.core.atomic import lock_directory

    target = tmp_path / "out"
    with lock_held_elsewhere(target):
        assert (tmp_path / ".out.lock").is_file()
        with pytest.raises(MedlamaInputError, match="is writing this output folder"):
            with lock_directory(target):
                pass
    assert not (tmp_path / ".out.lock").exists()  # let go: nothing left beside the folder
    with lock_directory(target):
        assert (tmp_path / ".out.lock").is_file()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("writer", ["directory", "text"])
def test_a_kill_the_moment_the_temporary_is_made_leaves_nothing_behind(tmp_path, monkeypatch, writer):
    """SIGTERM landing right after mkdtemp/mkstemp returns (as a supervisor that watches for the staging folder
    sends it): the run unwinds and no temporary outlives it."""
    import os
    import signal
    import tempfile

    from medlama.cli import Terminated, _sigterm_unwinds

    def killed_after(make):
        def made(*args, **kwargs):
            made_path = make(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGTERM)  # pending at once: Python runs the handler at the next bytecode
            return made_path
        return made

    monkeypatch.setattr(tempfile, "mkdtemp", killed_after(tempfile.mkdtemp))
    monkeypatch.setattr(tempfile, "mkstemp", killed_after(tempfile.mkstemp))
    out = tmp_path / "out"
    with pytest.raises(Terminated), _sigterm_unwinds():
        if writer == "directory":
            with atomic_directory(out, marker="m.json") as staging:
                (staging / "m.json").write_text("{}")
        else:
            atomic_write_text(out, "text")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_interrupted_run_ends_on_its_own_line(monkeypatch, capsys):
    """A writer the run abandoned (here one that fails when collected, as pyarrow's does on a closed file)
    says nothing after medlama's last line."""
    from medlama.cli import Terminated
    from medlama.commands import build

    class AbandonedWriter:
        def __del__(self):
            raise ValueError("write to closed file")

    def cut_off(args):
        writer = AbandonedWriter()
        writer.itself = writer  # a cycle, as a writer held by its dataset: freed by the collector, not at return
        raise Terminated()

    monkeypatch.setattr(build, "run_build", cut_off)
    import sys

    # Python's own hook (it prints to stderr), in place of pytest's; put back after the test
    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)
    assert main(["build", "biolama", "--source", "nowhere", "--out", "nowhere"]) == 143
    import gc

    gc.collect()
    err = capsys.readouterr().err
    assert err.strip().splitlines() == ["medlama: terminated (SIGTERM); earlier outputs are left as they were"]
