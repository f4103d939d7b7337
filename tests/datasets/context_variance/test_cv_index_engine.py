"""The datatrove index pipeline: a corpus of many files gives the index (and the sets) of one file and of the
in-process engine; a build that failed part-way resumes its missing tasks only; a repeated id is named at both
places; the Slurm and Ray executors are made with the same pipeline, and build the local executor's sets file for
file (Slurm through a stand-in sbatch that runs the job scripts here, Ray on an instance the test starts on this
machine); indexes of older formats are refused."""

from __future__ import annotations

import csv
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from medlama.core.errors import MedlamaInputError
from medlama.datasets.context_variance.index import build as index_build
from medlama.datasets.context_variance.index.corpus_index import CorpusIndex
from medlama.datasets.context_variance.index.format import entity_payload
from medlama.datasets.context_variance.index.pipeline import (
    build_file_index,
    make_executors,
    open_or_build_spec_index,
    plan_build,
    work_folder,
)
from medlama.datasets.context_variance.index.steps import (ChunkWriter, CorpusReader, FormTableTask, MatchChunks,
                                                            completed_tasks)
from medlama.datasets.context_variance.kb_adapters import knowledge_base_from_medlama
from medlama.datasets.context_variance.settings import CorpusSpec, IndexEngine
from medlama.loaders.corpora import corpus_files
from medlama.loaders.mimic_notes import MIMIC_COLUMNS

from cv_inputs import NOTES

ENGINE = IndexEngine(tasks=3, chunk_size=4, num_buckets=5)


