"""The steps of the index pipeline (:mod:`.pipeline`) as ``datatrove`` pipeline steps, and its work folder.

Four stages, each a ``datatrove`` executor whose tasks are resumable (a completed task is never run again):

1. **read** (``read_tasks`` + 1 tasks): :class:`CorpusReader` reads a contiguous range of the corpus files
   (ranges balanced by size) and yields one :class:`datatrove.data.Document` per record, its place (file,
   line, record number) in the metadata; :class:`ChunkWriter` writes them in chunks of ``chunk_size``
   documents (``chunks/rNNNNN-KKKKKK.parquet``) and, last, the task's summary (``chunks/rNNNNN.json``).
   Its first task, :class:`FormTableTask`, tokenises the entities' surface forms once for the whole build
   (``forms/``), beside the reading tasks rather than before them (reading task ``t`` is stage task ``t + 1``).
2. **match** (``tasks`` tasks): :class:`MatchChunks` gives every chunk its rows in the corpus stream (read
   task ranges are contiguous, so a row is the documents of earlier tasks plus the position in the task),
   matches the entities (:func:`.build.match_chunk`, the in-process engine's own code) and writes the
   stored documents (``documents/part-*.parquet``) and the chunk's (entity, row) pairs, sorted by postings
   bucket (``parts/NNNNNN.npy`` + ``.json``). Chunks whose part is written are skipped on a rerun.
3. **merge** (``min(tasks, num_buckets)`` tasks): :class:`MergePostings` gathers each bucket's pairs from
   every part (memory-mapped slices) into the CSR arrays of :mod:`.corpus_index`.
4. **finish** (1 task): :class:`FinishIndex` checks that document ids are unique across all shards (naming
   both places of a repeated id, as the readers do), writes ``manifest.json`` beside the form table and moves
   the index into place atomically (:func:`medlama.core.atomic.atomic_directory`).

The work folder (``<index>.work`` beside the index) holds ``plan.json`` (what is built: files, reader
options, entities, sizes), ``entities.json`` (the surface forms to match), ``forms/`` (their form table:
:mod:`.forms`' ``entities.json`` and ``forms.json``, read by every matching task) and each stage's outputs and
``datatrove`` logging folder (``logs/<stage>``: ``completions/`` is what makes a rerun resume).
"""

from __future__ import annotations

import bisect
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep

from medlama.core.atomic import atomic_directory, atomic_write_text
from medlama.core.errors import MedlamaInputError
from medlama.datasets.context_variance.index import build as index_build
from medlama.datasets.context_variance.index.build import peak_rss_mib
from medlama.datasets.context_variance.index.format import FORMAT, FORMAT_VERSION, write_bucket
from medlama.datasets.context_variance.index.forms import read_forms, write_forms
from medlama.datasets.context_variance.matching import form_table
from medlama.loaders.corpora import located_records
from medlama.loaders.corpus_files import DUPLICATE_HINTS, _error_at, _place

STAGES = ("read", "match", "merge", "finish")
FORM_TABLE_TASK = 0  # the read stage's task that tokenises the form table; reading task t is its task t + 1


class WorkFolder:
    """The paths of a build's work folder and what its plan says."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.chunks, self.documents = self.root / "chunks", self.root / "documents"
        self.parts, self.postings = self.root / "parts", self.root / "postings"

    def logs(self, stage: str) -> Path:
        return self.root / "logs" / stage

    def plan(self) -> dict:
        return json.loads((self.root / "plan.json").read_text(encoding="utf-8"))

    def payload(self) -> list[tuple[str, list[str]]]:
        return [(entity_id, forms) for entity_id, forms in
                json.loads((self.root / "entities.json").read_text(encoding="utf-8"))]

    @property
    def forms(self) -> Path:
        """The form table's folder (``entities.json`` and ``forms.json``, as an index stores them)."""
        return self.root / "forms"

    def form_table(self) -> tuple[list[str], list]:
        """``(entity ids in code order, forms in code order)`` of the build."""

        return (json.loads((self.forms / "entities.json").read_text(encoding="utf-8")), read_forms(self.forms))

    def read_summaries(self) -> list[dict]:
        """The read tasks' summaries, in task order (all of them: the match stage runs after the read stage)."""
        plan = self.plan()
        return [json.loads((self.chunks / f"r{rank:05d}.json").read_text(encoding="utf-8"))
                for rank in range(plan["read_tasks"])]

    def chunk_list(self) -> list[tuple[int, str, int]]:
        """``(number, chunk file, first row)`` of every chunk, in corpus order."""
        out, offset = [], 0
        for summary in self.read_summaries():
            first = offset
            for name, count in summary["chunks"]:
                out.append((len(out), name, first))
                first += count
            offset += summary["documents"]
        return out


def file_ranges(sizes: list[int], tasks: int) -> list[tuple[int, int]]:
    """``tasks`` contiguous ranges of files ``[lo, hi)``, balanced by size (some may be empty)."""
    total = sum(sizes) or 1
    bounds, cumulative, at = [0], 0, 0
    for rank in range(1, tasks):
        goal = total * rank / tasks
        while at < len(sizes) and cumulative + sizes[at] / 2 < goal:  # a file goes where most of it lies
            cumulative += sizes[at]
            at += 1
        bounds.append(at)
    bounds.append(len(sizes))
    return [(bounds[i], bounds[i + 1]) for i in range(tasks)]


class _WorkStep(PipelineStep):
    """A step of this pipeline: it reads and writes the work folder ``work`` (a path: steps are pickled)."""

    def __init__(self, work: str) -> None:
        super().__init__()
        self.work = work

    def _open(self, *outputs: str) -> tuple[WorkFolder, dict]:
        """The work folder (its ``outputs`` folders made) and its plan."""
        work = WorkFolder(self.work)
        for name in outputs:
            getattr(work, name).mkdir(parents=True, exist_ok=True)
        return work, work.plan()


class FormTableTask(_WorkStep):
    """Stage 1, its first task: the form table of the entities (:func:`.matching.form_table`), tokenised once
    for the build (seconds for tens of thousands of surface forms) rather than in every matching task.
    The other tasks pass through to the reader."""

    name, type = "medlama form table", "Tokenizer"

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        if rank != FORM_TABLE_TASK:
            return data
        work, plan = self._open()
        index_build.keep_torch_out(plan["block_torch"])
        started = time.perf_counter()
        payload = work.payload()
        entity_ids = [entity_id for entity_id, _ in payload]
        work.forms.mkdir(exist_ok=True)
        atomic_write_text(work.forms / "entities.json", json.dumps(entity_ids, ensure_ascii=False))
        write_forms(work.forms, form_table(payload), entity_ids)  # complete when the task is marked done
        summary = {"seconds": round(time.perf_counter() - started, 3),
                   "peak_rss_mib": round(index_build.peak_rss_mib(), 1)}
        atomic_write_text(work.forms / "summary.json", json.dumps(summary))
        self.stat_update("forms", value=len(entity_ids))
        return iter(())


class CorpusReader(_WorkStep):
    """Stage 1: the documents of this task's range of corpus files, with their places in ``metadata``."""

    name, type = "medlama corpus reader", "Reader"

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        if rank == FORM_TABLE_TASK:
            return
        plan = WorkFolder(self.work).plan()
        lo, hi = plan["file_ranges"][rank - 1]
        files = [tuple(pair) for pair in plan["files"]]
        for index in range(lo, hi):
            for record, line, number in located_records([files[index]], plan["format"], **plan["options"]):
                yield Document(text=record["text"], id=record["doc_id"],
                               metadata={"file": index, "line": line, "record": number})


class ChunkWriter(_WorkStep):
    """Stage 1: documents into chunk files of ``chunk_size``; the task's summary last (its completion)."""

    name, type = "medlama chunk writer", "Writer"

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        if rank == FORM_TABLE_TASK:
            return iter(())
        started = time.perf_counter()
        work, plan = self._open("chunks")
        task = rank - 1  # the reading task's number
        size = plan["chunk_size"]
        chunks: list[tuple[str, int]] = []
        batch: list[Document] = []
        characters = 0

        def flush() -> None:
            name = f"r{task:05d}-{len(chunks):06d}.parquet"
            _write_chunk(work.chunks / name, batch)
            chunks.append((name, len(batch)))
            self.stat_update("documents", value=len(batch))  # per chunk: per document costs ~7 us a record
            batch.clear()

        for document in data or ():
            batch.append(document)
            characters += len(document.text)
            if len(batch) == size:
                flush()
        if batch:
            flush()
        summary = {"documents": sum(count for _, count in chunks), "characters": characters, "chunks": chunks,
                   "peak_rss_mib": round(peak_rss_mib(), 1), "seconds": round(time.perf_counter() - started, 3)}
        atomic_write_text(work.chunks / f"r{task:05d}.json", json.dumps(summary))
        return iter(())


