"""One long document through the context builder: time and peak memory against its length.

A document of N repeats of a short clinical paragraph (each naming several pool entities) is matched, cut
into segments and turned into every context type's rows (:func:`medlama.datasets.context_variance.triple_rows.
sequence_rows`, what a build runs per retrieved document). Peak memory is Python's own allocation peak
(tracemalloc) during the rows; both should grow about linearly with N (they grew with its square before each
step's input text was made only when asked for, and mentions were found per segment by bisection).

    python benchmarks/bench_long_document.py                    # 250, 500, 1,000, 2,000 repeats
    python benchmarks/bench_long_document.py --repeats 500 4000
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

from medlama.datasets.context_variance import Entity, EntityMatcher, Triple
from medlama.datasets.context_variance.settings import BuildSettings
from medlama.datasets.context_variance.triple_rows import sequence_rows

PARAGRAPH = ("Patient reports discolored nasal discharge and postnasal drip, some heartburn and a sick feeling; "
             "no wheeze, no chest pain, mild nasal stuffiness and snoring at night.")
SYMPTOMS = ["discolored nasal discharge", "postnasal drip", "heartburn", "sick feeling", "wheeze", "chest pain",
            "nasal stuffiness", "snoring"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, nargs="+", default=[250, 500, 1000, 2000])
    args = parser.parse_args()
    pool = [Entity(name, name, (), "symptom") for name in SYMPTOMS]
    triple = Triple(Entity("nasal polyp", "nasal polyp", (), "disease"), "has symptom", pool[0],
                    (pool[1], pool[6], pool[7]), pool, "[X] has symptoms such as [Y].")
    matcher = EntityMatcher([triple.subject, *pool])
    names = {entity.id: entity.name for entity in pool}
    print(f"{'repeats':>8} {'characters':>11} {'mentions':>9} {'rows':>5} {'seconds':>8} {'peak MiB':>9}")
    for repeats in args.repeats:
        text = "nasal polyp. " + " ".join([PARAGRAPH] * repeats)
        mentions = matcher.match(text)
        tracemalloc.start()
        start = time.perf_counter()
        rows = sequence_rows(triple, "bench", "doc", text, mentions, BuildSettings(), names)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        print(f"{repeats:>8,} {len(text):>11,} {len(mentions):>9,} {len(rows):>5} {seconds:>8.2f} {peak:>9.1f}")


if __name__ == "__main__":
    main()
