"""Held-out cloze self-retrieval: the rewiring game (paper section 4) scored on sentences the model never saw.

Each held-out sentence gives a cloze pair by the rewiring's own masking rule (:mod:`medlama.trainers.cloze`);
every query then ranks all distinct answers of the set, encoded as the retrieval probe encodes (the
``reference`` preset: ``[CLS]`` of the last layer, exact L2 search), and acc@k, computed by the acc@k metric
module, counts the query's own span among the first k (an answer with the same text counts too).

Why it exists: MedLAMA acc@k mixes two things, whether the representation space retrieves by cloze
(what rewiring changes) and whether the model holds the probed fact (what it cannot change: the paper's
knowledge comes "from the original pre-trained parameters"). This check isolates the first. A rewired model
far above its base here but not on MedLAMA learnt the game and holds little of the probed knowledge, or its
base was a retrieval encoder already; one no better here was not rewired (too few steps, too small a
learning rate, a corpus of the wrong kind).
"""

from __future__ import annotations

from pathlib import Path

from medlama.core.defaults import MASK_PLACEHOLDER
from medlama.core.errors import MedlamaInputError
from medlama.probers.query_set import QuerySet
from medlama.trainers.cloze import build_cloze_dataset
from medlama.runs.workflow import probe
from medlama.probers.retrieval import PRESETS, RetrievalProber, RetrievalSettings
from medlama.core.settings import settings_from

#: Pairs scored by default: enough for a standard error under 1 point at acc@10 around 20%.
DEFAULT_PAIRS = 2000
#: The rewiring's max length: spans and queries are cut where training cut them.
MAX_LENGTH = 48


def heldout_queries(corpus: str | Path, *, pairs: int = DEFAULT_PAIRS, mask_ratio: float = 0.5, seed: int = 7):
    """A :class:`~medlama.runs.queries.QuerySet` of ``pairs`` cloze pairs sampled from ``corpus``.

    Lines too short to mask and pairs whose span is blank (a double space in the line) are left out: they
    have no answer to retrieve.
    """

    if not isinstance(pairs, int) or isinstance(pairs, bool) or pairs < 1:
        raise MedlamaInputError(f"held-out pairs must be a positive integer, got {pairs!r}")
    build = build_cloze_dataset(corpus, mask_token=MASK_PLACEHOLDER, mask_ratio=mask_ratio, seed=seed,
                                max_sentences=pairs, skip_short_lines=True)
    kept = [(query, answer) for query, answer in zip(build.dataset["query"], build.dataset["answer"])
            if answer.strip() and query.count(MASK_PLACEHOLDER) == 1]
    if len(kept) < 2:
        raise MedlamaInputError("the held-out corpus gives fewer than 2 cloze pairs", file=corpus)
    return QuerySet(ids=[f"heldout-{i}" for i in range(len(kept))], relations=["cloze"] * len(kept),
                    texts=[query for query, _ in kept], gold=[[answer] for _, answer in kept],
                    candidates=sorted({answer for _, answer in kept}), name=f"held-out cloze ({Path(corpus).name})")


def cloze_self_retrieval(model: str | Path, queries, *, label: str | None = None, top_k: int = 10,
                         device: str | None = None):
    """Probe ``model`` on held-out cloze ``queries`` (:func:`heldout_queries`); a ``ProbeResult``."""

    settings = settings_from(RetrievalSettings, base=PRESETS["reference"], query_max_length=MAX_LENGTH,
                             name_max_length=MAX_LENGTH)
    return probe(RetrievalProber(model, settings, device=device), queries, label=label, top_k=top_k)
