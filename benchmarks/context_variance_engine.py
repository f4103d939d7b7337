"""Benchmark: the datatrove index pipeline against the in-process engine, and what it projects to at scale.

On synthetic corpora (the generators of ``bench_cv_index.py``: MIMIC-length notes with mentions from a
vocabulary of synthetic entities), in one run:

1. MIMIC-like notes, one ``NOTEEVENTS.csv``: notes/s at ``--num-proc`` processes of the in-process engine
   (``CorpusIndex.build`` over the streaming reader: one reading process and ``--num-proc`` matching
   workers) and of the pipeline (``--executor local``, workers = ``--num-proc``), and their ratio; the
   pipeline's read stage (one task: one file) and match stage timed apart;
2. the same notes split into ``--files`` files (the read stage then runs in parallel too);
3. a PMC-like corpus of long articles (one ``.txt`` per article, ``--article-words`` words each);
4. peak resident memory of each kind of process (``VmHWM``, as the manifests record it);
5. a resumed build: the pipeline killed (SIGKILL to its process group) once half of its matching tasks are
   marked completed, then rerun with the same command; the rerun's time against a whole build's, both run
   as that command in a new process;
6. projections for MIMIC-IV-Note and PMC OA at 2, 32 and 256 cores from the measured per-process rates
   (matching scales with processes; reading is parallel across files only).

    python benchmarks/context_variance_engine.py                      # 40k notes, 2 processes
    python benchmarks/context_variance_engine.py --notes 8000 --articles 300   # a short run
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cv_index import make_entities, write_notes  # noqa: E402  (the synthetic corpus generators)

#: MIMIC-IV-Note v2.2: notes and the mean characters per note assumed for the projection.
MIMIC_IV = {"discharge": (331_793, 10_500), "radiology": (2_321_355, 1_600)}
#: PMC Open Access: articles and mean characters (about 100 GB of text).
PMC_OA = (5_000_000, 20_000)
CORES = (2, 32, 256)


def engine_build(spec, entities, directory: Path, workers: int, tasks: int | None, chunk_size: int) -> dict:
    """Build with the pipeline, timing the read stage and the rest apart; the manifest with the times."""
    from medlama.datasets.context_variance.index.corpus_index import CorpusIndex
    from medlama.datasets.context_variance.index.format import entity_payload
    from medlama.datasets.context_variance.index.pipeline import make_executors, plan_build
    from medlama.datasets.context_variance.settings import IndexEngine
    from medlama.loaders.corpora import corpus_files

    engine = IndexEngine(workers=workers, tasks=tasks, chunk_size=chunk_size)
    files = corpus_files(list(spec.paths), spec.format)
    started = time.perf_counter()
    work = plan_build(files, spec.format, {}, entity_payload(entities), directory, fingerprint="bench",
                      engine=engine)
    executors = make_executors(work, engine)
    executors[0].run()
    read = time.perf_counter() - started
    executors[-1].run()
    total = time.perf_counter() - started
    shutil.rmtree(work.root, ignore_errors=True)
    manifest = CorpusIndex(directory).manifest
    return {**manifest, "seconds": total, "read_seconds": read}


def old_build(corpus, entities, directory: Path, workers: int, chunk_size: int) -> dict:
    from medlama.datasets.context_variance.index.corpus_index import CorpusIndex

    started = time.perf_counter()
    index = CorpusIndex.build(corpus, entities, directory, num_proc=workers, chunk_size=chunk_size)
    return {**index.manifest, "seconds": time.perf_counter() - started}


def write_articles(folder: Path, count: int, words: int, entities, rng: random.Random) -> int:
    """``count`` PMC-like plain-text articles (title line, then paragraphs) of about ``words`` words."""
    forms = [form for entity in entities for form in entity.surface_forms]
    filler = "the results were significant in patients with and of to a was for study cells expression".split()
    folder.mkdir(parents=True, exist_ok=True)
    characters = 0
    for number in range(count):
        body = []
        for _ in range(words):
            body.append(rng.choice(forms) if rng.random() < 0.04 else rng.choice(filler))
            if rng.random() < 0.01:
                body[-1] += ".\n"
        text = f"Article {number}\n" + " ".join(body)
        characters += len(text)
        (folder / f"PMC{number:07d}.txt").write_text(text, encoding="utf-8")
    return characters


RESUME_SCRIPT = """
import sys
from pathlib import Path
from medlama.datasets.context_variance.index.format import entity_payload
from medlama.datasets.context_variance.index.pipeline import build_file_index
from medlama.datasets.context_variance.settings import IndexEngine
from medlama.loaders.corpora import corpus_files
sys.path.insert(0, {bench!r})
from bench_cv_index import make_entities
import random
entities = make_entities({entities}, random.Random({seed}))
files = corpus_files([{corpus!r}], "mimic")
build_file_index(files, "mimic", {{}}, entity_payload(entities), Path({directory!r}), fingerprint="resume",
                 engine=IndexEngine(workers={workers}, tasks={tasks}, chunk_size={chunk}))