def _write_chunk(path: Path, documents: list[Document]) -> None:
    table = pa.table({"doc_id": [d.id for d in documents], "text": pa.array([d.text for d in documents],
                                                                             pa.large_string()),
                      "file": pa.array([d.metadata["file"] for d in documents], pa.int32()),
                      "line": pa.array([d.metadata["line"] for d in documents], pa.int64()),
                      "record": pa.array([d.metadata["record"] for d in documents], pa.int64())})
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


class MatchChunks(_WorkStep):
    """Stage 2: match the entities in this task's chunks (every ``world_size``-th, from ``rank``)."""

    name, type = "medlama entity matcher", "Indexer"

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        work, plan = self._open("documents", "parts")
        todo = [chunk for chunk in work.chunk_list()[rank::world_size]
                if not (work.parts / f"{chunk[0]:06d}.json").exists()]
        if not todo:
            return iter(())
        # Kept for this process's next task (the driver releases it when the build ran in its own process).
        index_build.init_matcher(*work.form_table(), plan["block_torch"])
        for number, name, first_row in todo:
            table = pq.read_table(work.chunks / name, columns=["doc_id", "text"])
            doc_ids, texts = table.column("doc_id").to_pylist(), table.column("text").to_pylist()
            result = index_build.match_chunk(number, first_row, doc_ids, texts, str(work.documents),
                                             plan["min_entities"], plan["batch_size"])
            _write_part(work.parts, number, result, plan["num_buckets"])
            self.stat_update("documents", value=len(texts))
        return iter(())


def _write_part(folder: Path, number: int, result: dict, num_buckets: int) -> None:
    """A chunk's (code, row) pairs sorted by bucket, and its summary (written last: the part is done)."""
    codes, rows = result.pop("codes").astype(np.int64), result.pop("rows")
    buckets = codes % num_buckets
    order = np.argsort(buckets, kind="stable")
    np.save(folder / f"{number:06d}.npy", np.stack([codes[order], rows[order]]))
    result["bounds"] = np.searchsorted(buckets[order], np.arange(num_buckets + 1)).tolist()
    atomic_write_text(folder / f"{number:06d}.json", json.dumps(result))


class MergePostings(_WorkStep):
    """Stage 3: the CSR arrays of this task's postings buckets, from every part's slice of them."""

    name, type = "medlama postings merger", "Indexer"

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        work, plan = self._open("postings")
        numbers = [number for number, _, _ in work.chunk_list()]
        bounds = {n: json.loads((work.parts / f"{n:06d}.json").read_text(encoding="utf-8"))["bounds"]
                  for n in numbers}
        for bucket in range(rank, plan["num_buckets"], world_size):
            pieces = []
            for n in numbers:
                lo, hi = bounds[n][bucket], bounds[n][bucket + 1]
                if hi > lo:
                    pieces.append(np.array(np.load(work.parts / f"{n:06d}.npy", mmap_mode="r")[:, lo:hi]))
            pairs = np.concatenate(pieces, axis=1) if pieces else np.empty((2, 0), dtype=np.int64)
            write_bucket(work.postings, bucket, pairs[0], pairs[1])
            self.stat_update("postings", value=pairs.shape[1])
        return iter(())


