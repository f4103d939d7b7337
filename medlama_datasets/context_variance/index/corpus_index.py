"""An entity -> documents index, built once per corpus and reused from disk by every knowledge base.

The index folder is its on-disk format, described here (its constants and buckets: :mod:`.format`) and read by :class:`CorpusIndex` (open, check,
retrieve). Two writers make it: :mod:`.pipeline` builds it from corpus files as a ``datatrove``
pipeline (read sharded by file, match, merge postings; local, Slurm or Ray; resumable), and
:mod:`.build` from any iterable of records in this process and its workers
(:meth:`CorpusIndex.build`). Both need memory bounded by their chunk size, not by the corpus.

One index per corpus, whatever the knowledge base: it stores the *raw* matches of a set of surface forms
(the union of the knowledge bases' forms; every span every form matched, overlaps kept), each with its form
code (:func:`.matching.form_table`). A knowledge base opens it as a *view*
(``CorpusIndex(folder, entities=kb)``): the matches of its own entities' forms are kept, their overlaps
resolved longest-first (:func:`.matching.resolve`, what its own matcher does) and its ``min_entities``
applied, so the documents and mentions it sees are exactly those an index of its forms alone would hold.
A knowledge base whose forms the index matched reuses it; one with a form it lacks has the index rebuilt
over the union of the index's forms and its own (:meth:`CorpusIndex.open_or_build`), so the index of a
corpus only grows, and every knowledge base then reuses it.

The postings are per union entity, of its raw matches: a superset of a view's rows, which a lookup narrows
by resolving the candidates' matches (:meth:`CorpusIndex.rows_with`).

Only documents whose raw matches name at least ``min_entities`` distinct entities are stored (a triple needs
its subject and its target in the same document; with the default 2 nothing retrievable is lost, and a
view's count, never more than the raw one, loses nothing either).

Layout of an index folder (written atomically: an interrupted build leaves the previous one)::

    manifest.json             fingerprints, counts, parts and their row ranges
    entities.json             entity ids in code order
    forms.json                the forms (:mod:`.forms`): [entity code, lower-cased tokens, surface forms]
    documents/part-*.parquet  row, doc_id, text, match_token_start, match_token_end, match_start, match_end,
                              match_form (the raw matches, sorted by token bounds)
    postings/bucket-NNNN.{codes,offsets,rows}.npy
                              CSR: the rows of codes[i] are rows[offsets[i]:offsets[i+1]] (int64)

The postings are memory-mapped when read (``np.load(mmap_mode="r")``): a lookup touches the pages of
one entity's rows, so retrieval needs no postings in memory and does not slow down as the corpus grows.
Version 1 kept whole ``.npz`` buckets in an LRU cache (it thrashed on large corpora), version 2 the resolved
mentions of one knowledge base's forms (an index per knowledge base); both are refused.

A document's *row* is its 0-based position in the corpus stream; ``doc_id`` is the corpus's own id.
"""

from __future__ import annotations

import bisect
import json
import random
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from medlama.core.errors import MedlamaInputError
from medlama.datasets.context_variance.index.build import write_index
from medlama.datasets.context_variance.index.forms import allowed_forms, read_forms
from medlama.datasets.context_variance.index.format import (FORMAT, FORMAT_VERSION, MATCH_COLUMNS, current_manifest,
                                                             entity_payload, read_bucket)
from medlama.datasets.context_variance.knowledge import Entity, KnowledgeBase, Triple
from medlama.datasets.context_variance.matching import Mention, RawMatch, resolve


@dataclass(frozen=True)
class IndexedDocument:
    """A stored document with its entity mentions (resolved for the view that read it)."""

    row: int
    doc_id: str
    text: str
    mentions: tuple[Mention, ...]


