"""Contrastive-Probe probing speed: texts encoded per second and wall time for a MedLAMA config.

    python benchmarks/bench_probe.py --data out/medlama --config full          # the issue's figure
    python benchmarks/bench_probe.py --source ../shared/data/medlama --config hard --model PATH

Prints one table: candidates and queries encoded, seconds for each stage, texts per second, and the
end-to-end wall time of `probe()` (encoding, FAISS search and acc@k scoring). Run it on an otherwise
idle machine: the figures are only as good as the CPU is free.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, help="built MedLAMA folder (default: cached build from --source)")
    parser.add_argument("--source", help="MedLAMA release folder, when --data is not given")
    parser.add_argument("--config", default="full", choices=["full", "hard"])
    parser.add_argument("--model", help="encoder (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    import torch

    from medlama.core.defaults import default_model_path
    from medlama.core.display import print_table
    from medlama.runs.workflow import probe
    from medlama.runs.queries import load_medlama_queries
    from medlama.probers.registry import make_prober

    if args.data is None:
        from medlama.datasets.medlama_folder import cached_build  # builds (and scores hardness) only when needed

        args.data = cached_build(args.source)
    data = args.data
    queries = load_medlama_queries(data, args.config)
    model = args.model or str(default_model_path())
    prober = make_prober("retrieval", model, {"batch_size": args.batch_size})
    encoder = prober.encoder

    start = time.perf_counter()
    encoder.encode(queries.candidates, 25)
    names_seconds = time.perf_counter() - start
    start = time.perf_counter()
    encoder.encode(queries.with_mask(encoder.mask_token), 50)
    queries_seconds = time.perf_counter() - start
    result = probe(prober, queries)
    texts = len(queries.candidates) + len(queries)
    figures = {
        "config": args.config, "model": model, "device": str(encoder.device),
        "cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
        "candidates": len(queries.candidates), "queries": len(queries),
        "candidates_per_second": len(queries.candidates) / names_seconds,
        "queries_per_second": len(queries) / queries_seconds,
        "texts_per_second": texts / (names_seconds + queries_seconds),
        "probe_wall_seconds": result.seconds, "acc@1": result.acc(1), "acc@10": result.acc(10),
    }

    def shown(key: str, value) -> str:
        if key.startswith("acc@"):
            return f"{100 * value:.2f}%"
        return f"{value:,.1f}" if isinstance(value, float) else str(value)

    print_table(f"probe speed: MedLAMA {args.config}, {Path(model).name}", ["figure", "value"],
                [[key, shown(key, value)] for key, value in figures.items()])
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
