"""``push-results``: a ``medlama probe`` output (``results.json`` and the per-query ``predictions.jsonl``) to a
dataset repository, with a card giving the model, the data, the settings and the scores.

The rules are those of every push (:mod:`medlama.publishing.upload`): only a folder ``medlama probe`` wrote, its
files unchanged since (:func:`medlama.core.integrity.check_vouched`); the upload tree written first and
checked for local paths; ``dry_run=DIR`` leaves it in ``DIR/<repo name>/`` with ``DIR/manifest.json``.

The per-query rows quote the data's answers and predictions, so the results carry the data's terms, as each
dataset declares them (:attr:`medlama.datasets.registry.Declaration.terms`):

* MedLAMA, and BioLAMA runs holding its ``umls`` source: names from the UMLS Metathesaurus, so the card is
  gated to UMLS licensees (``gated``, the access-request form of :mod:`medlama.datasets.licences`) and the
  repository gated before anything is uploaded (manual approval by default); ungated only ``private``;
* other BioLAMA sources (CTD, Wikidata): ungated unless asked;
* context-variance sets (which may quote MIMIC notes or sources of unknown licence), and data of no declared
  dataset: deny by default, pushed only ``private``.

``results.json`` goes up with every local path reduced to its last part: an absolute one anywhere in its text
(:data:`medlama.core.public_paths.LOCAL_PATH`), a relative one (``../models/gpt2``, ``./run``) where a value
or a word of the recorded command is one (:func:`medlama.core.public_paths.is_relative_local`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from medlama.core.errors import MedlamaInputError
from medlama.core.integrity import check_vouched
from medlama.core.public_paths import LOCAL_PATH, public_command_line, public_path, public_word
from medlama.runs.outputs import PREDICTIONS_FILE, RESULTS_FILE
from medlama.publishing.dataset_push import gate_mode
from medlama.publishing.upload import check_repo_id, finish
from medlama.datasets.card import gate as gate_card
from medlama.datasets.licences import PRIVATE_TERMS, UMLS_TAG, strictest
from medlama.datasets.registry import declarations

#: The command whose output folders ``push-results`` uploads, and the files it uploads besides the card.
PROBE = "probe"
RESULTS_FILES = (RESULTS_FILE, PREDICTIONS_FILE)


def _runs(folder: Path) -> list[dict]:
    if not folder.is_dir():
        raise MedlamaInputError("not a folder: give the output folder of `medlama probe`", file=folder)
    file = folder / RESULTS_FILE
    try:
        runs = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MedlamaInputError("no results.json: give the output folder of a finished `medlama probe` run",
                                file=folder) from None
    except (OSError, ValueError) as error:
        raise MedlamaInputError(f"cannot read the results: {error}", file=file) from None
    if not isinstance(runs, list) or not runs or not all(isinstance(run, dict) for run in runs):
        raise MedlamaInputError("not the results.json of `medlama probe` (a list of runs expected)", file=file)
    return runs


def terms_of(runs: list[dict]) -> str:
    """``"umls"`` (gate to UMLS licensees), ``"open"`` or ``"restricted"`` (private only) for the data of
    ``runs``: the strictest of each run's dataset's declared terms (:meth:`~medlama.datasets.registry.Declaration.
    terms_of`, for the run's config and relations); data of no declared dataset is private only."""
    found = {declaration.name: declaration for declaration in declarations()}
    terms = []
    for run in runs:
        data = run.get("data") or (run.get("provenance") or {}).get("data") or {}
        declaration = found.get(str(data.get("dataset")))
        terms.append(declaration.terms_of(data.get("config"), run.get("per_relation") or {}) if declaration
                     else PRIVATE_TERMS)
    return strictest(terms)


def public_results(text: str) -> str:
    """``results.json`` with every local path reduced to its last part: absolute ones inside any string, a
    value that is a relative local path, and each word of a recorded ``command`` that is one."""
    def clean(value: Any, key: str | None = None) -> Any:
        if isinstance(value, str):
            if key == "command":
                return public_command_line(value)
            return LOCAL_PATH.sub(lambda match: public_path(match.group(0)), public_word(value, relative=True))
        if isinstance(value, list):
            return [clean(item) for item in value]
        if isinstance(value, dict):
            return {name: clean(item, name) for name, item in value.items()}
        return value

    return json.dumps(clean(json.loads(text)), indent=2, ensure_ascii=False) + "\n"


def _score_rows(run: dict) -> list[str]:
    metrics, intervals = run.get("metrics") or {}, run.get("intervals") or {}
    cells = []
    for k in metrics.get("k") or []:
        ci = intervals.get(f"acc@{k}")
        micro = f"{100 * metrics[f'acc@{k}']:.2f}" + (f" [{100 * ci[0]:.2f}, {100 * ci[1]:.2f}]" if ci else "")
        cells.append(f"| acc@{k} | {micro} | {100 * metrics.get(f'acc@{k}_macro', float('nan')):.2f} |")
    return cells


def card_text(runs: list[dict], repo_id: str, gate: str | None, terms: str) -> str:
    """The dataset card: YAML (tags, licence, gating, the ``predictions`` config) and, per run (``runs``: the
    records of :func:`public_results`), the model, the data, the settings and the scores."""
    # huggingface_hub loads when this runs, not when medlama.publishing.results_push is imported
    from huggingface_hub import DatasetCard, DatasetCardData


    data = DatasetCardData(
        pretty_name=f"medlama probe results: {', '.join(str(run.get('label')) for run in runs)}",
        tags=["medlama", "probing", "results", *([UMLS_TAG] if terms == "umls" else [])],
        configs=[{"config_name": "predictions", "data_files": [{"split": "test", "path": PREDICTIONS_FILE}]}])
    if terms == "umls":
        data.license, data.license_name = "other", "umls-metathesaurus"
    if gate:
        gate_card(data, gate)
    parts = [f"# medlama probe results\n\nPer-query predictions (`{PREDICTIONS_FILE}`: each query's id, relation, "
             f"gold answers, top predictions and hit@k, keyed by `run`) and the scores (`{RESULTS_FILE}`, with the "
             "full settings and provenance) of `medlama probe`.\n\n```python\nfrom datasets import load_dataset\n\n"
             f"rows = load_dataset(\"{repo_id}\", \"predictions\", split=\"test\")\n```\n"]
    if terms == "umls":
        parts.append("The rows quote names from the UMLS Metathesaurus: access is limited to UMLS licensees.\n")
    for run in runs:
        provenance = run.get("provenance") or {}
        model = provenance.get("model") or {}
        source = run.get("data") or provenance.get("data") or {}
        candidates = source.get("candidates") or {}
        settings = {key: value for key, value in (run.get("settings") or {}).items()}
        queries = sum(entry.get("queries", 0) for entry in (run.get("per_relation") or {}).values())
        parts.append(
            f"## {run.get('label')}\n\n"
            f"- **Model**: {model.get('id') or model.get('name') or settings.get('model') or 'unknown'}"
            + (f" (revision {model['revision']})" if model.get("revision") else "")
            + (f" (folder SHA-256 {model['sha256']})" if model.get("sha256") else "") + "\n"
            f"- **Data**: {source.get('dataset', 'unknown')} `{run.get('query_set')}`, {queries:,} queries"
            + (f", fingerprint `{source['fingerprint']}`" if source.get("fingerprint") else "") + "\n"
            f"- **Candidate pool**: rule `{candidates.get('rule')}`, {candidates.get('size', 0):,} names, SHA-256 "
            f"`{candidates.get('sha256')}`\n"
            f"- **Matching**: {(run.get('metrics') or {}).get('match', 'exact')}\n"
            f"- **Settings**: `{json.dumps(settings, sort_keys=True)}`\n"
            + (f"- **Date**: {provenance['date']}\n" if provenance.get("date") else "")
            + "\n| metric | micro (%) [95% bootstrap interval] | macro (%) |\n|:---|---:|---:|\n"
            + "\n".join(_score_rows(run)) + "\n")
    return str(DatasetCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(parts)))


