"""Atomic writes: an interrupted build or run leaves the previous output intact, two runs never write
one output folder at once, and a command replaces only what it wrote.

* :func:`atomic_directory` stages a new output beside the target and swaps it in when the block ends.
* :func:`claim_directory` checks that an output folder may be replaced and holds its lock over a whole
  run (a build, a training), so that a second writer is refused before doing any work.
* :func:`lock_directory` is the inter-process lock behind them: an ``flock`` on the hidden
  ``.NAME.lock`` beside the target, removed when the run lets go (see :func:`medlama.core.locks._take_lock` for why that
  is safe). A second writer fails at once with :class:`MedlamaInputError` naming the folder and, where
  known, the pid holding it; it does not wait, since the first writer may run for hours. A command that
  claims its output long before it writes (:func:`claim_directory`) writes it with :func:`staged_directory`,
  which takes no second claim.
* Ownership (``kind``): an output folder records which command wrote it, and what it wrote, in a hidden
  :data:`OWNER_NAME` file, ``{"kind": "build medlama", "entries": ["README.md", ...]}``; only the same
  ``kind`` replaces it, and only while the folder holds nothing but those entries (a ``probe`` output
  or a user's notes put inside it stop the run, named). A folder that holds the caller's marker but no
  ownership record was not written by a medlama command (by hand, or by a pre-release medlama): it is
  refused. A record without ``entries`` (a folder a command writes as it goes) is checked by kind only.
* Where: an output folder that is, or contains, the current directory is refused (replacing it would
  leave the shell in a deleted folder), and so is one that is, or contains, what the run reads.
* Staging folders ``.NAME.tmp-PID+START+HOST+XXXXXXXX`` hold a marker file (:data:`STAGING_MARKER`:
  owner pid, its start time and host) and the new output in ``new/``; the swap moves the previous
  output to ``old/`` inside it. Under the lock, only folders proven to be medlama's by that marker, and
  whose owner is gone, are cleaned: a previous output a kill in the swap left in ``old/`` is put back,
  the rest removed. A folder merely named like one (a user's) is never touched.
* Permissions follow the umask: outputs are ``0o777 & ~umask`` (folders) and ``0o666 & ~umask``
  (files), as a plain ``mkdir``/``open`` would make them, not ``mkdtemp``/``mkstemp``'s private modes.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from medlama.core.atomic_files import _follow_umask, _signals_held, atomic_write_bytes, atomic_write_text
from medlama.core.errors import MedlamaInputError
from medlama.core.integrity import FILES_KEY, file_records
from medlama.core.locks import Owner as _Owner
from medlama.core.locks import host_name as _host
from medlama.core.locks import lock_directory
from medlama.core.locks import owner_tag as _tag
from medlama.core.locks import parse_owner as _owner
from medlama.core.locks import start_token as _start_token
from medlama.core.ownership import OWNER_NAME, owner_kind, owner_record

__all__ = ["OWNER_NAME", "STAGING_MARKER", "atomic_directory", "atomic_write_bytes", "atomic_write_text",
           "check_output_place",
           "check_replaceable", "claim_directory", "lock_directory", "owner_kind", "staged_directory", "write_owner"]

#: The file inside a staging folder that proves it is medlama's and names its owner.
STAGING_MARKER = ".medlama-staging.json"



# --------------------------------------------------------------------------------------- ownership
def write_owner(folder: str | Path, kind: str, *, entries: list[str] | None = None, files: bool = False,
                previous: str | Path | None = None) -> None:
    """Record in ``folder`` that ``kind`` (the command, e.g. ``"rewire"``) wrote it, and (``entries``)
    the names it wrote at its top level; an earlier record of the same ``kind`` keeps its entries.

    :func:`atomic_directory` does this itself, with ``files``: the size and SHA-256 of every file written
    (:func:`medlama.core.integrity.file_records`, reusing those of ``previous``'s record for files unchanged), which
    ``push-dataset`` / ``push-model`` check. A command that writes into its output folder directly (``rewire``'s
    checkpoints) calls it when it first writes there; the files recorded by an earlier write of the same
    ``kind`` are then kept.
    """
    _check_kind(kind)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    here = owner_record(folder) or {}
    same = here.get("kind") == kind
    kept = here.get("entries") if same else None
    record: dict = {"kind": kind}
    if isinstance(kept, list) or entries is not None:
        record["entries"] = sorted({*(kept if isinstance(kept, list) else []), *(entries or [])} - {OWNER_NAME})
    if files:
        earlier = owner_record(previous) if previous is not None else None
        known = earlier.get(FILES_KEY) if earlier and earlier.get("kind") == kind else None
        record[FILES_KEY] = file_records(folder, known if isinstance(known, dict) else None)
    elif same and isinstance(here.get(FILES_KEY), dict):
        record[FILES_KEY] = here[FILES_KEY]
    atomic_write_text(folder / OWNER_NAME, json.dumps(record) + "\n")


def _check_kind(kind: str | None) -> None:
    if kind is not None and (not isinstance(kind, str) or not kind.strip()):
        raise ValueError(f"kind must be a non-empty string (the command, e.g. 'build medlama'), not {kind!r}")


def check_output_place(target: str | Path, *, reads: tuple[str | Path, ...] | list = ()) -> None:
    """Refuse an output folder that is, or contains, the current directory or anything in ``reads``
    (the data or models the run reads): replacing it would leave the shell in a deleted folder, or
    delete the run's own input."""
    target = Path(target).expanduser().resolve()
    with contextlib.suppress(OSError):
        here = Path.cwd().resolve()
        if here == target or target in here.parents:
            raise MedlamaInputError(
                f"the output folder {'is' if here == target else 'contains'} the current directory, which replacing it "
                "would delete from under this shell; choose another --out (nothing was changed)", file=target)
    for read in reads:
        path = Path(read).expanduser()
        if not path.exists():
            continue  # a hub model id, or a missing input that its reader reports
        path = path.resolve()
        if path == target or target in path.parents:
            raise MedlamaInputError(f"the output folder {'is' if path == target else 'contains'} {path}, which this "
                                    "run reads; choose another --out (nothing was changed)", file=target)


def _listing(names: list[str], limit: int = 8) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def check_replaceable(target: str | Path, *, marker: str, kind: str | None = None,
                      reads: tuple[str | Path, ...] | list = ()) -> None:
    """Raise :class:`MedlamaInputError` unless ``target`` may be replaced by a new output.

    It may if it does not exist, is an empty folder, or holds ``marker`` (a path relative to it), the
    file every output of the caller contains: then it is an earlier output of the same kind. Anything
    else is someone else's folder (``--out ~/project``), which replacing would delete. With ``kind``,
    the folder must also hold an ownership record naming that same ``kind`` and, where the record lists
    what was written, nothing else. ``reads``: see :func:`check_output_place`.
    """
    _check_kind(kind)
    target = Path(target).resolve()  # named in full: "--out ." would otherwise be reported as "."
    check_output_place(target, reads=reads)
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
    entries = (owner_record(target) or {}).get("entries")
    if isinstance(entries, list):
        extra = sorted(p.name + ("/" if p.is_dir() else "") for p in target.iterdir()
                       if p.name not in entries and p.name != OWNER_NAME)
        if extra:
            raise MedlamaInputError(
                f"the output folder holds {len(extra)} entr{'y' if len(extra) == 1 else 'ies'} that `medlama {kind}` "
                f"did not write and would delete: {_listing(extra)}; move {'it' if len(extra) == 1 else 'them'} "
                "elsewhere, or choose another folder (nothing was changed)", file=target)


@contextlib.contextmanager
def claim_directory(target: str | Path, *, marker: str, kind: str | None = None,
                    reads: tuple[str | Path, ...] | list = (), finished: str | None = None) -> Iterator[None]:
    """Hold ``target``'s lock for the block, once :func:`check_replaceable` allows replacing it.

    For a command that works long before it writes (a build, a training, a scoring run): wrap the whole run
    in it, and a second writer, or a folder that is not this command's, is refused at once; write the output
    inside it with :func:`staged_directory`. ``finished``: also refuse the output of an earlier finished run
    (one holding ``marker``), saying ``finished`` (how to proceed) in the message (:func:`check_finished`).
    The check runs before the lock is taken (a user's folder is refused with nothing created beside it, not
    even the lock file) and again once it is held (the folder may have changed meanwhile). Under the lock,
    leftovers of a killed run are dealt with first: a previous output that a kill in the middle of a swap
    left aside is put back at once, so it loads again even if this run then fails.
    """
    def check() -> None:
        if finished is None:
            check_replaceable(target, marker=marker, kind=kind, reads=reads)
        else:
            check_finished(target, marker=marker, kind=kind, overwrite=False, hint=finished, reads=reads)

    check()
    with lock_directory(target):
        _clean_leftovers(Path(target).resolve())
        check()
        yield


# ---------------------------------------------------------------------------------------- staging
def _staging_owner(folder: Path, target: Path) -> _Owner | None:
    """The owner its marker names, if ``folder`` is proven to be a staging folder of ``target``'s."""
    marker = folder / STAGING_MARKER
    if folder.is_symlink() or not folder.is_dir() or marker.is_symlink() or not marker.is_file():
        return None
    try:
        record = json.loads(marker.read_text(encoding="utf-8"))
        if record.get("medlama") != "staging" or record.get("target") != target.name:
            return None
        return _Owner(int(record["pid"]), int(record["start"]), str(record["host"]))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def _clean_leftovers(target: Path) -> None:
    """Remove staging folders of runs that are gone; put back a previous output a killed swap left aside.

    Runs under the target's lock, so no live run on this host owns a leftover. Only folders whose marker
    proves them medlama's are touched; one named like a staging folder but without it is a user's, kept
    (an empty one of a dead owner, killed before it wrote its marker, is removed by ``rmdir``, which
    cannot delete anything).
    """
    prefix = f".{target.name}.tmp-"
    for leftover in sorted(target.parent.glob(glob.escape(prefix) + "*")):
        owner = _staging_owner(leftover, target)
        if owner is None:
            named = _owner(leftover.name[len(prefix):])
            if named is not None and not named.alive() and not leftover.is_symlink():
                with contextlib.suppress(OSError):
                    leftover.rmdir()
            continue
        if owner.alive():
            continue
        previous = leftover / "old"
        if previous.is_dir() and not previous.is_symlink() and not os.path.lexists(target):
            # Killed between moving the old output aside and moving the new one in: the old one is whole.
            os.replace(previous, target)
            print(f"medlama: note: {target}: put back the previous output, which a run killed while replacing "
                  f"it had left in {leftover.name}", file=sys.stderr)
        shutil.rmtree(leftover, ignore_errors=True)


def _staging_folder(target: Path) -> Path:
    """A new staging folder beside ``target``, its marker written before anything else goes in."""
    folder = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-{_tag()}+", dir=target.parent))
    pid = os.getpid()
    record = {"medlama": "staging", "target": target.name, "pid": pid, "start": _start_token(pid), "host": _host()}
    try:
        (folder / STAGING_MARKER).write_text(json.dumps(record) + "\n", encoding="utf-8")
        (folder / "new").mkdir()
    except BaseException:  # a full disk: a folder without its whole marker would never be proven ours
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


@contextlib.contextmanager
def atomic_directory(target: str | Path, *, marker: str, kind: str | None = None,
                     reads: tuple[str | Path, ...] | list = ()) -> Iterator[Path]:
    """Yield an empty staging folder that replaces ``target`` only if the block finishes.

    ``marker``: the file (relative path) every output of the caller contains. ``kind``: the command
    writing it (``"build medlama"``, ``"rewire"``...); when given, it is recorded in the new output
    (:data:`OWNER_NAME`, with the names written) and an existing ``target`` must have been written by
    the same ``kind`` and hold nothing else. ``reads``: see :func:`check_output_place`.

    An existing ``target`` is replaced only if :func:`check_replaceable` allows it; otherwise
    :class:`MedlamaInputError` is raised on entry, before the block does any work and before anything
    is written. The target's lock (:func:`lock_directory`) is held from that check until the swap is
    done, so a second writer is refused on entry. The staging folder sits beside ``target`` (same
    file system, so the swap is a rename). On an exception, or a kill, ``target`` is untouched; a stale
    staging folder from a killed run is removed by the next run into the same target.
    :func:`claim_directory` then :func:`staged_directory`, for a caller that writes as soon as it claims.
    """
    with claim_directory(target, marker=marker, kind=kind, reads=reads):  # checked before and after locking
        with staged_directory(target, marker=marker, kind=kind) as staging:
            yield staging


@contextlib.contextmanager
def staged_directory(target: str | Path, *, marker: str, kind: str | None = None) -> Iterator[Path]:
    """The staging folder of :func:`atomic_directory`, for a caller that already holds ``target``'s claim
    (:func:`claim_directory`, taken before its long work): swapped in when the block finishes, after
    :func:`check_replaceable` allows it once more; removed, ``target`` untouched, on an exception or a kill."""
    target = Path(target).resolve()
    folder = None
    try:
        with _signals_held():  # a kill right after mkdtemp would leave a folder nothing cleans up
            folder = _staging_folder(target)
        staging = folder / "new"
        yield staging
        if kind is not None:
            write_owner(staging, kind, entries=[p.name for p in staging.iterdir()], files=True, previous=target)
        _follow_umask(staging)
        # Again: the block may have run for an hour, and someone may have put files there by hand.
        check_replaceable(target, marker=marker, kind=kind)
        if target.exists():
            os.replace(target, folder / "old")
        os.replace(staging, target)
    except BaseException:
        if folder is None:
            raise
        if not target.exists() and (folder / "old").is_dir():
            os.replace(folder / "old", target)  # the swap failed halfway: the previous output goes back
        shutil.rmtree(folder, ignore_errors=True)
        raise
    shutil.rmtree(folder, ignore_errors=True)


# ----------------------------------------------------------------------------------- finished runs
def check_finished(out: str | Path, *, marker: str, kind: str, overwrite: bool,
                   hint: str = "give --overwrite to replace them, or choose another --out",
                   reads: Iterable = ()) -> None:
    """Refuse ``out`` if another command's (or no command's) files are there (:func:`check_replaceable`), or a
    finished run's (its ``marker`` is there) without ``overwrite``, or if it is (or holds) the current directory
    or something in ``reads``, what the run reads; ``hint`` says how to proceed (the CLI's flags, or the Python
    API's keywords)."""
    check_replaceable(out, marker=marker, kind=kind, reads=reads)
    if (Path(out) / marker).is_file() and not overwrite:
        raise MedlamaInputError(f"the output folder holds the results of an earlier run; {hint} (nothing was "
                                "changed)", file=Path(out).resolve())


@contextlib.contextmanager
def claimed_output(out: str | Path, *, marker: str, kind: str, overwrite: bool,
                   hint: str = "give --overwrite to replace them, or choose another --out",
                   reads: Iterable = ()) -> Iterator[None]:
    """Hold ``out``'s lock for the block, after :func:`check_finished` (so before any work): :func:`claim_directory`
    refusing a finished run's output unless ``overwrite``. Used by every writer of a run's results, the
    commands' and the Python API's alike."""
    with claim_directory(out, marker=marker, kind=kind, reads=tuple(reads), finished=None if overwrite else hint):
        yield
