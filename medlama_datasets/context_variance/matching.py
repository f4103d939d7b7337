"""Entity mentions in text: spaCy's PhraseMatcher on a blank English tokenizer, no model download.

Every surface form (name and aliases) of every entity becomes a phrase pattern matched on the
``LOWER`` attribute, so matching is case-insensitive and respects token boundaries ("drip" never
matches inside "dripping"). Overlapping matches are resolved with :func:`spacy.util.filter_spans`:
the longest span wins, and of equally long overlapping spans the earliest one; the result is a list
of non-overlapping mentions in text order.

A surface form can belong to more than one entity (an alias shared by two concepts). Such a span is
one mention carrying every entity id that has this form (``entity_ids``, sorted); the consumer
decides which one it stands for (:mod:`.segmentation` picks the target, then a correct object).

Only the tokenizer runs (``nlp.tokenizer.pipe``, batched); nothing else of spaCy is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice

from medlama.datasets.context_variance.knowledge import Entity


@dataclass(frozen=True, order=True)
class Mention:
    """A matched entity mention: character offsets ``[start, end)`` into the text."""

    start: int
    end: int
    entity_ids: tuple[str, ...]
    text: str

    @property
    def entity_id(self) -> str:
        """The mention's entity when unambiguous (the first id otherwise)."""
        return self.entity_ids[0]


class EntityMatcher:
    """Find mentions of ``entities`` (their names and aliases) in texts.

    ``entities`` is any iterable of :class:`Entity`, or of ``(id, surface_forms)`` pairs (the
    compact form that is sent to worker processes).

    Two properties of spaCy's tokenizer shape this class. It caches the tokenisation of at most
    ``max_cache_size`` distinct chunks (10,000 by default) and tokenises everything else the slow way,
    so patterns are tokenised by a second tokenizer (its cache filled with pattern words would make
    document tokenisation tens of times slower) and the document tokenizer gets ``cache_size``
    entries. And its vocabulary keeps every string it has seen, which grows without bound over a large
    corpus (numbers, dates, misspellings); :meth:`pipe` therefore starts afresh (new pipeline, same
    patterns) once the vocabulary has grown by more than ``max_vocab`` entries beyond the patterns'
    own, which bounds memory.
    """

    def __init__(self, entities: Iterable[Entity] | Iterable[tuple[str, Sequence[str]]], *,
                 cache_size: int = 100_000, max_vocab: int = 500_000) -> None:
        forms_by_id: dict[str, list[str]] = {}
        for item in entities:
            entity_id, forms = (item.id, item.surface_forms) if isinstance(item, Entity) else item
            forms_by_id.setdefault(entity_id, []).extend(forms)
        self._forms = {entity_id: list(dict.fromkeys(f.strip() for f in forms if f and f.strip()))
                       for entity_id, forms in forms_by_id.items()}
        self.cache_size, self.max_vocab = cache_size, max_vocab
        self.resets = 0
        self._build()

    def _build(self) -> None:
        import spacy
        from spacy.matcher import PhraseMatcher

        self.nlp = spacy.blank("en")
        self.nlp.tokenizer.max_cache_size = self.cache_size
        patterns_nlp = spacy.blank("en", vocab=self.nlp.vocab)  # same vocabulary, its own cache
        self.matcher = PhraseMatcher(self.nlp.vocab, attr="LOWER")
        self.entity_count = self.pattern_count = 0
        for entity_id, forms in self._forms.items():
            patterns = [doc for doc in patterns_nlp.tokenizer.pipe(forms) if len(doc)]
            if patterns:
                self.matcher.add(entity_id, patterns)
                self.entity_count += 1
                self.pattern_count += len(patterns)
        self._base_vocab = len(self.nlp.vocab)

    def match(self, text: str) -> list[Mention]:
        """Non-overlapping longest mentions in ``text``, in text order."""
        return self._mentions(self.nlp.make_doc(text or ""))

    def pipe(self, texts: Iterable[str], *, batch_size: int = 256) -> Iterator[list[Mention]]:
        """:meth:`match` over many texts, tokenised in batches."""
        iterator = iter(texts)
        while True:
            batch = [text or "" for text in islice(iterator, batch_size)]
            if not batch:
                return
            for doc in self.nlp.tokenizer.pipe(batch, batch_size=batch_size):
                yield self._mentions(doc)
            if len(self.nlp.vocab) > self._base_vocab + self.max_vocab:
                self.resets += 1
                self._build()

    def _mentions(self, doc) -> list[Mention]:
        from spacy.util import filter_spans

        matches = self.matcher(doc)
        if not matches:
            return []
        strings = self.nlp.vocab.strings
        ids_by_span: dict[tuple[int, int], set[str]] = {}
        for match_id, start, end in matches:
            ids_by_span.setdefault((start, end), set()).add(strings[match_id])
        spans = filter_spans([doc[start:end] for start, end in ids_by_span])
        return [Mention(span.start_char, span.end_char, tuple(sorted(ids_by_span[span.start, span.end])),
                        span.text)
                for span in sorted(spans, key=lambda s: s.start)]
