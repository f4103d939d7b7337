"""Publishing to the Hugging Face Hub: built dataset folders (``push-dataset``), rewired models (``push-model``)
and metric modules (``push-metric``).

One module on purpose, although longer than most: the three commands are one idea (write the upload tree,
then upload it or leave it as a dry run) and share the tree, the manifest, the dry-run checks and the
authenticated, offline-aware upload; only what goes in the tree differs.

Each command first writes the *upload tree*, the exact files that go to the repository, and then either
uploads it (``HfApi.upload_folder``, one commit) or, with ``dry_run=DIR``, leaves it for inspection:

* ``DIR/<repo name>/`` (datasets, metrics) or ``DIR/files/`` (models): the upload tree. A dataset tree loads
  with ``load_dataset(str(tree), config)``, a metric tree with ``evaluate.load(str(tree))``, a model tree with
  ``SentenceTransformer(str(tree))``, exactly as the repository will for anyone;
* ``DIR/manifest.json``: repository, type, revision, privacy, gating, commit message, and every file with
  its size and SHA-256 (and, for the local record only, the folder it came from).

A dry-run folder is written atomically and records the command that wrote it (``push-dataset``,
``push-model``, ``push-metric``: :data:`medlama.atomic.OWNER_NAME` in ``DIR``, beside the tree, so never
uploaded); only that command replaces it, and two dry runs into one ``DIR`` at once are refused.

No uploaded file names a local path (:mod:`medlama.publishing.public_names`): the local copy keeps them.
A last check over every text file of the tree (:func:`check_tree_names_no_local_path`, before any upload and
for dry runs) refuses the push when one still names the home folder, the Python environment
(``sys.prefix``, ``sys.base_prefix``), a site-packages folder, or the folder being pushed or its parent.

Datasets: the tree is the folder's ``README.md`` (the card with its ``configs``, its load instructions naming
the repository), ``build_info.json`` and
every file a config's ``data_files`` names; nothing else. For UMLS-derived data (MedLAMA; BioLAMA when
it holds the ``umls`` source; context-variance sets built from either: the card's ``umls`` tag) the card
gets gated-access metadata (``gated``, ``extra_gated_prompt`` and ``extra_gated_fields``, a UMLS-licence
checkbox; the built folder's own card has them too) and the repository is set to gated (manual approval by
default) before any file is uploaded; such data is only pushed gated or
private. Data quoting MIMIC-III notes (context-variance sets with a ``mimic``-format source: the card's
``mimic`` tag) may not be redistributed under the PhysioNet data use agreement, and is only pushed
private. Context-variance folders built before these tags existed are recognised by their
``build_info.json`` (a source of format ``mimic``; an origin naming MedLAMA, or a BioLAMA ``umls_``
relation). ``build_info.json`` goes up without local paths: path-like fields keep only their last part.

Models (:func:`plan_model`): every file of the model folder except hidden files and the ``checkpoints/``
folder; with ``include_checkpoints`` the checkpoint models too (for the performance-over-steps curve),
without their optimizer, scheduler and RNG states. ``rewire_config.json`` goes up with the base model's
public name, corpus file names and a path-free command line; ``README.md`` (and any other file naming one
of those local paths) likewise. A file that would still name a local path stops the push. The card names the
repository it goes to (:func:`medlama.trainers.model_card.card_for_repo`: the usage snippet and the
``model-index`` name; sentence-transformers' training-pair widgets dropped), and each checkpoint's card is
replaced by one saying where it sits in the repository and how to load it.

Metrics: an ``evaluate`` community module is a Space whose script is named after the repository
(``evaluate.load("<user>/<name>")`` fetches ``<name>.py``): the tree is ``<name>.py`` (the module's script,
unchanged, renamed if the repository name differs), its ``README.md`` card (with the load path updated),
``requirements.txt`` and a Gradio ``app.py`` widget (:mod:`medlama.metrics.space_app`: blank optional
columns mean "not given").

The token comes from the ``token`` argument, ``HF_TOKEN`` or the standard ``hf auth login``; it is never
printed or written.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import site
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from medlama.atomic import atomic_directory, check_replaceable
from medlama.checksums import sha256_of
from medlama.datasets.licences import GATED_FIELDS, GATED_PROMPT, MIMIC_TAG, UMLS_TAG  # noqa: F401
from medlama.errors import MedlamaInputError
from medlama.publishing.public_names import public_build_info, public_rewire_record, replace_local
from medlama.trainers.model_card import (CARD_NAME, SCORES_NAME, card_for_repo, card_with_scores, checkpoint_card,
                                        scores_record)

MANIFEST_NAME = "manifest.json"
GATE_MODES = ("auto", "manual")
DATASET_EXTRA_FILES = ("README.md", "build_info.json")
METRIC_FILES = ("README.md", "requirements.txt")
#: The dry-run folder of a model holds its tree here (``DIR/files/``), beside ``manifest.json``.
MODEL_TREE = "files"
MODEL_RECORD = "rewire_config.json"
_CHECKPOINT_STATE = ("optimizer.pt", "scheduler.pt", "scaler.pt", "training_args.bin")
#: The Space's ``app.py``: :mod:`medlama.metrics.space_app`, with the repository id filled in.
APP_PLACEHOLDER = 'REPO_ID = "<repo_id>"'


# --------------------------------------------------------------------------- shared

#: Files never read by the local-path check: binary by nature (weights, Arrow/Parquet, archives, pickles).
#: Any other file holding a null byte is taken as binary too.
BINARY_SUFFIXES = frozenset({
    ".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".onnx", ".h5", ".msgpack", ".npy", ".npz", ".pkl",
    ".pickle", ".parquet", ".arrow", ".gz", ".bz2", ".xz", ".zst", ".zip", ".tar", ".model", ".png", ".jpg",
    ".jpeg", ".gif", ".ico", ".pdf"})
#: System-wide folders that name nobody's machine: not checked as a "parent" or Python prefix ("/usr").
_SHARED_FOLDERS = frozenset({"/", "/usr", "/usr/local", "/opt", "/tmp", "/var", "/var/tmp", "/home", "/Users"})
_CHUNK = 1 << 24


def local_paths(source: str | Path) -> dict[str, str]:
    """{absolute local path: what it is} that no uploaded file may name (``source``: the folder pushed)."""
    source = Path(source)
    found: dict[str, str] = {}

    def add(path: Any, what: str) -> None:
        if not path:
            return
        for variant in {str(Path(path)), str(Path(path).absolute()), os.path.realpath(path)}:
            text = variant.rstrip("/\\") or variant
            if (os.path.isabs(text) and text not in _SHARED_FOLDERS and not re.fullmatch(r"[A-Za-z]:[\\/]?", text)
                    and text not in found):
                found[text] = what

    add(source, "the folder being pushed")
    add(source.absolute().parent, "the folder holding the folder being pushed")
    add(Path(os.path.realpath(source)).parent, "the folder holding the folder being pushed")
    for folder in site.getsitepackages() if hasattr(site, "getsitepackages") else []:
        add(folder, "a site-packages folder")
    add(site.getusersitepackages(), "the user site-packages folder")
    add(sys.prefix, "the Python environment (sys.prefix)")
    add(sys.base_prefix, "the Python installation (sys.base_prefix)")
    add(str(Path.home()), "the home folder")
    return found


def _path_pattern(locals_: dict[str, str]) -> re.Pattern[bytes]:
    """A local path as a whole path: not inside a longer name or a URL, followed by a separator, a quote,
    a space, a bracket, a sentence's full stop or the end (so home ``/root`` does not match ``/rootfs``)."""
    forms = set()
    for local in locals_:
        forms.add(local.encode("utf-8"))
        forms.add(json.dumps(local)[1:-1].encode("utf-8"))  # as JSON writes it (backslashes, non-ASCII)
    alternatives = b"|".join(re.escape(form) for form in sorted(forms, key=len, reverse=True))
    return re.compile(rb"(?<![\w.~/\\:-])(?P<path>" + alternatives +
                      rb")(?=[/\\\"'`\s)\]},;<>|]|\.(?:\s|$)|$)")


