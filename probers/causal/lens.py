"""The logit lens of ``causal-likelihood --layers``: every candidate scored at each chosen layer, from one pass.

Layer ``i`` is ``output_hidden_states``' entry ``i`` (0: the embeddings, ``L``: the last layer's output; ``-1``:
the last, as the encoders' ``--layers`` counts). Its hidden state at each position goes through the model's
final norm and its output head, and the candidate's tokens are scored from those logits exactly as the model's
own logits score them (:func:`~medlama.probers.causal.passes.target_log_probs`, summed in float64, or their
mean). transformers' last entry is already the final norm's output, so it goes through the head alone: the last
layer's scores are the plain scores.

One pass serves every layer: the query's prefix runs once with its KV cache, and each batch of continuations
once after it, all hidden states kept. A model whose logits are more than head(norm(hidden)) (soft-capped or
scaled logits: Gemma 2, Cohere, Granite) or whose final norm is not found is refused, naming the model.
"""

from __future__ import annotations

from collections.abc import Sequence

from medlama.core.errors import MedlamaInputError
from medlama.core.finite import require_log_probs
from medlama.probers.causal.passes import (broadcast_cache, padded_tensors, row_totals, rows_per_pass, sum_dtype,
                                           returned_cache, target_log_probs, with_cache)
from medlama.probers.causal.scoring import CausalLM, _log_softmax
from medlama.probers.mlm import logprob_elements, rank_unique
from medlama.probers.query_set import QuerySet
from medlama.probers.ranking import Ranking

__all__ = ["LayerLens", "resolve_layers"]

#: Where causal LMs keep their final norm, on the decoder (``get_decoder()``) or the base model.
NORM_NAMES = ("norm", "ln_f", "final_layer_norm", "final_layernorm", "layer_norm")
#: Config fields that post-process the logits beyond the head: the lens could not reproduce the model's scores.
LOGIT_EXTRAS = ("final_logit_softcapping", "logit_scale", "logits_scaling")


def resolve_layers(layers: Sequence[int], depth: int, model: str) -> list[int]:
    """``layers`` as indices 0..``depth`` (a negative one counted from the end), checked."""
    resolved = []
    for layer in layers:
        index = layer + depth + 1 if layer < 0 else layer
        if not 0 <= index <= depth:
            raise MedlamaInputError(f"layer {layer} out of range: {model} has {depth} layers (use 0..{depth}, "
                                    "or -1 for the last)")
        resolved.append(index)
    return list(dict.fromkeys(resolved))


