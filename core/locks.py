"""The inter-process lock of an output folder, and the owner tags that name who holds it.

:func:`lock_directory` takes an ``flock`` on the hidden ``.NAME.lock`` beside the folder and removes that
file when it lets go (:func:`_take_lock` says why this is safe). A second writer is refused at once with
:class:`MedlamaInputError` naming the folder and, where known, the pid holding it; it does not wait, since
the first writer may run for hours. Within one process the lock is re-entrant per thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from medlama.core.errors import MedlamaInputError

# An owner tag: pid, start token (0 if unknown) and host, "+"-separated ("+" is kept out of the host
# name), then for staging folders the random part mkdtemp adds.
_OWNED = re.compile(r"^(?P<pid>\d+)\+(?P<start>\d+)\+(?P<host>[^+]+)(?:\+[A-Za-z0-9_]+)?$")


# ------------------------------------------------------------------------------------------ owners
def host_name() -> str:
    """This machine's name as owner tags carry it (no "+", at most 64 characters)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname())[:64] or "localhost"


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (Linux), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def start_token(pid: int) -> int:
    """When ``pid`` started (clock ticks since boot, Linux), or 0 where that cannot be read."""
    fields = _proc_stat(pid)
    try:
        return int(fields[19]) if fields else 0  # field 22 of stat; fields[0] is field 3
    except (IndexError, ValueError):
        return 0


def owner_tag(pid: int | None = None) -> str:
    """``PID+START+HOST`` of ``pid`` (default: this process), as staging folder names carry it."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}+{start_token(pid)}+{host_name()}"


@dataclass(frozen=True)
class Owner:
    """The process that holds a lock or owns a staging folder: pid, its start token and its host."""

    pid: int
    start: int
    host: str

    def alive(self) -> bool:
        """Whether this owner may still be running: False only when that is certain."""
        if self.host != host_name():
            return True  # another machine's process cannot be checked from here
        if self.pid <= 0:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # alive, another user's
        fields = _proc_stat(self.pid)
        if fields and fields[0] == "Z":
            return False  # exited, not yet reaped
        current = start_token(self.pid)
        return not (self.start and current and current != self.start)  # a different start: a reused pid

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


def parse_owner(tag: str) -> Owner | None:
    """The :class:`Owner` an owner tag (``PID+START+HOST[+...]``) names, or None if it names none."""
    match = _OWNED.match(tag)
    return Owner(int(match["pid"]), int(match["start"]), match["host"]) if match else None


# -------------------------------------------------------------------------------------------- lock
def _lock_path(target: Path) -> Path:
    return target.parent / f".{target.name}.lock"


@dataclass
class _Held:
    pid: int
    thread: int
    count: int


_held: dict[str, _Held] = {}
_guard = threading.Lock()


def _busy(target: Path, holder: Owner | None) -> MedlamaInputError:
    who = f" ({holder.describe()})" if holder is not None else ""
    return MedlamaInputError(f"another medlama run{who} is writing this output folder right now; wait for it "
                             "to finish, or choose another folder (nothing was changed)", file=target)


def _take_lock(path: Path) -> int | None:
    """An ``flock``-ed descriptor of the lock file ``path``, or None when another process holds it.

    The lock file is removed when its holder lets go (:func:`_let_go`), so that no hidden file stays
    beside every output. filelock leaves it in place because removing it naively breaks the lock: a
    contender that opened the file just before its removal would lock an inode no longer at the path
    while a third process locks a new one. So, after locking, the descriptor is checked to still be the
    file at ``path``; if not, the lock is taken again on the file now there. With the holder removing the
    file *before* unlocking, at most one process holds the file at the path. This keeps the lock beside
    the folder, where every user and host writing it sees it (a lock folder in the per-user cache would
    not stop a collaborator or another cluster node). Where ``fcntl`` is missing, see
    :func:`lock_directory`.
    """
    import fcntl  # POSIX only: imported where it is used, so that Windows (filelock instead) imports this module

    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(1000):
        fd = os.open(path, flags, 0o666)  # the umask applies, as for any file
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                return None
            raise
        try:
            current = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            current = None
        if current is not None and os.path.samestat(os.fstat(fd), current):
            return fd
        os.close(fd)  # the holder before removed this file as it let go: lock the one now at the path
    raise OSError(errno.EAGAIN, "the lock file keeps being replaced", str(path))


def _let_go(path: Path, fd: int) -> None:
    """Remove the lock file, then unlock it (in that order: see :func:`_take_lock`)."""
    with contextlib.suppress(OSError):
        os.unlink(path)
    os.close(fd)


@contextlib.contextmanager
def _inter_process_lock(target: Path, path: Path) -> Iterator[None]:
    try:
        import fcntl  # noqa: F401 - only whether it exists
    except ImportError:  # Windows: filelock's lock there removes its file itself
        # filelock loads when a lock is taken, not when the CLI parses its flags
        from filelock import FileLock, Timeout

        lock = FileLock(str(path), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            raise _busy(target, None) from None
        try:
            yield
        finally:
            lock.release()
        return
    fd = _take_lock(path)
    if fd is None:
        holder = None
        with contextlib.suppress(OSError, UnicodeDecodeError):
            holder = parse_owner(path.read_text(encoding="utf-8").strip())
        raise _busy(target, holder if holder is not None and holder.alive() else None)
    try:
        with contextlib.suppress(OSError):  # who holds it, for the busy message; a full disk must not stop here
            os.write(fd, (owner_tag() + "\n").encode())
        yield
    finally:
        _let_go(path, fd)


@contextlib.contextmanager
def lock_directory(target: str | Path) -> Iterator[None]:
    """Hold the inter-process lock of the output folder ``target`` for the block.

    Raises :class:`MedlamaInputError` at once if another process (or another thread of this one) holds
    it. Re-entrant within one thread. Creates ``target``'s parent folder.
    """
    target = Path(target).resolve()
    path = _lock_path(target)
    key, me = str(path), (os.getpid(), threading.get_ident())
    with _guard:
        held = _held.get(key)
        if held is not None and held.pid == me[0]:  # a forked child's copy of the table is not its lock
            if held.thread != me[1]:
                raise _busy(target, parse_owner(owner_tag()))
            held.count += 1
    if held is not None and held.pid == me[0]:
        try:
            yield
        finally:
            with _guard:
                held.count -= 1
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    with _inter_process_lock(target, path):
        try:
            with _guard:
                _held[key] = _Held(*me, count=1)
            yield
        finally:
            with _guard:
                _held.pop(key, None)
