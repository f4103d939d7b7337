"""Probing decoder-only causal LMs (GPT-2, BioGPT, Llama family): three methods behind ``Prober``.

* ``causal-likelihood`` (exact): every candidate scored by the log-probability of its tokens, then the
  query's text after ``[Y]``, as the continuation of the text before ``[Y]`` (sum, or mean per token with
  ``reduction="mean"``); the prefix runs once and its KV cache serves every candidate (``CausalLM``). With
  the sum, ``rank`` finds the same top-k by best-first search over the candidates' token trie
  (``search="best-first"``, the default there; :mod:`medlama.probers.causal.search`), scoring a fraction of
  the names; ``scores`` scores them all.
* ``causal-constrained`` (fast): beam search (``transformers``' ``generate``) with a logits processor walking
  a prefix trie of the candidates' token sequences, each closed by the first ``close_tokens`` tokens after
  ``[Y]`` (default 1; EOS when nothing follows), and a stopping criterion that finishes a beam where a
  candidate closes: every output is a candidate, the top-k from one decoding pass. A candidate that is a
  prefix of another ("asthma", "asthma attack") ends halfway down its path (``END``); if a closing token
  also continues a name, the shorter candidate wins (the trie: :mod:`medlama.probers.causal.trie`). Beams score like the likelihood method
  (``length_penalty`` 0 for sum, 1 for mean; exact stopping rule) and the finished candidates are ordered
  by the float64 sum (or mean) of the beams' own token log-probabilities, ties in candidate order (the
  likelihood method's ``rank_unique``): ``num_beams`` >= the number of candidates gives exactly its top-k
  when the closing tokens are the whole suffix (MedLAMA's `` .``, or ``close_tokens=None``; tested with
  ties). With no text after ``[Y]`` the beams also score the closing EOS.
* ``causal-generate``: greedy or beam generation until EOS or the first token after ``[Y]``; the answer
  (the text generated, the suffix removed from its end) is reported as the candidate names with the same
  token ids (``answer_match="exact"``, as the seq2seq ``generative`` prober does) or the same text after
  the acc@k metric's normalisation (``answer_match="normalized"``), else as generated. (``--answer-match``
  is not ``medlama probe --match``, which says how acc@k compares predictions with the gold answers.)

Ties keep candidate order. The methods are registered by name in ``medlama.probers.registry.METHODS``
(``make_prober("causal-likelihood", model, settings)``, ``medlama probe --method causal-likelihood``).
The model work the three share (loading, cutting a query at its slot, scoring continuations with the
prefix's KV cache) is :mod:`medlama.probers.causal.scoring`'s ``CausalLM``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from medlama.core.errors import MedlamaInputError
from medlama.core.finite import FiniteScores
from medlama.core.defaults import MASK_PLACEHOLDER
from medlama.probers.prober import Prober, check_all_scores
from medlama.metrics import answer_normalizer
from medlama.probers.ranking import Ranking
from medlama.probers.causal.batch import batched_log_probs
from medlama.probers.causal.fewshot import with_examples
from medlama.probers.causal.lens import LayerLens
from medlama.probers.causal.passes import padded_tensors
from medlama.probers.causal.scoring import CausalLM, CausalModelSettings, CausalQuery
from medlama.probers.causal.settings import ConstrainedSettings, GenerateSettings, LikelihoodSettings
from medlama.probers.causal.search import best_first
from medlama.probers.causal.trie import END, TrieTokens, candidate_trie, walk
from medlama.probers.generative import aligned_answer
from medlama.probers.mlm import candidate_lookup, rank_unique
from medlama.probers.query_set import QuerySet
from medlama.core.settings import as_dict

#: ``search_ran``'s count of multiple-choice queries (every choice scored, whatever ``search`` says).
CHOICES_SCORED = "every choice scored (multiple choice)"
class _CausalProber(Prober):
    """Shared set-up: the model, the settings record, candidate checks and batches of queries."""

    def __init__(self, model_path: str | Path, settings: CausalModelSettings, *, device: str | None = None) -> None:
        self.settings_ = settings
        self.lm = CausalLM(model_path, self.method, settings, device=device)

    @property
    def device(self) -> Any:
        """The causal LM's device."""
        return self.lm.device

    def settings(self) -> dict:
        return {"method": self.method, "model": self.lm.model_path, **as_dict(self.settings_)}

    def prompted(self, queries: QuerySet) -> QuerySet:
        """``queries`` as the model reads them: each after its few-shot examples, when ``few_shot`` asks for
        them (:func:`medlama.probers.causal.fewshot.with_examples`), else as they are. Every public ranking or
        scoring method reads its queries through this, once."""
        return with_examples(queries, self.settings_.few_shot, self.settings_.few_shot_seed,
                             as_turns=self.settings_.few_shot_as_multiturn)

    def inputs(self, queries: QuerySet) -> list[str]:
        """Each query of ``queries`` (as :meth:`prompted` gives them) as fed to the model: its prefix tokens
        (any chat template, BOS and few-shot examples included) decoded, ``[Y]`` where the answer goes, then its
        suffix tokens decoded."""
        decode = self.lm.tokenizer.decode
        return [decode(list(split.prefix)) + MASK_PLACEHOLDER + decode(list(split.suffix))
                for split in map(self.lm.split, queries.texts)]

    def _close(self, split: CausalQuery, tokens: int | None = 1) -> tuple[int, ...]:
        """The tokens that end an answer: the first ``tokens`` of the suffix (None: all), or EOS if it is empty."""
        if not split.suffix:
            return (self.lm.need_eos("to end answers of queries with no text after [Y]"),)
        return split.suffix[:tokens or len(split.suffix)]

    def _generate_chunks(self, splits: list[CausalQuery]):
        """Chunks of query indices with one closing token each (one stop set per call), shortest first."""
        order = sorted(range(len(splits)), key=lambda i: (self._close(splits[i]), len(splits[i].prefix)))
        step = self.settings_.batch_size
        chunk: list[int] = []
        for i in order:
            if chunk and (len(chunk) == step or self._close(splits[chunk[0]]) != self._close(splits[i])):
                yield chunk
                chunk = []
            chunk.append(i)
        if chunk:
            yield chunk

    def _left_padded(self, prefixes: list[list[int]]):
        """The prefixes left-padded for ``generate`` (each ends in the last column), their attention mask, width."""
        ids, filled = padded_tensors(prefixes, self.lm.pad_id, self.lm.device, left=True)
        return ids, filled.long(), ids.shape[1]