class CorpusIndex:
    """Read side of an index folder; :meth:`build` / :meth:`open_or_build` make one.

    ``entities`` (a knowledge base, or its entities) makes this a view of the index for them: the mentions
    of their forms only, resolved as their own matcher resolves them, in documents that mention at least
    ``min_entities`` of them (default: the index's own). Without ``entities``, every form the index matched.
    """

    def __init__(self, directory: str | Path, *, entities: Iterable[Entity] | KnowledgeBase | None = None,
                 min_entities: int | None = None, cache_parts: int = 64) -> None:
        self.directory = Path(directory)
        manifest_path = self.directory / "manifest.json"
        try:
            self.manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise MedlamaInputError("not a context-variance index (no manifest.json)", file=self.directory) from None
        except json.JSONDecodeError as error:
            raise MedlamaInputError(f"unreadable manifest: {error}", file=manifest_path) from None
        if self.manifest.get("format") != FORMAT or self.manifest.get("version") != FORMAT_VERSION:
            raise MedlamaInputError(
                f"index format {self.manifest.get('format')!r} v{self.manifest.get('version')} is not "
                f"{FORMAT!r} v{FORMAT_VERSION}; rebuild it", file=manifest_path)
        self.entity_ids: list[str] = json.loads((self.directory / "entities.json").read_text(encoding="utf-8"))
        self._codes = {entity_id: code for code, entity_id in enumerate(self.entity_ids)}
        self.forms = read_forms(self.directory)
        self._entity_of_form = [form.entity_id for form in self.forms]
        self.min_entities = self.manifest["min_entities"] if min_entities is None else min_entities
        if self.min_entities < self.manifest["min_entities"]:
            raise MedlamaInputError(f"the index stores documents with at least {self.manifest['min_entities']} "
                                    f"entities; a view cannot ask for {self.min_entities}", field="min_entities")
        self._allowed: set[int] | None = None
        if entities is not None:
            self._allowed = allowed_forms(self.forms, entity_payload(entities), self.directory)
        self._parts = self.manifest["parts"]  # [file, first_row, last_row], ascending rows
        self._part_starts = [part[1] for part in self._parts]
        self._part_meta: dict[int, tuple[object, list[int]]] = {}
        self._group_cache: OrderedDict[tuple[int, int, bool], tuple[np.ndarray, object]] = OrderedDict()
        self._named_cache: OrderedDict[int, frozenset[str] | None] = OrderedDict()
        self._buckets: dict[int, dict[str, np.ndarray]] = {}  # memory maps: opening costs no reading
        self._cache_parts, self._cache_groups = cache_parts, 64

    # ----------------------------------------------------------------------------------- building
    @classmethod
    def build(cls, corpus: Iterable[Mapping], entities: Iterable[Entity] | KnowledgeBase, directory: str | Path, *,
              fingerprint: str | None = None, num_proc: int = 1, chunk_size: int = 1000, min_entities: int = 2,
              num_buckets: int = 64, spill_pairs: int = 4_000_000, batch_size: int = 256,
              start_method: str = "spawn") -> CorpusIndex:
        """Match ``entities`` in every document of ``corpus`` and write the index to ``directory``.

        ``fingerprint`` identifies the corpus (:func:`medlama.loaders.corpora.corpus_fingerprint`); it is
        stored so that :meth:`open_or_build` can tell whether the index may be reused.

        With ``num_proc > 1`` the workers are started with ``start_method`` (default ``"spawn"``: safe in
        a parent that runs threads, e.g. pyarrow's or torch's; a script that calls this must then guard
        its entry point with ``if __name__ == "__main__":``). ``num_proc=1`` matches in this process. How the
        build streams the corpus (chunks, workers, postings spilled every ``spill_pairs``): :mod:`.build`.
        """
        write_index(corpus, entities, directory, fingerprint=fingerprint, num_proc=num_proc, chunk_size=chunk_size,
                    min_entities=min_entities, num_buckets=num_buckets, spill_pairs=spill_pairs,
                    batch_size=batch_size, start_method=start_method)
        return cls(directory)

    @classmethod
    def open(cls, directory: str | Path) -> CorpusIndex:
        return cls(directory)

    @staticmethod
    def is_current(directory: str | Path, entities: Iterable[Entity] | KnowledgeBase, fingerprint: str | None,
                   *, min_entities: int = 2) -> bool:
        """Whether ``directory`` holds an index of this corpus fingerprint that matched every surface form of
        ``entities`` (and kept every document with ``min_entities`` of them)."""
        manifest = current_manifest(directory, fingerprint)
        if manifest is None or manifest.get("min_entities", min_entities + 1) > min_entities:
            return False
        try:
            allowed_forms(read_forms(Path(directory)), entity_payload(entities), Path(directory))
        except MedlamaInputError:
            return False
        return True

    @classmethod
    def open_or_build(cls, corpus: Iterable[Mapping], entities: Iterable[Entity] | KnowledgeBase,
                      directory: str | Path, *, fingerprint: str | None, **options) -> CorpusIndex:
        """The view for ``entities`` of the corpus's index in ``directory``: reused when it matched their
        forms, else (re)built over the union of its forms and theirs (:func:`union_request`).

        Without a ``fingerprint`` the corpus cannot be recognised, and the index is always rebuilt.
        """
        entity_list = list(entities.entities.values() if isinstance(entities, KnowledgeBase) else entities)
        min_entities = options.get("min_entities", 2)
        if not cls.is_current(directory, entity_list, fingerprint, min_entities=min_entities):
            payload, options["min_entities"] = union_request(directory, fingerprint, entity_list, min_entities)
            cls.build(corpus, payload, directory, fingerprint=fingerprint, **options)
        return cls(directory, entities=entity_list, min_entities=min_entities)

    # ------------------------------------------------------------------------------------ reading
    @property
    def num_documents(self) -> int:
        """Documents read from the corpus (stored or not)."""
        return self.manifest["num_documents"]

    @property
    def num_stored_documents(self) -> int:
        return self.manifest["num_stored_documents"]

    def rows_with(self, entity_id: str) -> np.ndarray:
        """Sorted rows of the documents of this view that mention ``entity_id`` (empty when unknown)."""
        return self._keep(self._raw_rows(entity_id), (entity_id,))

    def _raw_rows(self, entity_id: str) -> np.ndarray:
        """The rows where a form of ``entity_id`` matched (whatever overlaps it lost): a superset."""
        code = self._codes.get(entity_id)
        if code is None:
            return np.empty(0, dtype=np.int64)
        bucket = self._bucket(code % self.manifest["num_buckets"])
        at = np.searchsorted(bucket["codes"], code)
        if at >= len(bucket["codes"]) or bucket["codes"][at] != code:
            return np.empty(0, dtype=np.int64)
        return bucket["rows"][bucket["offsets"][at]:bucket["offsets"][at + 1]]

    def _keep(self, rows: np.ndarray, entity_ids: Sequence[str]) -> np.ndarray:
        """The ``rows`` whose document, as this view resolves it, mentions every one of ``entity_ids``."""
        kept = []
        for row in rows:
            named = self._named(int(row))
            if named is not None and named.issuperset(entity_ids):
                kept.append(int(row))
        return np.asarray(kept, dtype=np.int64)

    def _named(self, row: int) -> frozenset[str] | None:
        """The entities this view's mentions of the document at ``row`` name; None when this view does not hold
        it. Read from the matches alone (not the text: a lookup resolves every candidate), cached."""
        if row in self._named_cache:
            self._named_cache.move_to_end(row)
            return self._named_cache[row]
        record = self._record(row, MATCH_COLUMNS)
        named = None
        if record is not None:
            mentions = resolve("", _matches(record), self._entity_of_form, self._allowed)
            named = frozenset(entity_id for mention in mentions for entity_id in mention.entity_ids)
            named = named if len(named) >= self.min_entities else None
        self._named_cache[row] = named
        if len(self._named_cache) > 65536:
            self._named_cache.popitem(last=False)
        return named

    def raw_rows(self, entity_id: str) -> np.ndarray:
        """Sorted rows of the stored documents where any form of ``entity_id`` matched, whatever this view keeps
        (every form's raw matches, overlaps kept); empty when the index has no such entity."""
        return np.asarray(self._raw_rows(entity_id), dtype=np.int64)

    def raw_document(self, row: int) -> tuple[str, list[RawMatch]] | None:
        """The text of the stored document at ``row`` and every raw match in it (each naming its form code, a
        position in :attr:`forms`), whatever this view keeps; None when the index does not store it."""
        record = self._record(int(row), ("text", *MATCH_COLUMNS))
        return None if record is None else (record["text"], list(_matches(record)))

    def document_frequency(self, entity_id: str) -> int:
        return len(self.rows_with(entity_id))

    def documents_with(self, *entity_ids: str) -> np.ndarray:
        """Sorted rows of the documents that mention every one of ``entity_ids``."""
        if not entity_ids:
            raise ValueError("documents_with needs at least one entity id")
        lists = sorted((self._raw_rows(entity_id) for entity_id in entity_ids), key=len)
        rows = lists[0]
        for other in lists[1:]:
            if not len(rows):
                break
            rows = np.intersect1d(rows, other, assume_unique=True)
        return self._keep(rows, entity_ids)

    def document(self, row: int) -> IndexedDocument:
        """The stored document at ``row``; ``KeyError`` when this view does not hold it."""
        document = self._document(row)
        if document is None:
            raise KeyError(row)
        return document

    def _document(self, row: int) -> IndexedDocument | None:
        """The document at ``row`` with this view's mentions; None when this view does not hold it (not
        stored, or naming fewer than ``min_entities`` of this view's entities)."""
        if self._named(row) is None:
            return None
        record = self._record(row, None)
        mentions = resolve(record["text"], _matches(record), self._entity_of_form, self._allowed)
        return IndexedDocument(int(row), record["doc_id"], record["text"], tuple(mentions))

    def _record(self, row: int, columns: Sequence[str] | None) -> dict | None:
        """The stored record at ``row`` (its ``columns``, or all), or None when it is not stored."""
        at = bisect.bisect_right(self._part_starts, row) - 1
        if at < 0 or row > self._parts[at][2]:
            return None
        rows, table = self._row_group(at, row, columns)
        i = int(np.searchsorted(rows, row))
        if i >= len(rows) or rows[i] != row:
            return None
        return {name: table.column(name)[i].as_py() for name in table.column_names}

    def documents(self, rows: Iterable[int]) -> Iterator[IndexedDocument]:
        """The stored documents at ``rows``, in the given order."""
        for row in rows:
            yield self.document(int(row))

    def retrieve(self, triple: Triple, *, max_docs: int | None = None, seed: int | str | None = None
                 ) -> list[IndexedDocument]:
        """Documents that mention both the triple's subject and its target (aliases included).

        At most ``max_docs``: the first ones in corpus order, or with a ``seed`` a seeded random sample
        (kept in corpus order).
        """
        rows = self.documents_with(triple.subject.id, triple.target.id)
        if max_docs is not None and len(rows) > max_docs:
            if seed is None:
                rows = rows[:max_docs]
            else:
                rng = random.Random(f"{seed}:{triple.key}")
                rows = np.sort(np.array(rng.sample(list(rows), max_docs), dtype=np.int64))
        return list(self.documents(rows))

    def retrieve_all(self, triples: Iterable[Triple], *, max_docs: int | None = None, seed: int | str | None = None
                     ) -> Iterator[tuple[Triple, list[IndexedDocument]]]:
        """:meth:`retrieve` for each triple in turn (documents are read lazily, one triple at a time)."""
        for triple in triples:
            yield triple, self.retrieve(triple, max_docs=max_docs, seed=seed)

    def _row_group(self, at: int, row: int, columns: Sequence[str] | None = None):
        """Rows and table (``columns`` and ``row``, or all) of the row group of part ``at`` that may hold
        ``row`` (small reads, cached)."""
        meta = self._part_meta.get(at)
        if meta is None:
            # pyarrow loads when an index is read, not with the package (the CLI's parser imports it)
            import pyarrow.parquet as pq

            handle = pq.ParquetFile(self.directory / "documents" / self._parts[at][0])
            firsts = [handle.metadata.row_group(i).column(0).statistics.min
                      for i in range(handle.metadata.num_row_groups)]
            meta = self._part_meta[at] = (handle, firsts)
            if len(self._part_meta) > self._cache_parts:
                self._part_meta.pop(next(iter(self._part_meta)))
        handle, firsts = meta
        group = max(0, bisect.bisect_right(firsts, row) - 1)
        key = (at, group, columns is None)
        cached = self._group_cache.get(key)
        if cached is not None:
            self._group_cache.move_to_end(key)
            return cached
        table = handle.read_row_group(group, columns=None if columns is None else ["row", *columns])
        value = (table.column("row").to_numpy(), table)
        self._group_cache[key] = value
        if len(self._group_cache) > self._cache_groups:
            self._group_cache.popitem(last=False)
        return value

    def _bucket(self, number: int) -> dict[str, np.ndarray]:
        value = self._buckets.get(number)
        if value is None:
            value = self._buckets[number] = read_bucket(self.directory / "postings", number)
        return value

    def __repr__(self) -> str:
        return (f"CorpusIndex({str(self.directory)!r}, {self.num_documents} documents, "
                f"{self.num_stored_documents} stored, {len(self.entity_ids)} entities)")


def union_request(directory: str | Path, fingerprint: str | None, entities: Iterable[Entity] | KnowledgeBase,
                  min_entities: int) -> tuple[list[tuple[str, tuple[str, ...]]], int]:
    """What to build when the index in ``directory`` lacks some of ``entities``' forms: the union of its forms
    and theirs, and the smaller ``min_entities``, when it is an index of the same corpus (every knowledge
    base it served keeps its view); theirs alone otherwise."""
    payload = list(entity_payload(entities))
    manifest = current_manifest(directory, fingerprint)
    if manifest is None:
        return entity_payload(payload), min_entities
    try:
        forms = read_forms(Path(directory))
        ids = json.loads((Path(directory) / "entities.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, MedlamaInputError):
        return entity_payload(payload), min_entities
    payload += [(entity_id, ()) for entity_id in ids] + [(form.entity_id, form.surface_forms) for form in forms]
    return entity_payload(payload), min(min_entities, manifest.get("min_entities", min_entities))


def _matches(record: dict) -> Iterator[RawMatch]:
    """The raw matches of a stored record."""
    return map(RawMatch, *(record[name] for name in MATCH_COLUMNS))
