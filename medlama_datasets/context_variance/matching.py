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

A corpus index keeps the *raw* matches (:meth:`EntityMatcher.pipe_raw`: every span every form matched,
before overlaps are resolved), each with its *form code* (an entity and the lower-cased tokens of one of its
forms, :func:`form_table`), so that one index serves every knowledge base whose forms it matched:
:func:`resolve` keeps the matches of one knowledge base's forms and resolves their overlaps exactly as
:meth:`EntityMatcher.match` does.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
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


@dataclass(frozen=True)
class RawMatch:
    """One span matched by one form: tokens ``[token_start, token_end)``, characters ``[start, end)``."""

    token_start: int
    token_end: int
    start: int
    end: int
    form: int  # the code of the form (an entity and a token sequence) that matched: see form_table


@dataclass(frozen=True)
class Form:
    """A matchable form of an entity: its lower-cased tokens, and the surface forms that tokenise to them."""

    entity_id: str
    tokens: tuple[str, ...]
    surface_forms: tuple[str, ...]


def clean_forms(forms: Iterable[str]) -> list[str]:
    """The surface forms a matcher uses: stripped, empty ones dropped, each once (in order)."""
    return list(dict.fromkeys(f.strip() for f in forms if f and f.strip()))


def blank_english():
    """spaCy's blank English pipeline (the tokenizer only), its vocabulary computing only the lexeme
    attributes matching reads (``LOWER``, and ``NORM``).

    Every word a tokenizer has not seen becomes a lexeme; spaCy computes some twenty attributes for it (shape,
    prefix, suffix, ``like_num``, ...), most of the cost of tokenising new words: tens of thousands of
    surface forms, and the numbers, dates and misspellings of a clinical corpus. Matching compares ``LOWER``
    alone, so the others are left unset (a quarter faster matching; patterns in about half the time).
    """
    import spacy  # spaCy loads at first use: a build's workers hide torch from it first
    # spacy loads when this runs, not when the CLI parses its flags
    from spacy.attrs import LOWER, NORM

    nlp = spacy.blank("en")
    nlp.vocab.lex_attr_getters = {attr: getter for attr, getter in nlp.vocab.lex_attr_getters.items()
                                  if attr in (LOWER, NORM)}
    return nlp


def form_table(payload: Iterable[tuple[str, Sequence[str]]], tokenizer=None) -> list[Form]:
    """The forms of ``payload`` (``(entity id, surface forms)``) in code order.

    Two surface forms of an entity that differ only in case (or in what the tokenizer drops) are one
    form: the matcher compares lower-cased tokens, so it cannot tell which of them matched.
    """
    if tokenizer is None:
        tokenizer = blank_english().tokenizer
    forms: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for entity_id, surface in payload:
        surface = clean_forms(surface)
        for form, doc in zip(surface, tokenizer.pipe(surface)):
            if len(doc):
                forms.setdefault((entity_id, tuple(token.lower_ for token in doc)), []).append(form)
    return [Form(entity_id, tokens, tuple(surface)) for (entity_id, tokens), surface in forms.items()]


@dataclass(frozen=True)
class _Span:
    """What :func:`spacy.util.filter_spans` reads of a span (token bounds), and the match's characters."""

    start: int
    end: int
    start_char: int
    end_char: int


def resolve(text: str, matches: Iterable[RawMatch], entity_of: Sequence[str] | Mapping[int, str],
            allowed: Container[int] | None = None) -> list[Mention]:
    """The mentions :meth:`EntityMatcher.match` gives ``text``, from its raw ``matches``.

    ``entity_of`` maps a form code to its entity id; ``allowed`` (form codes) keeps the matches of one
    knowledge base's forms, whose overlaps are then resolved as that knowledge base's own matcher
    resolves them (the same :func:`spacy.util.filter_spans`, on the same token bounds).
    """
    from spacy.util import filter_spans  # as in the tokenizer: spaCy at first use

    ids_by_span: dict[tuple[int, int], set[str]] = {}
    chars: dict[tuple[int, int], tuple[int, int]] = {}
    for match in matches:
        if allowed is None or match.form in allowed:
            key = (match.token_start, match.token_end)
            ids_by_span.setdefault(key, set()).add(entity_of[match.form])
            chars[key] = (match.start, match.end)
    spans = filter_spans([_Span(start, end, *chars[start, end]) for start, end in ids_by_span])
    return [Mention(span.start_char, span.end_char, tuple(sorted(ids_by_span[span.start, span.end])),
                    text[span.start_char:span.end_char])
            for span in sorted(spans, key=lambda s: s.start)]


