"""``push-metric``: a metric module as an ``evaluate`` community module, a Gradio Space
(:mod:`medlama.publishing.hub` describes the tree)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from medlama.core.errors import MedlamaInputError
from medlama.publishing.upload import check_repo_id, finish
from medlama.metrics import metric_path
from medlama.metrics import space_app

METRIC_FILES = ("README.md", "requirements.txt")
#: The Space's ``app.py``: :mod:`medlama.metrics.space_app`, with the repository id filled in.
APP_PLACEHOLDER = 'REPO_ID = "<repo_id>"'

def metric_folder(name: str | Path) -> Path:
    """A metric module folder: a bundled metric by name (``acc_at_k``, ``ucm``) or a folder ``<x>/<x>.py``."""
    candidate = Path(name)
    script = candidate / f"{candidate.resolve().name}.py"
    if candidate.is_dir() and script.is_file():
        return candidate

    try:  # a bundled name wins over a folder of that name that is no module (the repository's ucm/ package)
        return metric_path(str(name))
    except ValueError as error:
        if candidate.is_dir():
            raise MedlamaInputError(f"not an evaluate module folder: no {script.name}", file=candidate) from None
        raise MedlamaInputError(str(error)) from None


def space_app_text(repo_id: str) -> str:
    """The Space's ``app.py`` for the metric ``repo_id`` (blank optional cells mean "not given")."""
    text = Path(space_app.__file__).read_text(encoding="utf-8")
    if APP_PLACEHOLDER not in text:
        raise RuntimeError("medlama.metrics.space_app has lost its REPO_ID placeholder")
    return text.replace(APP_PLACEHOLDER, f"REPO_ID = {json.dumps(repo_id)}", 1)


def push_metric(name: str | Path, repo_id: str, *, private: bool = False, revision: str | None = None,
                commit_message: str | None = None, dry_run: str | Path | None = None, token: str | None = None,
                api=None) -> dict[str, Any]:
    """Publish a metric module as an ``evaluate`` community module: the Space ``repo_id`` (a Gradio widget).

    Afterwards ``evaluate.load(repo_id)`` works for anyone. With ``dry_run=DIR`` nothing is uploaded and
    ``evaluate.load(str(DIR / <repo name>))`` loads the tree offline.
    """
    folder = metric_folder(name)
    module = folder.resolve().name
    repo_name = check_repo_id(repo_id)
    if "." in repo_name:
        raise MedlamaInputError(f"repository name {repo_name!r}: evaluate imports the script <name>.py as a Python "
                                "module, so the name cannot contain '.'")
    for required in METRIC_FILES:
        if not (folder / required).is_file():
            raise MedlamaInputError(f"the metric module has no {required}", file=folder)
    manifest: dict[str, Any] = {
        "repo_id": repo_id, "repo_type": "space", "space_sdk": "gradio", "private": private, "revision": revision,
        "module": module, "script": f"{repo_name}.py", "commit_message": commit_message or f"Upload {module} "
                                                                                          "metric from medlama",
        "source": str(folder.resolve()),
    }

    def write_tree(tree: Path) -> None:
        tree.mkdir(parents=True)
        shutil.copy2(folder / f"{module}.py", tree / f"{repo_name}.py")
        card = (folder / "README.md").read_text(encoding="utf-8")
        # Local load paths (and the comment explaining them) become the repository id.
        card = re.sub(rf'evaluate\.load\("(?:metrics/)?{re.escape(module)}"\)([^\n]*?)(  # [^\n]*)?$',
                      lambda m: f'evaluate.load("{repo_id}"){m.group(1)}', card, flags=re.MULTILINE)
        (tree / "README.md").write_text(card, encoding="utf-8")
        shutil.copy2(folder / "requirements.txt", tree / "requirements.txt")
        (tree / "app.py").write_text(space_app_text(repo_id), encoding="utf-8")

    return finish(write_tree, repo_name, folder, manifest, kind="push-metric", dry_run=dry_run, api=api,
                   token=token, space_sdk="gradio")
