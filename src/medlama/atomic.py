"""Atomic writes: an interrupted build or run leaves the previous output intact, and two runs never
write one output folder at once.

* :func:`atomic_directory` stages a new output beside the target and swaps it in when the block ends.
* :func:`claim_directory` checks that an output folder may be replaced and holds its lock over a whole
  run (a build, a training), so that a second writer is refused before doing any work.
* :func:`lock_directory` is the inter-process lock behind them (``filelock``; the lock file is the hidden
  ``.NAME.lock`` beside the target, left in place on purpose: it never blocks a later run). A second
  writer fails at once with :class:`MedlamaInputError` naming the folder and, where known, the pid
  holding it; it does not wait, since the first writer may run for hours. Within one process the lock
  is re-entrant, so a command may hold it over its whole run (say from before a long build) and still
  call :func:`atomic_directory` inside.
* Ownership (``kind``): an output folder records which command wrote it in a hidden
  :data:`OWNER_NAME` file, ``{"kind": "build medlama"}``; only the same ``kind`` replaces it.
  A folder that holds the caller's marker but no ownership record was written by an earlier version
  (or by hand, e.g. ``{}`` as ``build_info.json``): it is refused with a message asking the user to
  delete it or pick a new folder. Without ``kind`` the marker alone suffices (the older rule).
* Staging folders are named ``.NAME.tmp-PID+START+HOST+XXXXXXXX`` (START: the process's start time,
  so that a reused pid is not mistaken for the owner). Under the lock, leftovers of a run that is
  gone (its pid not alive on this host) are removed; those of a live run, or of another host, are
  kept. Leftovers without an owner in their name come from versions that took no lock and are
  removed. A backup ``.NAME.tmp-old-...`` left by a kill in the middle of the swap is put back when
  the target is missing, so the previous output is never lost.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from medlama.errors import MedlamaInputError

#: The hidden ownership record every output written with a ``kind`` holds.
OWNER_NAME = ".medlama-output.json"

# A staging or backup folder's owner: pid, start token (0 if unknown) and host, "+"-separated ("+" is
# kept out of the host name), then for staging folders the random part mkdtemp adds.
_OWNED = re.compile(r"^(?P<old>old-)?(?P<pid>\d+)\+(?P<start>\d+)\+(?P<host>[^+]+)(?:\+[A-Za-z0-9_]+)?$")


# ------------------------------------------------------------------------------------------ owners
def _host() -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname())[:64] or "localhost"


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (Linux), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def _start_token(pid: int) -> int:
    """When ``pid`` started (clock ticks since boot, Linux), or 0 where that cannot be read."""
    fields = _proc_stat(pid)
    try:
        return int(fields[19]) if fields else 0  # field 22 of stat; fields[0] is field 3
    except (IndexError, ValueError):
        return 0


def _tag(pid: int | None = None) -> str:
    """``PID+START+HOST`` of ``pid`` (default: this process), as staging folder names carry it."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}+{_start_token(pid)}+{_host()}"


@dataclass(frozen=True)
class _Owner:
    pid: int
    start: int
    host: str

    def alive(self) -> bool:
        """Whether this owner may still be running: False only when that is certain."""
        if self.host != _host():
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
        current = _start_token(self.pid)
        return not (self.start and current and current != self.start)  # a different start: a reused pid

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


def _owner(tag: str) -> _Owner | None:
    match = _OWNED.match(tag)
    return _Owner(int(match["pid"]), int(match["start"]), match["host"]) if match else None


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


def _busy(target: Path, holder: _Owner | None) -> MedlamaInputError:
    who = f" ({holder.describe()})" if holder is not None else ""
    return MedlamaInputError(f"another medlama run{who} is writing this output folder right now; wait for it "
                             "to finish, or choose another folder (nothing was changed)", file=target)


