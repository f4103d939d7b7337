"""Index a corpus's files with ``datatrove``: locally with no setup, or on a Slurm or Ray cluster, unchanged.

:func:`build_file_index` plans the build (the corpus files in reading order, the reader options, the
entities' surface forms, the sizes) in a work folder beside the index (``<index>.work``) and runs the four
stages of :mod:`.steps` (read sharded by file, beside one task that tokenises the surface forms once;
match; merge postings; finish) as ``datatrove`` executors chained by ``depends``:

* ``local`` (the default): a :class:`datatrove.executor.LocalPipelineExecutor` per stage with ``workers``
  processes (``--num-proc``), in this process when ``workers`` is 1;
* ``slurm``: :class:`datatrove.executor.SlurmPipelineExecutor` s submitted as dependent job arrays (the
  command returns once they are queued; the same command, rerun after they finish, finds the index and
  builds the sets); the index root must be on a file system the nodes share;
* ``ray``: :class:`datatrove.executor.RayPipelineExecutor` s on the running Ray cluster (needs ``ray``).

Resume: ``datatrove`` marks each finished task in ``logs/<stage>/completions``; a rerun with the same plan
(same files, options, entities, tasks) skips them, and the match stage also skips chunks already matched.
A different plan starts afresh. The index appears only when the finish stage moves it into place
(atomically); the work folder is removed after a local or Ray build.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from datatrove.executor import LocalPipelineExecutor, SlurmPipelineExecutor, base
from loguru import logger

from medlama.core.atomic import atomic_write_text
from medlama.core.errors import MedlamaInputError
from medlama.core.locks import lock_directory
from medlama.datasets.context_variance.index.build import mark_caller, release_matcher
from medlama.datasets.context_variance.index.corpus_index import CorpusIndex, union_request
from medlama.datasets.context_variance.index.format import payload_fingerprint
from medlama.datasets.context_variance.settings import IndexEngine
from medlama.loaders.corpora import corpus_files
from medlama.datasets.context_variance.index.steps import (STAGES, WorkFolder, completed_tasks, file_ranges,
                                                            stage_pipeline)

def work_folder(directory: str | Path) -> WorkFolder:
    directory = Path(directory)
    return WorkFolder(directory.parent / f"{directory.name}.work")


def plan_build(files: Sequence[tuple[str, str]], format: str, options: dict, payload, directory: str | Path, *,
               fingerprint: str | None, engine: IndexEngine, min_entities: int = 2, batch_size: int = 256) -> WorkFolder:
    """Write the plan and the entities into the work folder; keep what an earlier run of the same plan did."""
    work = work_folder(directory)
    read_tasks = max(1, min(engine.task_count, len(files)))
    plan = {
        "directory": str(Path(directory).resolve()), "files": [list(pair) for pair in files],
        "format": format, "options": {key: list(value) if isinstance(value, tuple) else value
                                      for key, value in sorted(options.items())},
        "corpus_fingerprint": fingerprint, "entities_fingerprint": payload_fingerprint(payload),
        "entity_ids": [entity_id for entity_id, _ in payload],
        "executor": engine.executor, "tasks": engine.task_count, "workers": engine.workers,
        "read_tasks": read_tasks, "merge_tasks": min(engine.task_count, engine.num_buckets),
        "file_ranges": file_ranges([os.stat(file).st_size for file, _ in files], read_tasks),
        "chunk_size": engine.chunk_size, "num_buckets": engine.num_buckets, "min_entities": min_entities,
        "batch_size": batch_size,
        "layout": 2,  # of the work folder (the read stage's first task makes the form table): no other is resumed
        # A matching process only tokenises: keep torch out of it, but never out of the caller's process.
        "block_torch": not (engine.executor == "local" and engine.workers == 1),
    }
    plan = json.loads(json.dumps(plan))  # as it reads back (tuples become lists)
    try:
        previous = work.plan()
    except (OSError, ValueError):
        previous = None
    # A finished plan whose index has gone since (a Slurm build's work folder stays) starts afresh too.
    same = previous is not None and fingerprint is not None and all(
        previous.get(key) == value for key, value in plan.items()) and not completed_tasks(work, "finish")
    if same:
        plan.update(started=previous["started"], runs=previous["runs"] + 1)
    else:
        shutil.rmtree(work.root, ignore_errors=True)
        plan.update(started=time.time(), runs=1)
        work.root.mkdir(parents=True)
        atomic_write_text(work.root / "entities.json", json.dumps(payload, ensure_ascii=False))
    atomic_write_text(work.root / "plan.json", json.dumps(plan, indent=1))
    return work


def make_executors(work: WorkFolder, engine: IndexEngine) -> list:
    """The four stages' ``datatrove`` executors, each depending on the one before; run the last to run all."""
    plan = work.plan()
    # the read stage's first task tokenises the form table (beside the reading tasks, not before them)
    tasks = {"read": plan["read_tasks"] + 1, "match": plan["tasks"], "merge": plan["merge_tasks"], "finish": 1}
    executors: list = []
    for stage in STAGES:
        common = {"pipeline": stage_pipeline(stage, str(work.root), plan["directory"]), "tasks": tasks[stage],
                  "logging_dir": str(work.logs(stage)), "depends": executors[-1] if executors else None}
        if engine.executor == "local":
            executors.append(QuietLocalExecutor(workers=min(engine.workers, tasks[stage]), **common))
        elif engine.executor == "slurm":
            executors.append(SlurmPipelineExecutor(
                time=engine.slurm_time, partition=engine.slurm_partition, cpus_per_task=engine.slurm_cpus_per_task,
                mem_per_cpu_gb=engine.slurm_mem_per_cpu_gb, job_name=f"medlama-index-{stage}",
                # the jobs run this Python environment (datatrove sources the path it is given)
                venv_path=str(Path(sys.prefix) / "bin" / "activate") if sys.prefix != sys.base_prefix else None,
                **common))
        else:
            from datatrove.executor.ray import RayPipelineExecutor  # ray is an optional extra, needed here only

            executors.append(RayPipelineExecutor(workers=min(engine.workers, tasks[stage]), **common))
    return executors


