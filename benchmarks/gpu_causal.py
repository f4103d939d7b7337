"""``gpu.py``'s causal part: ``causal-likelihood`` (both searches) on Llama-1B and GPT-2 shaped models, each row
with its peers timed in the same process on the same queries and names:

* ``lm-eval HFLM``: lm-evaluation-harness's own ``HFLM(pretrained=model, tokenizer=...,
  batch_size=...).loglikelihood(requests)``, one ``loglikelihood`` request ``(text before [Y], the rest with the
  name in the slot)`` per query and name (lm-eval's algorithm: every full sequence, length-sorted batches, one
  log-softmax over the vocabulary at every position). Skipped, with a note, where lm-eval is not installed.
* ``lean full-sequence``: a plain-torch scorer of medlama's own token ids (prefix + name + suffix): full
  sequences, sorted by length into batches of ``--batch-size``, the model's body run once per batch and the
  vocabulary projection (and a float32 logsumexp) only at the scored positions.

Both score every name (an exhaustive ranking); their top-10 lists (score, ties in candidate order, as medlama
ranks) are compared with medlama's (``Peer.agreement``). Each timing is the least of ``--repeats`` runs, the
methods taken in turn in each round (a noisy shared machine slows all alike); ``--clock cpu`` (a CPU device) times
the process's CPU seconds instead of wall seconds, steadier where other jobs share the cores (with ``--threads 1``
and ``TOKENIZERS_PARALLELISM=false``, which ``gpu.py`` sets, that is each method's own work).
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from gpu_common import FlopCounter, Peer, Row, parameters, peak_for
from gpu_models import CAUSAL, build_causal, synthetic_queries
from gpu_peers import agreement, best_of

TOP = 10


def causal_sizes(args) -> list[str]:
    """The causal models measured: ``--causal-models`` (names of ``gpu_models.CAUSAL``), else by ``--small``."""
    given = getattr(args, "causal_models", None)
    if given:
        return list(given)
    return ["llama-tiny", "gpt2-tiny"] if args.small else ["llama-1b", "gpt2"]


def top_names(names: list[str], scores, k: int = TOP) -> list[str]:
    """The top ``k`` distinct names by score, ties in candidate order (medlama's ``rank_unique``)."""
    from medlama.probers.mlm import rank_unique

    return rank_unique(list(zip(names, [float(s) for s in scores])), k)


def medlama_rows(lm, queries) -> list[tuple[list[int], list[list[int]]]]:
    """Per query, medlama's own token ids: the prefix and each name's continuation (name + suffix)."""
    out = []
    for text in queries.texts:
        split = lm.split(text)
        out.append((list(split.prefix), [list(ids + split.suffix) if ids else [] for ids in
                                         lm.candidate_ids(queries.candidates, split.slot)]))
    return out


def lean_scores(model, prefix: list[int], rows: list[list[int]], batch_size: int, pad_id: int):
    """Every row's summed log-probability after ``prefix``: full sequences, length-sorted batches, the body once
    per batch, the vocabulary projection and a float32 logsumexp only at the scored positions."""
    import torch

    body, head = model.base_model, model.get_output_embeddings()
    device = next(model.parameters()).device
    out = torch.full((len(rows),), float("-inf"), dtype=torch.float64)
    order = sorted((i for i, row in enumerate(rows) if row), key=lambda i: len(rows[i]))
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            width = len(prefix) + max(len(rows[i]) for i in chunk) - 1
            ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
            at_rows, at_cols, targets = [], [], []
            for r, i in enumerate(chunk):
                sequence = prefix + rows[i]
                ids[r, :len(sequence) - 1] = torch.tensor(sequence[:-1])
                at_rows += [r] * len(rows[i])
                at_cols += range(len(prefix) - 1, len(sequence) - 1)
                targets += rows[i]
            hidden = body(input_ids=ids.to(device)).last_hidden_state[at_rows, at_cols]
            logits = head(hidden).float()
            picked = logits.gather(1, torch.tensor(targets, device=device)[:, None])[:, 0] - logits.logsumexp(-1)
            sums = torch.zeros(len(chunk), dtype=torch.float64, device=device)
            sums.index_add_(0, torch.tensor(at_rows, device=device), picked.double())
            out[chunk] = sums.cpu()
    return out


def lm_eval_peer(model, tokenizer, queries, batch_size: int, device):
    """``work`` for lm-eval's HFLM on every (query, name) pair, and its per-query top-10; ``None`` without lm-eval."""
    try:
        from lm_eval.api.instance import Instance
        from lm_eval.models.huggingface import HFLM
    except ImportError:
        return None
    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    harness = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size, device=str(device))
    requests, spans = [], []
    for text in queries.texts:
        left, right = text.split("[Y]")
        context = left.rstrip()
        start = len(requests)
        for name in queries.candidates:
            requests.append(Instance("loglikelihood", {}, (context, left[len(context):] + name + right), len(requests)))
        spans.append((start, len(requests)))
    found: list[list[str]] = []

    def work():
        scores = [score for score, _ in harness.loglikelihood(requests, disable_tqdm=True)]
        found[:] = [top_names(queries.candidates, scores[a:b]) for a, b in spans]
    return work, found