def _named_local(file: Path, pattern: re.Pattern[bytes], overlap: int) -> str | None:
    """The first local path the text file ``file`` names (None for binary files and clean text)."""
    if file.suffix.lower() in BINARY_SUFFIXES:
        return None
    with open(file, "rb") as handle:
        window, first = b"", True
        while True:
            chunk = handle.read(_CHUNK)
            if b"\0" in chunk:
                return None  # binary (a null byte is never text), whatever its name
            at_end = len(chunk) < _CHUNK
            window += chunk
            for match in pattern.finditer(window):
                # Near a chunk's end the match may go on in the next chunk: decided there (the overlap).
                if (match.start() > 0 or first) and (at_end or match.end() + 2 <= len(window)):
                    return match["path"].decode("utf-8")
            if at_end:
                return None
            window, first = window[-overlap:], False


def check_tree_names_no_local_path(tree: Path, source: str | Path) -> None:
    """Refuse the push when a text file of the upload ``tree`` names a local path (:func:`local_paths`):
    the home folder, the Python environment, a site-packages folder, the folder pushed or its parent."""
    locals_ = local_paths(source)
    if not locals_:
        return
    pattern = _path_pattern(locals_)
    overlap = max(len(json.dumps(local).encode("utf-8")) for local in locals_) + 8
    forms = {json.dumps(local)[1:-1]: local for local in locals_}
    for file in sorted(path for path in tree.rglob("*") if path.is_file()):
        named = _named_local(file, pattern, overlap)
        if named is not None:
            local = forms.get(named, named)
            raise MedlamaInputError(
                f"the upload tree's file {file.relative_to(tree).as_posix()!r} names the local path {local!r} "
                f"({locals_.get(local, 'a local folder')}), which would be uploaded; remove it from that file "
                "(nothing was uploaded)", file=source)


