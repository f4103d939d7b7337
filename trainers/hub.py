"""``medlama push-model``: upload a rewired model folder to the Hugging Face Hub, or show exactly what would go.

What is uploaded (:func:`plan_upload`): every file of the model folder except hidden files and the
``checkpoints/`` folder. With ``include_checkpoints`` the checkpoint models go too (for the performance-over-
steps curve), without their optimizer, scheduler and RNG states. The upload is one commit made of exactly
those files (``HfApi.create_commit``, the call behind ``upload_folder``), so what the dry run lists is what
is sent. The token comes from the ``token`` argument, ``HF_TOKEN``, or the standard ``hf auth login``; it is
never printed or written.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medlama.atomic import atomic_directory
from medlama.checksums import sha256_of
from medlama.hub import check_repo_id
from medlama.errors import MedlamaInputError

MANIFEST_NAME = "manifest.json"
DRY_RUN_FILES = "files"
_CHECKPOINT_STATE = ("optimizer.pt", "scheduler.pt", "scaler.pt", "training_args.bin")


def _is_model_folder(folder: Path) -> bool:
    return (folder / "config.json").is_file() and (folder / "modules.json").is_file() and any(
        (folder / name).is_file() for name in ("model.safetensors", "model.safetensors.index.json",
                                               "pytorch_model.bin", "pytorch_model.bin.index.json"))


def plan_upload(path: str | Path, *, include_checkpoints: bool = False) -> list[str]:
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




def _default_message(folder: Path) -> str:
    record = folder / "rewire_config.json"
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
        return (f"Upload {data['base_model']['name']} rewired with Contrastive-Probe "
                f"({data['training']['global_step']} steps)")
    except (OSError, ValueError, KeyError, TypeError):
        return "Upload model rewired with medlama"


def push_model(path: str | Path, repo_id: str, *, private: bool = False, revision: str | None = None,
               commit_message: str | None = None, include_checkpoints: bool = False,
               dry_run: str | Path | None = None, token: str | None = None) -> dict[str, Any]:
    """Upload the model folder ``path`` to the model repository ``repo_id`` (created if missing).

    With ``dry_run=DIR`` nothing is uploaded: ``DIR/files/`` receives a copy of exactly the files that would
    be, and ``DIR/manifest.json`` the repository, revision, privacy, commit message and each file's size and
    SHA-256. Returns that manifest (plus ``commit_url`` after a real upload).
    """
    folder = Path(path)
    check_repo_id(repo_id)
    files = plan_upload(folder, include_checkpoints=include_checkpoints)
    manifest: dict[str, Any] = {
        "repo_id": repo_id, "repo_type": "model", "private": private, "revision": revision,
        "commit_message": commit_message or _default_message(folder), "source": str(folder.resolve()),
        "files": [{"path": name, "size": (folder / name).stat().st_size, "sha256": sha256_of(folder / name)}
                  for name in files],
    }
    if dry_run is not None:
        _write_dry_run(Path(dry_run), folder, files, manifest)
        return manifest
    from huggingface_hub import CommitOperationAdd, HfApi, get_token

    token = token or os.environ.get("HF_TOKEN") or get_token()
    if not token:
        raise MedlamaInputError("no Hugging Face token: set HF_TOKEN or log in with `hf auth login`")
    api = HfApi(token=token)
    api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
    if revision:
        api.create_branch(repo_id, branch=revision, repo_type="model", exist_ok=True)
    info = api.create_commit(repo_id, [CommitOperationAdd(name, str(folder / name)) for name in files],
                             commit_message=manifest["commit_message"], repo_type="model", revision=revision)
    manifest["commit_url"] = getattr(info, "commit_url", None)
    return manifest


def _write_dry_run(target: Path, folder: Path, files: Sequence[str], manifest: dict[str, Any]) -> None:
    if target.exists() and (not target.is_dir() or (any(target.iterdir()) and not (target / MANIFEST_NAME).is_file())):
        raise MedlamaInputError("the dry-run folder exists and is not an earlier dry run; choose a new or empty "
                                "folder (nothing was changed)", file=target)
    if target.resolve() == folder.resolve() or folder.resolve() in target.resolve().parents:
        raise MedlamaInputError("the dry-run folder must be outside the model folder", file=target)
    with atomic_directory(target, marker=MANIFEST_NAME) as staging:
        for name in files:
            destination = staging / DRY_RUN_FILES / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(folder / name, destination)
        (staging / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
