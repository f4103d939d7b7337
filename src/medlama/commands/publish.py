"""``medlama push-dataset``, ``push-model``, ``push-results`` and ``push-metric``: publish built datasets, rewired
models, probe results and the metrics on the Hub (:mod:`medlama.publishing.hub`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from medlama.commands.flags import add_command, add_settings_flags, given_settings
from medlama.core.settings import settings_from
from medlama.publishing.settings import DatasetPushSettings, ModelPushSettings, PushSettings


def _target(parser: argparse.ArgumentParser, metavar: str, path_help: str, repo_help: str, *, dest: str = "path",
            kind: type | None = Path) -> None:
    """The two positional arguments of a push: what is pushed (``dest``) and the repository it goes to."""
    parser.add_argument(dest, type=kind, metavar=metavar, help=path_help)
    parser.add_argument("repo_id", metavar="REPO_ID", help=repo_help)


def _gated_push(parser: argparse.ArgumentParser, metavar: str, path_help: str, repo_help: str) -> None:
    """The arguments of a dataset push (``push-dataset``, ``push-results``): the folder, the repository and
    the flags of :class:`~medlama.publishing.settings.DatasetPushSettings`."""
    _target(parser, metavar, path_help, repo_help)
    add_settings_flags(parser, DatasetPushSettings)


def _settings(args: argparse.Namespace, cls: type):
    return settings_from(cls, given_settings(args, cls), what=args.command)


def register(subparsers) -> None:
    dataset = add_command(subparsers, "push-dataset", run_push_dataset,
                          help="upload a built dataset folder (Parquet, card, configs) to the Hugging Face Hub")
    _gated_push(dataset, "DIR", "built dataset folder, e.g. out/biolama", "e.g. your-name/biolama")

    model = add_command(subparsers, "push-model", run_push_model,
                        help="upload a rewired model folder to the Hugging Face Hub")
    _target(model, "PATH", "model folder written by medlama rewire", "e.g. your-name/minilm-contrastive-probe")
    add_settings_flags(model, ModelPushSettings,
                       helps={"dry_run": lambda text: text.replace("DIR/<repo name>/", "DIR/files/", 1)})

    results = add_command(subparsers, "push-results", run_push_results,
                          help="upload a probe's results and per-query predictions to the Hub as a dataset")
    _gated_push(results, "OUT", "output folder of `medlama probe`", "e.g. your-name/minilm-medlama-hard-results")

    metric = add_command(subparsers, "push-metric", run_push_metric,
                         help="publish a metric module (acc_at_k, ucm) as an evaluate community module")
    _target(metric, "NAME", "acc_at_k, ucm, or a module folder <x>/ holding <x>.py", "e.g. your-name/acc_at_k",
            dest="name", kind=None)
    add_settings_flags(metric, PushSettings)


def _report(manifest: dict, dry_run: Path | None) -> None:
    count = len(manifest["files"])
    size = sum(f["size"] for f in manifest["files"])
    where = f"{manifest['repo_type']} {manifest['repo_id']}"
    if manifest["revision"]:
        where += f"@{manifest['revision']}"
    gating = f", gated ({manifest['gated']})" if manifest.get("gated") else ""
    private = ", private" if manifest["private"] else ""
    if dry_run is not None:
        tree = dry_run / manifest["repo_id"].split("/")[1]
        print(f"dry run: {count} files ({size:,} bytes) for {where}{private}{gating} written to {tree}; "
              f"manifest {dry_run / 'manifest.json'}")
    else:
        print(f"uploaded {count} files ({size:,} bytes) to {where}{private}{gating}: {manifest.get('commit_url')}")
    if manifest.get("left_out"):
        print(f"left out (named by no config): {', '.join(manifest['left_out'][:10])}"
              + (" ..." if len(manifest["left_out"]) > 10 else ""))


def run_push_dataset(args: argparse.Namespace) -> int:
    """Upload a folder written by `medlama build` to a dataset repository, so that load_dataset(REPO_ID, config) works
    for anyone. UMLS-derived data (MedLAMA, BioLAMA's umls source, context-variance sets built from them) is gated:
    the card asks for a UMLS-licence confirmation and access requests are switched on before the data is uploaded. A
    context-variance set is pushed publicly only when every source's recorded licence allows redistribution: sets
    quoting MIMIC notes (PhysioNet's data use agreement forbids redistribution), or with a source of undeclared
    licence, are pushed only with --private. Only a folder a `medlama build` command wrote, with its files unchanged
    since, is uploaded. The token comes from HF_TOKEN or `hf auth login`."""

    from medlama.publishing.hub import push_dataset  # huggingface_hub loads when a push runs, not for --help

    return _gated_dataset_push(push_dataset, args)


def run_push_results(args: argparse.Namespace) -> int:
    """Upload results.json and predictions.jsonl of the `medlama probe` output OUT to the dataset repository REPO_ID,
    with a card giving each run's model, data, candidate pool, settings and scores (load_dataset(REPO_ID,
    'predictions') gives the per-query rows). The rows quote the data: MedLAMA and BioLAMA's umls source are
    UMLS-derived, so the repository is gated to UMLS licensees (access requests, manual approval by default) before
    anything is uploaded; runs on other data (context-variance sets) are pushed only with --private. Only a folder
    `medlama probe` wrote, its files unchanged since, is uploaded; no local path goes up. The token comes from
    HF_TOKEN or `hf auth login`."""

    from medlama.publishing.hub import push_results  # huggingface_hub loads when a push runs, not for --help

    return _gated_dataset_push(push_results, args)


def _gated_dataset_push(push, args: argparse.Namespace) -> int:
    """``push-dataset`` and ``push-results``: a folder to a dataset repository, gated as its data asks."""
    settings = _settings(args, DatasetPushSettings)
    manifest = push(args.path, args.repo_id, private=settings.private, revision=settings.revision,
                    commit_message=settings.commit_message, gated=settings.gated, dry_run=settings.dry_run)
    _report(manifest, settings.dry_run)
    return 0


def run_push_metric(args: argparse.Namespace) -> int:
    """Publish metrics/NAME to the Space REPO_ID so that evaluate.load(REPO_ID) works: the script (named after the
    repository, as evaluate expects), its card, requirements.txt and a Gradio app.py. The token comes from HF_TOKEN
    or `hf auth login`."""
    # publishing.hub loads (it imports datasets, huggingface_hub) when this runs, not when the CLI parses its flags
    from medlama.publishing.hub import push_metric

    settings = _settings(args, PushSettings)
    manifest = push_metric(args.name, args.repo_id, private=settings.private, revision=settings.revision,
                           commit_message=settings.commit_message, dry_run=settings.dry_run)
    _report(manifest, settings.dry_run)
    return 0


def run_push_model(args: argparse.Namespace) -> int:
    """Upload PATH (without checkpoints/ unless --include-checkpoints) to the model repository REPO_ID as one commit.
    The uploaded README.md and rewire_config.json name the base model by its Hub id (else its folder name) and the
    corpus and output by their file names: no local path is uploaded; PATH itself keeps them. The token comes from
    HF_TOKEN or `hf auth login`."""
    # publishing.hub loads (it imports datasets, huggingface_hub) when this runs, not when the CLI parses its flags
    from medlama.publishing.hub import MODEL_TREE, push_model

    settings = _settings(args, ModelPushSettings)
    manifest = push_model(args.path, args.repo_id, private=settings.private, revision=settings.revision,
                          commit_message=settings.commit_message, include_checkpoints=settings.include_checkpoints,
                          dry_run=settings.dry_run, results=settings.results,
                          partial_results=settings.partial_results)
    size = sum(f["size"] for f in manifest["files"])
    if manifest.get("scores"):
        print(f"card scores from {manifest['scores']['source']}: "
              + ", ".join(f"{name} {value:g}" for name, value in manifest["scores"]["scores"].items()))
    if settings.dry_run is not None:
        print(f"dry run: {len(manifest['files'])} files ({size / 1e6:.1f} MB) would be uploaded to "
              f"{args.repo_id}; copies in {settings.dry_run / MODEL_TREE}, details in "
              f"{settings.dry_run / 'manifest.json'}")
    else:
        print(f"uploaded {len(manifest['files'])} files ({size / 1e6:.1f} MB) to {args.repo_id}: "
              f"{manifest.get('commit_url') or ''}")
    return 0