def causal_part(args, device, dtype: str) -> list[Row]:
    from medlama.probers.registry import make_prober

    if getattr(args, "clock", "wall") == "cpu" and device.type != "cpu":
        raise SystemExit("--clock cpu times a CPU run; give --device cpu")
    queries, corpus = synthetic_queries(args.queries, args.candidates)
    repeats = max(1, getattr(args, "repeats", 1) or 1)
    rows = []
    for size in causal_sizes(args):
        if size not in CAUSAL:
            raise SystemExit(f"unknown causal model {size!r}; choose from {', '.join(CAUSAL)}")
        with tempfile.TemporaryDirectory() as tmp:
            build_causal(Path(tmp), size, corpus, device, dtype)
            probers = {search: make_prober("causal-likelihood", tmp, {"dtype": dtype, "search": search,
                                                                      "batch_size": args.batch_size},
                                           device=str(device)) for search in ("exhaustive", "best-first")}
            lm = probers["exhaustive"].lm
            model = lm.model
            ranked: dict[str, list[list[str]]] = {}
            works = {}
            for search, prober in probers.items():
                prober.rank(queries.subset([0]), top_k=TOP)  # warm-up
                works[search] = (lambda p=prober, s=search: ranked.__setitem__(s, p.rank(queries, top_k=TOP)))
            ids = medlama_rows(lm, queries)
            lean: list[list[str]] = []
            works["lean"] = lambda: lean.__setitem__(slice(None), [
                top_names(queries.candidates, lean_scores(model, prefix, continuations, args.batch_size, lm.pad_id))
                for prefix, continuations in ids])
            harness = lm_eval_peer(model, lm.tokenizer, queries, args.batch_size, device)
            if harness is not None:
                works["lm-eval"] = harness[0]
            seconds, _ = best_of(device, works, repeats, getattr(args, "clock", "wall"))
            for search, prober in probers.items():
                counter = FlopCounter()  # counted on one more run, untimed (the hooks cost time)
                counter.body(prober.lm.model, model.config, causal=True,
                             vocab_projection=model.get_output_embeddings().weight.numel())
                prober.rank(queries, top_k=TOP)
                counter.close()
                peers = [Peer("lean full-sequence (plain torch)", seconds["lean"], agreement(ranked[search], lean))]
                if harness is not None:
                    peers.insert(0, Peer("lm-eval HFLM.loglikelihood", seconds["lm-eval"],
                                         agreement(ranked[search], harness[1])))
                else:
                    peers.insert(0, Peer("lm-eval HFLM.loglikelihood", float("nan"), None, "not installed"))
                rows.append(Row("causal", size, f"causal-likelihood {search}", parameters(model), dtype, str(device),
                                len(queries), len(queries.candidates), seconds[search], counter.tokens, counter.flops,
                                peak_for(device, dtype, args.peak_tflops), peers))
            del probers, lm, model
    return rows
