"""Rewiring checkpoints: listing them, checking one is complete, choosing where a run resumes, and writing
each one atomically.

A rewiring output ``OUT`` keeps ``checkpoints/checkpoint-<step>`` folders (each a loadable model plus the
optimiser, scheduler, RNG and trainer state a resume needs) and ``checkpoints/rewire_config.json``, the
record of the run that wrote them. A checkpoint is saved into a hidden staging folder and renamed into place
(:func:`staged_checkpoint`), so a kill during a save leaves no half-written ``checkpoint-<step>``. One
written before that, or damaged since, is set aside on resume (renamed ``checkpoint-<step>.incomplete-<time>``,
never deleted) and the run continues from the last complete checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medlama.core.errors import MedlamaInputError
from medlama.core.resume import setting_differences
from medlama.trainers.config import MAY_CHANGE_ON_RESUME, MUST_MATCH_ON_RESUME, RewireConfig
from medlama.core.distributed import is_main_process
from medlama.core.checkpoints import CHECKPOINT_PREFIX, WEIGHT_FILES, checkpoint_step, list_checkpoints

CONFIG_NAME = "rewire_config.json"
CHECKPOINTS_DIR = "checkpoints"
#: What a resume needs besides the model (the RNG states are optional to the trainer).
STATE_FILES = ("trainer_state.json", "optimizer.pt", "scheduler.pt")


@dataclass
class CheckpointStatus:
    """A ``checkpoint-<step>`` folder and what keeps it from being resumed (nothing: it is complete)."""

    path: Path
    step: int
    problems: list[str]

    @property
    def complete(self) -> bool:
        return not self.problems

    def describe(self) -> str:
        return f"{self.path} is incomplete ({'; '.join(self.problems)})"


def inspect_checkpoint(path: str | Path) -> CheckpointStatus:
    """Check that a checkpoint folder holds everything a resume needs (model, optimizer, scheduler, state)."""
    path = Path(path)
    step = checkpoint_step(path)
    step = -1 if step is None else step
    if not path.is_dir():
        return CheckpointStatus(path, step, ["the folder does not exist"])
    missing = [name for name in (*STATE_FILES, "modules.json", "config.json") if not (path / name).is_file()]
    if not any((path / weights).is_file() for weights in WEIGHT_FILES):
        missing.append("model weights (model.safetensors)")
    problems = [f"missing {', '.join(missing)}"] if missing else []
    state = path / "trainer_state.json"
    if state.is_file():
        try:
            global_step = json.loads(state.read_text(encoding="utf-8"))["global_step"]
            if step >= 0 and global_step != step:
                problems.append(f"its trainer_state.json is for step {global_step}")
        except (ValueError, KeyError, TypeError):
            problems.append("its trainer_state.json is truncated or corrupt")
    return CheckpointStatus(path, step, problems)


def checkpoint_statuses(out: str | Path) -> list[CheckpointStatus]:
    """Every ``checkpoints/checkpoint-<step>`` folder of a rewiring output, complete or not, by step."""
    folder = Path(out) / CHECKPOINTS_DIR
    if not folder.is_dir():
        return []
    found = [inspect_checkpoint(p) for p in folder.iterdir() if p.is_dir() and checkpoint_step(p) is not None]
    return sorted(found, key=lambda c: c.step)


def set_aside(path: Path, reason: str = "incomplete") -> Path:
    """Rename ``path`` to ``<name>.<reason>-<time>`` beside it (never deleted) and return the new path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.{reason}-{stamp}")
    number = 1
    while target.exists():
        number += 1
        target = path.with_name(f"{path.name}.{reason}-{stamp}-{number}")
    os.replace(path, target)
    return target


def choose_resume_checkpoint(out: str | Path, resume: bool | str | Path = True) -> Path | None:
    """The checkpoint a run into ``out`` continues from, or None for a fresh start.

    ``resume=True``: the newest complete checkpoint. Incomplete ones newer than it (a save interrupted by
    an older version, or a damaged folder) are set aside by :func:`set_aside`, never deleted, and the
    rename is reported on stderr; the training then writes those steps again. ``False``: start over,
    which is an error if ``out`` already holds checkpoints. A path: that checkpoint (it must be complete).
    """
    checkpoints = checkpoint_statuses(out)
    if resume is False:
        if checkpoints:
            raise MedlamaInputError(
                f"{Path(out) / CHECKPOINTS_DIR} holds {len(checkpoints)} checkpoint(s) of an earlier run; to start "
                f"over, write to another output folder or remove them yourself (nothing is deleted for you)")
        return None
    if resume is not True:
        status = inspect_checkpoint(Path(resume))
        if not status.complete:
            raise MedlamaInputError(f"cannot resume: {status.describe()}")
        return status.path
    complete = [c for c in checkpoints if c.complete]
    last = complete[-1] if complete else None
    for status in checkpoints:
        if status.complete:
            continue
        if last is not None and status.step < last.step:
            print(f"medlama: ignoring an older incomplete checkpoint: {status.describe()}", file=sys.stderr)
        elif is_main_process():  # the other processes of a multi-device run resume from the same `last`
            moved = set_aside(status.path)
            print(f"medlama: {status.describe()}; the run was probably interrupted while saving it. Set aside as "
                  f"{moved.name} (nothing deleted); "
                  + (f"resuming from {last.path.name}, the last complete checkpoint" if last else
                     "no complete checkpoint precedes it, so training starts from the beginning"),
                  file=sys.stderr)
    return last.path if last else None


def check_resume_compatible(out: Path, config: RewireConfig, corpus: list[dict[str, Any]]) -> None:
    """Refuse to resume checkpoints written with other settings (:data:`MUST_MATCH_ON_RESUME`) or corpus."""
    saved_path = out / CHECKPOINTS_DIR / CONFIG_NAME
    if not saved_path.is_file():
        return
    try:
        saved = json.loads(saved_path.read_text(encoding="utf-8"))
    except ValueError:
        raise MedlamaInputError("unreadable run record; cannot check that the resumed run matches it",
                                file=saved_path) from None
    then = saved.get("config", {})
    differences = setting_differences(then, {key: getattr(config, key) for key in MUST_MATCH_ON_RESUME},
                                      MUST_MATCH_ON_RESUME)
    strip = [{k: v for k, v in item.items() if k != "path"} for item in corpus]
    saved_strip = [{k: v for k, v in item.items() if k != "path"} for item in saved.get("corpus", [])]
    if strip != saved_strip:
        differences.append("the corpus (file names, contents or sizes differ)")
    if differences:
        may_change = ", ".join(MAY_CHANGE_ON_RESUME)
        raise MedlamaInputError(
            f"{out} holds checkpoints of a different run ({'; '.join(differences)}); resume with the same settings "
            f"(only {may_change} may change), or write to another output folder")


@contextlib.contextmanager
def staged_checkpoint(run_dir: Path, step: int, *, main: bool = True,
                      barrier: Callable[[], Any] = lambda: None) -> Iterator[Path]:
    """Write ``run_dir/checkpoint-<step>`` atomically: the body saves into ``<yielded>/checkpoint-<step>``
    (a hidden staging folder), which is then renamed into place by the main process.

    ``barrier`` synchronises the processes of a multi-device run (each writes its own RNG state into the
    staging folder). A complete checkpoint of the same step (a resume from an earlier step re-saves it) is
    replaced; an incomplete one is set aside.
    """
    name = f"{CHECKPOINT_PREFIX}{step}"
    staging = run_dir / f".{name}.staging"
    final = run_dir / name
    if main and staging.exists():  # left by a save that was killed before its rename
        shutil.rmtree(staging)
    barrier()
    yield staging
    barrier()
    if main:
        old = None
        if final.exists():
            if inspect_checkpoint(final).complete:
                old = run_dir / f".{name}.replaced"
                if old.exists():
                    shutil.rmtree(old)
                os.replace(final, old)
            else:
                set_aside(final)
        os.replace(staging / name, final)
        shutil.rmtree(staging)
        if old is not None:
            shutil.rmtree(old)
    barrier()
