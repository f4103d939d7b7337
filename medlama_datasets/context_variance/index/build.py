"""The in-process writer of an entity -> documents index (:mod:`.corpus_index`, whose :class:`~.corpus_index.CorpusIndex`
reads it), for a corpus given as any iterable of records (the Python API); corpus *files* are indexed by the
``datatrove`` pipeline of :mod:`.pipeline`, which reuses this module's chunk matching (:func:`match_chunk`).

Building streams the corpus once: the main process reads documents (any iterable of
``{"doc_id", "text"}`` records, e.g. a streaming :class:`datasets.IterableDataset` from
:mod:`medlama.loaders.corpora`) and cuts them into chunks; ``num_proc`` worker processes match
entities in the chunks (:class:`~.matching.EntityMatcher`) and each writes its chunk's documents with
their mentions to one Parquet part. Postings (entity, document row) come back to the main process
as integer arrays, are hashed into buckets and spilled to disk whenever ``spill_pairs`` are buffered;
at the end each bucket is sorted into CSR arrays. At most ``2 * num_proc`` chunks are in flight, so
peak memory depends on ``chunk_size``, ``num_proc`` and ``spill_pairs``, not on the corpus size.

Documents are stored with their raw matches (every form's, overlaps kept), and only those whose matches
name at least ``min_entities`` distinct entities. The layout written is the one :mod:`.corpus_index` describes and reads (``FORMAT``, ``FORMAT_VERSION``).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path

import numpy as np

from medlama.core.atomic import atomic_directory
from medlama.datasets.context_variance.index.format import (FORMAT, FORMAT_VERSION, MATCH_COLUMNS, ROW_GROUP_SIZE,
                                                             entity_payload, payload_fingerprint, write_bucket)
from medlama.datasets.context_variance.index.forms import write_forms
from medlama.datasets.context_variance.knowledge import Entity, KnowledgeBase
from medlama.datasets.context_variance.matching import EntityMatcher, Form, form_table
from medlama.core.errors import MedlamaInputError


def write_index(corpus: Iterable[Mapping], entities: Iterable[Entity] | KnowledgeBase, directory: str | Path, *,
                fingerprint: str | None = None, num_proc: int = 1, chunk_size: int = 1000, min_entities: int = 2,
                num_buckets: int = 64, spill_pairs: int = 4_000_000, batch_size: int = 256,
                start_method: str = "spawn") -> None:
    """Match ``entities`` in every document of ``corpus`` and write the index folder ``directory``
    (atomically); :meth:`CorpusIndex.build <medlama.datasets.context_variance.index.corpus_index.CorpusIndex.build>`
    says what each option does."""
    if num_proc < 1 or chunk_size < 1 or num_buckets < 1 or min_entities < 1:
        raise MedlamaInputError("num_proc, chunk_size, num_buckets and min_entities must be >= 1")
    payload = entity_payload(entities)
    entity_ids = [entity_id for entity_id, _ in payload]
    forms = form_table(payload)  # tokenised once, here; the workers build their matchers from it
    started = time.perf_counter()
    with atomic_directory(directory, marker="manifest.json") as staging:
        (staging / "documents").mkdir()
        (staging / "postings").mkdir()
        spill_dir = staging / "spill"
        spill_dir.mkdir()
        postings = _PostingsWriter(spill_dir, num_buckets, spill_pairs)
        parts: list[list] = []
        totals = {"documents": 0, "stored": 0, "characters": 0, "worker_peak_rss_mib": 0.0}

        def collect(result: dict) -> None:
            if result["stored"]:
                parts.append([result["file"], result["first_row"], result["last_row"]])
            totals["stored"] += result["stored"]
            totals["characters"] += result["characters"]
            totals["worker_peak_rss_mib"] = max(totals["worker_peak_rss_mib"], result["peak_rss_mib"])
            postings.add(result["codes"], result["rows"])

        chunks = _chunks(corpus, chunk_size)
        options = (str(staging / "documents"), min_entities, batch_size)
        if num_proc == 1:
            init_matcher(entity_ids, forms)
            try:
                for number, first_row, doc_ids, texts in chunks:
                    totals["documents"] += len(texts)
                    collect(match_chunk(number, first_row, doc_ids, texts, *options))
            finally:
                release_matcher()
        else:
            context = multiprocessing.get_context(start_method)
            pool = ProcessPoolExecutor(num_proc, mp_context=context, initializer=init_matcher,
                                       initargs=(entity_ids, forms, True))
            try:
                pending: set[Future] = set()
                for number, first_row, doc_ids, texts in chunks:
                    totals["documents"] += len(texts)
                    pending.add(pool.submit(match_chunk, number, first_row, doc_ids, texts, *options))
                    while len(pending) >= 2 * num_proc:  # bounded: at most 2 chunks per worker
                        done, pending = wait(pending, return_when=FIRST_COMPLETED)
                        for future in done:
                            collect(future.result())
                for future in pending:
                    collect(future.result())
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
            pool.shutdown(wait=True)
        num_postings = postings.finish(staging / "postings")
        shutil.rmtree(spill_dir)
        parts.sort(key=lambda part: part[1])
        (staging / "entities.json").write_text(json.dumps(entity_ids, ensure_ascii=False), encoding="utf-8")
        write_forms(staging, forms, entity_ids)
        manifest = {
            "format": FORMAT, "version": FORMAT_VERSION,
            "corpus_fingerprint": fingerprint,
            "entities_fingerprint": payload_fingerprint(payload),
            "num_documents": totals["documents"], "num_stored_documents": totals["stored"],
            "num_characters": totals["characters"], "num_entities": len(entity_ids),
            "num_postings": num_postings, "num_buckets": num_buckets, "min_entities": min_entities,
            "chunk_size": chunk_size, "num_proc": num_proc,
            "build_seconds": round(time.perf_counter() - started, 3),
            # Peak resident memory (MiB) of the matching processes (this one when num_proc == 1)
            # and of this process.
            "worker_peak_rss_mib": round(totals["worker_peak_rss_mib"], 1),
            "main_peak_rss_mib": round(peak_rss_mib(), 1),
            "parts": parts,
        }
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")


def _chunks(corpus: Iterable[Mapping], size: int) -> Iterator[tuple[int, int, list[str], list[str]]]:
    """``(chunk number, first row, doc ids, texts)`` of ``size`` documents at a time."""
    datasets = sys.modules.get("datasets")
    if datasets is not None and isinstance(corpus, datasets.IterableDataset):
        # Batched iteration: per-example iteration of an IterableDataset costs ~0.3 ms a record, which
        # would make the reading process, not the matching workers, the bottleneck.
        if corpus.column_names is not None and "text" not in corpus.column_names:
            raise MedlamaInputError(f"the corpus has no 'text' column (columns: {corpus.column_names})",
                                    field="text")
        first_row = 0
        for number, batch in enumerate(corpus.iter(batch_size=size)):
            texts = batch.get("text")
            if texts is None:
                raise MedlamaInputError("a corpus record needs a 'text'", row=first_row, field="text")
            ids = batch.get("doc_id") or [None] * len(texts)
            yield (number, first_row,
                   [str(first_row + i) if doc_id is None else str(doc_id) for i, doc_id in enumerate(ids)],
                   ["" if text is None else str(text) for text in texts])
            first_row += len(texts)
        return
    doc_ids: list[str] = []
    texts: list[str] = []
    number = first_row = 0
    for row, record in enumerate(corpus):
        try:
            text = record["text"]
        except (KeyError, TypeError):
            raise MedlamaInputError("a corpus record needs a 'text'", row=row, field="text") from None
        doc_id = record.get("doc_id") if isinstance(record, Mapping) else None
        doc_ids.append(str(row) if doc_id is None else str(doc_id))
        texts.append("" if text is None else str(text))
        if len(texts) == size:
            yield number, first_row, doc_ids, texts
            number, first_row, doc_ids, texts = number + 1, row + 1, [], []
    if texts:
        yield number, first_row, doc_ids, texts


def peak_rss_mib() -> float:
    """Peak resident memory of this process in MiB (``VmHWM``; ``ru_maxrss`` where /proc is missing).

    ``VmHWM`` starts afresh when a spawned worker executes Python, whereas ``ru_maxrss`` would keep
    the parent's size from the moment of the fork.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource  # Unix only (no /proc: macOS): read only there

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ----------------------------------------------------------------------------- worker processes
_MATCHER: EntityMatcher | None = None
_FORM_CODES: list[int] = []  # the entity code of each form code
_KEY: tuple = ()  # what the matcher was made of


