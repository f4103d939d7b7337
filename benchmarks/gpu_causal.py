"""``gpu.py``'s causal part: ``causal-likelihood`` (both searches) on Llama-1B and GPT-2 shaped models."""

from __future__ import annotations

import tempfile
from pathlib import Path

from gpu_common import FlopCounter, Row, parameters, peak_for, timed
from gpu_models import build_causal, synthetic_queries


def causal_part(args, device, dtype: str) -> list[Row]:
    from medlama.probers.registry import make_prober

    queries, corpus = synthetic_queries(args.queries, args.candidates)
    rows = []
    for size in ("llama-tiny", "gpt2-tiny") if args.small else ("llama-1b", "gpt2"):
        with tempfile.TemporaryDirectory() as tmp:
            build_causal(Path(tmp), size, corpus, device, dtype)
            for search in ("exhaustive", "best-first"):
                prober = make_prober("causal-likelihood", tmp, {"dtype": dtype, "search": search,
                                                                "batch_size": args.batch_size}, device=str(device))
                model = prober.lm.model
                prober.rank(queries.subset([0]), top_k=10)  # warm-up
                counter = FlopCounter()
                counter.body(model, model.config, causal=True,
                             vocab_projection=model.get_output_embeddings().weight.numel())
                seconds = timed(device, lambda: prober.rank(queries, top_k=10))
                counter.close()
                rows.append(Row("causal", size, f"causal-likelihood {search}", parameters(model), dtype, str(device),
                                len(queries), len(queries.candidates), seconds, counter.tokens, counter.flops,
                                peak_for(device, dtype, args.peak_tflops)))
                del prober, model
    return rows
