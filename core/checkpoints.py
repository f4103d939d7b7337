"""Model checkpoints on disk: the weight files that make a folder a loadable model, and the
``checkpoint-<step>`` folders a rewiring run leaves (:func:`list_checkpoints`), which ``medlama probe
--checkpoints`` and the recipe probe step by step. Writing, checking and resuming them is the trainer's
(:mod:`medlama.trainers.checkpoints`)."""

from __future__ import annotations

from pathlib import Path

#: Weight files of a Hugging Face model folder (one is enough).
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
#: The name of a checkpoint folder: ``checkpoint-<step>``.
CHECKPOINT_PREFIX = "checkpoint-"


def checkpoint_step(path: str | Path) -> int | None:
    """The step of a ``checkpoint-<step>`` folder name, or None for any other name."""
    name = Path(path).name
    suffix = name[len(CHECKPOINT_PREFIX):] if name.startswith(CHECKPOINT_PREFIX) else ""
    return int(suffix) if suffix.isdigit() else None


def list_checkpoints(folder: str | Path) -> list[Path]:
    """The loadable ``checkpoint-<step>`` folders (a ``config.json`` and model weights) at or below
    ``folder``, by step (then path).

    ``folder`` may be a rewiring output (its ``checkpoints/`` is searched), a ``checkpoints/`` folder, a
    single checkpoint, or any folder holding rewired models (a recipe's output). Set-aside
    (``checkpoint-6.incomplete-...``) and hidden staging folders are not checkpoints.
    """
    root = Path(folder)
    if not root.is_dir():
        return []
    candidates = [root] if checkpoint_step(root) is not None else []
    candidates += [p for p in root.rglob(CHECKPOINT_PREFIX + "*")
                   if p.is_dir() and not any(part.startswith(".") for part in p.relative_to(root).parts)]
    found = [p for p in candidates if checkpoint_step(p) is not None and (p / "config.json").is_file()
             and any((p / weights).is_file() for weights in WEIGHT_FILES)]
    return sorted(found, key=lambda p: (checkpoint_step(p), str(p)))