def check_repo_id(repo_id: str) -> str:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise MedlamaInputError(f"invalid repository id {repo_id!r}: {error}") from None
    if repo_id.count("/") != 1:
        raise MedlamaInputError(f"repository id {repo_id!r} must be <user or organisation>/<name>")
    return repo_id.split("/")[1]


def _files_of(tree: Path) -> list[dict]:
    paths = sorted((path for path in tree.rglob("*") if path.is_file()),
                   key=lambda path: path.relative_to(tree).as_posix())
    return [{"path": path.relative_to(tree).as_posix(), "size": path.stat().st_size, "sha256": sha256_of(path)}
            for path in paths]


def _check_dry_run_target(target: Path, source: Path, what: str = "the folder being published",
                          kind: str | None = None) -> None:
    if target.exists() and (not target.is_dir() or (any(target.iterdir()) and not (target / MANIFEST_NAME).is_file())):
        raise MedlamaInputError("the dry-run folder exists and is not an earlier dry run; choose a new or empty "
                                "folder (nothing was changed)", file=target)
    check_replaceable(target, marker=MANIFEST_NAME, kind=kind)  # an earlier dry run of this same command
    resolved = target.resolve()
    if resolved == source.resolve() or source.resolve() in resolved.parents or resolved in source.resolve().parents:
        raise MedlamaInputError(f"the dry-run folder must be outside {what}", file=target)


def _api(token: str | None):
    """An authenticated ``HfApi``, or a clear error before any network call."""
    from huggingface_hub import HfApi, constants, get_token

    if constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE"):
        raise MedlamaInputError("the Hugging Face Hub is switched off here (HF_HUB_OFFLINE is set); unset it to "
                                "upload, or use --dry-run DIR to see the upload tree")
    token = token or os.environ.get("HF_TOKEN") or get_token()
    if not token:
        raise MedlamaInputError("no Hugging Face token: set HF_TOKEN or log in with `hf auth login`")
    return HfApi(token=token)


