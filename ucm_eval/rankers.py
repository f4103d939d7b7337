"""Rankers: rank a whole entity pool at the mask of each incremental context input, one interface for four methods.

``ranker.rank(inputs, pool)`` takes the inputs of a context sequence (texts with one ``[Y]`` slot) and
the pool's entity names, and returns an int array ``(len(inputs), len(pool))``: the 1-based rank of every
pool entity at every input (1 = best). Ties are broken by pool order (the earlier entity ranks first),
so ranks are a permutation of ``1..len(pool)`` in each row. ``ranker.scores(inputs, pool)`` gives the
underlying scores (higher is better), from which :func:`ranks_from_scores` ranks any subset of the pool.
``ranker.whole(inputs, pool)`` says which inputs the model sees whole (inputs over its length limit are
cut, see below).

The methods carry the names ``medlama probe --method`` gives the same techniques:

* ``mask-predict`` (:class:`~medlama.ucm_eval.mask_predict_ranker.MaskPredictRanker`): a masked LM with its
  MLM head, by **X-FACTR confidence decoding**, the multi-token decoding BioLAMA uses (its README: beam 5,
  up to 10 masks, the ``confidence`` fill) and the UCM paper follows ("we also implement a multi-token
  decoding strategy following BioLAMA"): the paper's choice, and ``auto``'s for a masked LM. The pool
  entities decoding returns are ranked by their decoded score; the others are not ranked (each takes the
  rank ``len(pool) + 1``). The same code as ``medlama probe --method mask-predict --preset biolama``.
* ``mask-average`` (:class:`MaskAverageRanker`): a masked LM with its MLM head, by **mask average**
  (Kassner et al. 2021; the Contrastive-Probe paper's retrieval baseline, not BioLAMA's decoding): a name
  of n tokens is scored by the mean log-probability of its tokens at n masks, so every pool entity is
  ranked (:mod:`medlama.probers.mask_average`, the same code as ``medlama probe --method mask-average``).
  A recorded choice (``--method mask-average``), not the paper's. Context far from the slot is cut when an
  input exceeds the model's length limit.
* ``retrieval`` (:class:`RetrievalRanker`): an encoder (base or rewired by Contrastive-Probe), as the
  retrieval prober ranks: ``[CLS]`` (or mean) of the input with the model's mask token at the slot,
  against the same representation of every pool name, scored by the one retrieval scorer
  (:func:`medlama.probers.faiss_search.score_matrix`: minus the squared L2 distance, the reference's exact L2
  search, or the cosine). Inputs longer than the limit lose their *start* (the prompt and its mask sit at
  the end), names are cut at 25 tokens as in the reference.
* ``causal-likelihood`` (:class:`medlama.ucm_eval.causal_ranker.CausalRanker`): a decoder-only causal LM
  (GPT-2, BioGPT, Llama family), by the exact log-probability of each name (then the text after the slot)
  as the continuation of the text before it, as ``medlama probe --method causal-likelihood`` ranks
  candidates. Inputs over the model's positions lose the start of their prefix.

Each method's settings are a dataclass: the probers' own for mask-predict
(:class:`~medlama.probers.mask_predict.MaskPredictSettings`, default its ``biolama`` preset), mask-average
(:class:`~medlama.probers.mask_average.MaskAverageSettings`) and causal-likelihood
(:class:`~medlama.probers.causal.prober.LikelihoodSettings`), and :class:`RetrievalRankerSettings` for retrieval
(a context input is cut to the model's limit from its start, where the prober cuts a query to 50 tokens);
:class:`RankerSettings` holds all four, for ``auto``. The method names are the probers'
(:mod:`medlama.probers.registry`), and :func:`make_ranker` builds a ranker from a method name and
its settings. ``auto`` picks causal-likelihood for a decoder-only causal LM (by its config), else
mask-predict (the paper's decoding) when the model has an MLM head, else retrieval.

Work shared across the inputs of a sequence (and across sequences): identical inputs are scored once
per call (``input0``, the prompt alone, is shared by every sequence of a triple); the retrieval ranker
encodes each pool name once and keeps its vector for later calls; the mask-average ranker tokenises the
pool once per call and runs one forward pass per (input, name length) for all names of that length.

The interface is :mod:`medlama.ucm_eval.context_ranker`; the causal ranker, with its own model code, lives in
:mod:`medlama.ucm_eval.causal_ranker`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from medlama.core.batching import AUTO, BatchSize, batch_size_setting, fit_batch, is_auto, starting_size
from medlama.core.defaults import MASK_PLACEHOLDER
from medlama.core.errors import MedlamaInputError
from medlama.probers.causal.prober import LikelihoodSettings
from medlama.probers.causal.scoring import is_causal_lm
from medlama.probers.encoding import POOLINGS, Encoder
from medlama.probers.mask_average import MaskAverageProber, MaskAverageSettings
from medlama.probers.mask_predict import MaskPredictSettings
from medlama.probers.query_set import QuerySet
from medlama.probers.faiss_search import DISTANCES, Distance, check_distance, score_matrix
from medlama.core.settings import Checked, did_you_mean, fields_of, setting, settings_from
from medlama.ucm_eval.causal_ranker import CausalRanker
from medlama.ucm_eval.context_ranker import ContextRanker, ranks_from_scores
from medlama.ucm_eval.mask_predict_ranker import PAPER_DECODING, MaskPredictRanker

__all__ = ["DEFAULTS", "FLAT_NAMES", "METHODS", "NOT_FOR_UCM", "CausalRanker", "ContextRanker", "MaskAverageRanker",
           "MaskPredictRanker", "RankerSettings", "RetrievalRanker", "RetrievalRankerSettings", "flat_ranker_settings",
           "make_ranker", "ranker_class", "ranker_settings", "ranks_from_scores"]

#: The ranking methods: the probing methods of :data:`medlama.probers.registry.METHODS` that rank a whole
#: pool at one slot, as ``medlama ucm --method`` and ``medlama probe --method`` spell them.
METHODS = ("mask-predict", "mask-average", "retrieval", "causal-likelihood")

#: The mask-average ranker's settings are the mask-average prober's (the name earlier releases exported).
MaskAverageRankerSettings = MaskAverageSettings


# ------------------------------------------------------------------------------------------ settings
@dataclass(frozen=True)
class RetrievalRankerSettings(Checked):
    """Settings of the retrieval ranker (the reference's: [CLS] of the last layer, L2, names cut at 25 tokens).

    Not the retrieval prober's :class:`~medlama.probers.retrieval.RetrievalSettings`: an input is a whole
    context sequence, kept to the model's limit by default (``query_max_length`` none) and cut from its
    start, and there is one layer.
    """

    layer: int = setting(-1, help="retrieval: hidden layer (0 the embeddings, -1 the last)")
    pooling: Literal["cls", "mean"] = setting("cls", choices=POOLINGS,
                                              help="retrieval: how a text becomes one vector ([CLS] or the mean "
                                                   "over its tokens)")
    distance: Distance = setting("l2", choices=DISTANCES,
                                 help="retrieval: l2 (minus the squared distance, the reference's) or cosine")
    query_max_length: int | None = setting(None, min=1, metavar="N",
                                           help="retrieval: most tokens of an input, longer inputs lose their "
                                                "start; none: the model's limit")
    name_max_length: int = setting(25, min=1, cli=False, help="retrieval: most tokens of a pool name")
    batch_size: BatchSize = batch_size_setting(64, help="texts per forward pass")


@dataclass(frozen=True)
class RankerSettings(Checked):
    """The settings of every method: ``auto`` picks the method per model, and each takes its own part."""

    mask_predict: MaskPredictSettings = setting(default_factory=lambda: PAPER_DECODING, cli=False,
                                                help="settings of the mask-predict ranker (default: the UCM "
                                                     "paper's, BioLAMA's confidence decoding)")
    mask_average: MaskAverageSettings = setting(default_factory=MaskAverageSettings, cli=False,
                                                help="settings of the mask-average ranker")
    retrieval: RetrievalRankerSettings = setting(default_factory=RetrievalRankerSettings, cli=False,
                                                 help="settings of the retrieval ranker")
    causal_likelihood: LikelihoodSettings = setting(default_factory=LikelihoodSettings, cli=False,
                                                    help="settings of the causal-likelihood ranker")

    def of(self, method: str) -> MaskAverageSettings | RetrievalRankerSettings | LikelihoodSettings:
        """The settings of ``method`` (``mask-predict``, ``mask-average``, ``retrieval`` or ``causal-likelihood``)."""
        return getattr(self, canonical_method(method).replace("-", "_"))


#: Method -> its settings class.
SETTINGS = {"mask-predict": MaskPredictSettings, "mask-average": MaskAverageSettings,
            "retrieval": RetrievalRankerSettings, "causal-likelihood": LikelihoodSettings}

#: The rankers' defaults, the one table that ``medlama ucm``, :func:`medlama.ucm`, :func:`ranker_settings` and
#: :func:`make_ranker` read: the paper's decoding (:data:`~medlama.ucm_eval.mask_predict_ranker.PAPER_DECODING`)
#: for mask-predict, each other method's settings class's defaults.
DEFAULTS = RankerSettings()

#: Method -> the fields of its settings that no UCM input asks, so that a UCM run takes none of them (``medlama
#: ucm`` has no flag for them, :func:`medlama.ucm` no keyword): learned prompts and their train overlap
#: (mask-predict), few-shot examples, a layer sweep and a top-k search (causal-likelihood: one score per name).
#: ``batch_size`` is one value for every ranker (:func:`flat_ranker_settings`).
NOT_FOR_UCM = {"mask-predict": ("batch_size", "prompts", "allow_train_overlap"), "mask-average": ("batch_size",),
               "retrieval": ("batch_size",),
               "causal-likelihood": ("batch_size", "search", "layers", "few_shot", "few_shot_seed",
                                     "few_shot_as_multiturn")}


def ucm_fields(method: str) -> tuple[str, ...]:
    """The fields of ``method``'s settings that a UCM run takes by name (its command-line fields, less
    :data:`NOT_FOR_UCM`), ``batch_size`` aside."""
    return tuple(field.name for field in fields_of(SETTINGS[method])
                 if field.metadata.get("cli", True) and field.name not in NOT_FOR_UCM[method])


#: Every ranker setting a UCM run takes by name: ``medlama ucm``'s flags, :func:`medlama.ucm`'s keywords.
FLAT_NAMES = ("batch_size", *(name for method in METHODS for name in ucm_fields(method)))


def flat_ranker_settings(values: Mapping[str, Any]) -> RankerSettings:
    """Every ranker's settings from ``values``, named as ``medlama ucm``'s flags (:data:`FLAT_NAMES`):
    ``batch_size`` for every ranker, each other name for its method; what is not given is :data:`DEFAULTS`'s.
    Each method's settings are checked as they are made; a name of no ranker is an error."""
    unknown = [name for name in values if name not in FLAT_NAMES]
    if unknown:
        notes = ", ".join(did_you_mean(name, FLAT_NAMES) for name in unknown)
        raise MedlamaInputError(f"unknown ranker setting(s): {notes}; known: {', '.join(FLAT_NAMES)}")
    parts = {}
    for method in METHODS:
        own = {name: value for name, value in values.items() if name in ("batch_size", *ucm_fields(method))}
        parts[method.replace("-", "_")] = settings_from(SETTINGS[method], own, base=DEFAULTS.of(method),
                                                        what=f"{method} ranker")
    return RankerSettings(**parts)