class EntityMatcher:
    """Find mentions of ``entities`` (their names and aliases) in texts.

    ``entities`` is any iterable of :class:`Entity`, or of ``(id, surface_forms)`` pairs;
    :meth:`from_forms` builds the same matcher from their form table (what an index build sends to its
    matching processes, so that the surface forms are tokenised once per build).

    Two properties of spaCy's tokenizer shape this class. It caches the tokenisation of at most
    ``max_cache_size`` distinct chunks (10,000 by default) and tokenises everything else the slow way,
    so the surface forms are tokenised by another tokenizer (:func:`form_table`: its cache filled with
    pattern words would make document tokenisation tens of times slower) and the document tokenizer gets
    ``cache_size`` entries. And its vocabulary keeps every string it has seen, which grows without bound
    over a large corpus (numbers, dates, misspellings); :meth:`pipe` therefore starts afresh (new pipeline, same
    patterns) once the vocabulary has grown by more than ``max_vocab`` entries beyond the patterns'
    own, which bounds memory.
    """

    def __init__(self, entities: Iterable[Entity] | Iterable[tuple[str, Sequence[str]]], *,
                 cache_size: int = 100_000, max_vocab: int = 500_000) -> None:
        forms_by_id: dict[str, list[str]] = {}
        for item in entities:
            entity_id, forms = (item.id, item.surface_forms) if isinstance(item, Entity) else item
            forms_by_id.setdefault(entity_id, []).extend(forms)
        self._init(form_table(forms_by_id.items()), cache_size, max_vocab)

    @classmethod
    def from_forms(cls, forms: Sequence[Form], *, cache_size: int = 100_000,
                   max_vocab: int = 500_000) -> "EntityMatcher":
        """The matcher of a form table (:func:`form_table`, or an index's ``forms.json``): what the
        constructor builds from the same entities, without tokenising their surface forms again (seconds
        for tens of thousands of forms, in every process that matches)."""
        matcher = cls.__new__(cls)
        matcher._init(list(forms), cache_size, max_vocab)
        return matcher

    def _init(self, forms: list[Form], cache_size: int, max_vocab: int) -> None:
        self.forms = forms
        self._form_codes = {(form.entity_id, form.tokens): code for code, form in enumerate(forms)}
        self.cache_size, self.max_vocab = cache_size, max_vocab
        self.resets = 0
        self._build()

    def _build(self) -> None:
        from spacy.matcher import PhraseMatcher  # as in the tokenizer: spaCy at first use
        # spacy loads when this runs, not when the CLI parses its flags
        from spacy.tokens import Doc

        self.nlp = blank_english()
        self.nlp.tokenizer.max_cache_size = self.cache_size
        self.matcher = PhraseMatcher(self.nlp.vocab, attr="LOWER")
        # A pattern is a form's lower-cased tokens: the matcher compares LOWER, so a Doc of those words
        # matches exactly what the tokenised surface forms would (one pattern per distinct token sequence).
        patterns: dict[str, list] = {}
        for form in self.forms:
            patterns.setdefault(form.entity_id, []).append(Doc(self.nlp.vocab, words=list(form.tokens)))
        for entity_id, docs in patterns.items():
            self.matcher.add(entity_id, docs)
        self.entity_count = len(patterns)
        self.pattern_count = len(self.forms)
        self._base_vocab = len(self.nlp.vocab)

    def match(self, text: str) -> list[Mention]:
        """Non-overlapping longest mentions in ``text``, in text order."""
        return self._mentions(self.nlp.make_doc(text or ""))

    def pipe(self, texts: Iterable[str], *, batch_size: int = 256) -> Iterator[list[Mention]]:
        """:meth:`match` over many texts, tokenised in batches."""
        return map(self._mentions, self._docs(texts, batch_size))

    def pipe_raw(self, texts: Iterable[str], *, batch_size: int = 256) -> Iterator[list[RawMatch]]:
        """Every match of every form (overlaps kept) in each of ``texts``, in text order; :func:`resolve`
        turns them into :meth:`match`'s mentions."""
        return map(self._raw, self._docs(texts, batch_size))

    def _docs(self, texts: Iterable[str], batch_size: int) -> Iterator:
        """The tokenised ``texts``, in batches; between batches (each doc matched by then), the pipeline
        starts afresh once the vocabulary outgrows ``max_vocab`` (see the class docstring)."""
        iterator = iter(texts)
        while True:
            batch = [text or "" for text in islice(iterator, batch_size)]
            if not batch:
                return
            yield from self.nlp.tokenizer.pipe(batch, batch_size=batch_size)
            if len(self.nlp.vocab) > self._base_vocab + self.max_vocab:
                self.resets += 1
                self._build()

    def _raw(self, doc) -> list[RawMatch]:
        strings = self.nlp.vocab.strings
        found = set()
        for match_id, start, end in self.matcher(doc):
            # the form's tokens are the span's (the matcher compares LOWER), which names the form matched
            form = self._form_codes[strings[match_id], tuple(token.lower_ for token in doc[start:end])]
            span = doc[start:end]
            found.add(RawMatch(start, end, span.start_char, span.end_char, form))
        return sorted(found, key=lambda m: (m.token_start, m.token_end, m.form))

    def _mentions(self, doc) -> list[Mention]:
        from spacy.util import filter_spans  # as in the tokenizer: spaCy at first use

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
