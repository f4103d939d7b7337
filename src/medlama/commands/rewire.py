"""``medlama rewire``: Contrastive-Probe rewiring of an encoder; ``medlama push-model``: upload the result."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "rewire", help="rewire an encoder for probing (Contrastive-Probe self-retrieval training)",
        description="Train an encoder on cloze pairs made from corpus sentences (Contrastive-Probe, Meng et al. "
                    "2022). OUT receives the final model (SentenceTransformer(OUT), AutoModel.from_pretrained(OUT)), "
                    "README.md, rewire_config.json and checkpoints/checkpoint-<step>. Running again into the same "
                    "OUT resumes from its last checkpoint. Settings left out come from the preset.")
    parser.add_argument("--corpus", required=True, nargs="+", type=Path, metavar="FILE",
                        help="sentence files, one sentence per line (e.g. ../shared/data/elicit_corpora/*_0)")
    parser.add_argument("--out", required=True, type=Path, help="output folder")
    parser.add_argument("--model", help="Hugging Face encoder folder or hub name (default: the bundled "
                                        "sentence-transformers/all-MiniLM-L6-v2)")
    parser.add_argument("--preset", default="paper", choices=["paper", "demo"],
                        help="paper: batch 192, lr 2e-5, 200 steps, max length 48, tau 0.04, checkpoint every 50 "
                             "steps, 10k sentences; demo: a CPU-sized run, batch 32, lr 5e-5, 50 steps, checkpoint "
                             "every 25 (default: %(default)s)")
    parser.add_argument("--steps", type=int, help="training steps")
    parser.add_argument("--batch-size", type=int, help="pairs per step, summed over devices")
    parser.add_argument("--lr", type=float, dest="learning_rate", help="learning rate")
    parser.add_argument("--weight-decay", type=float)
    parser.add_argument("--warmup-steps", type=int)
    parser.add_argument("--tau", type=float, dest="temperature", help="InfoNCE temperature (scale = 1/tau)")
    parser.add_argument("--mask-ratio", type=float, help="masked span: 1 to 1 + int(words * ratio) words")
    parser.add_argument("--max-length", type=int, help="tokens per text")
    parser.add_argument("--layer", type=int, help="keep the first L transformer layers (default: all)")
    dropout = parser.add_mutually_exclusive_group()
    dropout.add_argument("--dropout", type=float, help="hidden and attention dropout (preset: 0.1)")
    dropout.add_argument("--keep-model-dropout", action="store_true", help="keep the model's own dropout")
    parser.add_argument("--save-steps", type=int, help="checkpoint every N steps (the last step always is)")
    parser.add_argument("--seed", type=int, help="seed of the masks, the batches and the training")
    parser.add_argument("--max-sentences", type=int,
                        help="use a random sample of N corpus lines (0: all; preset: 10000)")
    parser.add_argument("--skip-short-lines", action="store_true",
                        help="leave out lines too short to mask, and count them (default: such a line is an error)")
    parser.add_argument("--batch-sampler", choices=["no_duplicates", "random"],
                        help="no_duplicates (default): no text twice in a batch; random: plain shuffled batches")
    parser.add_argument("--precision", choices=["auto", "fp32", "fp16", "bf16"],
                        help="auto (default): bf16 on CUDA cards that support it, else fp16 on CUDA, else fp32")
    parser.add_argument("--mask-token", help="the mask string in queries (default: the tokenizer's mask token)")
    resume = parser.add_mutually_exclusive_group()
    resume.add_argument("--no-resume", action="store_true",
                        help="start over; an error if OUT already holds checkpoints (they are never deleted)")
    resume.add_argument("--resume-from", type=Path, metavar="CHECKPOINT", help="resume from this checkpoint folder")
    parser.add_argument("--json", action="store_true", help="print the run record as JSON")
    parser.set_defaults(func=run_rewire)

    push = subparsers.add_parser(
        "push-model", help="upload a rewired model folder to the Hugging Face Hub",
        description="Upload PATH (without checkpoints/ unless --include-checkpoints) to the model repository "
                    "REPO_ID as one commit. The token comes from HF_TOKEN or `hf auth login`.")
    push.add_argument("path", type=Path, metavar="PATH", help="model folder written by medlama rewire")
    push.add_argument("repo_id", metavar="REPO_ID", help="e.g. your-name/minilm-contrastive-probe")
    push.add_argument("--private", action="store_true", help="create the repository as private")
    push.add_argument("--revision", help="branch to commit to (created if missing)")
    push.add_argument("--message", help="commit message")
    push.add_argument("--include-checkpoints", action="store_true",
                      help="also upload checkpoints/*/ models (not their optimizer states)")
    push.add_argument("--dry-run", type=Path, metavar="DIR",
                      help="upload nothing: write the files that would be uploaded to DIR/files and the commit "
                           "details to DIR/manifest.json")
    push.set_defaults(func=run_push_model)


def run_rewire(args: argparse.Namespace) -> int:
    from medlama.trainers.contrastive_probe import RewireConfig, rewire

    settings = {name: getattr(args, name) for name in (
        "model", "steps", "batch_size", "learning_rate", "weight_decay", "warmup_steps", "temperature",
        "mask_ratio", "max_length", "layer", "dropout", "save_steps", "seed", "batch_sampler", "precision",
        "mask_token")}
    config = RewireConfig.preset(args.preset, **settings)
    if args.keep_model_dropout:
        config.dropout = None
    if args.max_sentences is not None:
        config.max_sentences = args.max_sentences or None
    if args.skip_short_lines:
        config.skip_short_lines = True
    resume = False if args.no_resume else (args.resume_from if args.resume_from else True)
    result = rewire(args.corpus, args.out, config, resume=resume)
    if args.json:
        json.dump(result.record, sys.stdout, indent=2)
        print()
        return 0
    record, training = result.record, result.record["training"]
    cloze = record["cloze"]
    print(f"rewired {record['base_model']['name']} (layers {record['base_model']['layers_used']}/"
          f"{record['base_model']['layers_total']}) -> {result.path}")
    print(f"  cloze pairs: {cloze['pairs']:,} from {cloze['sentences']:,} lines"
          + (f", {cloze['skipped_short']:,} too short to mask left out" if cloze["skipped_short"] else ""))
    print(f"  steps: {result.global_step} (this run: {result.steps_this_run}"
          + (f", resumed from {result.resumed_from}" if result.resumed_from else "") + ")"
          + (f", {result.pairs_per_second:.1f} pairs/s on {training['device']} ({training['precision']})"
             if result.pairs_per_second else ""))
    print(f"  checkpoints: {', '.join(p.name for p in result.checkpoints) or 'none'}")
    return 0


def run_push_model(args: argparse.Namespace) -> int:
    from medlama.trainers.hub import push_model

    manifest = push_model(args.path, args.repo_id, private=args.private, revision=args.revision,
                          commit_message=args.message, include_checkpoints=args.include_checkpoints,
                          dry_run=args.dry_run)
    size = sum(f["size"] for f in manifest["files"])
    if args.dry_run is not None:
        print(f"dry run: {len(manifest['files'])} files ({size / 1e6:.1f} MB) would be uploaded to "
              f"{args.repo_id}; copies in {args.dry_run / 'files'}, details in {args.dry_run / 'manifest.json'}")
    else:
        print(f"uploaded {len(manifest['files'])} files ({size / 1e6:.1f} MB) to {args.repo_id}: "
              f"{manifest.get('commit_url') or ''}")
    return 0