@contextlib.contextmanager
def lock_directory(target: str | Path) -> Iterator[None]:
    """Hold the inter-process lock of the output folder ``target`` for the block.

    Raises :class:`MedlamaInputError` at once if another process (or another thread of this one) holds
    it. Re-entrant within one thread. Creates ``target``'s parent folder.
    """
    from filelock import FileLock, Timeout

    target = Path(target).resolve()
    path = _lock_path(target)
    key, me = str(path), (os.getpid(), threading.get_ident())
    with _guard:
        held = _held.get(key)
        if held is not None and held.pid == me[0]:  # a forked child's copy of the table is not its lock
            if held.thread != me[1]:
                raise _busy(target, _owner(_tag()))
            held.count += 1
    if held is not None and held.pid == me[0]:
        try:
            yield
        finally:
            with _guard:
                held.count -= 1
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        holder = None
        with contextlib.suppress(OSError, UnicodeDecodeError):
            holder = _owner(path.read_text(encoding="utf-8").strip())
        raise _busy(target, holder if holder is not None and holder.alive() else None) from None
    try:
        path.write_text(_tag() + "\n", encoding="utf-8")  # who holds it, for the busy message
        with _guard:
            _held[key] = _Held(*me, count=1)
        yield
    finally:
        with _guard:
            _held.pop(key, None)
        with contextlib.suppress(OSError):
            path.write_text("", encoding="utf-8")
        lock.release()


# --------------------------------------------------------------------------------------- ownership
def write_owner(folder: str | Path, kind: str) -> None:
    """Record in ``folder`` that ``kind`` (the command, e.g. ``"rewire"``) wrote it.

    :func:`atomic_directory` does this itself; a command that writes into its output folder directly
    (``rewire``'s checkpoints) calls it when it first writes there.
    """
    _check_kind(kind)
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / OWNER_NAME).write_text(json.dumps({"kind": kind}) + "\n", encoding="utf-8")


