"""Resuming a long run, in one place: what a resumed run must share with the run it continues, and the
completed shards it continues from.

**Settings that differ** (every command that resumes: ``rewire``'s checkpoints, ``probe``'s and ``ucm``'s
shards): :func:`setting_differences` lists each setting whose value differs, as ``name: <then> then, <now>
now``, so the refusal names what changed.

**Completed shards** (``probe`` and ``ucm``; the probe's shard plan is :mod:`medlama.runs.resume`), kept
so that a rerun continues where a killed one stopped. A run that computes its output in independent pieces (``probe``: a relation, or a block of its queries, per
model; ``ucm``: a pool of context sequences per model) writes each piece, a *shard*, as soon as it is done,
into a work folder that belongs to its output: the hidden ``.NAME.work`` beside ``OUT`` (on the same file
system, seen by every process of a multi-process run). Rerunning the same command into the same ``OUT``
reads the shards already there and computes only the rest; the output, written once at the end by the
command's atomic writer, is the one an uninterrupted run writes.

* The work folder's :data:`WORK_MARKER` names the command (``kind``), the output and the run's *manifest*:
  everything that decides its per-query outputs (method settings, model identities, data fingerprint, query
  selection, candidate pool). A rerun whose manifest differs is refused, naming each setting that differs
  (:func:`setting_differences`, as ``rewire`` refuses checkpoints of another run), and
  told how to start over (``--overwrite`` discards the shards). Unless the run that left them stopped with an
  error rather than an interrupt (:meth:`ShardStore.failed` records it): a corrected command, with other
  settings, then starts over (said on stderr), and the same command still continues. A folder at that place
  without the marker is not medlama's and is never touched.
* A shard is one JSON-lines file, ``shards/<key>.jsonl``: a header naming the shard (its ``identity``), then
  one line per item, whatever JSON the command's computation returns per query (so per-query fields added to
  a ranking pass through unchanged). Each is written atomically (a rename), so a file there is a whole shard.
  The key is the SHA-256 of the identity, which the header repeats and the reader checks.
* Writers: the command holds its output's lock (:func:`medlama.core.locks.lock_directory`) for the whole run,
  so a second run into the same ``OUT`` is refused; the processes of one multi-process run share the folder,
  each writing only its own shards. The folder is removed once the output is written.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medlama.core.errors import MedlamaInputError
from medlama.core.atomic import atomic_write_text

__all__ = ["WORK_MARKER", "ShardStore", "WorkFolderCheck", "check_work_folder", "discard_work_folder", "flatten",
           "plain", "setting_differences", "work_folder"]

#: The file that proves a work folder medlama's: ``{"medlama": "work", "kind", "target", "manifest"}``.
WORK_MARKER = ".medlama-work.json"
_SHARDS, _NOTES = "shards", "notes"


def flatten(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` as ``{"a.b": 1}``: nested records compared setting by setting."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def setting_differences(then: Mapping[str, Any], now: Mapping[str, Any], keys: Iterable[str] | None = None
                        ) -> list[str]:
    """``"name: <then> then, <now> now"`` for each setting (of ``keys``, or of either record, nested records
    compared key by key) whose value differs between the earlier run's record ``then`` and this run's ``now``."""
    if keys is None:
        then, now = flatten(then), flatten(now)
        keys = sorted({*then, *now})
    return [f"{key}: {then.get(key)!r} then, {now.get(key)!r} now" for key in keys if then.get(key) != now.get(key)]


def work_folder(out: str | Path) -> Path:
    """Where the shards of a run into ``out`` are kept: the hidden ``.NAME.work`` beside it."""
    out = Path(out).expanduser().resolve()
    return out.parent / f".{out.name}.work"


def plain(value: Any) -> Any:
    """JSON's spelling of numpy scalars and paths (``json.dumps``' ``default``)."""
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _as_json(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists, numpy scalars numbers)."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=plain))


def _record(folder: Path) -> dict | None:
    marker = folder / WORK_MARKER
    if folder.is_symlink() or marker.is_symlink():
        return None
    try:
        record = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("medlama") == "work" else None


@dataclass(frozen=True)
class WorkFolderCheck:
    """What :func:`check_work_folder` decided of a run's work folder, and why (one of the reasons below)."""

    #: whether the run continues the shards there
    keep: bool
    reason: str
    #: for :data:`FAILED_OTHER`: the error the earlier run stopped with
    failed: str | None = None


#: The reasons of a :class:`WorkFolderCheck`: no work folder; ``overwrite`` given; no shard completed; an earlier
#: run with other settings that stopped with an error (its shards discarded, not refused); the same settings.
NONE, OVERWRITE, NO_SHARD, FAILED_OTHER, SAME = "none", "overwrite", "no shard", "failed with other settings", "same"