class LayerLens:
    """The logit lens of ``lm`` at ``layers`` (see the module docstring)."""

    def __init__(self, lm: CausalLM, layers: Sequence[int]) -> None:
        self.lm = lm
        config = lm.model.config.get_text_config(decoder=True)
        self.depth = int(config.num_hidden_layers)
        self.layers = resolve_layers(layers, self.depth, lm.model_path)
        extras = [name for name in LOGIT_EXTRAS if getattr(config, name, None) not in (None, 1, 1.0)]
        if extras:
            raise MedlamaInputError(f"--layers: this model post-processes its logits ({', '.join(extras)}), which "
                                    "the logit lens (final norm, then the output head) would leave out",
                                    file=lm.model_path)
        owners = [getattr(lm.model, "get_decoder", lambda: None)(), lm.model.base_model]
        found = [getattr(owner, name) for owner in owners if owner is not None for name in NORM_NAMES
                 if callable(getattr(owner, name, None))]
        if not found:
            raise MedlamaInputError(f"--layers: no final norm found on {type(lm.model).__name__} (looked for "
                                    f"{', '.join(NORM_NAMES)}); the logit lens needs it", file=lm.model_path)
        self.norm = found[0]
        self.head = lm.model.get_output_embeddings()

    def logits(self, hidden_states, layer: int):
        """The lens' logits of ``layer`` from a pass's ``hidden_states`` (the last entry is already normed)."""
        hidden = hidden_states[layer].to(self.head.weight.device)  # a sharded model's layers sit on several devices
        return self.head(hidden if layer == self.depth else self.norm(hidden))

    def _check_last(self, last: list, logits) -> None:
        """Refuse a model whose last hidden state through the head is not its own logits (the last entry is then
        not the final norm's output, and the lens' layers would not be scored as the last layer is)."""
        import torch  # torch only when a model runs

        lensed, own = self.logits(last, self.depth).float(), logits.float().to(self.head.weight.device)
        if not torch.allclose(lensed, own, rtol=1e-3, atol=1e-3 * float(own.abs().max()) + 1e-5):
            raise MedlamaInputError("--layers: this model's last hidden state through its output head is not its "
                                    "logits (not the final norm's output, or more after the head), so the logit "
                                    "lens cannot score its layers as it scores the last", file=self.lm.model_path)

    def log_probs(self, prefix: Sequence[int], rows: Sequence[Sequence[int]], *,
                  reduction: str = "sum") -> dict[int, object]:
        """Per layer, a float64 CPU tensor of each row's summed (or mean) log-probability as the continuation
        of ``prefix`` (an empty row: ``-inf``), as :meth:`CausalLM.continuation_log_probs` gives it at the last
        layer."""
        import torch  # torch only when a model runs
        from transformers import DynamicCache  # transformers only when a model runs

        lm = self.lm
        out = {layer: torch.full((len(rows),), float("-inf"), dtype=torch.float64) for layer in self.layers}
        real = sorted((i for i, row in enumerate(rows) if row), key=lambda i: len(rows[i]))
        if not real:
            return out
        longest = len(rows[real[-1]])
        prefix = lm.fit_prefix(prefix, longest)
        budget = logprob_elements(lm.device)  # once per call: on a GPU it asks the driver for free memory
        # every layer's logits of a pass are held at once: rows x positions x vocabulary x layers
        per_batch = rows_per_pass(longest * len(self.layers), batch_size=lm.settings.batch_size, budget=budget,
                                  vocab=lm.vocab_size)
        wide = sum_dtype(lm.device)
        with torch.inference_mode():
            head = lm.model(input_ids=torch.tensor([list(prefix)], dtype=torch.long, device=lm.device),
                            **with_cache(lm.model, DynamicCache(config=lm.model.config)), use_cache=True,
                            output_hidden_states=True, logits_to_keep=1)
            cache = returned_cache(head)
            last = [h[0, -1] for h in head.hidden_states]  # each layer's state at the prefix's last position
            self._check_last(last, head.logits[0, -1])
            first = {layer: _log_softmax(self.logits(last, layer)) for layer in self.layers}
            sums: dict[int, list] = {layer: [] for layer in self.layers}
            for start in range(0, len(real), per_batch):
                chunk = real[start:start + per_batch]
                ids, filled = padded_tensors([rows[i] for i in chunk], lm.pad_id, lm.device)
                passed = None
                if ids.shape[1] > 1:
                    passed = lm.model(input_ids=ids[:, :-1], **with_cache(lm.model, broadcast_cache(cache, len(chunk))),
                                      use_cache=True, output_hidden_states=True).hidden_states
                for layer in self.layers:
                    lp = first[layer].to(ids.device)[ids[:, :1]]
                    if passed is not None:
                        rest = target_log_probs(self.logits(passed, layer), ids[:, 1:])
                        lp = torch.cat([lp, rest.to(lp.device, lp.dtype)], dim=1)
                    sums[layer].append(row_totals(lp, filled, wide, reduction=reduction))
        order = torch.tensor(real)
        for layer in self.layers:
            scores = torch.cat(sums[layer]).to("cpu", torch.float64)
            require_log_probs(scores, model=lm.model_path)
            out[layer][order] = scores
        return out

    def rankings(self, queries: QuerySet, names: Sequence[str] | None, inputs: Sequence[str], top_k: int, *,
                 reduction: str = "sum", all_scores: bool = False) -> dict[int, Ranking]:
        """``{layer: Ranking}`` of ``queries`` (as the model reads them; ``inputs``: their fed texts): every name
        of ``names`` (``None``: each query's own choices) scored at every layer, one pass per query, ranked by
        score, ties in candidate order (``rank_unique``, as causal-likelihood ranks exhaustive scores)."""
        rows: dict[int, list] = {layer: [] for layer in self.layers}
        for q, text in enumerate(queries.texts):
            pool = list(names) if names is not None else list(queries.choices[q])
            if not pool:
                raise MedlamaInputError(f"query {queries.ids[q]!r} of {queries.name!r} has no choices; --method "
                                        "causal-likelihood ranks each query's choices")
            split = self.lm.split(text)
            scored = self.log_probs(split.prefix, [ids + split.suffix if ids else ()
                                                   for ids in self.lm.candidate_ids(pool, split.slot)],
                                    reduction=reduction)
            first = {name: i for i, name in reversed(list(enumerate(pool)))}
            for layer, row in scored.items():
                row = row.numpy()
                top = [[first[name] for name in rank_unique(list(zip(pool, row)), top_k)]]
                rows[layer] += Ranking.from_pool([queries.gold[q]], pool, [row], top, inputs=[inputs[q]],
                                                 all_scores=all_scores).rows()
        return {layer: Ranking.from_rows(layer_rows) for layer, layer_rows in rows.items()}
