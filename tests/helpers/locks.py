"""Another process holding an output folder's lock, as a second medlama run would, for the busy-folder tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def lock_held_elsewhere(out: Path) -> Iterator[subprocess.Popen]:
    """Yield a process that holds ``out``'s lock (``medlama.core.atomic.lock_directory``) until the block ends."""
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys\nfrom medlama.core.atomic import lock_directory\n"
        f"with lock_directory({str(out)!r}):\n    print('held', flush=True)\n    sys.stdin.read()\n")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        if holder.stdout.readline().strip() != "held":
            raise AssertionError(f"the lock-holding process did not take the lock (exit status {holder.wait()})")
        yield holder
    finally:
        try:
            holder.communicate("", timeout=60)  # end of its stdin: it leaves the block and lets go
        except subprocess.TimeoutExpired:
            holder.kill()
            holder.wait()
