"""The per-triple work of a context-variance build: retrieve documents, build contexts, make rows.

For each triple, at most ``max_docs`` documents mentioning both its subject and its target are retrieved
from a source's :class:`~.index.corpus_index.CorpusIndex` (a seeded random sample when there are more), and every
requested context type of each document is built with its negative-target counterpart
(:func:`~.contexts.build_contexts`): one row per (triple, document, context type, negative flag), its
segments stored once with their layout (:mod:`.rows` rebuilds the inputs).
Triples are processed in chunks, in ``num_proc`` spawned processes when more than one, and the chunks
come back in order, so the rows never depend on the scheduling.
"""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path

from medlama.datasets.context_variance.kb_adapters import pool_id, triple_id
from medlama.datasets.context_variance.knowledge import Triple
from medlama.datasets.context_variance.contexts import REAL, build_contexts
from medlama.datasets.context_variance.index.corpus_index import CorpusIndex
from medlama.datasets.context_variance.settings import BuildSettings

#: Rows of a chunk of triples, and per triple (its position, documents that gave rows).
Chunk = tuple[list[dict], list[tuple[int, int]]]


def sequence_rows(triple: Triple, source: str, doc_id: str, text: str, mentions, settings: BuildSettings,
                  names: dict[str, str]) -> list[dict]:
    """The rows of one retrieved document: one per context type and negative flag.

    Empty when the subject's only mentions are also mentions of the target (the same words name both,
    as MedLAMA's easy rows do): such a document holds no context *about* the subject.
    """
    tid = triple_id(triple)
    subject, target = triple.subject.id, triple.target.id
    if not any(subject in m.entity_ids and target not in m.entity_ids for m in mentions):
        return []  # the subject is only mentioned as the target's own name (a shared surface form)
    try:
        contexts = build_contexts(triple, text, mentions, context_types=settings.context_types,
                                  negative=settings.negative, seed=f"{settings.seed}:{tid}:{doc_id}",
                                  random_mode=settings.random_mode, separator=settings.separator,
                                  knowledge_end=settings.knowledge_end, max_segments=settings.max_segments)
    except ValueError:  # the target's mentions all stand for other entities here
        return []
    correct = [entity.id for entity in triple.correct_objects]
    rows = []
    for (context_type, negative), sequence in contexts.items():
        inputs = sequence.inputs  # the steps' texts are not stored: rows.row_inputs rebuilds them when read
        rows.append({
            "id": f"{source}/{tid}/{doc_id}/{context_type}" + ("/negative" if negative else ""),
            "triple_id": tid, "relation": triple.relation, "source": source, "doc_id": doc_id,
            "context_type": context_type, "negative": negative,
            "subject_id": triple.subject.id, "subject_name": triple.subject.name,
            "target_id": triple.target.id, "target_name": triple.target.name,
            "center_id": sequence.center_entity, "center_name": names.get(sequence.center_entity,
                                                                          sequence.center_entity),
            "correct_ids": correct, "correct_names": [entity.name for entity in triple.correct_objects],
            "pool_id": pool_id(triple), "prompt": sequence.prompt,
            "added_entities": [step.added_entity for step in inputs],
            "added_texts": [step.added_text for step in inputs],
            "added_is_correct": [step.added_is_correct for step in inputs],
            "added_is_new": [step.added_is_new for step in inputs],
            "segments": [segment.text if context_type == REAL else segment.knowledge_text
                         for segment in sequence.segments],
            "layout": list(sequence.layout),
            "knowledge_separator": settings.separator, "knowledge_end": settings.knowledge_end,
        })
    return rows


# Worker state (one process builds the rows of a range of triples against one index).
_W: dict = {}


def _init_worker(triples: Sequence[Triple], names: dict[str, str], settings: BuildSettings,
                 entities: Sequence[tuple[str, Sequence[str]]], block_torch: bool = False) -> None:
    if block_torch and "torch" not in sys.modules:
        sys.modules["torch"] = None  # type: ignore[assignment]  # never needed here; keeps workers small
    _W.update(triples=triples, names=names, settings=settings, entities=entities, indexes={})


def _rows_for(source: str, index_dir: str, start: int, stop: int) -> Chunk:
    """Rows of triples ``start..stop`` and, per triple, (its position, documents retrieved)."""
    index = _W["indexes"].get(index_dir)
    if index is None:
        index = _W["indexes"][index_dir] = open_index(index_dir, _W["entities"])
    settings: BuildSettings = _W["settings"]
    rows: list[dict] = []
    found: list[tuple[int, int]] = []
    for position in range(start, stop):
        triple = _W["triples"][position]
        documents = index.retrieve(triple, max_docs=settings.max_docs, seed=settings.seed)
        produced = 0
        for document in documents:
            new = sequence_rows(triple, source, document.doc_id, document.text, document.mentions, settings,
                                _W["names"])
            produced += bool(new)
            rows.extend(new)
        found.append((position, produced))
    return rows, found


def open_index(directory: str | Path, entities: Sequence[tuple[str, Sequence[str]]]):
    """The view for ``entities`` (the knowledge base's ``(id, surface forms)``) of the corpus index in
    ``directory``; its postings are memory-mapped, so triples in knowledge-base order (not bucket order)
    cost page reads, never whole buckets."""
    return CorpusIndex(directory, entities=entities)


def run_chunks(source: str, index_dir: str, entities: Sequence[tuple[str, Sequence[str]]],
               chunks: Sequence[tuple[int, int]], triples: Sequence[Triple], names: dict[str, str],
               settings: BuildSettings, num_proc: int) -> Iterator[Chunk]:
    """(rows, found) of each chunk ``(start, stop)`` of ``triples``, in order; in ``num_proc`` processes when
    more than one. ``index_dir``: the source's index, opened once per process as the view for ``entities``
    (:func:`~.index.format.entity_payload` of the knowledge base)."""
    if num_proc == 1 or len(chunks) == 1:
        _init_worker(triples, names, settings, entities)
        try:
            for start, stop in chunks:
                yield _rows_for(source, index_dir, start, stop)
        finally:
            _W.clear()
        return
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(num_proc, mp_context=context, initializer=_init_worker,
                               initargs=(triples, names, settings, entities, True))
    try:
        pending: dict[int, Future] = {}
        done: dict[int, tuple] = {}
        next_out = 0
        for number, (start, stop) in enumerate(chunks):
            pending[number] = pool.submit(_rows_for, source, index_dir, start, stop)
            while len(pending) >= 2 * num_proc:
                finished, _ = wait(pending.values(), return_when=FIRST_COMPLETED)
                for key in [k for k, f in pending.items() if f in finished]:
                    done[key] = pending.pop(key).result()
                while next_out in done:  # in order, so the files do not depend on scheduling
                    yield done.pop(next_out)
                    next_out += 1
        for key in sorted(pending):
            done[key] = pending.pop(key).result()
        while next_out in done:
            yield done.pop(next_out)
            next_out += 1
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