class CausalLikelihoodProber(_CausalProber):
    """Every candidate ranked by its exact log-probability in the slot (the reference causal method)."""

    method = "causal-likelihood"
    independent_queries = True  # each query's candidates are scored on their own (see Prober)
    #: A multiple-choice query set is ranked in one call: every query's choices scored together
    #: (:func:`medlama.probers.causal.batch.batched_log_probs`), not one small pass per query.
    ranks_choices = True

    def __init__(self, model_path: str | Path, settings: LikelihoodSettings = LikelihoodSettings(), *,
                 device: str | None = None) -> None:
        super().__init__(model_path, settings, device=device)
        #: Queries ranked by best-first to the end, and those it handed to exhaustive scoring (its rule:
        #: :func:`medlama.probers.causal.search.keep_searching`), recorded as ``search_ran``.
        self.searched = {"best-first": 0, "switched to exhaustive": 0}
        #: Multiple-choice queries, every choice scored (no search: a query's few choices are all ranked).
        self.choices_scored = 0
        #: The logit lens of ``layers`` (checked now, before any query is ranked), else ``None``.
        self.lens = LayerLens(self.lm, settings.layers) if settings.layers else None

    def settings(self) -> dict:
        ran = dict(self.searched) if any(self.searched.values()) else {}
        if self.choices_scored:
            ran[CHOICES_SCORED] = self.choices_scored
        return {**super().settings(), "search": self.settings_.resolved_search, **({"search_ran": ran} if ran else {})}

    def scores(self, queries: QuerySet):
        """Scores ``(len(queries), len(candidates))`` as float64, higher is better (every candidate scored)."""
        return self._scores(self.prompted(queries))

    def _scores(self, queries: QuerySet):
        names = self._need_candidates(queries)
        out = np.empty((len(queries), len(names)), dtype=np.float64)
        for q, text in enumerate(queries.texts):
            split = self.lm.split(text)
            rows = [name + split.suffix if name else () for name in self.lm.candidate_ids(names, split.slot)]
            out[q] = self.lm.continuation_log_probs(split.prefix, rows, reduction=self.settings_.reduction,
                                                    kv_cache=self.settings_.kv_cache).numpy()
        return out

    scores_pool = True

    @property
    def score_meaning(self) -> str:
        return f"{self.settings_.reduction} of token log-probabilities (answer and suffix)"

    def rank_scored(self, queries: QuerySet, top_k: int = 10, *, all_scores: bool = False) -> Ranking:
        """Every candidate scored (:meth:`scores`), the top ``top_k`` by score, ties in candidate order."""
        if top_k < 1:
            raise MedlamaInputError(f"top_k must be >= 1, got {top_k}")
        if self.lens is not None:  # a layer sweep's prober used on its own: the first layer listed
            return self.rank_layers_scored(queries, top_k, all_scores=all_scores)[self.lens.layers[0]]
        names = self._need_candidates(queries)
        queries = self.prompted(queries)
        if queries.choices is not None:
            return self._rank_choices(queries, top_k, all_scores)
        if self.settings_.resolved_search == "best-first" and not all_scores:  # every score asked for: all scored
            results = self._best_first(queries, top_k, cutoff=self.settings_.rank_cutoff)
            for result in results:
                self.searched["switched to exhaustive" if result.switched else "best-first"] += 1
            # the gold's rank is exact over the whole pool (with rank_cutoff: up to it, null beyond)
            return Ranking(names=[r.names for r in results], scores=[list(r.scores) for r in results],
                           inputs=self.inputs(queries), gold_ranks=[r.gold_rank for r in results],
                           gold_scores=[r.gold_score for r in results])
        first = {name: i for i, name in reversed(list(enumerate(names)))}
        scores = self._scores(queries)
        top = [[first[name] for name in rank_unique(list(zip(names, row)), top_k)] for row in scores]
        return Ranking.from_pool(queries.gold, names, scores, top, inputs=self.inputs(queries),
                                 all_scores=all_scores)

    def rank_layers_scored(self, queries: QuerySet, top_k: int = 10, *, all_scores: bool = False
                           ) -> dict[int, Ranking]:
        """``{layer: Ranking}`` of every ``layers`` entry by the logit lens (:mod:`medlama.probers.causal.lens`),
        every candidate (or, multiple choice, every choice) scored at every layer from one pass per query, ranked
        as :meth:`rank_scored` ranks exhaustive scores (ties in candidate order)."""
        if self.lens is None:
            raise MedlamaInputError(f"--method {self.method} scores layers with the logit lens only when layers "
                                    "are given (--layers)")
        if top_k < 1:
            raise MedlamaInputError(f"top_k must be >= 1, got {top_k}")
        queries = self.prompted(queries)
        names = None if queries.choices is not None else self._need_candidates(queries)
        return self.lens.rankings(queries, names, self.inputs(queries), top_k, reduction=self.settings_.reduction,
                                  all_scores=all_scores)

    def _rank_choices(self, queries: QuerySet, top_k: int, all_scores: bool) -> Ranking:
        """Each query of a multiple-choice set against its own choices, every choice scored (the exhaustive
        ranking of each query's choices: ties in choice order), all queries' choices in shared passes."""
        requests = []
        for query_id, text, choices in zip(queries.ids, queries.texts, queries.choices):
            if not choices:
                raise MedlamaInputError(f"query {query_id!r} of {queries.name!r} has no choices; --method "
                                        f"{self.method} ranks each query's choices")
            split = self.lm.split(text)
            requests.append((split.prefix, [ids + split.suffix if ids else ()
                                            for ids in self.lm.candidate_ids(choices, split.slot)]))
        reduction = self.settings_.reduction
        scored = batched_log_probs(self.lm, requests, reduction=reduction) if self.settings_.kv_cache else \
            [self.lm.continuation_log_probs(prefix, rows, reduction=reduction, kv_cache=False)
             for prefix, rows in requests]
        inputs = self.inputs(queries)
        rows = []
        for q, (choices, row) in enumerate(zip(queries.choices, scored)):
            row = row.numpy()
            first = {name: i for i, name in reversed(list(enumerate(choices)))}
            top = [[first[name] for name in rank_unique(list(zip(choices, row)), top_k)]]
            rows += Ranking.from_pool([queries.gold[q]], choices, [row], top, inputs=[inputs[q]],
                                      all_scores=all_scores).rows()
        self.choices_scored += len(queries)
        return Ranking.from_rows(rows)

    def best_first(self, queries: QuerySet, top_k: int = 10, *, cutoff: int | None = 0) -> list:
        """Per query, the exact top ``top_k`` with scores, the gold's rank up to ``cutoff`` (``None``: exact over
        the whole pool) and its score, by best-first search (:func:`medlama.probers.causal.search.best_first`;
        sum reduction only)."""
        return self._best_first(self.prompted(queries), top_k, cutoff=cutoff)

    def _best_first(self, queries: QuerySet, top_k: int, *, cutoff: int | None) -> list:
        if self.settings_.reduction != "sum":
            raise MedlamaInputError(f"best-first search needs reduction 'sum', got {self.settings_.reduction!r}")
        names = self._need_candidates(queries)
        return [best_first(self.lm, text, names, top_k, gold=gold, cutoff=cutoff, batch_size=self.settings_.batch_size)
                for text, gold in zip(queries.texts, queries.gold)]