def write_notes(path: Path, first: int, count: int) -> Path:
    """``count`` MIMIC-III notes with ROW_IDs from ``first`` (the test notes in turn, numbered)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(MIMIC_COLUMNS)
        for row_id in range(first, first + count):
            writer.writerow([row_id, 1, 2, "2100-01-01", "", "", "Discharge summary", "", "", "",
                             f"Note {row_id}. {NOTES[row_id % len(NOTES)]}"])
    return path


@pytest.fixture(scope="module")
def kb(medlama_folder):
    return knowledge_base_from_medlama(medlama_folder, "full")


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> tuple[Path, Path]:
    """The same 30 notes as one file and as a folder of four files (sizes 7, 9, 1, 13)."""
    root = tmp_path_factory.mktemp("notes")
    single = write_notes(root / "single" / "NOTEEVENTS.csv", 1, 30)
    first = 1
    for number, count in enumerate((7, 9, 1, 13)):
        write_notes(root / "many" / f"notes-{number}.csv", first, count)
        first += count
    return single, root / "many"


def assert_same_index(a: CorpusIndex, b: CorpusIndex) -> None:
    for key in ("num_documents", "num_stored_documents", "num_characters", "num_postings", "corpus_fingerprint",
                "entities_fingerprint"):
        assert a.manifest[key] == b.manifest[key], key
    assert a.entity_ids == b.entity_ids
    for entity_id in a.entity_ids:
        assert np.array_equal(a.rows_with(entity_id), b.rows_with(entity_id)), entity_id
    stored = sorted({int(r) for entity_id in a.entity_ids for r in a.rows_with(entity_id)})
    assert len(stored) == a.num_stored_documents
    for row in stored:
        assert a.document(row) == b.document(row)


def test_many_files_give_the_index_of_one_file_and_of_the_in_process_engine(tmp_path, corpora, kb):
    single, many = corpora
    one, split = CorpusSpec.make(single, "mimic"), CorpusSpec.make(many, "mimic")
    by_engine = open_or_build_spec_index(one, kb, tmp_path / "one", fingerprint="same", engine=ENGINE)
    from_files = open_or_build_spec_index(split, kb, tmp_path / "many", fingerprint="same", engine=ENGINE)
    in_process = CorpusIndex.build(one.load(), kb, tmp_path / "old", fingerprint="same", chunk_size=4,
                                   num_buckets=5)
    assert from_files.manifest["engine"]["read_tasks"] == 3 and from_files.manifest["engine"]["files"] == 4
    assert from_files.num_documents == 30 and from_files.num_stored_documents > 5
    assert_same_index(from_files, in_process)
    assert_same_index(by_engine, in_process)
    assert from_files.document(int(from_files.rows_with("C101")[0])).doc_id == "4"  # ROW_IDs kept (note 4 is the first with a wheeze)
    assert not work_folder(tmp_path / "many").root.exists()  # removed once the index is in place


def test_many_files_build_the_sets_of_one_file(tmp_path, corpora, medlama_folder):
    from medlama.datasets.context_variance.export import build_context_variance

    single, many = corpora
    kb = knowledge_base_from_medlama(medlama_folder, "full")
    for name, path in (("one", single), ("many", many)):
        build_context_variance(kb, [CorpusSpec.make(path, "mimic")], tmp_path / name, index_root=tmp_path / "idx",
                               progress=False, origin="MedLAMA `full`")
    parts = sorted((tmp_path / "one" / "data").rglob("*.parquet"))
    assert parts
    for part in parts:
        relative = part.relative_to(tmp_path / "one")
        assert part.read_bytes() == (tmp_path / "many" / relative).read_bytes(), relative


def test_a_failed_build_resumes_only_its_missing_tasks(tmp_path, corpora, kb, monkeypatch):
    _, many = corpora
    spec = CorpusSpec.make(many, "mimic")
    files, payload = corpus_files([str(many)], "mimic"), entity_payload(kb)
    # files of 7, 9, 1 and 13 notes in chunks of 2: 4 + 5 + 1 + 7 = 17 chunks; matching task t takes t, t+4, ...
    engine = IndexEngine(tasks=4, chunk_size=2, num_buckets=5)
    matched: list[int] = []
    failed: list[int] = []
    real = index_build.match_chunk

    def flaky(number, *args):
        matched.append(number)
        if number == 6 and not failed:  # task 2's second chunk fails, once
            failed.append(number)
            raise RuntimeError("killed")
        return real(number, *args)

    monkeypatch.setattr(index_build, "match_chunk", flaky)
    directory = tmp_path / "idx"
    with pytest.raises(RuntimeError, match="killed"):
        build_file_index(files, "mimic", {}, payload, directory, fingerprint="v1", engine=engine)
    work = work_folder(directory)
    assert not directory.exists()  # nothing half-built is ever in place
    assert completed_tasks(work, "read") == [0, 1, 2, 3, 4]  # the form table and four reading tasks
    assert completed_tasks(work, "match") == [0, 1]  # task 2 failed; tasks run in order, so 3 never ran
    assert len(work.chunk_list()) == 17
    assert sorted(matched) == [0, 1, 2, 4, 5, 6, 8, 9, 12, 13, 16]
    matched.clear()
    assert build_file_index(files, "mimic", {}, payload, directory, fingerprint="v1", engine=engine)
    # only the chunks of the unfinished tasks, less the one task 2 had matched before it failed
    assert sorted(matched) == [3, 6, 7, 10, 11, 14, 15]
    assert not work.root.exists()  # the work folder is removed once the index is in place
    resumed = CorpusIndex(directory)
    assert resumed.manifest["engine"]["runs"] == 2
    whole = open_or_build_spec_index(spec, kb, tmp_path / "whole", fingerprint="v1", engine=engine)
    assert_same_index(resumed, whole)


def test_a_changed_plan_starts_afresh(tmp_path, corpora, kb):
    single, _ = corpora
    files, payload = corpus_files([str(single)], "mimic"), entity_payload(kb)
    work = plan_build(files, "mimic", {}, payload, tmp_path / "idx", fingerprint="v1", engine=ENGINE)
    (work.root / "chunks").mkdir()
    (work.root / "chunks" / "r00000.json").write_text("{}")
    again = plan_build(files, "mimic", {}, payload, tmp_path / "idx", fingerprint="v1", engine=ENGINE)
    assert again.plan()["runs"] == 2 and (work.root / "chunks" / "r00000.json").exists()
    plan_build(files, "mimic", {}, payload, tmp_path / "idx", fingerprint="v2", engine=ENGINE)
    assert not (work.root / "chunks").exists() and work.plan()["runs"] == 1
    (work.root / "chunks").mkdir()
    (work.logs("finish") / "completions").mkdir(parents=True)
    (work.logs("finish") / "completions" / "00000").touch()  # finished, and its index removed since
    plan_build(files, "mimic", {}, payload, tmp_path / "idx", fingerprint="v2", engine=ENGINE)
    assert not (work.root / "chunks").exists() and work.plan()["runs"] == 1
    # a work folder of another layout (an earlier medlama's: its read tasks numbered otherwise) is not resumed
    (work.root / "chunks").mkdir()
    plan = work.plan()
    del plan["layout"]
    (work.root / "plan.json").write_text(json.dumps(plan))
    plan_build(files, "mimic", {}, payload, tmp_path / "idx", fingerprint="v2", engine=ENGINE)
    assert not (work.root / "chunks").exists() and work.plan()["runs"] == 1


def test_torch_is_hidden_from_build_processes_only(monkeypatch):
    """A process of the build (a pool worker) runs without torch (spaCy would import it: seconds, ~300 MB); the
    process that runs the build keeps it, whichever stage it runs itself."""
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(index_build, "_CALLER_PID", None)
    index_build.mark_caller()
    index_build.keep_torch_out(True)
    assert "torch" not in sys.modules
    monkeypatch.setattr(index_build, "_CALLER_PID", -1)  # as in a worker process
    index_build.keep_torch_out(False)
    assert "torch" not in sys.modules
    index_build.keep_torch_out(True)
    assert sys.modules["torch"] is None


def test_a_repeated_id_across_files_names_both_places(tmp_path, kb):
    write_notes(tmp_path / "notes" / "a.csv", 1, 5)
    write_notes(tmp_path / "notes" / "b.csv", 4, 3)  # ROW_IDs 4, 5, 6: 4 is in a.csv too
    spec = CorpusSpec.make(tmp_path / "notes", "mimic")
    with pytest.raises(MedlamaInputError) as error:
        open_or_build_spec_index(spec, kb, tmp_path / "idx", fingerprint="x", engine=ENGINE)
    first = tmp_path / "notes" / "a.csv"
    assert f"document id '4' was already read at {first}, line 5 (record 4)" in str(error.value)
    assert "is a notes file read twice?" in str(error.value)
    assert error.value.file == str(tmp_path / "notes" / "b.csv") and error.value.row == 2
    assert not (tmp_path / "idx").exists()
    # the streaming reader of the whole corpus says the same
    with pytest.raises(MedlamaInputError) as streamed:
        list(spec.load())
    assert str(streamed.value) == str(error.value)


def test_cluster_executors_run_the_same_pipeline(tmp_path, corpora, kb):
    from datatrove.executor import SlurmPipelineExecutor
    from datatrove.executor.ray import RayPipelineExecutor

    single, _ = corpora
    files, payload = corpus_files([str(single)], "mimic"), entity_payload(kb)
    slurm = IndexEngine(executor="slurm", tasks=64, num_buckets=5, slurm_partition="cpu", slurm_time="2:00:00")
    work = plan_build(files, "mimic", {}, payload, tmp_path / "idx", fingerprint="v1", engine=slurm)
    local = make_executors(work, IndexEngine(tasks=64))
    executors = make_executors(work, slurm)
    assert [type(e) for e in executors] == [SlurmPipelineExecutor] * 4
    assert [e.tasks for e in executors] == [2, 64, 5, 1]  # the form table and one file to read; five buckets
    assert [e.partition for e in executors] == ["cpu"] * 4 and executors[1].time == "2:00:00"
    assert [e.depends for e in executors] == [None, *executors[:3]]
    if sys.prefix != sys.base_prefix:  # the jobs activate the environment running this
        assert executors[0].venv_path == str(Path(sys.prefix) / "bin" / "activate")
    for mine, theirs in zip(local, executors):
        assert [type(step) for step in mine.pipeline] == [type(step) for step in theirs.pipeline]
    assert [type(step) for step in executors[0].pipeline] == [FormTableTask, CorpusReader, ChunkWriter]
    assert [type(step) for step in executors[1].pipeline] == [MatchChunks]
    assert executors[1].logging_dir.path.endswith("logs/match")
    ray = make_executors(work, IndexEngine(executor="ray", tasks=64, workers=8))
    assert [type(e) for e in ray] == [RayPipelineExecutor] * 4 and ray[1].workers == 8 and ray[0].workers == 2
    with pytest.raises(MedlamaInputError, match="slurm-partition"):
        IndexEngine(executor="slurm").check_available()
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        with pytest.raises(MedlamaInputError, match=r"--executor ray needs the .ray. extra: pip install \"medlama\[ray\]\""):
            IndexEngine(executor="ray").check_available()


@pytest.mark.parametrize("old_version", [1, 2])
def test_an_older_format_index_is_refused_and_rebuilt(tmp_path, corpora, kb, old_version):
    single, _ = corpora
    spec = CorpusSpec.make(single, "mimic")
    index = open_or_build_spec_index(spec, kb, tmp_path / "idx", fingerprint="v1", engine=ENGINE)
    manifest = json.loads((index.directory / "manifest.json").read_text())
    (index.directory / "manifest.json").write_text(json.dumps({**manifest, "version": old_version}))
    with pytest.raises(MedlamaInputError, match=f"v{old_version} is not .* v3; rebuild it"):
        CorpusIndex.open(index.directory)
    rebuilt = open_or_build_spec_index(spec, kb, tmp_path / "idx", fingerprint="v1", engine=ENGINE)
    assert rebuilt.manifest["version"] == 3
    postings = rebuilt._raw_rows("C101")  # memory-mapped, not read
    assert isinstance(postings, np.memmap) or postings.base is not None


def test_the_command_refuses_an_executor_it_cannot_use_before_reading(tmp_path, corpora, medlama_folder, capsys):
    from medlama.cli import main

    single, _ = corpora
    base = ["build", "context-variance", "--medlama", str(medlama_folder), "--mimic", str(single),
            "--index-dir", str(tmp_path / "idx"), "--out", str(tmp_path / "out")]
    assert main([*base, "--executor", "slurm", "--tasks", "8"]) == 2
    assert "--executor slurm needs --slurm-partition" in capsys.readouterr().err
    assert main([*base, "--tasks", "0"]) == 2
    assert not (tmp_path / "idx").exists() and not (tmp_path / "out").exists()


def build_argv(medlama_folder: Path, notes: Path) -> list[str]:
    """``build context-variance`` of the 30 notes, in two tasks (an executor's flags and ``--out`` to add)."""
    return ["build", "context-variance", "--medlama", str(medlama_folder), "--config", "full", "--mimic", str(notes),
            "--tasks", "2"]


@pytest.fixture(scope="module")
def local_sets(tmp_path_factory, corpora, medlama_folder) -> Path:
    """The sets the local executor builds from the 30 notes: what a cluster executor must build, file for file."""
    from medlama.cli import main

    root = tmp_path_factory.mktemp("local-executor")
    single, _ = corpora
    assert main([*build_argv(medlama_folder, single), "--index-dir", str(root / "idx"), "--out", str(root / "sets")]) == 0
    return root / "sets"


def assert_same_sets(expected: Path, built: Path) -> None:
    """Every Parquet file of the sets ``expected`` is in ``built`` byte for byte, and ``built`` holds no other."""
    parts = sorted(p.relative_to(expected) for p in (expected / "data").rglob("*.parquet"))
    assert parts and parts == sorted(p.relative_to(built) for p in (built / "data").rglob("*.parquet"))
    for part in parts:
        assert (expected / part).read_bytes() == (built / part).read_bytes(), part


def test_a_slurm_build_builds_what_the_local_executor_builds(tmp_path, corpora, medlama_folder, local_sets, capsys,
                                                             monkeypatch):
    """The Slurm path for real, with a stand-in sbatch that runs each generated job script here (every task of
    its array, srun and all): the jobs write the index, the same command run again builds the sets from it, and
    they are the local executor's, file for file."""
    from medlama.cli import main

    import fake_slurm  # tests/helpers

    single, _ = corpora
    monkeypatch.setenv("PATH", fake_slurm.on_path(fake_slurm.install(tmp_path / "bin")))
    slurm = [*build_argv(medlama_folder, single), "--index-dir", str(tmp_path / "slurm-idx"), "--executor", "slurm",
             "--slurm-partition", "cpu", "--out", str(tmp_path / "slurm")]
    assert main(slurm) == 0
    assert "is being built by Slurm jobs; nothing written" in capsys.readouterr().err
    log = (tmp_path / "bin" / "jobs.log").read_text()
    assert "exit 0" in log and "exit 1" not in log, log[-2000:]
    assert main(slurm) == 0 and (tmp_path / "slurm" / "build_info.json").is_file()
    assert_same_sets(local_sets, tmp_path / "slurm")


@pytest.fixture
def local_ray(monkeypatch) -> Path:
    """A Ray instance of this machine alone, for one test (its folder): two CPUs, every server listening on
    127.0.0.1 only, its files (sockets, logs, the token it makes, datatrove's task logs) in a temporary folder;
    stopped after. Without ray installed (the ``ray`` extra) the test is skipped, but fails in CI, which installs it."""
    try:
        import ray
        from ray._private import ray_constants
    except ImportError:
        message = "ray is not installed (pip install -e \".[ray]\")"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    # Short: Ray's Unix socket paths under it must fit in 107 bytes (a pytest tmp_path may not).
    scratch = Path(tempfile.mkdtemp(prefix="ray-"))
    # A Linux node serves on the address other machines reach it by; Ray's single-machine mode (its default on
    # macOS and Windows) serves on 127.0.0.1. For Ray's own processes (the variable) and this one (the constant,
    # read when ray was first imported; a private module, so this test is where a Ray upgrade that moves it shows).
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
    monkeypatch.setenv("HOME", str(scratch))  # the token Ray makes (~/.ray/auth_token): not the user's
    monkeypatch.setenv("TMPDIR", str(scratch))  # datatrove's Ray tasks log into $TMPDIR/ray_logs first
    ray.init(address="local", num_cpus=2, object_store_memory=80 * 2**20, include_dashboard=False,
             _temp_dir=str(scratch), log_to_driver=False)
    try:
        yield scratch
    finally:
        ray.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)


