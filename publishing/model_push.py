"""``push-model``: a rewired model folder to a model repository, with public names for every local path
(:mod:`medlama.publishing.hub` describes the rules)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from medlama.core.errors import MedlamaInputError
from medlama.core.integrity import check_vouched
from medlama.publishing.public_names import public_rewire_record, replace_local
from medlama.publishing.upload import check_repo_id, finish
from medlama.trainers.model_card import (CARD_NAME, SCORES_NAME, card_for_repo, card_with_scores, checkpoint_card,
                                        scores_record)
from medlama.trainers.guards import nonfinite_weights
from medlama.publishing.model_scores import probe_scores

#: The dry-run folder of a model holds its tree here (``DIR/files/``), beside ``manifest.json``.
MODEL_TREE = "files"
MODEL_RECORD = "rewire_config.json"
#: The command whose output folders ``push-model`` uploads (``medlama.trainers.trainer.KIND``, without importing
#: the trainer and torch).
REWIRE = "rewire"
_CHECKPOINT_STATE = ("optimizer.pt", "scheduler.pt", "scaler.pt", "training_args.bin")

def _is_model_folder(folder: Path) -> bool:
    return (folder / "config.json").is_file() and (folder / "modules.json").is_file() and any(
        (folder / name).is_file() for name in ("model.safetensors", "model.safetensors.index.json",
                                               "pytorch_model.bin", "pytorch_model.bin.index.json"))


def plan_model(path: str | Path, *, include_checkpoints: bool = False) -> list[str]:
    """The files (relative POSIX paths, sorted) that :func:`push_model` uploads from ``path``."""
    folder = Path(path)
    if not folder.is_dir():
        raise MedlamaInputError("model folder not found", file=folder)
    if not _is_model_folder(folder):
        raise MedlamaInputError("not a sentence-transformers model folder (config.json, modules.json and weights "
                                "expected); pass the output folder of medlama rewire", file=folder)
    files = []
    for file in folder.rglob("*"):
        relative = file.relative_to(folder)
        if not file.is_file() or any(part.startswith(".") for part in relative.parts):
            continue
        if relative.parts[0] == "checkpoints":
            if not include_checkpoints or len(relative.parts) < 3:  # checkpoints/rewire_config.json: run record
                continue
            if relative.name in _CHECKPOINT_STATE or relative.name.startswith("rng_state"):
                continue
        files.append(relative.as_posix())
    return sorted(files)


def _model_record(folder: Path) -> dict[str, Any] | None:
    try:
        record = json.loads((folder / MODEL_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _default_model_message(record: dict[str, Any] | None) -> str:
    try:
        return (f"Upload {record['base_model']['name']} rewired with Contrastive-Probe "
                f"({record['training']['global_step']} steps)")
    except (KeyError, TypeError):
        return "Upload model rewired with medlama"


def _place(source: Path, destination: Path) -> None:
    """A hard link where possible (model weights are large), else a copy."""
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)


def _write_public_file(source: Path, destination: Path, replacements: dict[str, str],
                       public_record: dict[str, Any] | None, *, link: bool,
                       edit: Callable[[str], str] | None = None) -> None:
    """Copy ``source`` to ``destination``, with public names for the local paths it holds; a file that
    would still name one (a binary file, or text the replacements do not cover) stops the push.
    ``public_record``: the run record to write instead, for the folder's ``rewire_config.json``;
    ``edit``: a last change to the text (the cards: the repository id)."""
    data = source.read_bytes()
    if public_record is None and edit is None and not any(local.encode("utf-8") in data for local in replacements):
        (_place if link else shutil.copy2)(source, destination)
        return
    try:
        text = (json.dumps(public_record, indent=2) + "\n" if public_record is not None
                else replace_local(data.decode("utf-8"), replacements))
        text = edit(text) if edit is not None else text
    except UnicodeDecodeError:
        text = None
    leaked = next((local for local in replacements if text is None or local in text), None)
    if leaked is not None:
        raise MedlamaInputError(f"this file names the local path {leaked!r}, which would be uploaded; remove it "
                                "(nothing was uploaded)", file=source)
    destination.write_text(text, encoding="utf-8")


def push_model(path: str | Path, repo_id: str, *, private: bool = False, revision: str | None = None,
               commit_message: str | None = None, include_checkpoints: bool = False,
               dry_run: str | Path | None = None, token: str | None = None, api=None,
               results: str | Path | None = None, partial_results: bool = False) -> dict[str, Any]:
    """Upload the model folder ``path`` to the model repository ``repo_id`` (created if missing).

    The uploaded ``rewire_config.json`` and ``README.md`` name the base model, the corpus and the command
    without local paths (module docstring); the folder itself is not changed. With ``dry_run=DIR`` nothing
    is uploaded: ``DIR/files/`` receives exactly the files that would be, and ``DIR/manifest.json`` the
    repository, revision, privacy, commit message and each file's size and SHA-256. Returns that manifest
    (plus ``commit_url`` after a real upload). The folder must be a ``rewire`` output whose files are those
    it wrote (:func:`medlama.core.integrity.check_vouched`: a model copied in by hand, or weights cut short, are
    refused). ``results``: a ``medlama probe`` output of this folder, whose scores go into the pushed card's
    ``model-index`` and ``probing_scores.json`` (:func:`medlama.publishing.model_scores.probe_scores`); a run of
    part of its query set (``--limit``, some relations) is refused there unless ``partial_results``, and then
    named as partial in each metric's name.
    """
    folder = Path(path)
    check_repo_id(repo_id)
    files = plan_model(folder, include_checkpoints=include_checkpoints)

    broken = nonfinite_weights(folder)
    if broken:  # a diverged rewiring: such a model encodes everything to NaN, whoever wrote it
        raise MedlamaInputError(f"{len(broken)} weight tensor(s) hold NaN or infinity (first: {broken[0]}): the "
                                "model is broken (a rewiring that diverged); nothing was uploaded", file=folder)
    check_vouched(folder, files, kinds=(REWIRE,), command="push-model")
    scored = None
    if results is not None:
        scored = probe_scores(results, folder, partial=partial_results)
    record = _model_record(folder)
    public_record, replacements = public_rewire_record(record or {}, folder)
    # The same paths as JSON writes them (non-ASCII letters and backslashes escaped).
    replacements.update({json.dumps(local)[1:-1]: json.dumps(public)[1:-1] for local, public in replacements.items()})
    manifest: dict[str, Any] = {
        "repo_id": repo_id, "repo_type": "model", "private": private, "revision": revision,
        "commit_message": commit_message or _default_model_message(public_record), "source": str(folder.resolve()),
    }

    rewritten_record = public_record if record not in (None, public_record) else None
    if scored is not None:
        manifest["scores"] = {"scores": scored.scores, "source": scored.source}

    def with_scores(text: str) -> str:
        if scored is None:
            return text
        return card_with_scores(text, scored.scores, model_name=repo_id, source=scored.source,
                                dataset=scored.dataset, config=scored.config, where=folder / CARD_NAME)

    def card_edit(relative: str) -> Callable[[str], str] | None:
        """The root card names the repository; a checkpoint's card says where it sits in it."""
        if relative == CARD_NAME:
            return lambda text: card_for_repo(with_scores(text), repo_id, revision, checkpoints=include_checkpoints)
        parts = relative.split("/")
        if len(parts) == 3 and parts[0] == "checkpoints" and parts[2] == CARD_NAME:
            return lambda _text: checkpoint_card(repo_id, "/".join(parts[:2]), revision)
        return None

    def write_tree(tree: Path) -> None:
        for relative in files:
            destination = tree / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            _write_public_file(folder / relative, destination, replacements,
                               rewritten_record if relative == MODEL_RECORD else None, link=dry_run is None,
                               edit=card_edit(relative))
        if scored is not None:  # replaced, never written through a hard link into the folder's own file
            (tree / SCORES_NAME).unlink(missing_ok=True)
            (tree / SCORES_NAME).write_text(scores_record(scored.scores, source=scored.source, dataset=scored.dataset,
                                                          config=scored.config), encoding="utf-8")

    return finish(write_tree, MODEL_TREE, folder, manifest, kind="push-model", dry_run=dry_run, api=api,
                   token=token, what="the model folder")