class CausalConstrainedProber(_CausalProber):
    """Beam search over the candidates' token trie: top-k candidates in one decoding pass per query."""

    method = "causal-constrained"

    def __init__(self, model_path: str | Path, settings: ConstrainedSettings = ConstrainedSettings(), *,
                 device: str | None = None) -> None:
        from transformers import GenerationConfig  # transformers only when a model loads or runs

        super().__init__(model_path, settings, device=device)
        # Only the trie and the beam settings may shape the ranking: no sampling, penalties, minimum lengths
        # or EOS inherited from the checkpoint's generation config (answers end where the trie says).
        self.lm.model.generation_config = GenerationConfig(pad_token_id=self.lm.pad_id)

    @property
    def score_meaning(self) -> str:
        return f"{self.settings_.reduction} of token log-probabilities (answer and closing tokens)"

    def rank_scored(self, queries: QuerySet, top_k: int = 10, *, all_scores: bool = False) -> Ranking:
        """The candidates the beams finished, best first, with their scores; the gold is ranked among them
        only (``None`` when no beam finished it: the pool is not scored as a whole)."""
        import torch  # torch only when a model runs
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList  # only when decoding

        check_all_scores(self, all_scores)

        if top_k < 1:
            raise MedlamaInputError(f"top_k must be >= 1, got {top_k}")
        names = self._need_candidates(queries)
        queries = self.prompted(queries)
        beams = self.settings_.num_beams or top_k
        mean = self.settings_.reduction == "mean"
        splits = [self.lm.split(text) for text in queries.texts]
        out: list[list[str]] = [[] for _ in splits]
        out_scores: list[list[float]] = [[] for _ in splits]
        tries: dict[tuple[str, tuple[int, ...]], tuple[dict, int]] = {}
        positions: dict[str, dict[tuple[int, ...], list[int]]] = {}
        order = sorted(range(len(splits)), key=lambda i: len(splits[i].prefix))
        step = self.settings_.batch_size
        for start in range(0, len(order), step):
            chunk = order[start:start + step]
            keys = [(splits[i].slot, self._close(splits[i], self.settings_.close_tokens)) for i in chunk]
            for slot, close in keys:
                if (slot, close) not in tries:
                    ids = self.lm.candidate_ids(names, slot)
                    tries[slot, close] = (candidate_trie(ids, close), max(len(s) for s in ids) + len(close))
                if slot not in positions:  # token ids -> the candidates' indices, built once per slot
                    positions[slot] = {}
                    for index, key in enumerate(self.lm.candidate_ids(names, slot)):
                        positions[slot].setdefault(key, []).append(index)
            longest = max(tries[key][1] for key in keys)
            ids, mask, width = self._left_padded([self.lm.fit_prefix(splits[i].prefix, longest) for i in chunk])
            chunk_tries = [tries[key][0] for key in keys]
            constraint = TrieTokens(chunk_tries, width, self.lm.pad_id)
            # Every finished beam comes back (one per candidate at most), scored by a float64 sum of its own
            # token log-probabilities and ordered as causal-likelihood orders its scores.
            config = GenerationConfig(num_beams=beams, num_return_sequences=beams, do_sample=False,
                                      max_new_tokens=longest, pad_token_id=self.lm.pad_id,
                                      length_penalty=1.0 if mean else 0.0,
                                      # exact stopping: with sums a finished beam cannot be beaten by a longer
                                      # one; with means only the bound at the maximum length is safe
                                      early_stopping="never" if mean else False)
            with torch.inference_mode():
                generated = self.lm.model.generate(
                    input_ids=ids, attention_mask=mask, generation_config=config,
                    logits_processor=LogitsProcessorList([FiniteScores(self.lm.model_path), constraint]),
                    stopping_criteria=StoppingCriteriaList([constraint.done]))
            generated = generated.view(len(chunk), beams, -1)[:, :, width:].cpu().tolist()
            for b, (i, (slot, close), trie, sequences) in enumerate(zip(chunk, keys, chunk_tries, generated)):
                scored: dict[tuple[int, ...], float] = {}
                for tokens in sequences:
                    node = walk(trie, tokens)
                    if node is not None and END in node:
                        path = tokens[:len(node[END]) + len(close)]  # the candidate and its closing tokens
                        total = sum(constraint.seen[b, tuple(path[:t])][path[t]] for t in range(len(path)))
                        scored[node[END]] = total / len(path) if mean else total
                ranked = [(names[index], score) for index, score in
                          sorted((index, score) for key, score in scored.items() for index in positions[slot][key])]
                out[i] = rank_unique(ranked, top_k)  # (-score, candidate index), exactly as causal-likelihood
                best = {}
                for name, value in ranked:
                    best[name] = max(value, best.get(name, float("-inf")))
                out_scores[i] = [best[name] for name in out[i]]
        return Ranking.from_names(queries.gold, out, scores=out_scores, inputs=self.inputs(queries))