def check_work_folder(out: str | Path, *, kind: str, manifest: Mapping[str, Any], overwrite: bool,
                      hint: str = "give --overwrite to start over") -> WorkFolderCheck:
    """Whether ``out``'s work folder holds shards this run continues, and why; refuse one that is not medlama's,
    is another command's, or holds a run with other settings (unless ``overwrite``, which discards it, or that
    run stopped with an error, :meth:`ShardStore.failed`: then it is discarded too). Reads only: every process
    of a run calls it, before any work, and each refuses alike; :meth:`ShardStore.open` acts on its answer."""
    folder = work_folder(out)
    if not folder.exists() and not folder.is_symlink():
        return WorkFolderCheck(False, NONE)
    record = _record(folder)
    if record is None:
        raise MedlamaInputError(f"{folder.name} beside the output folder is not a medlama work folder (no "
                                f"{WORK_MARKER}); it is never touched: move it, or choose another --out", file=folder)
    if record.get("kind") != kind:
        raise MedlamaInputError(f"the work folder holds the shards of `medlama {record.get('kind')}`, not "
                                f"`medlama {kind}`; choose another output folder (nothing was changed)", file=folder)
    if overwrite:
        return WorkFolderCheck(False, OVERWRITE)
    if not any((folder / _SHARDS).glob("*.jsonl")):  # no shard done: nothing to continue
        return WorkFolderCheck(False, NO_SHARD)
    differences = setting_differences(record.get("manifest") or {}, _as_json(dict(manifest)))
    if differences and record.get("failed"):  # a run stopped by an error: a corrected rerun starts over
        return WorkFolderCheck(False, FAILED_OTHER, failed=str(record["failed"]))
    if differences:
        raise MedlamaInputError(
            f"the work folder holds the completed shards of a `medlama {kind}` run with other settings "
            f"({'; '.join(differences)}); rerun with that run's settings to continue it, or {hint} (its shards "
            "are then discarded)", file=folder)
    return WorkFolderCheck(True, SAME)


def discard_work_folder(out: str | Path, *, kind: str) -> None:
    """Remove ``out``'s work folder if it is medlama's and ``kind``'s (a user's folder is never touched)."""
    folder = work_folder(out)
    record = _record(folder) if folder.is_dir() else None
    if record is not None and record.get("kind") == kind:
        shutil.rmtree(folder, ignore_errors=True)


def _numbers_as_values(value: Any) -> Any:
    if isinstance(value, (bool, int, float)):
        return float(value)
    if isinstance(value, Mapping):
        return {key: _numbers_as_values(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_numbers_as_values(item) for item in value]
    return value


def _lines_hash(lines: Sequence[str]) -> str:
    return hashlib.sha256("".join(line + "\n" for line in lines).encode()).hexdigest()


class ShardStore:
    """The completed shards of one run (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._made_by: str | None = None

    @classmethod
    def open(cls, out: str | Path, *, kind: str, manifest: Mapping[str, Any], overwrite: bool,
             hint: str = "give --overwrite to start over") -> "ShardStore":
        """The store of a run into ``out`` (the main process, holding ``out``'s lock): the shards of an earlier
        run with the same manifest are kept, and discarded with ``overwrite``; another run's are refused."""
        checked = check_work_folder(out, kind=kind, manifest=manifest, overwrite=overwrite, hint=hint)
        folder = work_folder(out)
        if checked.reason == FAILED_OTHER:
            print(f"medlama: starting over: the completed shards beside the output are of a run with other settings "
                  f"that stopped with an error ({checked.failed}); they are discarded", file=sys.stderr)
        if not checked.keep:
            discard_work_folder(out, kind=kind)
        (folder / _SHARDS).mkdir(parents=True, exist_ok=True)
        record = {"medlama": "work", "kind": kind, "target": Path(out).name, "manifest": _as_json(dict(manifest))}
        atomic_write_text(folder / WORK_MARKER, json.dumps(record, ensure_ascii=False, default=plain) + "\n")
        return cls(folder)

    def failed(self, error: BaseException) -> None:
        """Record that the run stopped with ``error`` (not interrupted, which a rerun of the same settings
        continues): a rerun with the same settings still continues from the shards, and one with other settings
        (the corrected command) discards them instead of being refused."""
        record = _record(self.folder)
        if record is not None:
            reason = " ".join(str(error).split())[:300] or type(error).__name__
            atomic_write_text(self.folder / WORK_MARKER,
                              json.dumps({**record, "failed": reason}, ensure_ascii=False, default=plain) + "\n")

    def stopped(self, error: BaseException, out: str | Path, *, kind: str) -> None:
        """What a run into ``out`` stopped by ``error`` leaves: nothing, when no shard is complete (nothing to
        continue); else, for an error (not an interrupt), the failure recorded (:meth:`failed`)."""
        if self.empty():
            discard_work_folder(out, kind=kind)
        elif isinstance(error, Exception):
            self.failed(error)

    def empty(self) -> bool:
        """Whether no shard is complete (a run that failed before finishing one leaves nothing to continue)."""
        return not any((self.folder / _SHARDS).glob("*.jsonl"))

    @classmethod
    def joined(cls, out: str | Path) -> "ShardStore":
        """The store the main process opened, as another process of the same run uses it."""
        return cls(work_folder(out))

    @staticmethod
    def key(identity: Mapping[str, Any]) -> str:
        """The file name of the shard ``identity`` names: the SHA-256 of its canonical JSON."""
        text = json.dumps(_as_json(dict(identity)), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()

    def _path(self, identity: Mapping[str, Any]) -> Path:
        return self.folder / _SHARDS / f"{self.key(identity)}.jsonl"

    def has(self, identity: Mapping[str, Any]) -> bool:
        """Whether the shard ``identity`` names is complete."""
        return self._path(identity).is_file()

    def made_by(self) -> str:
        """What produces this run's shards: the SHA-256 of its manifest (models and their content hashes or
        revisions, the settings, the data and its candidate pool), which every shard it writes records."""
        if self._made_by is None:  # the manifest is written once, when the store opens
            record = _record(self.folder) or {}
            # numbers as values (1, 1.0 and True alike), as the work folder's settings check compares them
            text = json.dumps(_numbers_as_values(record.get("manifest")), sort_keys=True, ensure_ascii=False,
                              default=plain)
            self._made_by = hashlib.sha256(text.encode()).hexdigest()
        return self._made_by

    def write(self, identity: Mapping[str, Any], items: Sequence[Any], **meta: Any) -> list[Any]:
        """Keep a completed shard (atomically), with ``meta`` (e.g. the seconds it took) in its header, what
        produced it (:meth:`made_by`) and the SHA-256 of its items; returns its items as :meth:`read` gives them
        back, so that a run and its resumption go on from the same values."""
        body = [json.dumps(item, ensure_ascii=False, default=plain) for item in items]
        lines = [json.dumps({"shard": _as_json(dict(identity)), "items": len(items), "meta": _as_json(meta),
                             "made_by": self.made_by(), "sha256": _lines_hash(body)}, ensure_ascii=False), *body]
        atomic_write_text(self._path(identity), "".join(line + "\n" for line in lines))
        return [json.loads(line) for line in body]

    def read(self, identity: Mapping[str, Any]) -> tuple[list[Any], dict]:
        """The items of a completed shard and its ``meta``. A damaged file, a shard another run wrote (another
        model, settings, data or pool: its ``made_by``) or one changed since it was written (its checksum) is an
        error naming it: nothing of it is published as this run's."""
        path = self._path(identity)
        start_over = "rerun with --overwrite to start over"
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
            header = json.loads(lines[0])
            items = [json.loads(line) for line in lines[1:]]
        except (OSError, ValueError, IndexError):
            raise MedlamaInputError(f"a completed shard cannot be read; {start_over}", file=path) from None
        if header.get("shard") != _as_json(dict(identity)) or header.get("items") != len(items):
            raise MedlamaInputError(f"a completed shard does not hold what its name says; {start_over}", file=path)
        if header.get("made_by") != self.made_by():
            raise MedlamaInputError("a completed shard was not written by this run (another model, settings, data "
                                    f"or candidate pool), so its rankings are not this run's; {start_over}",
                                    file=path)
        if header.get("sha256") != _lines_hash(lines[1:]):
            raise MedlamaInputError(f"a completed shard has changed since it was written; {start_over}", file=path)
        return items, header.get("meta") or {}

    def note(self, name: str, record: Mapping[str, Any]) -> None:
        """Keep ``record`` about ``name`` (a unit's settings, as the process that first computed it saw them);
        the first note stays."""
        path = self.folder / _NOTES / f"{self.key({'note': name})}.json"
        if not path.is_file():
            atomic_write_text(path, json.dumps({"name": name, "record": _as_json(dict(record))},
                                               ensure_ascii=False) + "\n")

    def noted(self, name: str) -> dict | None:
        """The record kept about ``name``, or None."""
        path = self.folder / _NOTES / f"{self.key({'note': name})}.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))["record"]
        except (OSError, ValueError, KeyError):
            return None