def push_results(path: str | Path, repo_id: str, *, private: bool = False, revision: str | None = None,
                 commit_message: str | None = None, gated: str | None = None, dry_run: str | Path | None = None,
                 token: str | None = None, api=None) -> dict[str, Any]:
    """Upload the ``medlama probe`` output ``path`` to the dataset repository ``repo_id`` (module docstring).

    ``gated``: ``"auto"``, ``"manual"`` or ``"none"``; ``None``: manual for UMLS-derived data, none otherwise."""
    name = check_repo_id(repo_id)
    folder = Path(path)
    runs = _runs(folder)
    check_vouched(folder, RESULTS_FILES, kinds=(PROBE,), command="push-results")
    terms = terms_of(runs)
    if terms == "restricted" and not private:
        raise MedlamaInputError("these runs probed data whose terms allow no public copy (a context-variance set "
                                "may quote MIMIC notes or text of undeclared licence; an undeclared dataset's are "
                                "unknown), and the per-query rows quote it: push them --private (nothing was "
                                "uploaded)", file=folder)
    gate = gate_mode(gated, umls=terms == "umls", private=private, folder=folder,
                     what="the per-query rows quote names")
    manifest: dict[str, Any] = {
        "repo_id": repo_id, "repo_type": "dataset", "private": private, "revision": revision, "gated": gate or False,
        "umls_derived": terms == "umls", "source": str(folder.resolve()),
        "commit_message": commit_message or "Upload probe results written by medlama",
        "runs": [str(run.get("label")) for run in runs],
    }

    public = public_results((folder / RESULTS_FILE).read_text(encoding="utf-8"))

    def write_tree(tree: Path) -> None:
        tree.mkdir(parents=True, exist_ok=True)
        (tree / "README.md").write_text(card_text(json.loads(public), repo_id, gate, terms), encoding="utf-8")
        (tree / RESULTS_FILE).write_text(public, encoding="utf-8")
        shutil.copy2(folder / PREDICTIONS_FILE, tree / PREDICTIONS_FILE)

    return finish(write_tree, name, folder, manifest, kind="push-results", dry_run=dry_run, api=api, token=token,
                  gated=gate)
