"""The one interface every prober implements (:class:`Prober`: ranks answers for cloze queries), what a
result records of the prober that ranked it (:class:`ProberNote`), and the checks every prober's settings
go through."""

from __future__ import annotations

from abc import ABC
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from medlama.core.errors import MedlamaInputError
from medlama.core.settings import check, choices_of, fields_of, type_hints
from medlama.probers.query_set import QuerySet
from medlama.probers.ranking import Ranking

S = TypeVar("S")


class Prober(ABC):
    """Ranks answers for cloze queries. Implementations differ only in how they rank.

    A prober implements :meth:`rank_scored` (its predictions with their scores, the text fed to the model,
    the gold answer's rank and score: a :class:`~medlama.probers.ranking.Ranking`) or, if it has no scores
    to give, :meth:`rank` alone; each is derived from the other. Methods that score every candidate of the
    pool build their ranking with :meth:`Ranking.from_pool <medlama.probers.ranking.Ranking.from_pool>`
    (the gold ranked among all candidates; ``all_scores`` keeps every candidate's score for
    ``scores.parquet``), methods that generate answers with :meth:`Ranking.from_names
    <medlama.probers.ranking.Ranking.from_names>` (the gold ranked among the answers returned only).
    :attr:`score_meaning` says what the scores are; it is recorded in the run's settings (``score``).

    Every member a method may lack is declared here with its default, so callers read it and never probe for
    it: :attr:`ranks_choices`, :meth:`rank_layers_scored` (a layer sweep), :attr:`settings_`, :attr:`loaded`,
    :attr:`device`.
    """

    #: Short method name, as ``medlama probe --method`` spells it.
    method: str = "prober"
    #: Whether a query's ranking is the same whatever other queries are ranked in the same call (no batching
    #: of queries together): a probe may then be cut into blocks of queries, resumed and split across processes
    #: block by block (:mod:`medlama.runs.resume`); otherwise each candidate pool's queries are one shard.
    independent_queries: bool = False
    #: Whether :meth:`rank_scored` scores every candidate of the pool (so ``all_scores`` can be given).
    scores_pool: bool = False
    #: Whether :meth:`rank_scored` ranks a multiple-choice query set whole (each query against its own choices)
    #: in one call; otherwise :func:`medlama.probers.pools.rank_choices` ranks it one query at a time, that
    #: query's choices as its pool.
    ranks_choices: bool = False
    #: The method's typed settings (its dataclass in :data:`medlama.probers.registry.METHODS`); ``None`` for a
    #: prober that has none.
    settings_: Any = None
    #: How the prober's model was loaded (:func:`~medlama.core.models.loading_with`'s record), set by the probe
    #: workflow that made it; ``None`` for a prober made by hand.
    loaded: dict | None = None
    #: The device the prober computes on (a ``torch.device`` or a name); ``None``: not known. Methods whose
    #: model sits in an encoder or language model give that one's.
    device: Any = None

    @property
    def score_meaning(self) -> str | None:
        """What the ranking's scores are (``"cosine similarity"``, ``"sum of token log-probabilities"``);
        ``None`` when the method gives no scores (its order is the decoder's beam order)."""
        return None

    def rank(self, queries: QuerySet, top_k: int = 10) -> list[list[str]]:
        """Ranked predictions (best first, at most ``top_k``) for each query, in query order."""
        if type(self).rank_scored is Prober.rank_scored:
            raise NotImplementedError(f"{type(self).__name__} implements neither rank nor rank_scored")
        return self.rank_scored(queries, top_k).names

    def rank_scored(self, queries: QuerySet, top_k: int = 10, *, all_scores: bool = False) -> Ranking:
        """The :class:`~medlama.probers.ranking.Ranking` of ``queries`` (at most ``top_k`` names each).
        ``all_scores``: also every candidate's score (only where :attr:`scores_pool`). By default: the names
        of :meth:`rank`, without scores, the gold ranked among them."""
        if type(self).rank is Prober.rank:
            raise NotImplementedError(f"{type(self).__name__} implements neither rank nor rank_scored")
        check_all_scores(self, all_scores)
        return Ranking.from_names(queries.gold, self.rank(queries, top_k))

    def rank_layers_scored(self, queries: QuerySet, top_k: int = 10, *, all_scores: bool = False
                           ) -> dict[int, Ranking]:
        """``{layer: Ranking}``: the scored ranking at every layer the settings sweep (a layer sweep, asked for by
        settings ``layers``), as :meth:`rank_scored` ranks one. By default the method has no layer sweep: an
        error naming it."""
        raise MedlamaInputError(f"--method {self.method} has no layer sweep: it ranks with the model's output "
                                "only (layers is retrieval's)")

    def settings(self) -> dict:
        """Everything that determines the predictions, for the JSON output and model cards."""
        return {"method": self.method}

    def _need_candidates(self, queries: QuerySet) -> list[str]:
        """The candidate names of ``queries``, refused when there are none (for methods that rank candidates)."""
        if not queries.candidates:
            raise MedlamaInputError(f"the candidate set of {queries.name!r} is empty; --method {self.method} "
                                    "ranks candidates")
        return list(queries.candidates)


@dataclass(frozen=True)
class ProberNote:
    """What a result records of the prober that ranked it: its :meth:`~Prober.settings`, the device it
    computed on, what its scores mean (:attr:`~Prober.score_meaning`) and how its model was loaded
    (``loaded``: :func:`~medlama.core.models.loading_with`'s record, for a prober the probe workflow made).
    Kept beside a probe's resume shards, so a resumed run records it without loading the model again."""

    settings: dict
    device: str | None = None
    score: str | None = None
    loaded: dict = field(default_factory=dict)

    @classmethod
    def of(cls, prober: "Prober") -> "ProberNote":
        return cls(prober.settings(), device_of(prober), prober.score_meaning, dict(prober.loaded or {}))

    def record(self) -> dict:
        """As JSON (a resume shard's note)."""
        return asdict(self)


def check_all_scores(prober: "Prober | type[Prober]", all_scores: bool) -> None:
    """Refuse every candidate's score from a method that does not score the pool (it generates answers)."""
    if all_scores and not prober.scores_pool:
        raise MedlamaInputError(f"--method {prober.method} generates its answers and does not score every "
                                "candidate: it cannot log all scores (log_all_scores); methods that can: "
                                "retrieval, mask-average, masked-likelihood, causal-likelihood")


def check_settings(settings: S) -> S:
    """Check a prober's settings dataclass (:func:`medlama.core.settings.check`), wording a value outside its
    choices or bounds as the probers always have: "unknown initial fill 'left'; choose from [...]", "beam
    size must be >= 1, got 0" (the noun is the field's ``noun`` metadata, else its name)."""
    hints = type_hints(settings)
    for field in fields_of(settings):
        value = getattr(settings, field.name)
        noun = field.metadata.get("noun") or field.name.replace("_", " ")
        allowed = choices_of(field, hints.get(field.name))
        if allowed is not None and isinstance(value, str) and value not in allowed:
            raise MedlamaInputError(f"unknown {noun} {value!r}; choose from {list(allowed)}")
        low = field.metadata.get("min")
        if low is not None and isinstance(value, (int, float)) and not isinstance(value, bool) and value < low:
            raise MedlamaInputError(f"{noun} must be >= {low}, got {value}")
    return check(settings)


def device_of(prober: Prober) -> str | None:
    """The device a prober computes on (:attr:`Prober.device`), as a string; ``None`` when not known."""
    return None if prober.device is None else str(prober.device)
