"""What the system does to a run: SIGTERM (a timeout, ``scancel``, ``docker stop``), a full disk and a
read-only file system. Each time: a one-line ``medlama: error:`` or note naming the path and the cause,
the exit status a shell expects, the previous output byte for byte as it was, and no staging folder or
lock file left behind.

The disk cases run ``medlama build biolama`` in a private mount namespace (``unshare -rm``) on a small
tmpfs, made full or read-only there; they are skipped where user namespaces are not allowed.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def medlama_command(source: Path, out: Path) -> list[str]:
    return [sys.executable, "-P", "-m", "medlama", "build", "biolama", "--source", str(source), "--out", str(out)]


def tree(folder: Path) -> dict[str, str | None]:
    """Every path under ``folder`` (hidden ones too) with its bytes' hash (None for a folder)."""
    return {p.relative_to(folder).as_posix(): (None if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(folder.rglob("*"))}


def test_sigterm_removes_staging_and_exits_143(tmp_path, biolama_release_dir, biolama_dir):
    out = tmp_path / "biolama"
    shutil.copytree(biolama_dir, out)
    before = tree(tmp_path)
    run = subprocess.Popen(medlama_command(biolama_release_dir, out), stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while run.poll() is None and time.monotonic() < deadline and not list(tmp_path.glob(".biolama.tmp-*")):
        time.sleep(0.01)
    assert run.poll() is None, f"the build ended (status {run.returncode}) before its staging folder appeared"
    run.send_signal(signal.SIGTERM)
    err = run.communicate(timeout=120)[1]
    assert run.returncode == 143, err
    assert err.strip().splitlines()[-1] == "medlama: terminated (SIGTERM); earlier outputs are left as they were"
    assert "Traceback" not in err
    assert tree(tmp_path) == before  # no staging folder, no lock file, the previous build as it was


NAMESPACE_OK = subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0 \
    if shutil.which("unshare") else False


def on_small_disk(tmp_path: Path, biolama_dir: Path, source: Path, make_it: str) -> tuple[int, str, dict, dict]:
    """Copy the earlier build onto a 2 MiB tmpfs, run ``make_it`` (shell) on it, then rebuild into it.
    Returns the rebuild's exit status, its stderr, and the disk's tree before and after the rebuild."""
    disk, report = tmp_path / "disk", tmp_path / "report"
    disk.mkdir()
    report.mkdir()
    snapshot = f"'{sys.executable}' '{__file__}' '{disk}'"  # this file's tree(), run as a script
    rebuild = " ".join(f"'{word}'" for word in medlama_command(source, disk / "biolama"))
    script = (f"set -e; mount -t tmpfs -o size=2m tmpfs '{disk}'; cp -a '{biolama_dir}' '{disk}/biolama'; "
              f"{make_it}; {snapshot} > '{report}/before.json'; set +e; "
              f"{rebuild} > /dev/null 2> '{report}/err.txt'; echo $? > '{report}/status'; "
              f"{snapshot} > '{report}/after.json'")
    done = subprocess.run(["unshare", "-rm", "bash", "-c", script], capture_output=True, text=True, timeout=600)
    assert (report / "status").is_file(), done.stderr
    return (int((report / "status").read_text()), (report / "err.txt").read_text(),
            json.loads((report / "before.json").read_text()), json.loads((report / "after.json").read_text()))


@pytest.mark.skipif(not NAMESPACE_OK, reason="user namespaces (unshare -rm) are not allowed here")
def test_read_only_file_system_is_a_clear_error(tmp_path, biolama_release_dir, biolama_dir):
    disk = tmp_path / "disk"
    status, err, before, after = on_small_disk(tmp_path, biolama_dir, biolama_release_dir,
                                               f"mount -o remount,ro '{disk}'")
    assert status == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert err.startswith(f"medlama: error: {disk}/.biolama.lock: Read-only file system; "), err
    assert after == before


@pytest.mark.skipif(not NAMESPACE_OK, reason="user namespaces (unshare -rm) are not allowed here")
def test_full_disk_is_a_clear_error_and_leaves_nothing(tmp_path, biolama_release_dir, biolama_dir):
    disk = tmp_path / "disk"
    # Full but for 16 pages: the lock and the staging folder's marker fit, the new Parquet files do not.
    fill = (f"free=$(df --output=avail -B4096 '{disk}' | tail -1); "
            f"dd if=/dev/zero of='{disk}/filler' bs=4096 count=$((free - 16)) 2>/dev/null")
    status, err, before, after = on_small_disk(tmp_path, biolama_dir, biolama_release_dir, fill)
    assert status == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert err.startswith(f"medlama: error: {disk}/biolama") and "No space left on device" in err, err
    assert "the previous output is left as it was" in err or "earlier outputs are left as they were" in err
    assert after == before  # the earlier build byte for byte; no staging folder, no lock file


def test_a_failed_write_in_a_staging_folder_names_the_output():
    import errno

    from medlama.cli import os_error_text

    staged = OSError(errno.ENOSPC, "No space left on device", "/data/out/.medlama.tmp-12+34+host+ab12/new/hard.parquet")
    assert os_error_text(staged, Path("/elsewhere")) == (
        "/data/out/medlama: could not write the new output (No space left on device, at "
        "/data/out/.medlama.tmp-12+34+host+ab12/new/hard.parquet); the previous output is left as it was")
    no_path = OSError(errno.EROFS, "Read-only file system")  # a write to an open file names no path
    assert os_error_text(no_path, Path("/data/probe")) == (
        "/data/probe: Read-only file system; earlier outputs are left as they were")


if __name__ == "__main__":  # the disk's tree, from inside the namespace that mounts it
    print(json.dumps(tree(Path(sys.argv[1]))))
