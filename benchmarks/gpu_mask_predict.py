"""``gpu.py``'s mask-predict part: ``--method mask-predict`` with X-FACTR's confidence decoding (BioLAMA's setting:
beam 5, 1..M masks, each round fills the single most probable (mask, token) pair, no refinement) on a BERT-base
shaped model, against a plain re-implementation of that decoding written here from the paper's description
(Jiang et al. 2020, X-FACTR's ``iter_decode_beam_search`` with ``init_method="confidence"``), independent of
medlama's code: per mask count, every query's beam entries in one batch, the full model's logits, log-softmax
over the vocabulary with special tokens (and ids past the tokenizer's vocabulary) excluded, the ``beam`` best
(mask, token) pairs per entry, the ``beam`` best distinct fills by summed log-probability kept. Both decode raw strings (no mapping onto candidate names)
and rank them by mean log-probability; the top-k lists of the two are compared."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from gpu_common import FlopCounter, Peer, Row, parameters, peak_for
from gpu_models import build_masked, synthetic_queries
from gpu_peers import agreement, best_of

from medlama.core.models import torch_dtype
from medlama.probers.registry import make_prober

BEAM = 5


def xfactr_confidence(model, tokenizer, texts: list[str], max_masks: int, beam: int, top_k: int, device):
    """X-FACTR's confidence decoding of ``texts`` (each with one ``[Y]``): the ``top_k`` decoded strings per text."""
    # never proposed: special tokens, and the output rows past the tokenizer's vocabulary (the benchmark's models
    # pad their vocabulary to the real models' size; no text holds those ids)
    vocabulary = model.get_output_embeddings().weight.shape[0]
    special = torch.tensor(sorted(set(tokenizer.all_special_ids) | set(range(len(tokenizer), vocabulary))),
                           device=device)
    found: list[dict[str, float]] = [{} for _ in texts]
    with torch.inference_mode():
        for m in range(1, max_masks + 1):
            filled = [text.replace("[Y]", " ".join([tokenizer.mask_token] * m)) for text in texts]
            enc = tokenizer(filled, return_tensors="pt", padding=True).to(device)
            slots = enc["input_ids"] == tokenizer.mask_token_id  # (texts x width), m per row
            where = slots.nonzero()[:, 1].view(len(texts), m)
            # beams: per text, a list of (token tuple with -1 still masked, log-probability per mask)
            beams = [[((-1,) * m, (0.0,) * m)] for _ in texts]
            for _ in range(m):  # confidence fill: one mask per round
                owners = [t for t, entries in enumerate(beams) for _ in entries]
                flat = [entry for entries in beams for entry in entries]
                ids = enc["input_ids"][owners].clone()
                tokens = torch.tensor([tokens for tokens, _ in flat], device=device)
                rows_at = where[owners]
                ids.scatter_(1, rows_at, torch.where(tokens >= 0, tokens, tokenizer.mask_token_id))
                logits = model(input_ids=ids, attention_mask=enc["attention_mask"][owners]).logits
                lp = logits.gather(1, rows_at[:, :, None].expand(-1, -1, logits.shape[-1])).float().log_softmax(-1)
                lp[:, :, special] = float("-inf")
                lp[tokens >= 0] = float("-inf")  # a filled mask is not proposed again
                values, index = lp.flatten(1).topk(beam, dim=-1)
                values, index = values.tolist(), index.tolist()
                proposals: list[dict[tuple, tuple]] = [{} for _ in texts]
                for r, (t, (toks, lps)) in enumerate(zip(owners, flat)):
                    for value, flat_index in zip(values[r], index[r]):
                        if value == float("-inf"):
                            continue
                        j, token = divmod(flat_index, logits.shape[-1])
                        new = (toks[:j] + (token,) + toks[j + 1:], lps[:j] + (value,) + lps[j + 1:])
                        if new[0] not in proposals[t] or sum(new[1]) > sum(proposals[t][new[0]][1]):
                            proposals[t][new[0]] = new
                beams = [sorted(p.values(), key=lambda e: -sum(e[1]))[:beam] or b for p, b in zip(proposals, beams)]
            for t, entries in enumerate(beams):
                for toks, lps in entries:
                    text = " ".join(tokenizer.decode(list(toks), skip_special_tokens=True).split())
                    if text:
                        found[t][text] = max(found[t].get(text, float("-inf")), sum(lps) / m)
    return [sorted(scores, key=lambda s: -scores[s])[:top_k] for scores in found]


def mask_predict_part(args, device, dtype: str) -> list[Row]:
    queries, corpus = synthetic_queries(args.queries, args.candidates)
    size = "bert-tiny" if args.small else "bert-base"
    max_masks, top_k = (3 if args.small else 5), 10
    with tempfile.TemporaryDirectory() as tmp:
        build_masked(Path(tmp), size, corpus, device)
        prober = make_prober("mask-predict", tmp, {"init": "confidence", "refine": "none", "beam_size": BEAM,
                                                   "max_masks": max_masks, "max_iterations": max_masks,
                                                   "to_candidates": False, "batch_size": args.queries},
                             device=str(device))
        lm = prober.lm
        model = lm.model.to(torch_dtype(dtype))  # mask-predict has no dtype setting: cast in memory
        prober.rank(queries.subset([0]), top_k=top_k)  # warm-up
        counter = FlopCounter()
        counter.body(model.base_model, model.config, causal=False)
        if lm.head is not None:
            counter.head(lm.head)
        ours = prober.rank(queries, top_k=top_k)
        counter.close()
        texts = list(queries.texts)
        xfactr_confidence(model, lm.tokenizer, texts[:1], max_masks, BEAM, top_k, device)  # warm-up
        theirs: list[list[str]] = []

        def run() -> None:
            theirs[:] = xfactr_confidence(model, lm.tokenizer, texts, max_masks, BEAM, top_k, device)

        best, _ = best_of(device, {"medlama": lambda: prober.rank(queries, top_k=top_k), "peer": run},
                          args.repeats)
        seconds, peer = best["medlama"], best["peer"]
        return [Row("mask-pred", size, f"mask-predict confidence M={max_masks}", parameters(model), dtype,
                    str(device), len(queries), 0, seconds, counter.tokens, counter.flops,
                    peak_for(device, dtype, args.peak_tflops),
                    [Peer("X-FACTR confidence decoding (plain, here)", peer, agreement(ours, theirs))])]
