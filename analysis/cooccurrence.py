"""How often a fact's subject and object occur together in a corpus, counted through its context-variance index
(:class:`~medlama.datasets.context_variance.index.corpus_index.CorpusIndex`, what ``medlama build
context-variance`` builds and reuses).

The matching rule (recorded beside every count, :func:`matching_rule`):

* a name is found where the index's matcher found one of its *forms*: the name's tokens by the index's own
  tokenizer (spaCy's blank English one), lower-cased, equal a form's tokens; so case does not matter and a name
  never matches inside a longer word ("drip" is not in "dripping"), but it does match inside a longer name
  ("pain" in "chest pain"). Every span the index matched counts (its raw matches, overlaps kept), not only the
  longest-first mentions a knowledge base's view keeps;
* ``aliases="names"``: only the names the run gives (the subject's name, the gold answers' names);
  ``aliases="entity"``: also every other form of the index entities those names are forms of (their aliases);
* a subject span and an object span count together only when their tokens do not overlap (one span is never
  both);
* the object is any of the fact's gold answers (a sentence or segment with two of them counts once);
* *sentence*: both spans start in the same sentence; sentences end after ``.``, ``!`` or ``?`` (and any
  closing quote or bracket) followed by white space, and at every line break; an abbreviation's full stop
  ("e.g. the") ends a sentence too;
* *segment*: both spans are in the same document of the index, the unit its corpus reader yields (a line of a
  text corpus read per line, a file read per file, a note, an article);
* a fact whose subject or any gold name is no form of the index is not counted (``None``): the index cannot
  tell how often that name occurs, and zero would be a wrong number. The index stores only the documents where
  at least ``min_entities`` (its manifest's) distinct entities matched, which every document holding two
  entities' names is; a subject and object that are forms of one entity are seen only in such documents.
"""

from __future__ import annotations

import bisect
import re
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from medlama.datasets.context_variance.index.corpus_index import CorpusIndex
from medlama.datasets.context_variance.matching import RawMatch, blank_english, form_table

#: How the names of a fact are matched: its own names, or with their index entities' other forms.
ALIASES = ("names", "entity")
#: Where a sentence ends: after ``.``/``!``/``?`` and any closing quote or bracket, before white space; a line break.
SENTENCE_END = re.compile(r"(?<=[.!?])[\"'\u201d\u2019)\]]*\s+|\s*\n\s*")


def matching_rule(aliases: str) -> dict:
    """The rule by which names were matched and co-occurrence counted (the module docstring), as recorded."""
    return {
        "case": "ignored: tokens compared lower-cased",
        "tokenization": "the index's: spaCy's blank English tokenizer; a name matches where its tokens equal a "
                        "matched form's tokens (never inside a longer word; inside a longer name, yes)",
        "spans": "every span the index matched (raw matches, overlaps kept)",
        "aliases": aliases,
        "aliases_meaning": ("only the names the run gives (subject name, gold answer names)" if aliases == "names"
                            else "the run's names and every other form of the index entities they are forms of"),
        "object": "any gold answer of the fact (a sentence or segment counts once)",
        "overlap": "a subject span and an object span count together only when their tokens do not overlap",
        "sentence": "both spans start in one sentence; a sentence ends after '.', '!' or '?' (and closing quotes or "
                    "brackets) before white space, and at a line break",
        "segment": "both spans in one document of the index (the unit its corpus reader yields)",
        "uncounted": "a fact whose subject or a gold name is no form of the index is not counted (null) and not "
                     "binned",
    }


def sentence_starts(text: str) -> list[int]:
    """The character offsets where the sentences of ``text`` start (:data:`SENTENCE_END`), the first 0."""
    return [0, *(match.end() for match in SENTENCE_END.finditer(text) if match.end() < len(text))]


@dataclass(frozen=True)
class Counts:
    """A fact's co-occurrences: ``sentence`` (sentences holding both) and ``segment`` (documents holding both)."""

    sentence: int
    segment: int


