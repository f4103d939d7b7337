"""``push-dataset``: a built dataset folder (card, ``build_info.json``, the files its configs name) to a dataset
repository, gated for UMLS-derived data and refused publicly unless every source's licence allows it
(:mod:`medlama.publishing.hub` describes the rules)."""

from __future__ import annotations

import fnmatch
import json
import shutil
from pathlib import Path
from typing import Any

from medlama.datasets.licences import MIMIC_TAG, UMLS_TAG, SourceLicence, is_physionet, recorded_licence
from medlama.core.errors import MedlamaInputError
from medlama.core.integrity import check_vouched
from medlama.publishing.public_names import public_build_info
from medlama.publishing.upload import check_repo_id, finish
from medlama.core.defaults import BUILD_INFO
from medlama.datasets.card import gate as gate_card, name_repository
from medlama.datasets.registry import declarations

GATE_MODES = ("auto", "manual")
DATASET_EXTRA_FILES = ("README.md", BUILD_INFO)


def _load_card(folder: Path):
    # huggingface_hub loads when this runs, not when medlama.publishing.dataset_push is imported
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
        info = json.loads((folder / BUILD_INFO).read_text(encoding="utf-8"))
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


def source_licences(info: dict[str, Any] | None) -> dict[str, SourceLicence]:
    """Source name -> licence of a context-variance ``build_info`` (:func:`medlama.datasets.licences.recorded_licence`:
    a build made before licences were recorded has PhysioNet's for a ``mimic`` source, else unknown)."""
    return {str(source.get("source")): recorded_licence(source) for source in _cv_sources(info or {})}


def mimic_source_names(info: dict[str, Any] | None) -> list[str]:
    """The sources of a context-variance ``build_info`` that quote MIMIC notes (PhysioNet's licence, whatever
    reader read them)."""
    return [name for name, licence in source_licences(info).items() if is_physionet(licence.licence)]


def is_mimic_derived(card, info: dict[str, Any] | None = None) -> bool:
    """Whether the data quotes MIMIC notes: the card's ``mimic`` tag, or a source under PhysioNet's licence in
    ``build_info`` (``info``; builds made before the tag: a ``mimic`` source)."""
    return MIMIC_TAG in (card.data.get("tags") or []) or bool(mimic_source_names(info))


def check_licences_allow(folder: Path, card, info: dict[str, Any], *, private: bool) -> None:
    """Deny by default: a public push needs every source's licence to allow redistribution (MIMIC notes and
    sources of unknown licence are pushed only ``private``)."""
    if private:
        return
    if is_mimic_derived(card, info):  # before gating: a gate does not make redistribution allowed
        names = mimic_source_names(info)
        named = f" (source{'s' if len(names) > 1 else ''} {', '.join(names)})" if names else ""
        raise MedlamaInputError(f"this dataset quotes MIMIC clinical notes{named}, which the PhysioNet data use "
                                "agreement forbids redistributing: it can only be pushed --private (nothing was "
                                "uploaded)", file=folder)
    held = {name: licence for name, licence in source_licences(info).items() if not licence.redistributable}
    if held:
        listed = ", ".join(f"{name} ({licence.describe()})" for name, licence in held.items())
        raise MedlamaInputError(
            f"the licence of source{'s' if len(held) > 1 else ''} {listed} does not allow redistribution, and a set "
            "is pushed publicly only when every source's licence does: push it --private, or rebuild it declaring "
            f"the licence (`medlama build context-variance ... --corpus-licence {next(iter(held))}=LICENCE`, an "
            "SPDX id or text, recorded in the card) (nothing was uploaded)", file=folder)


def gate_mode(gated: str | None, *, umls: bool, private: bool, folder: Path, what: str) -> str | None:
    """The repository's gating (``"auto"``, ``"manual"``, or ``None`` for none) for ``gated`` as asked
    (``None``: manual for UMLS-derived data, none otherwise); UMLS-derived data (``what`` says what holds it)
    is refused ungated unless ``private``."""
    if gated is None:
        gated = "manual" if umls else "none"
    if gated not in (*GATE_MODES, "none"):
        raise MedlamaInputError(f"unknown gating {gated!r}; choose from {[*GATE_MODES, 'none']}")
    if umls and gated == "none" and not private:
        raise MedlamaInputError(f"{what} derived from the UMLS Metathesaurus, which may only be redistributed to "
                                "UMLS licensees: push it gated (the default) or --private", file=folder)
    return None if gated == "none" else gated


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


def dataset_kinds() -> tuple[str, ...]:
    """The commands whose output folders ``push-dataset`` uploads (their ownership records name them): one
    ``build <name>`` per declared dataset (:func:`medlama.datasets.registry.declarations`)."""
    return tuple(declaration.kind for declaration in declarations())


def _pushed_card_text(card, gate: str | None, repo_id: str) -> str:
    """The card as uploaded: gating keys as the repository is gated, load instructions naming ``repo_id``."""
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
    for UMLS-derived data (each request approved by hand), none otherwise. UMLS-derived data is refused ungated
    unless ``private``; data quoting MIMIC notes, or with a source of unknown (undeclared) licence, is refused
    unless ``private``. The folder must be a dataset build's, its files unchanged since
    (:func:`medlama.core.integrity.check_vouched`).
    With ``dry_run=DIR`` nothing is uploaded (module docstring). Returns the manifest.
    """
    folder = Path(path)
    name = check_repo_id(repo_id)
    files, left_out = plan_dataset(folder)
    check_vouched(folder, files, kinds=dataset_kinds(), command="push-dataset")  # before the card is trusted
    card = _load_card(folder)
    info = _build_info(folder)
    umls = is_umls_derived(card, info)
    mimic = is_mimic_derived(card, info)
    check_licences_allow(folder, card, info, private=private)
    gate = gate_mode(gated, umls=umls, private=private, folder=folder, what="this dataset holds data")
    manifest: dict[str, Any] = {
        "repo_id": repo_id, "repo_type": "dataset", "private": private, "revision": revision, "gated": gate or False,
        "umls_derived": umls, "commit_message": commit_message or f"Upload {card.data.get('pretty_name') or name} "
                                                                   "built with medlama",
        "mimic_derived": mimic, "source": str(folder.resolve()), "left_out": left_out,
        "licences": {name: licence.licence for name, licence in source_licences(info).items()},
    }

    def write_tree(tree: Path) -> None:
        for relative in files:
            destination = tree / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            if relative == "README.md":
                destination.write_text(_pushed_card_text(_load_card(folder), gate, repo_id), encoding="utf-8")
            elif relative == BUILD_INFO:
                destination.write_text(public_build_info((folder / relative).read_text(encoding="utf-8")),
                                       encoding="utf-8")
            else:
                shutil.copy2(folder / relative, destination)

    return finish(write_tree, name, folder, manifest, kind="push-dataset", dry_run=dry_run, api=api, token=token,
                   gated=gate)
