"""The candidate-embedding cache on a disk that cannot take it: full, or read-only. The probe needs no cache, so
``medlama probe`` finishes with the same numbers, says in one warning line why the vectors were not kept and
names ``MEDLAMA_EMBEDDING_CACHE=0``, and ``results.json`` records them as ``not stored``; it never blames the
``--out`` folder (on a disk with room) for the cache's disk.

Each case runs the user's command (``python -m medlama probe``) in a private mount namespace (``unshare -rm``)
with ``$MEDLAMA_CACHE`` on a small tmpfs made full or read-only there, and ``--out`` on the ordinary disk;
skipped where user namespaces are not allowed (as ``test_disk_and_signals.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

NAMESPACE_OK = subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0 \
    if shutil.which("unshare") else False

FULL = "dd if=/dev/zero of='{disk}/filler' bs=4096 2>/dev/null || true"  # every page taken
READ_ONLY = "mkdir -p '{disk}/embeddings'; mount -o remount,ro '{disk}'"


def probe_on_cache_disk(tmp_path: Path, biolama_dir: Path, model: Path, make_it: str) -> tuple[int, str, Path]:
    """``medlama probe`` (retrieval, the tiny encoder) with its cache on a 1 MiB tmpfs that ``make_it`` (shell,
    ``{disk}``: the tmpfs) made full or read-only. Returns the exit status, stderr and the ``--out`` folder."""
    disk, out = tmp_path / "cache", tmp_path / "probe"
    disk.mkdir()
    command = [sys.executable, "-P", "-m", "medlama", "probe", "--dataset", "biolama", "--data", str(biolama_dir),
               "--config", "umls", "--model", str(model), "--method", "retrieval", "--batch-size", "4",
               "--out", str(out)]
    script = (f"set -e; mount -t tmpfs -o size=1m tmpfs '{disk}'; {make_it.format(disk=disk)}; set +e; "
              + " ".join(f"'{word}'" for word in command))
    env = {**os.environ, "MEDLAMA_CACHE": str(disk), "MEDLAMA_EMBEDDING_CACHE": "1", "TQDM_DISABLE": "1"}
    done = subprocess.run(["unshare", "-rm", "bash", "-c", script], capture_output=True, text=True, timeout=600,
                          env=env)
    return done.returncode, done.stderr, out


@pytest.mark.skipif(not NAMESPACE_OK, reason="user namespaces (unshare -rm) are not allowed here")
@pytest.mark.parametrize("make_it, reason", [(FULL, "No space left on device"),
                                             (READ_ONLY, "Read-only file system")], ids=["full", "read-only"])
def test_a_cache_that_cannot_be_written_is_skipped_with_a_warning(tmp_path, biolama_dir, make_tiny_bert,
                                                                   make_it, reason):
    model = make_tiny_bert("cache-disk-encoder")
    status, err, out = probe_on_cache_disk(tmp_path, biolama_dir, model, make_it)
    assert status == 0, err
    assert "Traceback" not in err and "medlama: error" not in err, err
    warnings = [line for line in err.splitlines() if line.startswith("medlama: warning:")]
    assert len(warnings) == 1, err
    assert f"{tmp_path / 'cache'}/embeddings: {reason}" in warnings[0], warnings[0]
    assert "MEDLAMA_EMBEDDING_CACHE=0" in warnings[0], warnings[0]
    results = json.loads((out / "results.json").read_text())
    assert [result["settings"]["candidate_embeddings"] for result in results] == ["not stored"]