AnySettings = (MaskPredictSettings | MaskAverageSettings | RetrievalRankerSettings | LikelihoodSettings
               | RankerSettings)


def canonical_method(method: str) -> str:
    """``method``, checked to be a ranker (a method of :data:`METHODS`) or ``auto``; any other name is an error."""
    choices = ("auto", *METHODS)
    if method not in choices:
        raise MedlamaInputError(f"unknown ranker {method!r}; choose from {sorted(choices)}")
    return method


def ranker_settings(method: str, values: Mapping[str, Any] | None = None, **more: Any
                    ) -> MaskAverageSettings | RetrievalRankerSettings | LikelihoodSettings:
    """The settings of ``method`` with ``values`` replacing defaults; an unknown or misspelt name is an error."""
    name = canonical_method(method)
    if name == "auto":
        raise MedlamaInputError("'auto' has no settings of its own: give RankerSettings (one part per method)")
    return settings_from(SETTINGS[name], values, base=DEFAULTS.of(name), what=f"{name} ranker", **more)


class MaskAverageRanker(ContextRanker):
    """Mask average over the pool with a masked LM (BERT style, MLM head required)."""

    method = "mask-average"

    def __init__(self, model_path: str | Path, settings: MaskAverageSettings | None = None, *,
                 device: str | None = None) -> None:
        self.settings_ = settings if settings is not None else MaskAverageSettings()
        self.prober = MaskAverageProber(model_path, self.settings_, device=device)
        self.model_path = str(model_path)

    def _scores(self, inputs: list[str], pool: list[str]) -> np.ndarray:
        queries = QuerySet(ids=[str(i) for i in range(len(inputs))], relations=[""] * len(inputs), texts=inputs,
                           gold=[[] for _ in inputs], candidates=pool, name="context inputs")
        return self.prober.scores(queries).double().numpy()

    def _fits(self, text: str, pool: list[str]) -> bool:
        # The longest name needs the most masks: if its template fits, every name's does.
        lm, cap = self.prober.lm, self.settings_.max_tokens
        split = lm.split(text)
        longest = max((len(ids) for ids in lm.candidate_ids(pool, split.space_before)), default=0)
        masks = min(longest, cap) if cap else longest
        return len(lm.lead) + len(split.prefix) + masks + len(split.suffix) + len(lm.trail) <= lm.max_length

    def settings(self) -> dict:
        # "method" as `medlama probe` names it (earlier releases recorded "mlm"); "scoring" kept for their readers.
        return {"method": self.method, "model": self.model_path, "max_tokens": self.settings_.max_tokens,
                "batch_size": self.settings_.batch_size, "scoring": "mask-average"}


class RetrievalRanker(ContextRanker):
    """An encoder's ``[CLS]`` of the masked input against the pool names' (the retrieval prober's ranking)."""

    method = "retrieval"

    def __init__(self, model_path: str | Path, settings: RetrievalRankerSettings | None = None, *,
                 device: str | None = None, cache_names: int = 200_000) -> None:
        self.settings_ = settings if settings is not None else RetrievalRankerSettings()
        self.distance = check_distance(self.settings_.distance)
        self.encoder = Encoder(model_path, layers=[self.settings_.layer], pooling=self.settings_.pooling,
                               batch_size=self.settings_.batch_size, device=device)
        self.layer = self.encoder.layers[0]
        config = self.encoder.model.config
        limits = [getattr(config, "max_position_embeddings", None) or 512, self.encoder.tokenizer.model_max_length,
                  512]
        limit = int(min(x for x in limits if x and x > 0))
        wanted = self.settings_.query_max_length
        self.query_max_length = min(wanted, limit) if wanted else limit
        self.name_max_length = self.settings_.name_max_length
        self.model_path = str(model_path)
        self._names: dict[str, np.ndarray] = {}
        self._cache_names = cache_names

    def name_vectors(self, names: list[str]) -> np.ndarray:
        """Vectors of ``names`` (encoded once, kept for later calls)."""
        missing = [name for name in dict.fromkeys(names) if name not in self._names]
        if missing:
            if len(self._names) + len(missing) > self._cache_names:
                self._names.clear()
            vectors = self.encoder.encode(missing, self.name_max_length)[self.layer]
            self._names.update(zip(missing, vectors))
        return np.stack([self._names[name] for name in names]).astype(np.float64)

    def query_vectors(self, inputs: list[str]) -> np.ndarray:
        tokenizer = self.encoder.tokenizer
        texts = [text.replace(MASK_PLACEHOLDER, self.encoder.mask_token) for text in inputs]
        side = tokenizer.truncation_side
        tokenizer.truncation_side = "left"  # keep the prompt and its mask, drop the start of the context
        try:
            return self.encoder.encode(texts, self.query_max_length)[self.layer].astype(np.float64)
        finally:
            tokenizer.truncation_side = side

    def _fits(self, text: str, pool: list[str]) -> bool:
        masked = text.replace(MASK_PLACEHOLDER, self.encoder.mask_token)
        return len(self.encoder.tokenizer(masked)["input_ids"]) <= self.query_max_length

    def _scores(self, inputs: list[str], pool: list[str]) -> np.ndarray:
        return score_matrix(self.name_vectors(pool), self.query_vectors(inputs), self.distance)

    def settings(self) -> dict:
        return {"method": self.method, "model": self.model_path, "layer": self.layer,
                "pooling": self.encoder.pooling, "distance": self.distance,
                "query_max_length": self.query_max_length, "name_max_length": self.name_max_length,
                "truncation": "inputs lose their start"}


class AutoBatchRanker(ContextRanker):
    """A ranker whose settings ask ``batch_size="auto"``, resolved as ``medlama probe`` resolves it: the ranker
    ``build(size)`` makes, first at ``start`` (:func:`~medlama.core.batching.starting_size`) and, when a call runs
    out of memory, made again at half the size (:func:`~medlama.core.batching.fit_batch`); a later call starts
    at the size the last one used. Its settings record ``"auto"`` and the size it resolved to
    (``resolved_batch_size``)."""

    def __init__(self, build: Callable[[int], ContextRanker], start: int) -> None:
        self._build, self.size = build, start
        self.ranker: ContextRanker | None = build(start)
        self._built = start
        self.method, self.ranks_all, self.model_path = self.ranker.method, self.ranker.ranks_all, self.ranker.model_path

    def _at(self, size: int) -> ContextRanker:
        if self.ranker is None or size != self._built:
            self.ranker = None  # let go of the model before loading it again
            self.ranker = self._build(size)
            self._built = size
        return self.ranker

    def _scores(self, inputs: list[str], pool: list[str]) -> np.ndarray:
        scores, self.size = fit_batch(lambda size: self._at(size).scores(inputs, pool), self.size)
        return scores

    def whole(self, inputs: Sequence[str], pool: Sequence[str]) -> np.ndarray:
        return self._at(self.size).whole(inputs, pool)

    def _fits(self, text: str, pool: list[str]) -> bool:
        return bool(self.whole([text], pool)[0])

    def settings(self) -> dict:
        return {**self._at(self.size).settings(), "batch_size": AUTO, "resolved_batch_size": self.size}