def owner_kind(folder: str | Path) -> str | None:
    """The ``kind`` recorded in ``folder``, or None when it has no readable ownership record."""
    try:
        record = json.loads((Path(folder) / OWNER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    kind = record.get("kind") if isinstance(record, dict) else None
    return kind if isinstance(kind, str) and kind else None


def _check_kind(kind: str | None) -> None:
    if kind is not None and (not isinstance(kind, str) or not kind.strip()):
        raise ValueError(f"kind must be a non-empty string (the command, e.g. 'build medlama'), not {kind!r}")


def check_replaceable(target: str | Path, *, marker: str, kind: str | None = None) -> None:
    """Raise :class:`MedlamaInputError` unless ``target`` may be replaced by a new output.

    It may if it does not exist, is an empty folder, or holds ``marker`` (a path relative to it), the
    file every output of the caller contains: then it is an earlier output of the same kind. Anything
    else is someone else's folder (``--out .``, ``--out ~/project``), which replacing would delete.
    With ``kind``, the folder must also hold an ownership record naming that same ``kind``.
    """
    _check_kind(kind)
    target = Path(target).resolve()  # named in full: "--out ." would otherwise be reported as "."
    if not target.exists():
        return
    if not target.is_dir():
        raise MedlamaInputError("the output path exists and is not a folder; choose a new or empty folder "
                                "(nothing was changed)", file=target)
    if not any(target.iterdir()):
        return
    if not (target / marker).is_file():
        raise MedlamaInputError(f"the output folder is not empty and is not an earlier output of this command "
                                f"(it has no {marker}); choose a new or empty folder (nothing was changed)",
                                file=target)
    if kind is None:
        return
    owner = owner_kind(target)
    if owner is None:
        raise MedlamaInputError(
            f"the output folder has {marker} but no readable {OWNER_NAME}, the record of the command that wrote "
            f"it: it was written by hand or by an earlier medlama version, so `medlama {kind}` will not replace "
            "it; delete it, or choose a new folder (nothing was changed)", file=target)
    if owner != kind:
        raise MedlamaInputError(
            f"the output folder was written by `medlama {owner}`, and only `medlama {owner}` replaces it, not "
            f"`medlama {kind}`; choose another folder (nothing was changed)", file=target)


@contextlib.contextmanager
def claim_directory(target: str | Path, *, marker: str, kind: str | None = None) -> Iterator[None]:
    """Hold ``target``'s lock for the block, once :func:`check_replaceable` allows replacing it.

    For a command that works long before it writes (a build, a training): wrap the whole run in it, and
    a second writer, or a folder that is not this command's, is refused at once. The check runs before
    the lock is taken (a user's folder is refused with nothing created beside it, not even the lock
    file) and again once it is held (the folder may have changed meanwhile). Under the lock, leftovers
    of a killed run are dealt with first: a previous output that a kill in the middle of a swap left
    aside is put back at once, so it loads again even if this run then fails.
    """
    check_replaceable(target, marker=marker, kind=kind)
    with lock_directory(target):
        _clean_leftovers(Path(target).resolve())
        check_replaceable(target, marker=marker, kind=kind)
        yield


# ---------------------------------------------------------------------------------------- staging
def _clean_leftovers(target: Path) -> None:
    """Remove staging folders of runs that are gone; put back a backup a killed swap left behind.

    Runs under the target's lock, so no live run of this version owns a leftover of this host.
    """
    prefix = f".{target.name}.tmp-"
    for leftover in sorted(target.parent.glob(glob.escape(prefix) + "*")):
        tag = leftover.name[len(prefix):]
        owner = _owner(tag.removeprefix("old-"))
        if owner is not None and owner.alive():
            continue
        if tag.startswith("old-") and not target.exists():
            # Killed between moving the old output aside and moving the new one in: the old one is whole.
            os.replace(leftover, target)
            print(f"medlama: note: {target}: put back the previous output, which a run killed while replacing "
                  f"it had left in {leftover.name}", file=sys.stderr)
            continue
        shutil.rmtree(leftover, ignore_errors=True)


@contextlib.contextmanager
def atomic_directory(target: str | Path, *, marker: str, kind: str | None = None) -> Iterator[Path]:
    """Yield an empty staging folder that replaces ``target`` only if the block finishes.

    ``marker``: the file (relative path) every output of the caller contains. ``kind``: the command
    writing it (``"build medlama"``, ``"rewire"``...); when given, it is recorded in the new output
    (:data:`OWNER_NAME`) and an existing ``target`` must have been written by the same ``kind``.

    An existing ``target`` is replaced only if :func:`check_replaceable` allows it; otherwise
    :class:`MedlamaInputError` is raised on entry, before the block does any work and before anything
    is written. The target's lock (:func:`lock_directory`) is held from that check until the swap is
    done, so a second writer is refused on entry. The staging folder sits beside ``target`` (same
    file system, so the swap is a rename). On an exception, or a kill, ``target`` is untouched; a stale
    staging folder from a killed run is removed by the next run into the same target.
    """
    target = Path(target).resolve()
    with claim_directory(target, marker=marker, kind=kind):  # checked before and after taking the lock
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-{_tag()}+", dir=target.parent))
        try:
            yield staging
            if kind is not None:
                write_owner(staging, kind)
            # Again: the block may have run for an hour, and someone may have put files there by hand.
            check_replaceable(target, marker=marker, kind=kind)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        backup = target.parent / f".{target.name}.tmp-old-{_tag()}"
        if target.exists():
            os.replace(target, backup)
        os.replace(staging, target)
        shutil.rmtree(backup, ignore_errors=True)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ----------------------------------------------------------------------------------- finished runs
def check_finished(out: str | Path, *, marker: str, kind: str, overwrite: bool,
                   hint: str = "give --overwrite to replace them, or choose another --out") -> None:
    """Refuse ``out`` if another command's (or no command's) files are there (:func:`check_replaceable`), or a
    finished run's (its ``marker`` is there) without ``overwrite``; ``hint`` says how to proceed (the CLI's
    flags, or the Python API's keywords)."""
    check_replaceable(out, marker=marker, kind=kind)
    if (Path(out) / marker).is_file() and not overwrite:
        raise MedlamaInputError(f"the output folder holds the results of an earlier run; {hint} (nothing was "
                                "changed)", file=Path(out).resolve())


@contextlib.contextmanager
def claimed_output(out: str | Path, *, marker: str, kind: str, overwrite: bool,
                   hint: str = "give --overwrite to replace them, or choose another --out") -> Iterator[None]:
    """Hold ``out``'s lock for the block, after :func:`check_finished` (so before any work). Used by every
    writer of a run's results, the commands' and the Python API's alike."""
    check_finished(out, marker=marker, kind=kind, overwrite=overwrite, hint=hint)  # a refusal creates nothing
    with lock_directory(out):
        check_finished(out, marker=marker, kind=kind, overwrite=overwrite, hint=hint)  # again, now no one writes it
        yield
