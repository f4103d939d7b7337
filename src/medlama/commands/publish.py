"""``medlama push-dataset``, ``push-model``, ``push-results`` and ``push-metric``: publish built datasets, rewired
models, probe results and the metrics on the Hub (:mod:`medlama.publishing.hub`)."""

from __future__ import annotations

import argparse
from pathlib import Path


def _common(parser: argparse.ArgumentParser, tree: str = "DIR/<repo name>/") -> None:
    parser.add_argument("--private", action="store_true", help="create the repository as private")
    parser.add_argument("--revision", help="branch to commit to (created if missing; default: main)")
    parser.add_argument("--message", help="commit message (default: one naming what is uploaded)")
    parser.add_argument("--dry-run", type=Path, metavar="DIR",
                        help=f"upload nothing: write the exact upload tree to {tree} and DIR/manifest.json "
                             "(default: upload)")


def _gated_push(parser: argparse.ArgumentParser, metavar: str, path_help: str, repo_help: str, func) -> None:
    """The arguments of a dataset push (``push-dataset``, ``push-results``): the folder, the repository, the
    common flags and ``--gated``."""
    parser.add_argument("path", type=Path, metavar=metavar, help=path_help)
    parser.add_argument("repo_id", metavar="REPO_ID", help=repo_help)
    _common(parser)
    parser.add_argument("--gated", choices=["auto", "manual", "none"],
                        help="access requests: auto-approved, manually approved, or none (default: manual for "
                             "UMLS-derived data, none otherwise; none needs --private for UMLS data)")
    parser.set_defaults(func=func)


def register(subparsers) -> None:
    dataset = subparsers.add_parser(
        "push-dataset", help="upload a built dataset folder (Parquet, card, configs) to the Hugging Face Hub",
        description="Upload a folder written by `medlama build` to a dataset repository, so that "
                    "load_dataset(REPO_ID, config) works for anyone. UMLS-derived data (MedLAMA, BioLAMA's umls "
                    "source, context-variance sets built from them) is gated: the card asks for a UMLS-licence "
                    "confirmation and access requests are switched on before the data is uploaded. A context-variance "
                    "set is pushed publicly only when every source's recorded licence allows redistribution: sets "
                    "quoting MIMIC notes (PhysioNet's data use agreement forbids redistribution), or with a source "
                    "of undeclared licence, are pushed only with --private. Only a folder a `medlama build` "
                    "command wrote, with its files unchanged since, is uploaded. The token comes from HF_TOKEN or "
                    "`hf auth login`.")
    _gated_push(dataset, "DIR", "built dataset folder, e.g. out/biolama", "e.g. your-name/biolama", run_push_dataset)

    model = subparsers.add_parser(
        "push-model", help="upload a rewired model folder to the Hugging Face Hub",
        description="Upload PATH (without checkpoints/ unless --include-checkpoints) to the model repository "
                    "REPO_ID as one commit. The uploaded README.md and rewire_config.json name the base model by "
                    "its Hub id (else its folder name) and the corpus and output by their file names: no local "
                    "path is uploaded; PATH itself keeps them. The token comes from HF_TOKEN or `hf auth login`.")
    model.add_argument("path", type=Path, metavar="PATH", help="model folder written by medlama rewire")
    model.add_argument("repo_id", metavar="REPO_ID", help="e.g. your-name/minilm-contrastive-probe")
    _common(model, tree="DIR/files/")
    model.add_argument("--include-checkpoints", action="store_true",
                       help="also upload checkpoints/*/ models (not their optimizer states)")
    model.add_argument("--results", type=Path, metavar="PROBE_OUT",
                       help="the output folder of `medlama probe --model PATH`: its acc@k scores (percent) go into "
                            "the uploaded card's model-index and probing scores table (PATH is not changed); runs "
                            "of another model, or of PATH before it changed, are refused (default: none)")
    model.set_defaults(func=run_push_model)

    results = subparsers.add_parser(
        "push-results", help="upload a probe's results and per-query predictions to the Hub as a dataset",
        description="Upload results.json and predictions.jsonl of the `medlama probe` output OUT to the dataset "
                    "repository REPO_ID, with a card giving each run's model, data, candidate pool, settings and "
                    "scores (load_dataset(REPO_ID, 'predictions') gives the per-query rows). The rows quote the "
                    "data: MedLAMA and BioLAMA's umls source are UMLS-derived, so the repository is gated to UMLS "
                    "licensees (access requests, manual approval by default) before anything is uploaded; runs on "
                    "other data (context-variance sets) are pushed only with --private. Only a folder `medlama "
                    "probe` wrote, its files unchanged since, is uploaded; no local path goes up. The token comes "
                    "from HF_TOKEN or `hf auth login`.")
    _gated_push(results, "OUT", "output folder of `medlama probe`", "e.g. your-name/minilm-medlama-hard-results",
                run_push_results)

    metric = subparsers.add_parser(
        "push-metric", help="publish a metric module (acc_at_k, ucm) as an evaluate community module",
        description="Publish metrics/NAME to the Space REPO_ID so that evaluate.load(REPO_ID) works: the script "
                    "(named after the repository, as evaluate expects), its card, requirements.txt and a Gradio "
                    "app.py. The token comes from HF_TOKEN or `hf auth login`.")
    metric.add_argument("name", metavar="NAME", help="acc_at_k, ucm, or a module folder <x>/ holding <x>.py")
    metric.add_argument("repo_id", metavar="REPO_ID", help="e.g. your-name/acc_at_k")
    _common(metric)
    metric.set_defaults(func=run_push_metric)


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
    from medlama.publishing.hub import push_dataset

    manifest = push_dataset(args.path, args.repo_id, private=args.private, revision=args.revision,
                            commit_message=args.message, gated=args.gated, dry_run=args.dry_run)
    _report(manifest, args.dry_run)
    return 0


def run_push_results(args: argparse.Namespace) -> int:
    from medlama.publishing.hub import push_results

    manifest = push_results(args.path, args.repo_id, private=args.private, revision=args.revision,
                            commit_message=args.message, gated=args.gated, dry_run=args.dry_run)
    _report(manifest, args.dry_run)
    return 0


def run_push_metric(args: argparse.Namespace) -> int:
    from medlama.publishing.hub import push_metric

    manifest = push_metric(args.name, args.repo_id, private=args.private, revision=args.revision,
                           commit_message=args.message, dry_run=args.dry_run)
    _report(manifest, args.dry_run)
    return 0


def run_push_model(args: argparse.Namespace) -> int:
    from medlama.publishing.hub import MODEL_TREE, push_model

    manifest = push_model(args.path, args.repo_id, private=args.private, revision=args.revision,
                          commit_message=args.message, include_checkpoints=args.include_checkpoints,
                          dry_run=args.dry_run, results=args.results)
    size = sum(f["size"] for f in manifest["files"])
    if manifest.get("scores"):
        print(f"card scores from {manifest['scores']['source']}: "
              + ", ".join(f"{name} {value:g}" for name, value in manifest["scores"]["scores"].items()))
    if args.dry_run is not None:
        print(f"dry run: {len(manifest['files'])} files ({size / 1e6:.1f} MB) would be uploaded to "
              f"{args.repo_id}; copies in {args.dry_run / MODEL_TREE}, details in {args.dry_run / 'manifest.json'}")
    else:
        print(f"uploaded {len(manifest['files'])} files ({size / 1e6:.1f} MB) to {args.repo_id}: "
              f"{manifest.get('commit_url') or ''}")
    return 0