def _build(cls: type[ContextRanker], model_path: str | Path, settings: Any, device: str | None) -> ContextRanker:
    """``cls``'s ranker of ``model_path`` with ``settings``; with ``batch_size="auto"``, an :class:`AutoBatchRanker`."""
    if not is_auto(settings):
        return cls(model_path, settings, device=device)
    return AutoBatchRanker(lambda size: cls(model_path, replace(settings, batch_size=size), device=device),
                           starting_size(settings))


# ------------------------------------------------------------------------------------------ by name
_CLASSES: dict[str, type[ContextRanker]] = {"mask-predict": MaskPredictRanker, "mask-average": MaskAverageRanker,
                                            "retrieval": RetrievalRanker, "causal-likelihood": CausalRanker}


def ranker_class(method: str) -> type[ContextRanker]:
    """The ranker class of ``method``."""
    return _CLASSES[canonical_method(method)]


def _settings_for(method: str, settings: AnySettings | None):
    """The part of ``settings`` that ``method`` takes (its defaults when none is given)."""
    expected = SETTINGS[method]
    if settings is None:
        return DEFAULTS.of(method)
    if isinstance(settings, RankerSettings):
        return settings.of(method)
    if isinstance(settings, expected):
        return settings
    raise MedlamaInputError(f"the {method} ranker takes {expected.__name__} (or RankerSettings), "
                            f"got {type(settings).__name__}")


def make_ranker(method: str, model_path: str | Path, settings: AnySettings | None = None, *,
                device: str | None = None) -> ContextRanker:
    """The ranker of ``method`` (``mask-predict``, ``mask-average``, ``retrieval``, ``causal-likelihood`` or
    ``auto``) for the model at ``model_path``.

    ``auto``: causal-likelihood when the model's config is a decoder-only causal LM, else mask-predict (the
    UCM paper's confidence decoding) when the model has an MLM head, else retrieval. ``settings``: the
    method's settings dataclass, or :class:`RankerSettings` (each method takes its part); ``None``: the
    defaults. Settings with ``batch_size="auto"`` give an :class:`AutoBatchRanker` (the largest size that fits).
    """
    name = canonical_method(method)
    if name != "auto":
        return _build(ranker_class(name), model_path, _settings_for(name, settings), device)
    if not isinstance(settings, RankerSettings):  # one method's settings: the other methods take their defaults
        part = next(({key: settings} for key, cls in (("mask_predict", MaskPredictSettings),
                                                      ("mask_average", MaskAverageSettings),
                                                      ("retrieval", RetrievalRankerSettings),
                                                      ("causal_likelihood", LikelihoodSettings))
                     if isinstance(settings, cls)), {})
        if settings is not None and not part:
            raise MedlamaInputError(f"ranker settings must be RankerSettings or a method's settings, "
                                    f"got {type(settings).__name__}")
        settings = replace(DEFAULTS, **part)
    if is_causal_lm(model_path):
        return _build(ranker_class("causal-likelihood"), model_path, settings.causal_likelihood, device)
    try:
        return _build(MaskPredictRanker, model_path, settings.mask_predict, device)
    except MedlamaInputError as error:
        try:
            return _build(RetrievalRanker, model_path, settings.retrieval, device)
        except MedlamaInputError as second:
            raise MedlamaInputError(f"neither a masked LM ({error}) nor an encoder ({second})") from None