class FinishIndex(_WorkStep):
    """Stage 4: the duplicate-id pass, then the index moved into ``directory`` with its manifest."""

    name, type = "medlama index finisher", "Writer"

    def __init__(self, work: str, directory: str) -> None:
        super().__init__(work)
        self.directory = directory

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        work = WorkFolder(self.work)
        plan = work.plan()
        check_unique_ids(work)
        reads = work.read_summaries()
        forms = json.loads((work.forms / "summary.json").read_text(encoding="utf-8"))
        parts = [json.loads((work.parts / f"{n:06d}.json").read_text(encoding="utf-8"))
                 for n, _, _ in work.chunk_list()]
        manifest = {
            "format": FORMAT, "version": FORMAT_VERSION,
            "corpus_fingerprint": plan["corpus_fingerprint"],
            "entities_fingerprint": plan["entities_fingerprint"],
            "num_documents": sum(r["documents"] for r in reads),
            "num_stored_documents": sum(p["stored"] for p in parts),
            "num_characters": sum(r["characters"] for r in reads), "num_entities": len(plan["entity_ids"]),
            "num_postings": sum(part["bounds"][-1] for part in parts), "num_buckets": plan["num_buckets"],
            "min_entities": plan["min_entities"], "chunk_size": plan["chunk_size"], "num_proc": plan["workers"],
            "engine": {"name": "datatrove", "executor": plan["executor"], "tasks": plan["tasks"],
                       "read_tasks": plan["read_tasks"], "merge_tasks": plan["merge_tasks"],
                       "files": len(plan["files"]), "runs": plan["runs"]},
            # Wall time from the first run's start (a resumed build's includes the pause between runs).
            "build_seconds": round(time.time() - plan["started"], 3),
            # Peak resident memory (MiB) of a matching task, of a reading task and of the finishing task.
            "worker_peak_rss_mib": max((p["peak_rss_mib"] for p in parts), default=0.0),
            "read_peak_rss_mib": max((r["peak_rss_mib"] for r in reads), default=0.0),
            "form_table_peak_rss_mib": forms["peak_rss_mib"],
            # Seconds of the reading tasks (summed) and of the form table's task, whatever ran beside them.
            "read_task_seconds": round(sum(r["seconds"] for r in reads), 3),
            "form_table_seconds": forms["seconds"],
            "main_peak_rss_mib": round(peak_rss_mib(), 1),
            "parts": sorted(([p["file"], p["first_row"], p["last_row"]] for p in parts if p["stored"]),
                            key=lambda part: part[1]),
        }
        with atomic_directory(self.directory, marker="manifest.json") as staging:
            # Linked, not moved: if the swap fails, the work folder still holds everything a rerun needs.
            for folder in (work.documents, work.postings):
                (staging / folder.name).mkdir()
                for path in folder.iterdir():
                    _link(path, staging / folder.name / path.name)
            for name in ("entities.json", "forms.json"):
                _link(work.forms / name, staging / name)
            (staging / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        for folder in (work.chunks, work.parts, work.documents, work.postings):  # the index has what it needs
            shutil.rmtree(folder, ignore_errors=True)
        return iter(())


def _link(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # a file system without hard links
        shutil.copy2(source, target)


def check_unique_ids(work: WorkFolder) -> None:
    """Stop with the reader's error when a document id repeats: the first repeat in corpus order, naming
    where it was read first and where again (file, line, record)."""
    plan = work.plan()
    chunks = work.chunk_list()
    if not chunks:
        return
    tables = []
    for number, name, first_row in chunks:
        table = pq.read_table(work.chunks / name, columns=["doc_id"])
        tables.append(table.append_column("row", pa.array(np.arange(first_row, first_row + len(table)))))
    ids = pa.concat_tables(tables)
    counts = ids.group_by("doc_id").aggregate([("row", "count")])
    repeated = counts.filter(pc.greater(counts["row_count"], 1))["doc_id"]
    if not len(repeated):
        return
    rows = ids.filter(pc.is_in(ids["doc_id"], value_set=repeated)).sort_by("row")
    seen: dict[str, int] = {}
    for doc_id, row in zip(rows["doc_id"].to_pylist(), rows["row"].to_pylist()):
        if doc_id in seen:
            first, again = _place_of(work, chunks, seen[doc_id], plan), _place_of(work, chunks, row, plan)
            raise _error_at(f"document id {doc_id!r} was already read at {_place(*first)}; document ids must be "
                            f"unique within a corpus ({DUPLICATE_HINTS[plan['format']]})", *again)
        seen[doc_id] = row


def _place_of(work: WorkFolder, chunks: list, row: int, plan: dict) -> tuple[str, int | None, int | None]:
    """(file, line, record) of the document at ``row``."""
    at = bisect.bisect_right([first for _, _, first in chunks], row) - 1
    _, name, first = chunks[at]
    record = pq.read_table(work.chunks / name, columns=["file", "line", "record"]).slice(row - first, 1).to_pylist()[0]
    return plan["files"][record["file"]][0], record["line"], record["record"]


def stage_pipeline(stage: str, work: str, directory: str) -> list[PipelineStep]:
    """The ``datatrove`` pipeline of one stage."""
    if stage == "read":
        return [FormTableTask(work), CorpusReader(work), ChunkWriter(work)]
    if stage == "match":
        return [MatchChunks(work)]
    if stage == "merge":
        return [MergePostings(work)]
    if stage == "finish":
        return [FinishIndex(work, directory)]
    raise ValueError(f"unknown stage {stage!r}")


def completed_tasks(work: WorkFolder, stage: str) -> list[int]:
    """The tasks of ``stage`` that ``datatrove`` has marked completed (what a rerun skips)."""
    folder = work.logs(stage) / "completions"
    return sorted(int(p.name) for p in folder.iterdir()) if folder.is_dir() else []

