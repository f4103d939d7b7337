"""Atomic file writes: a file is written through a temporary file and a rename, so a reader never sees half
of it, with the modes a plain ``open`` gives under the umask; and the signal hold that keeps a kill from
leaving a temporary file or folder nothing cleans up. Output *folders* are :mod:`medlama.core.atomic`'s."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path


# ------------------------------------------------------------------------------------------- umask
def _umask() -> int:
    """The process's umask, read without changing it where Linux allows (``os.umask`` can only swap it)."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        status = Path("/proc/self/status").read_text().splitlines()
        return int(next(line for line in status if line.startswith("Umask:")).split()[1], 8)
    mask = os.umask(0o022)  # elsewhere: set and put back at once
    os.umask(mask)
    return mask


def _follow_umask(folder: Path) -> None:
    """Give ``folder`` and everything in it the modes a plain ``mkdir``/``open`` gives under the umask
    (``mkdtemp``/``mkstemp``, and some libraries, make them private: collaborators could not read them)."""
    mask = _umask()
    for path in [folder, *folder.rglob("*")]:
        with contextlib.suppress(OSError):  # a hard link to a file of another user's: left as it is
            if path.is_symlink():
                continue
            if path.is_dir():
                os.chmod(path, 0o777 & ~mask)
            else:
                os.chmod(path, ((0o666 | (path.stat().st_mode & 0o111)) & ~mask))


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGTERM and SIGINT back for the block; one that arrives meanwhile is acted on when it ends.

    Python runs a signal handler between bytecodes, so a kill can land after ``mkdtemp`` has made a staging
    folder and before the code that would remove it on an exception has the folder's name: the folder
    would outlive the run. For the block, the handlers only note the signal; at its end the previous
    handlers are back and a noted signal is handed to its own (raising ``KeyboardInterrupt`` or the CLI's
    ``Terminated`` once the caller holds the name, inside its ``try``). Masking the signal instead would
    not do: the kernel hands a process signal to any thread that does not mask it. Handlers can only be
    set in the main thread; elsewhere the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    previous = {number: signal.signal(number, lambda signum, frame: noted.append(signum))
                for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for number in dict.fromkeys(noted):
            handler = previous[number]
            if callable(handler):
                handler(number, None)
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), number)  # the default action (ending the process), as it would have been


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename (with the umask's mode)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename (with the umask's mode)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = None
    try:
        with _signals_held():  # as for a staging folder: no kill between mkstemp and the cleanup below
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would hide results from collaborators
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise
