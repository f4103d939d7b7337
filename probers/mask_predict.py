"""Mask predict (X-FACTR, Jiang et al. 2020): decode answers of 1..M tokens from the PLM vocabulary.

For every number of masks m = 1..M the slot ``[Y]`` becomes m mask tokens, and a beam of ``beam_size``
fills is decoded with the model's MLM head:

* initial fill ``independent``: one forward pass; every mask takes its own predictions, and the beam
  keeps the ``beam_size`` best combinations (exact top combinations by summed log-probability);
* ``order``: left to right, one mask per round, the model re-run after each fill (autoregressive);
* ``confidence``: per round, the single (mask, token) pair with the highest probability is filled;
* refinement (``order+order``, ``independent+confidence``, ...): once every mask is filled, one position
  per round is masked again and re-predicted given all the others. ``order`` re-masks the positions
  left to right in passes and stops after a pass that changed nothing; ``confidence`` re-masks the
  least confident token and stops after a round that changed nothing.

Every round, each beam entry proposes its ``beam_size`` best continuations; duplicates are merged and
the ``beam_size`` best by summed log-probability are kept. ``max_iterations`` caps the rounds per m
counted as X-FACTR counts them: initial fill rounds included (an ``order`` fill of m masks takes m
rounds), so it must be at least M unless the fill is ``independent``.

Score of a decoded answer (it decides the beam, and the ranking across m):
the **mean log-probability of its tokens at fill time**: each token contributes the log-softmax
probability (over the whole vocabulary, not renormalised after excluding special tokens) it had when it
was last placed, in the context of that round; a refinement round that re-predicts the same token keeps
its earlier log-probability (as X-FACTR does). With ``rescore``, a final pass replaces this by the mean
pseudo-log-likelihood: each token's log-probability with only its own position masked and every other
token filled in (computed once on the final beams, not during the search as X-FACTR's ``--reprob``).

Special tokens (``[CLS]``, ``[MASK]``, ``[PAD]``, ``[UNK]``, ...) are never predicted.

Ranking: the final beams of every m (up to ``beam_size`` x M fills) are decoded to strings (word pieces
joined, ``tokenizer.decode``), merged, deduplicated (a string keeps its best score) and sorted by score.
X-FACTR itself keeps only the best beam entry of the best m, which is this ranking's first answer.
With ``to_candidates`` (default), a decoded answer whose token ids equal a candidate name's token ids is
reported as that name (all such names, in candidate order, when several share the ids, e.g. case
variants under an uncased tokenizer): X-FACTR counts a hit when the ids equal the gold answer's, and
this keeps that criterion under exact-match scoring. Other answers are reported as decoded.

Presets: ``paper`` is the paper's first setting (beam 5, M = 5, ``independent``, X-FACTR's 10 rounds);
``paper-order+order`` its second (``order`` fill, ``order`` refinement); ``biolama`` BioLAMA's (beam 5,
M = 10, ``confidence`` fill, no refinement, 10 rounds); ``fill-mask`` the single-token fill-mask baseline of
the paper's table 3 (Petroni et al. 2019, LAMA): one mask, the 10 most probable vocabulary tokens (M = 1,
beam 10), so only single-token answers can be found (1.1% of MedLAMA's distinct answer names; the paper's
2.6% is the share per relation, averaged). ``results.json`` records the preset the settings equal (``preset``,
none when they equal none) and the approach (``approach``).

Learned prompts (``prompts``: a folder of ``medlama optiprompt``, :mod:`medlama.probers.learned_prompts`):
each query is decoded with its relation's learned vectors in place of the manual template's words; the
prompts must have been trained for this model and tokenizer, and hold every probed relation.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from medlama.core.batching import BatchSize, batch_size_setting
from medlama.core.errors import MedlamaInputError
from medlama.core.public_paths import public_word
from medlama.probers.prober import Prober, check_all_scores, check_settings
from medlama.probers.learned_prompts import LearnedPrompt, PromptSet
from medlama.probers.mlm import MaskedLM, SplitQuery, candidate_lookup, rank_unique
from medlama.probers.query_set import QuerySet
from medlama.probers.ranking import Ranking
from medlama.core.settings import setting

INITS = ("independent", "order", "confidence")
REFINES = ("none", "order", "confidence")


@dataclass(frozen=True)
class MaskPredictSettings:
    """X-FACTR decoding settings (see the module docstring)."""

    max_masks: int = setting(5, help="decode answers of 1..M tokens", min=1, metavar="M")
    beam_size: int = setting(5, help="beam size", min=1, metavar="B")
    init: str = setting("independent", help="initial fill of the masks", choices=INITS, noun="initial fill")
    refine: str = setting("none", help="iterative refinement after the initial fill", choices=REFINES,
                          noun="refinement")
    max_iterations: int = setting(10, help="most decoding rounds per mask count, initial fill rounds included",
                                  min=1, metavar="N")
    rescore: bool = setting(False, help="score the final answers by pseudo-log-likelihood instead of the "
                                        "log-probabilities at fill time")
    to_candidates: bool = setting(True, help="report a decoded answer whose token ids equal a candidate name's "
                                             "as that name (--raw-predictions: as decoded)", cli=False)
    batch_size: BatchSize = batch_size_setting(16, help="queries decoded together (x beam size rows per forward pass)")
    prompts: str | None = setting(None, metavar="PROMPTS", help="decode with learned prompts: a folder of medlama "
                                  "optiprompt or a Hub repo id (none: the manual prompts)")
    allow_train_overlap: bool = setting(False, switch=True, help="probe learned prompts on queries that ask facts "
                                        "they were trained on (another build's test split): recorded, not refused")

    def __post_init__(self) -> None:
        check_settings(self)
        if self.init != "independent" and self.max_iterations < self.max_masks:
            raise MedlamaInputError(f"max iterations ({self.max_iterations}) must be >= max masks "
                                    f"({self.max_masks}) with the {self.init!r} fill, which takes one round "
                                    "per mask; otherwise answers would keep masks")

    @property
    def name(self) -> str:
        return self.init if self.refine == "none" else f"{self.init}+{self.refine}"


#: Named settings: the paper's two X-FACTR settings (beam 5, up to 5 masks), BioLAMA's, and table 3's
#: single-token fill-mask (one mask; a beam of 10 keeps the 10 best tokens, the answers acc@10 needs).
PRESETS = {
    "paper": MaskPredictSettings(),
    "paper-order+order": MaskPredictSettings(init="order", refine="order"),
    "biolama": MaskPredictSettings(max_masks=10, init="confidence"),
    "fill-mask": MaskPredictSettings(max_masks=1, beam_size=10),
}
#: Fields that do not change the answers (how many rows run together), that say where prompts come from, or
#: whether learned prompts may meet their training facts: none changes how a mask is decoded.
_NOT_DECODING = ("batch_size", "prompts", "to_candidates", "allow_train_overlap")


def preset_of(settings: MaskPredictSettings) -> str | None:
    """The preset whose decoding ``settings`` equal (batch size, prompts, candidate mapping and the train-overlap
    permission aside), or None."""
    for name, preset in PRESETS.items():
        if all(getattr(settings, f) == getattr(preset, f) for f in asdict(preset) if f not in _NOT_DECODING):
            return name
    return None


def approach_of(settings: MaskPredictSettings) -> str:
    """Which of the paper's table 3 approaches ``settings`` run: fill-mask (one token) or X-FACTR (multi-token)."""
    if settings.max_masks == 1:
        return "fill-mask (one token, Petroni et al. 2019)"
    return f"X-FACTR multi-token decoding ({settings.name}, Jiang et al. 2020)"


@dataclass(frozen=True)
class Fill:
    """One beam entry: a token (or -1, still masked) and its log-probability at each of the m masks."""

    tokens: tuple[int, ...]
    logprobs: tuple[float, ...]

    @property
    def total(self) -> float:
        return sum(self.logprobs)

    @property
    def complete(self) -> bool:
        return -1 not in self.tokens

    def put(self, position: int, token: int, logprob: float) -> "Fill":
        return Fill(self.tokens[:position] + (token,) + self.tokens[position + 1:],
                    self.logprobs[:position] + (logprob,) + self.logprobs[position + 1:])


class _Group:
    """The decoding state of one query with m masks."""

    def __init__(self, query: int, m: int, ids: list[int], start: int) -> None:
        self.query, self.m, self.ids, self.start = query, m, ids, start
        self.beams = [Fill((-1,) * m, (0.0,) * m)]
        self.phase = "fill"
        self.rounds = 0
        self.offset = 0  # next position of an order refinement pass
        self.modified = False  # whether the current order refinement pass changed the beam

    def row(self, fill: Fill, masked: list[int]) -> list[int]:
        row = list(self.ids)
        for j, token in enumerate(fill.tokens):
            if token >= 0 and j not in masked:
                row[self.start + j] = token
        return row


def _best(proposals: list[Fill], size: int) -> list[Fill]:
    """The ``size`` best distinct fills by total (a duplicate keeps its best total; ties keep order)."""
    best: dict[tuple[int, ...], Fill] = {}
    for fill in proposals:
        if fill.tokens not in best or fill.total > best[fill.tokens].total:
            best[fill.tokens] = fill
    first = {}
    for order, fill in enumerate(proposals):
        first.setdefault(fill.tokens, order)
    return sorted(best.values(), key=lambda fill: (-fill.total, first[fill.tokens]))[:size]