def init_matcher(entity_ids: Sequence[str], forms: Sequence[Form], block_torch: bool = False) -> None:
    """Make this process's matcher of the form table ``forms`` of the entities ``entity_ids`` (in code
    order); kept when it already matches the same forms (a process running several index tasks builds
    its spaCy pipeline once)."""
    global _MATCHER, _FORM_CODES, _KEY
    key = (tuple(entity_ids), tuple(forms))
    if _MATCHER is not None and key == _KEY:
        return
    keep_torch_out(block_torch)
    _MATCHER = EntityMatcher.from_forms(forms)
    codes = {entity_id: code for code, entity_id in enumerate(entity_ids)}
    _FORM_CODES = [codes[form.entity_id] for form in _MATCHER.forms]
    _KEY = key


_CALLER_PID: int | None = None  # the process that runs a build (:func:`mark_caller`): its torch is left alone


def mark_caller() -> None:
    """Say that this process runs an index build: a stage it runs itself (one task, or one worker) never
    hides torch from it."""
    global _CALLER_PID
    _CALLER_PID = os.getpid()


def keep_torch_out(block_torch: bool) -> None:
    """In an index build's own process (``block_torch``, and not the caller's), mark torch absent before spaCy
    is imported."""
    if block_torch and os.getpid() != _CALLER_PID and "torch" not in sys.modules:
        # Such a process only tokenises. spaCy's thinc imports torch when it can (seconds and ~300 MB per
        # process); marking it absent makes thinc run without it. Never done in the caller's process.
        sys.modules["torch"] = None  # type: ignore[assignment]


def release_matcher() -> None:
    global _MATCHER, _FORM_CODES, _KEY
    _MATCHER, _FORM_CODES, _KEY = None, [], ()


def match_chunk(number: int, first_row: int, doc_ids: list[str], texts: list[str], out_dir: str,
                   min_entities: int, batch_size: int) -> dict:
    """Match one chunk, write its stored documents to a Parquet part, return its postings."""
    # pyarrow loads when an index is written, not with the package (the CLI's parser imports it)
    import pyarrow as pa
    import pyarrow.parquet as pq

    assert _MATCHER is not None, "worker not initialised"
    columns: dict[str, list] = {name: [] for name in ("row", "doc_id", "text", *MATCH_COLUMNS)}
    codes: list[int] = []
    rows: list[int] = []
    characters = 0
    for offset, matches in enumerate(_MATCHER.pipe_raw(texts, batch_size=batch_size)):
        characters += len(texts[offset])
        # Raw matches (every form's): a knowledge base's view names at most these entities, so the
        # documents stored and the postings hold every one a view can find.
        entity_codes = {_FORM_CODES[match.form] for match in matches}
        if len(entity_codes) < min_entities:
            continue
        row = first_row + offset
        codes.extend(entity_codes)
        rows.extend([row] * len(entity_codes))
        columns["row"].append(row)
        columns["doc_id"].append(doc_ids[offset])
        columns["text"].append(texts[offset])
        for name, field in zip(MATCH_COLUMNS, ("token_start", "token_end", "start", "end", "form")):
            columns[name].append([getattr(match, field) for match in matches])
    file = f"part-{number:06d}.parquet"
    if columns["row"]:
        schema = pa.schema([("row", pa.int64()), ("doc_id", pa.string()), ("text", pa.large_string()),
                            *((name, pa.list_(pa.int32())) for name in MATCH_COLUMNS)])
        pq.write_table(pa.table(columns, schema=schema), Path(out_dir) / file, compression="zstd",
                       row_group_size=ROW_GROUP_SIZE)
    return {"file": file, "first_row": columns["row"][0] if columns["row"] else first_row,
            "last_row": columns["row"][-1] if columns["row"] else first_row,
            "stored": len(columns["row"]), "characters": characters, "peak_rss_mib": peak_rss_mib(),
            "codes": np.asarray(codes, dtype=np.int32), "rows": np.asarray(rows, dtype=np.int64)}


class _PostingsWriter:
    """Hash (code, row) pairs into buckets, spilling to disk; :meth:`finish` writes sorted CSR buckets."""

    def __init__(self, spill_dir: Path, num_buckets: int, spill_pairs: int) -> None:
        self.spill_dir, self.num_buckets, self.spill_pairs = spill_dir, num_buckets, spill_pairs
        self.codes: list[np.ndarray] = []
        self.rows: list[np.ndarray] = []
        self.buffered = 0
        self.spills = 0

    def add(self, codes: np.ndarray, rows: np.ndarray) -> None:
        if len(codes):
            self.codes.append(codes)
            self.rows.append(rows)
            self.buffered += len(codes)
        if self.buffered >= self.spill_pairs:
            self._spill()

    def _spill(self) -> None:
        if not self.buffered:
            return
        codes = np.concatenate(self.codes)
        rows = np.concatenate(self.rows)
        buckets = codes % self.num_buckets
        order = np.argsort(buckets, kind="stable")
        codes, rows, buckets = codes[order], rows[order], buckets[order]
        bounds = np.searchsorted(buckets, np.arange(self.num_buckets + 1))
        for bucket in range(self.num_buckets):
            lo, hi = bounds[bucket], bounds[bucket + 1]
            if hi > lo:
                np.save(self.spill_dir / f"b{bucket:04d}-{self.spills:06d}.npy",
                        np.stack([codes[lo:hi].astype(np.int64), rows[lo:hi]]))
        self.spills += 1
        self.codes, self.rows, self.buffered = [], [], 0

    def finish(self, out_dir: Path) -> int:
        self._spill()
        total = 0
        for bucket in range(self.num_buckets):
            pieces = [np.load(path) for path in sorted(self.spill_dir.glob(f"b{bucket:04d}-*.npy"))]
            pairs = np.concatenate(pieces, axis=1) if pieces else np.empty((2, 0), dtype=np.int64)
            total += write_bucket(out_dir, bucket, pairs[0], pairs[1])
        return total
