"""``gpu.py``'s masked part: ``masked-likelihood`` (PLL) on a BERT-base shaped model, with lm-pub-quiz's
``MaskedLMEvaluator`` (BEAR's library: the same PLL variant, the same model object in memory, the same rows per
pass) timed beside it on the same queries and names."""

from __future__ import annotations

import tempfile
from pathlib import Path

from gpu_common import FlopCounter, Peer, Row, parameters, peak_for
from gpu_models import build_masked, synthetic_queries
from gpu_peers import agreement, best_of, top_names

from medlama.probers.registry import make_prober


def lm_pub_quiz_peer(prober, queries, batch_size: int, device):
    """lm-pub-quiz scoring every candidate of every query (``evaluate_instance``, summed), the model medlama
    probed (same weights, same dtype), ``batch_size`` masked copies per pass: ``(run, its top-k lists)``."""
    from lm_pub_quiz import Evaluator  # the peer, in the test extra only: imported when this part runs

    evaluator = Evaluator.from_model(prober.lm.model, model_type="MLM", tokenizer=prober.lm.tokenizer,
                                     pll_metric=prober.settings_.pll.replace("-", "_"), device=device,
                                     capitalize=False)
    names = list(queries.candidates)
    evaluator.evaluate_instance(template=queries.texts[0], answers=names, reduction="sum",
                                batch_size=batch_size)  # warm-up, as medlama's
    scored: list[list[float]] = []

    def run() -> None:
        scored[:] = [evaluator.evaluate_instance(template=text, answers=names, reduction="sum",
                                                 batch_size=batch_size) for text in queries.texts]

    return run, scored


def masked_part(args, device, dtype: str) -> list[Row]:
    queries, corpus = synthetic_queries(args.queries, args.candidates)
    size = "bert-tiny" if args.small else "bert-base"
    top_k = 10
    with tempfile.TemporaryDirectory() as tmp:
        build_masked(Path(tmp), size, corpus, device)
        prober = make_prober("masked-likelihood", tmp, {"dtype": dtype, "batch_size": args.batch_size},
                             device=str(device))
        lm = prober.lm
        if lm.head is None:
            raise SystemExit("the MLM head is not applied on its own; the FLOP count assumes it is")
        prober.rank(queries.subset([0]), top_k=top_k)  # warm-up
        counter = FlopCounter()
        counter.body(lm.model.base_model, lm.model.config, causal=False)
        counter.head(lm.head)
        ranked = prober.rank(queries, top_k=top_k)  # what the peer is compared with; counted once
        counter.close()
        run, scored = lm_pub_quiz_peer(prober, queries, args.batch_size, device)
        best, _ = best_of(device, {"medlama": lambda: prober.rank(queries, top_k=top_k), "peer": run},
                          args.repeats)
        seconds, theirs = best["medlama"], best["peer"]
        names = list(queries.candidates)
        peer = Peer("lm-pub-quiz MaskedLMEvaluator", theirs,
                    agreement(ranked, [top_names(row, names, top_k) for row in scored]))
        return [Row("masked", size, f"masked-likelihood {prober.settings_.pll}", parameters(lm.model), dtype,
                    str(device), len(queries), len(queries.candidates), seconds, counter.tokens, counter.flops,
                    peak_for(device, dtype, args.peak_tflops), [peer])]