def build_file_index(files: Sequence[tuple[str, str]], format: str, options: dict, payload, directory: str | Path,
                     *, fingerprint: str | None, engine: IndexEngine, min_entities: int = 2,
                     batch_size: int = 256) -> bool:
    """Build the index of ``files`` (read as ``format`` with ``options``) in ``directory``; ``payload``: the
    entities (:func:`~.format.entity_payload`). True when the index is there on return (false: Slurm jobs
    were submitted and will write it)."""
    engine.check_available()
    mark_caller()
    with lock_directory(work_folder(directory).root):  # a second build of the same index is refused
        work = plan_build(files, format, options, payload, directory, fingerprint=fingerprint, engine=engine,
                          min_entities=min_entities, batch_size=batch_size)
        executors = make_executors(work, engine)
        try:
            if engine.executor == "slurm":
                submit(executors, work)
            else:
                executors[-1].run()
        finally:
            release_matcher()  # a local build with one worker matched in this process
    if engine.executor == "slurm":
        print(f"medlama: index jobs submitted to Slurm (logs in {work.root / 'logs'}); when they are done, run "
              "the same command again to build the sets from the index", file=sys.stderr)
        return False
    shutil.rmtree(work.root, ignore_errors=True)
    return True


def submit(executors: Sequence[SlurmPipelineExecutor], work: WorkFolder) -> None:
    """Submit the stages' Slurm jobs. ``sbatch`` refusing them (no controller, a partition that does not exist)
    is one error quoting ``sbatch``'s own words; the work folder of launch scripts goes with it when no job
    was queued (the jobs of stages queued before a refusal still write there: their ids are named)."""
    # datatrove runs sbatch with its stdout captured and its stderr ours: catch that, to quote it. Its own
    # launch messages go through loguru to this process's stderr as it is now.
    logger.remove()
    logger.add(sys.stderr, level="INFO")
    with tempfile.TemporaryFile() as said:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(said.fileno(), 2)
        try:
            executors[-1].run()
            failure = None
        except (subprocess.CalledProcessError, OSError) as error:
            failure = error
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            logger.remove()
            logger.add(sys.stderr)  # loguru's default, as datatrove leaves it
        said.seek(0)
        text = said.read().decode("utf-8", errors="replace")
    if failure is None:
        sys.stderr.write(text)
        return
    quoted = [line.strip() for line in text.splitlines() if "sbatch" in line.lower() and line.strip()]
    reason = quoted[-1] if quoted else (str(failure) if isinstance(failure, OSError) else
                                        f"sbatch exited with status {failure.returncode}")
    queued = [str(e.job_id) for e in executors if e.job_id not in (None, -1)]
    if queued:
        raise MedlamaInputError(f"Slurm refused the index jobs: {reason}. Jobs {', '.join(queued)} were queued "
                                f"before it and write into {work.root}: cancel them (scancel) or let them finish, "
                                "then run the same command again")
    shutil.rmtree(work.root, ignore_errors=True)
    raise MedlamaInputError(f"Slurm refused the index jobs: {reason}; nothing was queued or left behind")