class MaskPredictProber(Prober):
    """Multi-token mask predict with a masked LM's MLM head; answers come from the PLM vocabulary."""

    method = "mask-predict"

    def __init__(self, model_path: str | Path, settings: MaskPredictSettings = PRESETS["paper"], *,
                 device: str | None = None, lm: MaskedLM | None = None) -> None:
        self.settings_ = settings
        self.lm = lm or MaskedLM(model_path, device=device, batch_size=settings.batch_size * settings.beam_size)
        self.learned: PromptSet | None = None
        self._offsets: dict[str, int] = {}
        self._prompts: dict[str, LearnedPrompt] = {}
        if settings.prompts is not None:
            self.learned = PromptSet.read(settings.prompts)
            self.learned.check_base(self.lm)
            self.use_prompts(self.learned.prompts)

    def use_prompts(self, prompts: dict[str, LearnedPrompt] | None) -> None:
        """Decode each relation of ``prompts`` with its learned vectors (``None``: the manual prompts)."""
        import torch  # torch only when a model runs

        self._offsets, stacked, at = {}, [], 0
        for name, prompt in (prompts or {}).items():
            self._offsets[name] = at
            stacked.append(prompt.vectors)
            at += prompt.vectors.shape[0]
        self._prompts = dict(prompts or {})
        self.lm.vectors = torch.cat(stacked).to(self.lm.device) if stacked else None

    @property
    def device(self) -> Any:
        """The masked LM's device."""
        return self.lm.device

    def settings(self) -> dict:
        out = {"method": self.method, "model": self.lm.model_path, "decoding": self.settings_.name,
               "approach": approach_of(self.settings_), "preset": preset_of(self.settings_),
               **asdict(self.settings_)}
        if self.learned is not None:  # a local folder by its last part, as the model (the identity says which)
            out["prompts"] = public_word(str(self.settings_.prompts))
            out["learned_prompts"] = self.learned.note()
        return out

    def _split(self, queries: QuerySet, q: int) -> SplitQuery:
        prompt = self._prompts.get(queries.relations[q]) if self._offsets else None
        if prompt is None:
            return self.lm.split(queries.texts[q])
        return prompt.split(self.lm, queries.texts[q], self._offsets[prompt.relation])

    # -- one round for many groups -------------------------------------------------------------------

    def _masked(self, group: _Group, fill: Fill) -> list[int]:
        """Positions (0..m-1) to predict this round for one beam entry."""
        if group.phase == "fill":
            return [j for j, token in enumerate(fill.tokens) if token < 0]
        if self.settings_.refine == "order":
            return [group.offset]
        return [min(range(group.m), key=lambda j: fill.logprobs[j])]  # least confident, leftmost on ties

    def _propose(self, group: _Group, fill: Fill, masked: list[int], top: dict[int, list[tuple[float, int]]]):
        """Continuations of one beam entry given the top (log-probability, token) pairs at each masked position."""
        size = self.settings_.beam_size
        if group.phase == "refine":
            p = masked[0]
            return [fill if token == fill.tokens[p] else fill.put(p, token, lp) for lp, token in top[p]]
        if self.settings_.init == "independent":
            partial = [fill]
            for j in masked:
                extended = [done.put(j, token, lp) for done in partial for lp, token in top[j]]
                partial = sorted(extended, key=lambda f: -f.total)[:size]  # stable: exact top combinations
            return partial
        if self.settings_.init == "order":
            j = masked[0]
            return [fill.put(j, token, lp) for lp, token in top[j]]
        options = sorted(((lp, j, token) for j in masked for lp, token in top[j]), key=lambda o: -o[0])
        return [fill.put(j, token, lp) for lp, j, token in options[:size]]

    def _advance(self, group: _Group, proposals: list[Fill]) -> None:
        settings = self.settings_
        new = _best(proposals, settings.beam_size) or group.beams
        changed = [f.tokens for f in new] != [f.tokens for f in group.beams]
        group.beams = new
        group.rounds += 1
        if group.phase == "fill":
            if all(f.complete for f in new):
                group.phase = "done" if settings.refine == "none" else "refine"
        elif settings.refine == "order":
            group.modified = group.modified or changed
            group.offset += 1
            if group.offset == group.m:
                if not group.modified:
                    group.phase = "done"
                group.offset, group.modified = 0, False
        elif not changed:
            group.phase = "done"
        if group.rounds >= settings.max_iterations:
            group.phase = "done"

    def _decode(self, groups: list[_Group]) -> None:
        """Run rounds until every group is done; all beams of all groups share each forward pass."""
        size = self.settings_.beam_size
        while True:
            requests = [(group, fill, self._masked(group, fill)) for group in groups if group.phase != "done"
                        for fill in group.beams]
            if not requests:
                return
            values, tokens = self.lm.log_probs(
                [group.row(fill, masked) for group, fill, masked in requests],
                [[group.start + j for j in masked] for group, _, masked in requests],
                lambda lp, _: tuple(t.cpu() for t in lp.topk(size, dim=-1)), exclude_special=True)
            values, tokens = values.tolist(), tokens.tolist()
            proposals: dict[int, list[Fill]] = {}
            for r, (group, fill, masked) in enumerate(requests):
                top = {j: [(lp, token) for lp, token in zip(values[r][i], tokens[r][i]) if lp != -math.inf]
                       for i, j in enumerate(masked)}
                proposals.setdefault(id(group), []).extend(self._propose(group, fill, masked, top))
            for group in groups:
                if group.phase != "done":
                    self._advance(group, proposals.get(id(group), []))

    def _rescore(self, groups: list[_Group]) -> dict[tuple[int, int], float]:
        """(group index, beam index) -> mean pseudo-log-likelihood of the final fill."""
        import torch  # torch only when a model runs

        rows, positions, targets, keys = [], [], [], []
        for g, group in enumerate(groups):
            for b, fill in enumerate(group.beams):
                for j in range(group.m):
                    rows.append(group.row(fill, [j]))
                    positions.append([group.start + j])
                    targets.append(fill.tokens[j])
                    keys.append((g, b))
        wanted = torch.tensor(targets, dtype=torch.long, device=self.lm.device)

        def picked(lp, index):  # each row's own token at its single position
            return lp[torch.arange(len(index), device=lp.device), 0, wanted[index]].cpu()

        values = self.lm.log_probs(rows, positions, picked).tolist()
        sums: dict[tuple[int, int], list[float]] = {}
        for key, value in zip(keys, values):
            sums.setdefault(key, []).append(value)
        return {key: sum(v) / len(v) for key, v in sums.items()}

    # -- the prober ----------------------------------------------------------------------------------

    def decode(self, queries: QuerySet) -> list[list[tuple[str, float]]]:
        """Every decoded answer of every query with its score (see the module docstring), best first."""
        settings = self.settings_
        if self.learned is not None:
            # run_probe checked them already; a prober used alone too
            self.learned.check_queries(queries, allow_train_overlap=settings.allow_train_overlap)
        splits = [self._split(queries, q) for q in range(len(queries))]
        lookups = {}
        out: list[list[tuple[str, float]]] = []
        for start in range(0, len(queries), settings.batch_size):
            block = range(start, min(len(queries), start + settings.batch_size))
            groups = []
            for q in block:
                for m in range(1, settings.max_masks + 1):
                    ids, first = self.lm.template(splits[q], m)
                    groups.append(_Group(q, m, ids, first))
            self._decode(groups)
            rescored = self._rescore(groups) if settings.rescore else {}
            answers: dict[int, list[tuple[str, float]]] = {q: [] for q in block}
            for g, group in enumerate(groups):
                space = splits[group.query].space_before
                if settings.to_candidates and space not in lookups:
                    lookups[space] = candidate_lookup(self.lm.candidate_ids(queries.candidates, space),
                                                      queries.candidates)
                for b, fill in enumerate(group.beams):
                    score = rescored[(g, b)] if settings.rescore else fill.total / group.m
                    names = lookups[space].get(fill.tokens) if settings.to_candidates else None
                    for text in names or [self.lm.decode(fill.tokens)]:
                        answers[group.query].append((text, score))
            for q in block:
                ranked = rank_unique(answers[q], len(answers[q]))
                scores = {}
                for text, score in answers[q]:
                    scores[text] = max(score, scores.get(text, -math.inf))
                out.append([(text, scores[text]) for text in ranked])
        return out

    @property
    def score_meaning(self) -> str:
        return ("mean pseudo-log-likelihood of the answer's tokens" if self.settings_.rescore
                else "mean decoded token log-probability per mask")

    def rank_scored(self, queries: QuerySet, top_k: int = 10, *, all_scores: bool = False) -> Ranking:
        """The decoded answers, best first, with their scores; the gold is ranked among them only (the pool
        is not scored as a whole). ``inputs``: what was fed, the query with the model's mask token in the slot
        (with learned prompts: the learned template, its ``[Vi]`` markers, the subject and the mask token)."""
        check_all_scores(self, all_scores)
        decoded = [answers[:top_k] for answers in self.decode(queries)]
        mask = self.lm.tokenizer.mask_token
        inputs = queries.with_mask(mask)
        if self._offsets:
            inputs = [self._prompts[relation].shown(text, mask) if relation in self._prompts else shown
                      for relation, text, shown in zip(queries.relations, queries.texts, inputs)]
        return Ranking.from_names(queries.gold, [[text for text, _ in row] for row in decoded],
                                  scores=[[score for _, score in row] for row in decoded], inputs=inputs)