"""


def resumed_build(corpus: Path, work_root: Path, args) -> dict:
    """A whole build and a killed-then-rerun build, each the same command in a new process (interpreter
    start-up, imports and planning included, as a user reruns it): seconds of each, and the matching tasks
    the killed run had completed."""
    from medlama.datasets.context_variance.index.pipeline import work_folder
    from medlama.datasets.context_variance.index.steps import completed_tasks

    tasks = args.tasks or 4 * args.num_proc

    def command(directory: Path) -> list[str]:
        return [sys.executable, "-c", RESUME_SCRIPT.format(
            bench=str(Path(__file__).resolve().parent), entities=args.entities, seed=args.seed, corpus=str(corpus),
            directory=str(directory), workers=args.num_proc, tasks=tasks, chunk=args.chunk_size)]

    started = time.perf_counter()
    subprocess.run(command(work_root / "idx-whole"), check=True, stderr=subprocess.DEVNULL)
    whole = time.perf_counter() - started

    directory = work_root / "idx-resume"
    work = work_folder(directory)
    started = time.perf_counter()
    process = subprocess.Popen(command(directory), start_new_session=True, stderr=subprocess.DEVNULL)
    while process.poll() is None and len(completed_tasks(work, "match")) < tasks // 2:
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    killed = time.perf_counter() - started
    done = len(completed_tasks(work, "match"))
    started = time.perf_counter()
    subprocess.run(command(directory), check=True, stderr=subprocess.DEVNULL)
    rerun = time.perf_counter() - started
    # every file of the two indexes byte for byte, but the manifest (it records times and runs)
    files = sorted(path.relative_to(work_root / "idx-whole") for path in (work_root / "idx-whole").rglob("*")
                   if path.is_file() and path.name != "manifest.json")
    same = bool(files) and all((work_root / "idx-whole" / f).read_bytes() == (directory / f).read_bytes()
                               for f in files)
    return {"whole": whole, "killed": killed, "rerun": rerun, "done": done, "tasks": tasks, "same": same}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=40_000)
    parser.add_argument("--files", type=int, default=8, help="files the notes are split into for step 2")
    parser.add_argument("--articles", type=int, default=1_000)
    parser.add_argument("--article-words", type=int, default=3_000)
    parser.add_argument("--entities", type=int, default=20_000)
    parser.add_argument("--num-proc", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=None)
    parser.add_argument("--chunk-size", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from medlama.datasets.context_variance.settings import CorpusSpec

    work = Path(tempfile.mkdtemp(prefix="cv-engine-bench-"))
    rng = random.Random(args.seed)
    print(f"machine: {os.cpu_count()} CPU cores; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{args.num_proc} processes; work folder {work}")
    entities = make_entities(args.entities, rng)
    notes = work / "one" / "NOTEEVENTS.csv"
    notes.parent.mkdir()
    characters = write_notes(notes, args.notes, entities, rng, 5.0)
    split = work / "many"
    split.mkdir()
    _split_csv(notes, split, args.files)
    print(f"corpus: {args.notes:,} notes, {characters:,} characters; {args.entities:,} entities")

    one = CorpusSpec.make(notes, "mimic")
    old = old_build(one.load(), entities, work / "idx-old", args.num_proc, args.chunk_size)
    new = engine_build(one, entities, work / "idx-new", args.num_proc, args.tasks, args.chunk_size)
    many = engine_build(CorpusSpec.make(split, "mimic"), entities, work / "idx-many", args.num_proc, args.tasks,
                        args.chunk_size)
    rate = {name: m["num_documents"] / m["seconds"] for name, m in (("old", old), ("new", new), ("many", many))}
    print(f"\n1. one file, {args.num_proc} processes: in-process engine {rate['old']:,.0f} notes/s "
          f"({old['seconds']:.1f} s); pipeline {rate['new']:,.0f} notes/s ({new['seconds']:.1f} s, read stage "
          f"{new['read_seconds']:.1f} s); ratio {rate['new'] / rate['old']:.2f}")
    print(f"2. {args.files} files: pipeline {rate['many']:,.0f} notes/s ({many['seconds']:.1f} s, read stage "
          f"{many['read_seconds']:.1f} s in {many['engine']['read_tasks']} tasks); ratio to the in-process "
          f"engine {rate['many'] / rate['old']:.2f}")
    assert new["num_postings"] == old["num_postings"] == many["num_postings"]

    articles = work / "pmc"
    article_chars = write_articles(articles, args.articles, args.article_words, entities, rng)
    pmc = engine_build(CorpusSpec.make(articles, "pmc"), entities, work / "idx-pmc", args.num_proc, args.tasks,
                       max(1, args.chunk_size // 20))
    pmc_old = old_build(CorpusSpec.make(articles, "pmc").load(), entities, work / "idx-pmc-old", args.num_proc,
                        max(1, args.chunk_size // 20))
    print(f"3. PMC-like: {args.articles:,} articles of {article_chars / args.articles:,.0f} characters: pipeline "
          f"{args.articles / pmc['seconds']:,.1f} articles/s = {article_chars / pmc['seconds'] / 1e6:.2f} M chars/s "
          f"(read stage {pmc['read_seconds']:.1f} s in {pmc['engine']['read_tasks']} tasks); in-process engine "
          f"{args.articles / pmc_old['seconds']:,.1f} articles/s; ratio {pmc_old['seconds'] / pmc['seconds']:.2f}")
    print(f"4. peak memory (MiB): pipeline read task {new['read_peak_rss_mib']:,.0f}, form-table task "
          f"{new['form_table_peak_rss_mib']:,.0f}, match task {new['worker_peak_rss_mib']:,.0f}, finish task "
          f"{new['main_peak_rss_mib']:,.0f} (the caller's process when --num-proc is 1); PMC-like match task "
          f"{pmc['worker_peak_rss_mib']:,.0f}; in-process engine: reader {old['main_peak_rss_mib']:,.0f}, worker "
          f"{old['worker_peak_rss_mib']:,.0f}")

    resume = resumed_build(notes, work, args)
    print(f"5. resume (each run the same command in a new process): a whole build {resume['whole']:.1f} s; a build "
          f"killed after {resume['killed']:.1f} s with {resume['done']}/{resume['tasks']} matching tasks done, "
          f"rerun in {resume['rerun']:.1f} s = {resume['rerun'] / resume['whole']:.0%} of the whole build "
          f"(same index: {resume['same']})")

    match_seconds = new["seconds"] - new["read_seconds"]  # the match, merge and finish stages
    per_process = characters / match_seconds / args.num_proc  # matching characters/s of one process
    read_rate = characters / new["read_task_seconds"]  # characters/s of one reading task (the reading alone)
    forms = new["form_table_seconds"]  # once per build, beside the reading tasks (counted as if before them)
    print(f"\n6. projection from {per_process / 1e6:.2f} M chars/s per matching process, "
          f"{read_rate / 1e6:.1f} M chars/s per reading task (one file per task) and {forms:.1f} s for the "
          f"form table of {args.entities:,} entities; hours")
    corpora = {"MIMIC-IV-Note (2 files)": ([n * c for n, c in MIMIC_IV.values()], 2),
               "PMC OA (5 M files)": ([PMC_OA[0] * PMC_OA[1]], PMC_OA[0])}
    print(f"   {'corpus':<26}{'characters':>12}" + "".join(f"{f'{c} cores':>12}" for c in CORES))
    for name, (sizes, files) in corpora.items():
        total = sum(sizes)
        cells = []
        for cores in CORES:
            reading = max(sizes) / read_rate if files < cores else total / read_rate / cores
            cells.append((forms + reading + total / per_process / cores) / 3600)
        print(f"   {name:<26}{total / 1e9:>10.1f} G" + "".join(f"{hours:>12.2f}" for hours in cells))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    shutil.rmtree(work, ignore_errors=True)


def _split_csv(source: Path, folder: Path, files: int) -> None:
    import csv

    csv.field_size_limit(2**31 - 1)
    with open(source, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    header, body = rows[0], rows[1:]
    per = -(-len(body) // files)
    for number in range(files):
        with open(folder / f"notes-{number:03d}.csv", "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(header)
            writer.writerows(body[number * per:(number + 1) * per])


if __name__ == "__main__":
    main()