def _publish(tree: Path, manifest: dict[str, Any], *, api, gated: str | None, space_sdk: str | None = None) -> None:
    """Create the repository (and branch), gate it first if asked, then upload the tree as one commit."""
    repo_id, repo_type, revision = manifest["repo_id"], manifest["repo_type"], manifest["revision"]
    extra = {"space_sdk": space_sdk} if space_sdk else {}
    api.create_repo(repo_id, repo_type=repo_type, private=manifest["private"], exist_ok=True, **extra)
    if gated:  # before the data lands in the repository, never after
        api.update_repo_settings(repo_id, gated=gated, repo_type=repo_type)
    if revision:
        api.create_branch(repo_id, branch=revision, repo_type=repo_type, exist_ok=True)
    info = api.upload_folder(repo_id=repo_id, folder_path=str(tree), repo_type=repo_type, revision=revision,
                             commit_message=manifest["commit_message"])
    manifest["commit_url"] = getattr(info, "commit_url", None)


def _finish(tree_writer, name: str, source: Path, manifest: dict[str, Any], *, kind: str, dry_run, api, token,
            gated: str | None = None, space_sdk: str | None = None,
            what: str = "the folder being published") -> dict[str, Any]:
    """Write the tree into a dry-run folder, or into a scratch folder and upload it.

    ``kind``: the command (``"push-model"``), recorded in the dry-run folder; the ownership record and the
    lock file sit outside the tree (``DIR`` itself and its parent), so neither is ever uploaded.
    """
    if dry_run is not None:
        target = Path(dry_run)
        _check_dry_run_target(target, source, what, kind)
        with atomic_directory(target, marker=MANIFEST_NAME, kind=kind) as staging:  # holds DIR's lock
            tree_writer(staging / name)
            check_tree_names_no_local_path(staging / name, source)
            manifest["files"] = _files_of(staging / name)
            (staging / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        return manifest
    api = api or _api(token)
    with tempfile.TemporaryDirectory(prefix="medlama-push-") as scratch:
        tree = Path(scratch) / name
        tree_writer(tree)
        check_tree_names_no_local_path(tree, source)
        manifest["files"] = _files_of(tree)
        _publish(tree, manifest, api=api, gated=gated, space_sdk=space_sdk)
    return manifest


# --------------------------------------------------------------------------- datasets


def _load_card(folder: Path):
    from huggingface_hub import DatasetCard

    readme = folder / "README.md"
    if not folder.is_dir():
        raise MedlamaInputError("dataset folder not found", file=folder)
    if not readme.is_file():
        raise MedlamaInputError("not a built dataset folder (no README.md); build one with `medlama build`",
                                file=folder)
    try:
        return DatasetCard.load(readme)
    except Exception as error:  # a card that does not parse: say where
        raise MedlamaInputError(f"cannot read the dataset card: {error}", file=readme) from None


def _build_info(folder: Path) -> dict[str, Any]:
    """The folder's ``build_info.json``, or ``{}`` when it has none (or not a JSON object)."""
    try:
        info = json.loads((folder / "build_info.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _cv_sources(info: dict[str, Any]) -> list[dict]:
    """The sources of a context-variance ``build_info.json`` (none for other datasets)."""
    if info.get("dataset") != "context-variance" or not isinstance(info.get("sources"), list):
        return []
    return [source for source in info["sources"] if isinstance(source, dict)]


def is_umls_derived(card, info: dict[str, Any] | None = None) -> bool:
    """Whether the card declares UMLS-derived data: the ``umls`` tag, or the UMLS licence; or, for a
    context-variance build made before the tag, its ``build_info`` (``info``) shows MedLAMA or BioLAMA ``umls``."""
    data = card.data
    if UMLS_TAG in (data.get("tags") or []) or data.get("license_name") == "umls-metathesaurus":
        return True
    info = info or {}
    sources = _cv_sources(info)
    return bool(sources) and (str(info.get("origin", "")).startswith("MedLAMA") or any(
        str(relation).startswith("umls_") for source in sources for relation in source.get("relations") or {}))


def mimic_source_names(info: dict[str, Any] | None) -> list[str]:
    """The sources of a context-variance ``build_info`` that quote MIMIC-III notes (format ``mimic``)."""
    return [str(source.get("source")) for source in _cv_sources(info or {}) if source.get("format") == "mimic"]


def is_mimic_derived(card, info: dict[str, Any] | None = None) -> bool:
    """Whether the data quotes MIMIC-III notes: the card's ``mimic`` tag, or (builds made before the tag) a
    ``mimic`` source in ``build_info`` (``info``)."""
    return MIMIC_TAG in (card.data.get("tags") or []) or bool(mimic_source_names(info))


def plan_dataset(path: str | Path) -> tuple[list[str], list[str]]:
    """(files to upload, other files left out) of a built dataset folder, relative POSIX paths, sorted.

    Checks that the card declares configs and that every ``data_files`` pattern names at least one file,
    so that ``load_dataset(REPO_ID, config)`` works for every config once uploaded.
    """
    folder = Path(path)
    card = _load_card(folder)
    configs = card.data.get("configs")
    if not configs:
        raise MedlamaInputError("the card declares no configs (YAML `configs`)", file=folder / "README.md")
    present = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                     if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    wanted = {name for name in DATASET_EXTRA_FILES if name in present}
    for config in configs:
        entries = config.get("data_files") or []
        if isinstance(entries, (str, dict)):
            entries = [entries]
        for entry in entries:
            patterns = entry.get("path") if isinstance(entry, dict) else entry
            for pattern in [patterns] if isinstance(patterns, str) else patterns:
                matched = [name for name in present if fnmatch.fnmatchcase(name, pattern)]
                if not matched:
                    raise MedlamaInputError(f"config {config.get('config_name')!r}: no file matches {pattern!r}",
                                            file=folder)
                wanted.update(matched)
    files = sorted(wanted)
    return files, [name for name in present if name not in wanted]


def _pushed_card_text(card, gate: str | None, repo_id: str) -> str:
    """The card as uploaded: gating keys as the repository is gated, load instructions naming ``repo_id``."""
    from medlama.datasets.card import gate as gate_card, name_repository

    if gate:
        gate_card(card.data, gate)
    else:  # an ungated (private) push: the card says what the repository is
        for key in ("gated", "extra_gated_prompt", "extra_gated_fields"):
            card.data.pop(key, None)
    card.text = name_repository(card.text, repo_id)
    return str(card)


def push_dataset(path: str | Path, repo_id: str, *, private: bool = False, revision: str | None = None,
                 commit_message: str | None = None, gated: str | None = None, dry_run: str | Path | None = None,
                 token: str | None = None, api=None) -> dict[str, Any]:
    """Upload the built dataset folder ``path`` to the dataset repository ``repo_id`` (created if missing).

    ``gated``: ``"auto"`` or ``"manual"`` access approval, ``"none"`` for no gating, or ``None``: ``"manual"``
    for UMLS-derived data (each request approved by hand), none otherwise. UMLS-derived data is refused ungated unless ``private``; data
    quoting MIMIC-III notes is refused unless ``private``.
    With ``dry_run=DIR`` nothing is uploaded (module docstring). Returns the manifest.
    """
    folder = Path(path)
    name = check_repo_id(repo_id)
    files, left_out = plan_dataset(folder)
    card = _load_card(folder)
    info = _build_info(folder)
    umls = is_umls_derived(card, info)
    mimic = is_mimic_derived(card, info)
    if mimic and not private:  # before gating: a gate does not make redistribution allowed
        names = mimic_source_names(info)
        named = f" (source{'s' if len(names) > 1 else ''} {', '.join(names)})" if names else ""
        raise MedlamaInputError(f"this dataset quotes MIMIC-III clinical notes{named}, which the PhysioNet data use "
                                "agreement forbids redistributing: it can only be pushed --private (nothing was "
                                "uploaded)", file=folder)
    if gated is None:
        gated = "manual" if umls else "none"
    if gated not in (*GATE_MODES, "none"):
        raise MedlamaInputError(f"unknown gating {gated!r}; choose from {[*GATE_MODES, 'none']}")
    if umls and gated == "none" and not private:
        raise MedlamaInputError("this dataset holds data derived from the UMLS Metathesaurus, which may only be "
                                "redistributed to UMLS licensees: push it gated (the default) or --private",
                                file=folder)
    gate = None if gated == "none" else gated
    manifest: dict[str, Any] = {
        "repo_id": repo_id, "repo_type": "dataset", "private": private, "revision": revision, "gated": gate or False,
        "umls_derived": umls, "commit_message": commit_message or f"Upload {card.data.get('pretty_name') or name} "
                                                                   "built with medlama",
        "mimic_derived": mimic, "source": str(folder.resolve()), "left_out": left_out,
    }

    def write_tree(tree: Path) -> None:
        for relative in files:
            destination = tree / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            if relative == "README.md":
                destination.write_text(_pushed_card_text(_load_card(folder), gate, repo_id), encoding="utf-8")
            elif relative == "build_info.json":
                destination.write_text(public_build_info((folder / relative).read_text(encoding="utf-8")),
                                       encoding="utf-8")
            else:
                shutil.copy2(folder / relative, destination)

    return _finish(write_tree, name, folder, manifest, kind="push-dataset", dry_run=dry_run, api=api, token=token,
                   gated=gate)


# --------------------------------------------------------------------------- models


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
               results: str | Path | None = None) -> dict[str, Any]:
    """Upload the model folder ``path`` to the model repository ``repo_id`` (created if missing).

    The uploaded ``rewire_config.json`` and ``README.md`` name the base model, the corpus and the command
    without local paths (module docstring); the folder itself is not changed. With ``dry_run=DIR`` nothing
    is uploaded: ``DIR/files/`` receives exactly the files that would be, and ``DIR/manifest.json`` the
    repository, revision, privacy, commit message and each file's size and SHA-256. Returns that manifest
    (plus ``commit_url`` after a real upload). ``results``: a ``medlama probe`` output of this folder, whose
    scores go into the pushed card's ``model-index`` and ``probing_scores.json``
    (:func:`medlama.publishing.model_scores.probe_scores`).
    """
    folder = Path(path)
    check_repo_id(repo_id)
    files = plan_model(folder, include_checkpoints=include_checkpoints)
    from medlama.trainers.guards import nonfinite_weights

    broken = nonfinite_weights(folder)
    if broken:  # a diverged rewiring: such a model encodes everything to NaN
        raise MedlamaInputError(f"{len(broken)} weight tensor(s) hold NaN or infinity (first: {broken[0]}): the "
                                "model is broken (a rewiring that diverged); nothing was uploaded", file=folder)
    scored = None
    if results is not None:
        from medlama.publishing.model_scores import probe_scores

        scored = probe_scores(results, folder)
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
            return lambda text: card_for_repo(with_scores(text), repo_id, revision)
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

    return _finish(write_tree, MODEL_TREE, folder, manifest, kind="push-model", dry_run=dry_run, api=api,
                   token=token, what="the model folder")


# --------------------------------------------------------------------------- metrics


def metric_folder(name: str | Path) -> Path:
    """A metric module folder: a bundled metric by name (``acc_at_k``, ``ucm``) or a folder ``<x>/<x>.py``."""
    candidate = Path(name)
    script = candidate / f"{candidate.resolve().name}.py"
    if candidate.is_dir() and script.is_file():
        return candidate
    from medlama.metrics import metric_path

    try:  # a bundled name wins over a folder of that name that is no module (the repository's ucm/ package)
        return metric_path(str(name))
    except ValueError as error:
        if candidate.is_dir():
            raise MedlamaInputError(f"not an evaluate module folder: no {script.name}", file=candidate) from None
        raise MedlamaInputError(str(error)) from None


def space_app_text(repo_id: str) -> str:
    """The Space's ``app.py`` for the metric ``repo_id`` (blank optional cells mean "not given")."""
    from medlama.metrics import space_app

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

    return _finish(write_tree, repo_name, folder, manifest, kind="push-metric", dry_run=dry_run, api=api,
                   token=token, space_sdk="gradio")