class CooccurrenceCounter:
    """Counts subject-object co-occurrence in one index (the rule: module docstring), caching each fact's."""

    def __init__(self, index: CorpusIndex, *, aliases: str = "names") -> None:
        if aliases not in ALIASES:
            raise ValueError(f"aliases must be one of {ALIASES}, not {aliases!r}")
        self.index, self.aliases = index, aliases
        self._tokenizer = blank_english().tokenizer
        self._by_tokens: dict[tuple[str, ...], set[int]] = {}
        self._by_entity: dict[str, set[int]] = {}
        for code, form in enumerate(index.forms):
            self._by_tokens.setdefault(tuple(form.tokens), set()).add(code)
            self._by_entity.setdefault(form.entity_id, set()).add(code)
        self._cache: dict[tuple[frozenset[int], frozenset[int]], Counts] = {}
        # A document shared by many facts (a frequent subject's) is read and cut into sentences once.
        self._documents: OrderedDict[int, tuple[list[int], list[RawMatch]] | None] = OrderedDict()

    def forms_of(self, names: Sequence[str]) -> tuple[frozenset[int], list[str]]:
        """The form codes of ``names`` (with their entities' other forms under ``aliases="entity"``), and the
        names that are no form of the index."""
        tokens = {form.entity_id: form.tokens for form in form_table(
            [(str(i), [name]) for i, name in enumerate(names)], self._tokenizer)}
        codes: set[int] = set()
        missing = []
        for i, name in enumerate(names):
            found = self._by_tokens.get(tuple(tokens.get(str(i), ())), set())
            if not found:
                missing.append(name)
            codes |= found
        if self.aliases == "entity":
            codes = set().union(*(self._by_entity[self.index.forms[code].entity_id] for code in codes))
        return frozenset(codes), missing

    def count(self, subject: str, gold: Sequence[str]) -> Counts | str:
        """The fact's :class:`Counts`, or why it cannot be counted (a name that is no form of the index)."""
        if not gold:
            return "no gold answer"
        subject_codes, missing = self.forms_of([subject])
        object_codes, missing_gold = self.forms_of(list(gold))
        if missing or missing_gold:
            return f"not a form of the index: {', '.join(repr(name) for name in missing + missing_gold)}"
        key = (subject_codes, object_codes)
        if key not in self._cache:
            self._cache[key] = self._count(subject_codes, object_codes)
        return self._cache[key]

    def _document(self, row: int) -> tuple[list[int], list[RawMatch]] | None:
        """The sentence starts and raw matches of the stored document at ``row`` (None: not stored), cached."""
        if row in self._documents:
            self._documents.move_to_end(row)
            return self._documents[row]
        document = self.index.raw_document(row)
        value = None if document is None else (sentence_starts(document[0]), document[1])
        self._documents[row] = value
        if len(self._documents) > 4096:
            self._documents.popitem(last=False)
        return value

    def _rows(self, codes: Iterable[int]) -> np.ndarray:
        entities = sorted({self.index.forms[code].entity_id for code in codes})
        return np.unique(np.concatenate([self.index.raw_rows(entity) for entity in entities] or [np.empty(0)]))

    def _count(self, subject_codes: frozenset[int], object_codes: frozenset[int]) -> Counts:
        sentences = segments = 0
        for row in np.intersect1d(self._rows(subject_codes), self._rows(object_codes)):
            document = self._document(int(row))
            if document is None:
                continue
            starts, matches = document
            subjects = [m for m in matches if m.form in subject_codes]
            objects = [m for m in matches if m.form in object_codes]
            together: set[int] = set()
            found = False
            for s in subjects:
                for o in objects:
                    if s.token_end <= o.token_start or o.token_end <= s.token_start:
                        found = True
                        sentence = bisect.bisect_right(starts, s.start) - 1
                        if sentence == bisect.bisect_right(starts, o.start) - 1:
                            together.add(sentence)
            segments += found
            sentences += len(together)
        return Counts(sentences, segments)
