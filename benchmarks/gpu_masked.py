"""``gpu.py``'s masked part: ``masked-likelihood`` (PLL) on a BERT-base shaped model."""

from __future__ import annotations

import tempfile
from pathlib import Path

from gpu_common import FlopCounter, Row, parameters, peak_for, timed
from gpu_models import build_masked, synthetic_queries


def masked_part(args, device, dtype: str) -> list[Row]:
    from medlama.probers.registry import make_prober

    queries, corpus = synthetic_queries(args.queries, args.candidates)
    size = "bert-tiny" if args.small else "bert-base"
    with tempfile.TemporaryDirectory() as tmp:
        build_masked(Path(tmp), size, corpus, device)
        prober = make_prober("masked-likelihood", tmp, {"dtype": dtype, "batch_size": args.batch_size},
                             device=str(device))
        lm = prober.lm
        if lm.head is None:
            raise SystemExit("the MLM head is not applied on its own; the FLOP count assumes it is")
        prober.rank(queries.subset([0]), top_k=10)  # warm-up
        counter = FlopCounter()
        counter.body(lm.model.base_model, lm.model.config, causal=False)
        counter.head(lm.head)
        seconds = timed(device, lambda: prober.rank(queries, top_k=10))
        counter.close()
        return [Row("masked", size, f"masked-likelihood {prober.settings_.pll}", parameters(lm.model), dtype,
                    str(device), len(queries), len(queries.candidates), seconds, counter.tokens, counter.flops,
                    peak_for(device, dtype, args.peak_tflops))]