def test_a_ray_build_builds_what_the_local_executor_builds(tmp_path, corpora, medlama_folder, local_sets, local_ray):
    """``--executor ray`` for real, on a Ray instance started for the test: the four stages run as Ray tasks
    (two at a time), the index appears and its work folder goes, and the sets are the local executor's."""
    import ray

    from medlama.cli import main

    assert [node["NodeManagerAddress"] for node in ray.nodes()] == ["127.0.0.1"]
    single, _ = corpora
    assert main([*build_argv(medlama_folder, single), "--index-dir", str(tmp_path / "ray-idx"), "--executor", "ray",
                 "--num-proc", "2", "--out", str(tmp_path / "ray")]) == 0
    # datatrove's Ray tasks each logged in the instance's folder: the pipeline ran there, not in this process
    assert sorted(p.name for p in (local_ray / "ray_logs" / "logs").glob("task_*.log"))
    (index,) = [p for p in (tmp_path / "ray-idx").iterdir()]  # the index of the notes, and no work folder
    assert (index / "manifest.json").is_file() and not work_folder(index).root.exists()
    assert_same_sets(local_sets, tmp_path / "ray")


def test_sbatch_refusing_the_jobs_is_one_error_and_leaves_nothing(tmp_path, corpora, medlama_folder, capsys,
                                                                    monkeypatch):
    from medlama.cli import main

    import fake_slurm  # tests/helpers

    single, _ = corpora
    monkeypatch.setenv("PATH", fake_slurm.on_path(fake_slurm.install(tmp_path / "bin", failing=True)))
    assert main(["build", "context-variance", "--medlama", str(medlama_folder), "--mimic", str(single), "--index-dir",
                 str(tmp_path / "idx"), "--executor", "slurm", "--slurm-partition", "cpu", "--tasks", "2",
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"medlama: error: Slurm refused the index jobs: {fake_slurm.CONTROLLER_DOWN}; nothing was queued" in err
    assert "Traceback" not in err and "CalledProcessError" not in err
    left = [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.parts[len(tmp_path.parts)] != "bin"]
    assert left in ([], ["idx"]), left  # at most the (empty) index root: no work folder, no launch script
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(MedlamaInputError, match="sbatch, which is not on the PATH"):
        IndexEngine(executor="slurm", slurm_partition="cpu").check_available()
