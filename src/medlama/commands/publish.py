"""``medlama push-dataset`` and ``medlama push-metric``: publish built datasets and the metrics on the Hub."""

from __future__ import annotations

import argparse
from pathlib import Path


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--private", action="store_true", help="create the repository as private")
    parser.add_argument("--revision", help="branch to commit to (created if missing; default: main)")
    parser.add_argument("--message", help="commit message")
    parser.add_argument("--dry-run", type=Path, metavar="DIR",
                        help="upload nothing: write the exact upload tree to DIR/<repo name>/ and DIR/manifest.json")


def register(subparsers) -> None:
    dataset = subparsers.add_parser(
        "push-dataset", help="upload a built dataset folder (Parquet, card, configs) to the Hugging Face Hub",
        description="Upload a folder written by `medlama build` to a dataset repository, so that "
                    "load_dataset(REPO_ID, config) works for anyone. UMLS-derived data (MedLAMA, BioLAMA's umls "
                    "source, context-variance sets built from them) is gated: the card asks for a UMLS-licence "
                    "confirmation and access requests are switched on before the data is uploaded. Sets quoting "
                    "MIMIC-III notes are pushed only with --private (the PhysioNet data use agreement forbids "
                    "redistribution). The token comes from HF_TOKEN or `hf auth login`.")
    dataset.add_argument("path", type=Path, metavar="DIR", help="built dataset folder, e.g. out/biolama")
    dataset.add_argument("repo_id", metavar="REPO_ID", help="e.g. your-name/biolama")
    _common(dataset)
    dataset.add_argument("--gated", choices=["auto", "manual", "none"],
                         help="access requests: auto-approved, manually approved, or none (default: auto for "
                              "UMLS-derived data, none otherwise; none needs --private for UMLS data)")
    dataset.set_defaults(func=run_push_dataset)

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
    from medlama.hub import push_dataset

    manifest = push_dataset(args.path, args.repo_id, private=args.private, revision=args.revision,
                            commit_message=args.message, gated=args.gated, dry_run=args.dry_run)
    _report(manifest, args.dry_run)
    return 0


def run_push_metric(args: argparse.Namespace) -> int:
    from medlama.hub import push_metric

    manifest = push_metric(args.name, args.repo_id, private=args.private, revision=args.revision,
                           commit_message=args.message, dry_run=args.dry_run)
    _report(manifest, args.dry_run)
    return 0
