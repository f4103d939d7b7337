"""Rewire throughput: training pairs per second of Contrastive-Probe rewiring.

Runs the real pipeline (:func:`medlama.trainers.trainer.rewire`: cloze pairs, trainer, loss,
checkpoints, final model) on the bundled all-MiniLM-L6-v2 for a few steps per setting, into a temporary
folder, and prints per-step times. "steady" excludes the first step (allocator and thread-pool warm-up) and
the steps that also wrote a checkpoint; "best" is the fastest such step (the least disturbed by other work on
a shared machine; the load average is printed too); "CPU-s" is this process's CPU time per step; "whole call"
is the ``rewire`` call (model load, pairs, checkpoints, final model).

    python benchmarks/bench_rewire.py                      # CPU settings sweep
    python benchmarks/bench_rewire.py --settings 192x48    # the paper's batch x max length only
    python benchmarks/bench_rewire.py --model PATH --steps 10 --settings 64x48 32x32

Runs on a GPU when one is visible (mixed precision as ``rewire`` picks it); ``--precision`` overrides.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "elicit_corpora" / \
    "pubmed_sents_no_punkt_10k_0"


def measure(corpus: Path, model: str | None, batch_size: int, max_length: int, steps: int, save_steps: int,
            precision: str, layer: int | None) -> dict:
    from transformers import TrainerCallback

    from medlama.trainers.config import RewireConfig
    from medlama.trainers.trainer import rewire

    class StepTimes(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[tuple[int, float, float]] = []  # (step, wall seconds, CPU seconds of this process)
            self._t = self._c = 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            self._t, self._c = time.perf_counter(), time.process_time()

        def on_step_end(self, args, state, control, **kwargs):
            self.times.append((state.global_step, time.perf_counter() - self._t, time.process_time() - self._c))

    config = RewireConfig.preset("paper", model=model, steps=steps, batch_size=batch_size, max_length=max_length,
                                 save_steps=save_steps, precision=precision, layer=layer, logging_steps=steps,
                                 skip_short_lines=True)
    timer = StepTimes()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = rewire(corpus, Path(tmp) / "out", config, callbacks=[timer], disable_tqdm=True)
        total = time.perf_counter() - start
    # no warm-up step, no step that also wrote a checkpoint
    steady = [(t, c) for step, t, c in timer.times[1:] if step % save_steps] or [(t, c) for _, t, c in timer.times]
    step_s = statistics.median(t for t, _ in steady)
    return {"batch_size": batch_size, "max_length": max_length, "steps": steps, "layer": layer,
            "device": result.record["training"]["device"], "precision": result.record["training"]["precision"],
            "first_step_s": round(timer.times[0][1], 3), "steady_step_s": round(step_s, 3),
            "best_step_s": round(min(t for t, _ in steady), 3),
            "cpu_s_per_step": round(statistics.median(c for _, c in steady), 3),
            "steady_pairs_per_s": round(batch_size / step_s, 1),
            "best_pairs_per_s": round(batch_size / min(t for t, _ in steady), 1),
            "run_pairs_per_s": round(result.pairs_per_second or 0, 1), "total_s": round(total, 1),
            "loadavg_after": round(os.getloadavg()[0], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--model", default=None, help="encoder folder or hub name (default: the bundled model)")
    parser.add_argument("--settings", nargs="+", default=["192x48", "64x48", "32x48", "32x32", "16x32"],
                        help="BATCHxMAX_LENGTH settings to time (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=6, help="steps per setting (default: %(default)s)")
    parser.add_argument("--save-steps", type=int, default=1000, help="checkpoint interval (default: none in the run)")
    parser.add_argument("--layer", type=int, default=None)
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "fp16", "bf16"])
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice); with 1 thread the "
                                                    "CPU-s per step is a load-independent measure on a busy machine")
    parser.add_argument("--json", action="store_true", help="print one JSON object per setting")
    args = parser.parse_args(argv)

    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.2f}, "
          f"cuda={'yes: ' + torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no'}", file=sys.stderr)
    rows = []
    for setting in args.settings:
        batch, length = (int(x) for x in setting.lower().split("x"))
        row = measure(args.corpus, args.model, batch, length, args.steps, args.save_steps, args.precision, args.layer)
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            print(f"batch {batch:>4} x len {length:>3} on {row['device']} ({row['precision']}): "
                  f"{row['steady_step_s']:.2f} s/step median (best {row['best_step_s']:.2f}, "
                  f"{row['cpu_s_per_step']:.2f} CPU-s), {row['steady_pairs_per_s']:.1f} pairs/s "
                  f"(best {row['best_pairs_per_s']:.1f}), {row['run_pairs_per_s']:.1f} pairs/s over the run, "
                  f"first step {row['first_step_s']:.2f} s, whole call {row['total_s']:.1f} s for "
                  f"{row['steps']} steps, load {row['loadavg_after']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
