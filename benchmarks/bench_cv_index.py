"""Benchmark: entity matching and index building for context-variance sets on a synthetic MIMIC corpus.

Writes a synthetic ``NOTEEVENTS.csv`` (default 100,000 notes of MIMIC-like length, ~1,800 characters on
average, with entity mentions from a synthetic vocabulary of 20,000 entities / ~40,000 surface forms),
then measures:

1. matching alone (tokeniser + PhraseMatcher, one process) on the first notes;
2. the full index build from the streaming MIMIC reader with ``--num-proc`` workers (read, match,
   store documents, postings), in documents and characters per second;
3. peak memory of the main process and of the largest worker: the ``VmHWM`` high-water mark of
   ``/proc/self/status`` recorded by the index build (``ru_maxrss`` only where ``/proc`` is missing;
   see ``medlama.datasets.context_variance.index.build.peak_rss_mib``);
4. retrieval (subject & target intersection) and document fetches;

and projects the build time for all of MIMIC-III (2,083,180 notes) at the measured rates.

    python benchmarks/bench_cv_index.py                    # 100k notes, 2 workers
    python benchmarks/bench_cv_index.py --notes 20000 --num-proc 1 --keep /tmp/cv-bench
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

MIMIC_NOTES = 2_083_180  # rows of MIMIC-III v1.4 NOTEEVENTS.csv

SYLLABLES = ["ba", "co", "di", "fe", "ga", "hi", "jo", "ku", "la", "me", "ni", "po", "ra", "si", "tu", "ve",
             "xa", "yo", "ze", "an", "el", "in", "or", "ul", "tra", "pho", "cho", "ste", "bro", "pla"]
FILLER = ("the patient was is and with no of to in on for at by denies reports noted history left right "
          "bilateral mild moderate severe daily mg po bid tid prn since last week today yesterday stable "
          "improved worsening exam normal negative positive per plan continue follow up status post").split()


def pseudo_word(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))


def make_entities(count: int, rng: random.Random):
    from medlama.datasets.context_variance import Entity

    seen: set[str] = set()
    entities = []
    for i in range(count):
        forms = []
        for _ in range(rng.choice((1, 2, 2, 3))):
            form = " ".join(pseudo_word(rng) for _ in range(rng.choice((1, 1, 2, 2, 2, 3, 4))))
            if form not in seen:
                seen.add(form)
                forms.append(form)
        if forms:
            entities.append(Entity(f"C{i:07d}", forms[0], tuple(forms[1:])))
    return entities


def write_notes(path: Path, notes: int, entities, rng: random.Random, mentions_per_100_words: float) -> int:
    forms = [form for entity in entities for form in entity.surface_forms]
    # Filler words never collide with entity forms (a trailing "q"); 5% of tokens are long-tail strings
    # (numbers, dates, measurements) as in clinical notes, which grow the tokenizer's vocabulary.
    vocabulary = FILLER + [pseudo_word(rng) + "q" for _ in range(3000)]
    characters = 0
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["ROW_ID", "SUBJECT_ID", "HADM_ID", "CHARTDATE", "CHARTTIME", "STORETIME", "CATEGORY",
                         "DESCRIPTION", "CGID", "ISERROR", "TEXT"])
        for row in range(notes):
            length = max(20, min(4000, int(rng.lognormvariate(5.1, 0.7))))  # words; mean ~210
            words = []
            for _ in range(length):
                if rng.random() < mentions_per_100_words / 100:
                    form = rng.choice(forms)
                    words.append(form.upper() if rng.random() < 0.1 else form)
                elif rng.random() < 0.05:
                    kind = rng.random()
                    if kind < 0.4:
                        words.append(f"{rng.randint(0, 999)}.{rng.randint(0, 9)}")
                    elif kind < 0.7:
                        words.append(f"[**{rng.randint(2100, 2200)}-{rng.randint(1, 12)}-{rng.randint(1, 28)}**]")
                    else:
                        words.append(f"{rng.randint(1, 500)}{rng.choice(('mg', 'mL', 'mmHg', 'cm'))}")
                else:
                    words.append(rng.choice(vocabulary))
                if rng.random() < 0.08:
                    words[-1] += rng.choice((".", ",", ":", ";\n"))
            text = " ".join(words)
            characters += len(text)
            writer.writerow([row + 1, rng.randint(1, 40000), "", "2100-01-01", "", "", "Nursing", "Note", "", "",
                             text])
    return characters


def cpu_seconds() -> float:
    """User + system CPU time of this process and of its finished children (the pool's workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=100_000)
    parser.add_argument("--entities", type=int, default=20_000)
    parser.add_argument("--mentions", type=float, default=5.0, help="entity mentions per 100 words")
    parser.add_argument("--num-proc", type=int, default=2)
    parser.add_argument("--chunk-size", type=int, default=1000)
    parser.add_argument("--match-sample", type=int, default=5000, help="notes for the matching-only run")
    parser.add_argument("--keep", type=Path, help="work folder to keep (default: a temporary one)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from medlama.datasets.context_variance import CorpusIndex, EntityMatcher, Entity, Triple
    from medlama.loaders.corpora import corpus_fingerprint
    from medlama.loaders.mimic_notes import read_mimic_notes

    work = args.keep or Path(tempfile.mkdtemp(prefix="cv-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    print(f"machine: {os.cpu_count()} CPU cores; python {sys.version.split()[0]}; work folder {work}; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    started = time.perf_counter()
    entities = make_entities(args.entities, rng)
    notes_path = work / "NOTEEVENTS.csv"
    characters = write_notes(notes_path, args.notes, entities, rng, args.mentions)
    forms = sum(len(e.surface_forms) for e in entities)
    print(f"synthetic corpus: {args.notes:,} notes, {characters:,} characters "
          f"(mean {characters / args.notes:,.0f}), {notes_path.stat().st_size / 2**20:,.1f} MiB; "
          f"{len(entities):,} entities / {forms:,} surface forms; written in {time.perf_counter() - started:.1f} s")

    # 1. Matching alone, one process.
    started = time.perf_counter()
    matcher = EntityMatcher(entities)
    built = time.perf_counter() - started
    sample = []
    for record in read_mimic_notes(notes_path):
        sample.append(record["text"])
        if len(sample) == args.match_sample:
            break
    started = time.perf_counter()
    found = sum(len(mentions) for mentions in matcher.pipe(sample))
    elapsed = time.perf_counter() - started
    sample_chars = sum(map(len, sample))
    print(f"matching only (1 process): matcher built in {built:.1f} s; {len(sample):,} notes in {elapsed:.1f} s = "
          f"{len(sample) / elapsed:,.0f} notes/s, {sample_chars / elapsed / 1e6:.2f} M chars/s, "
          f"{found / len(sample):.1f} mentions/note")
    del sample, matcher

    # 2. Full index build from the streaming reader.
    index_dir = work / "index"
    cpu_before = cpu_seconds()
    started = time.perf_counter()
    index = CorpusIndex.build(read_mimic_notes(notes_path), entities, index_dir,
                              fingerprint=corpus_fingerprint(notes_path, "mimic"), num_proc=args.num_proc,
                              chunk_size=args.chunk_size)
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds() - cpu_before
    docs_per_s = index.num_documents / elapsed
    chars_per_s = index.manifest["num_characters"] / elapsed
    size = sum(p.stat().st_size for p in index_dir.rglob("*") if p.is_file())
    print(f"index build (num_proc={args.num_proc}, chunk_size={args.chunk_size}): {index.num_documents:,} notes "
          f"in {elapsed:.1f} s = {docs_per_s:,.0f} notes/s, {chars_per_s / 1e6:.2f} M chars/s; "
          f"{index.num_stored_documents:,} stored, {index.manifest['num_postings']:,} postings, "
          f"{size / 2**20:,.1f} MiB on disk")
    cpu_docs_per_s = index.num_documents / (cpu / args.num_proc) if args.num_proc > 1 else index.num_documents / cpu
    print(f"  CPU time (main + workers): {cpu:.1f} s = {cpu / index.num_documents * 1e3:.2f} ms/note; "
          f"wall-clock {elapsed:.1f} s on {os.cpu_count()} cores (load average before/after shows other jobs); "
          f"an idle machine with {args.num_proc} cores would reach ~{cpu_docs_per_s:,.0f} notes/s")

    # 3. Peak memory.
    print(f"peak memory (VmHWM): main process {index.manifest['main_peak_rss_mib']:,.0f} MiB (reads the corpus; "
          f"includes the datasets/torch imports and step 1's matcher), each matching worker "
          f"<= {index.manifest['worker_peak_rss_mib']:,.0f} MiB")

    # 4. Retrieval: pairs of entities that co-occur, as a triple's subject and target would.
    pairs = []
    for row in range(0, index.num_documents, max(1, index.num_documents // 2000)):
        try:
            document = index.document(row)
        except KeyError:
            continue
        ids = sorted({m.entity_id for m in document.mentions})
        if len(ids) >= 2:
            pairs.append((ids[0], ids[-1]))
    by_id = {e.id: e for e in entities}
    started = time.perf_counter()
    fetched = 0
    for subject, target in pairs:
        triple = Triple(by_id[subject], "related", by_id[target], (), [by_id[target]])
        fetched += len(index.retrieve(triple, max_docs=10))
    elapsed = time.perf_counter() - started
    print(f"retrieval: {len(pairs):,} triples in {elapsed:.2f} s ({elapsed / max(1, len(pairs)) * 1e3:.2f} ms each, "
          f"{fetched:,} documents fetched)")

    # 5. Projection for MIMIC-III.
    mean_chars = index.manifest["num_characters"] / index.num_documents
    print(f"projection for MIMIC-III ({MIMIC_NOTES:,} notes, num_proc={args.num_proc}): "
          f"{MIMIC_NOTES / docs_per_s / 60:,.1f} min at the measured {docs_per_s:,.0f} notes/s, "
          f"~{MIMIC_NOTES / cpu_docs_per_s / 60:,.1f} min on an idle machine "
          f"(at {mean_chars:,.0f} characters/note; scale by the real mean length / {mean_chars:,.0f}); "
          f"index ~{size / index.num_documents * MIMIC_NOTES / 2**30:,.1f} GiB")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