def _normalize(text: str) -> str:
    """The acc@k metric's own normalisation, so that matching agrees with ``--match normalized`` scoring."""
    return answer_normalizer()(text)


class CausalGenerateProber(_CausalProber):
    """Answers generated freely (greedy or beam search), matched to the candidate names."""

    method = "causal-generate"

    def __init__(self, model_path: str | Path, settings: GenerateSettings = GenerateSettings(), *,
                 device: str | None = None) -> None:
        super().__init__(model_path, settings, device=device)

    def generate(self, queries: QuerySet, top_k: int = 10) -> list[list[str]]:
        """The answers of every query in beam order (at most ``min(top_k, num_beams)``), before matching."""
        return self._generate(self.prompted(queries), top_k)

    def _generate(self, queries: QuerySet, top_k: int) -> list[list[str]]:
        import torch  # torch only when a model runs
        from transformers import LogitsProcessorList  # transformers only when a model loads or runs

        if top_k < 1:
            raise MedlamaInputError(f"top_k must be >= 1, got {top_k}")
        settings = self.settings_
        beams = settings.num_beams or top_k
        returned = min(top_k, beams)
        splits = [self.lm.split(text) for text in queries.texts]
        suffixes = [text.split(MASK_PLACEHOLDER)[1] for text in queries.texts]
        out: list[list[str]] = [[] for _ in splits]
        extra = settings.max_answer_tokens
        for chunk in self._generate_chunks(splits):
            (close,) = self._close(splits[chunk[0]])
            stops = sorted({close} | ({self.lm.eos_id} if self.lm.eos_id is not None else set()))
            ids, mask, width = self._left_padded([self.lm.fit_prefix(splits[i].prefix, extra) for i in chunk])
            with torch.inference_mode():
                generated = self.lm.model.generate(input_ids=ids, attention_mask=mask, num_beams=beams,
                                                   num_return_sequences=returned, do_sample=False,
                                                   max_new_tokens=extra, eos_token_id=stops,
                                                   pad_token_id=self.lm.pad_id,
                                                   logits_processor=LogitsProcessorList(
                                                       [FiniteScores(self.lm.model_path)]))
            generated = generated.view(len(chunk), returned, -1)[:, :, width:].cpu().tolist()
            for i, sequences in zip(chunk, generated):
                answers = []
                for tokens in sequences:
                    end = next((at for at, token in enumerate(tokens) if token in stops), len(tokens))
                    answers.append(aligned_answer(self.lm.decode(tokens[:end]), "", suffixes[i]))
                out[i] = answers
        return out

    def rank_scored(self, queries: QuerySet, top_k: int = 10, *, all_scores: bool = False) -> Ranking:
        """The generated answers (matched to candidates), in beam order and without scores; the gold is
        ranked among them only."""
        check_all_scores(self, all_scores)
        return Ranking.from_names(queries.gold, self._rank(queries, top_k), inputs=self.inputs(self.prompted(queries)))

    def _rank(self, queries: QuerySet, top_k: int = 10) -> list[list[str]]:
        settings = self.settings_
        names = self._need_candidates(queries) if settings.to_candidates else []  # raw answers need none
        by_text: dict[str, list[str]] = {}
        for name in names if settings.answer_match == "normalized" else ():
            by_text.setdefault(_normalize(name), []).append(name)
        ranked = []
        for text, answers in zip(queries.texts, self.generate(queries, top_k)):  # the slot reads as without examples
            slot = self.lm.split(text).slot
            lookup = candidate_lookup(self.lm.candidate_ids(names, slot), names) if names else {}
            found: list[str] = []
            for answer in filter(None, answers):  # empty answers dropped
                if settings.answer_match == "normalized":
                    found.extend(by_text.get(_normalize(answer)) or [answer])
                else:
                    found.extend(lookup.get(self.lm.slot_ids(answer, slot)) or [answer])
            ranked.append(list(dict.fromkeys(found))[:top_k])
        return ranked