class IndexSubmitted(Exception):
    """The index jobs were submitted to a cluster (Slurm) and will write the index later."""


def open_or_build_spec_index(spec, entities, directory: str | Path, *, fingerprint: str | None,
                             engine: IndexEngine, min_entities: int = 2):
    """The view for ``entities`` of corpus ``spec``'s (a :class:`~.settings.CorpusSpec`) index in ``directory``:
    reused when it was built from the same files and matched every form of ``entities``, else built by the
    pipeline over the union of its forms and theirs (:func:`~.corpus_index.union_request`; resuming an interrupted
    build of the same plan). :class:`IndexSubmitted` when Slurm jobs will build it."""
    if not CorpusIndex.is_current(directory, entities, fingerprint, min_entities=min_entities):
        payload, build_min = union_request(directory, fingerprint, entities, min_entities)
        options = spec.reader_options()
        files = corpus_files(list(spec.paths), spec.format, **options)
        if not build_file_index(files, spec.format, options, payload, directory, fingerprint=fingerprint,
                                engine=engine, min_entities=build_min):
            raise IndexSubmitted(f"the index of source {spec.name!r} is being built by Slurm jobs")
    return CorpusIndex(directory, entities=entities, min_entities=min_entities)


# ----------------------------------------------------------------------------------- local executor
class QuietLocalExecutor(LocalPipelineExecutor):
    """``datatrove``'s local executor with its task logs in the logging folder only, not on the console
    (the build reports its own progress and errors; the logs stay in ``logs/<stage>/logs``)."""

    _running = 0  # executors running in this process: a stage runs the stage it depends on first

    def run(self):
        if not QuietLocalExecutor._running:
            logger.remove()  # datatrove logs through loguru's default console handler; medlama does not use loguru
        QuietLocalExecutor._running += 1
        try:
            return super().run()
        finally:
            QuietLocalExecutor._running -= 1
            if not QuietLocalExecutor._running:
                logger.remove()
                logger.add(sys.stderr)  # loguru's default, as datatrove leaves it

    def _run_for_rank(self, rank: int, local_rank: int = 0, node_rank: int = -1):
        original = base.add_task_logger, base.close_task_logger
        base.add_task_logger, base.close_task_logger = _file_logger, _close_file_logger
        try:
            return super()._run_for_rank(rank, local_rank, node_rank)
        finally:
            base.add_task_logger, base.close_task_logger = original


def _file_logger(logging_dir, rank: int, local_rank: int = 0, node_rank: int = -1):
    logger.remove()
    logfile = logging_dir.open(f"logs/task_{rank:05d}.log", "w")
    handler = logger.add(logfile, level="DEBUG", colorize=False)
    return logfile, handler


def _close_file_logger(opened) -> None:
    logfile, handler = opened
    logger.remove(handler)
    logfile.close()
