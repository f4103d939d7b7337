"""The results page at full size: `medlama report` of several runs of the MedLAMA hard set's size, and how
quickly the page answers in headless Chromium.

    python benchmarks/bench_report_page.py                       # 15,329 queries, 19 relations, 4 runs
    python benchmarks/bench_report_page.py --runs 6 --queries 19000

The runs are made here (seeded): queries spread over the relations, a pool of 22,923 made-up names of two
to six words, each run's top 10 with scores and the gold's rank, written by the probe's own writer. Prints
the page's size, the seconds `medlama report` takes, and in the browser: opening the page until it is
drawn, a relation filter, a hit/miss filter, the first search (which builds the search text of every
query) and a second one, and turning a page (each from the event to the page laid out again). Needs the
test extra (selenium) and Debian's chromium and chromium-driver.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

MEASURE = """const [id, value, event] = arguments;
const node = document.getElementById(id), start = performance.now();
node.value = value; node.dispatchEvent(new Event(event));
document.body.offsetHeight;  // lay the page out
return performance.now() - start;"""


def make_runs(root: Path, runs: int, queries: int, relations: int = 19, pool: int = 22923) -> list[Path]:
    import numpy as np

    from medlama.runs.outputs import write_probe_results
    from medlama.probers.query_set import QuerySet
    from medlama.probers.ranking import Ranking
    from medlama.runs.result import ProbeResult
    from medlama.runs.scores import score

    rng = np.random.default_rng(0)
    words = [f"{a}{b}" for a in ("cardio", "neuro", "hepato", "osteo", "derma", "gastro", "nephro", "pulmo")
             for b in ("pathy", "itis", "oma", "plasia", "genesis", "sclerosis", "trophy", "algia", "cyte", "gen")]
    names = sorted({" ".join(rng.choice(words, size=rng.integers(2, 7))) + f" {i}" for i in range(pool)})
    pick = np.asarray(names, dtype=object)  # choose from an array: a list would be copied at every draw
    relation_names = [f"relation_{j:02d}_has_some_long_name" for j in range(relations)]
    rel = [relation_names[i % relations] for i in range(queries)]
    gold = [[str(g) for g in pick[rng.choice(len(names), size=1 + i % 3, replace=False)]] for i in range(queries)]
    texts = [f"{' '.join(rng.choice(words, size=4))} is associated with [Y] ." for _ in range(queries)]
    query_set = QuerySet([f"q{i:05d}" for i in range(queries)], rel, texts, gold, names, "hard",
                         {"dataset": "medlama", "config": "hard", "relations": "all", "fingerprint": "bench"})
    folders = []
    for r in range(runs):
        predictions, scores = [], []
        for answers in gold:
            top = [str(n) for n in pick[rng.choice(len(names), size=10, replace=False)]]
            if rng.random() < 0.1 + 0.1 * r:
                top[int(rng.integers(0, 10))] = answers[0]
            predictions.append(top)
            scores.append(sorted(rng.uniform(-40, -10, size=10).tolist(), reverse=True))
        ranking = Ranking.from_names(gold, predictions, scores=scores, inputs=texts)
        result = ProbeResult(label=f"run {r}", query_set="hard", settings={"method": "bench"}, ids=query_set.ids,
                             relations=rel, gold=gold, predictions=predictions, metrics=score(query_set, predictions),
                             seconds=0.0, data={**query_set.info, "candidates": query_set.pool_record()},
                             ranking=ranking)
        folder = root / f"run{r}"
        folder.mkdir()
        write_probe_results(folder, [result])
        folders.append(folder)
    return folders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--queries", type=int, default=15329)
    args = parser.parse_args()

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    from medlama.core.display import print_table
    from medlama.reports import ReportSettings, write_report

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folders = make_runs(root, args.runs, args.queries)
        page = root / "page.html"
        start = time.perf_counter()
        write_report(folders, ReportSettings(out=page))
        build = time.perf_counter() - start
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,1000", f"--user-data-dir={root / 'profile'}"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        try:
            start = time.perf_counter()
            driver.get(page.as_uri())
            WebDriverWait(driver, 300).until(lambda d: d.execute_script("return document.body.dataset.ready"))
            opened = time.perf_counter() - start
            timings = [("open the page until drawn", 1000 * opened)]
            timings.append(("filter: one relation", driver.execute_script(MEASURE, "filter-relation", "3", "change")))
            timings.append(("filter: all relations again", driver.execute_script(MEASURE, "filter-relation", "", "change")))
            driver.execute_script("document.querySelector('select.filter-run').value = 'miss'")
            timings.append(("filter: miss in the first run", driver.execute_script(MEASURE, "filter-k", "10", "change")))
            driver.execute_script("document.querySelector('select.filter-run').value = ''")
            driver.execute_script("document.getElementById('search').value = 'neuroitis'")
            timings.append(("first search (builds the search text)", driver.execute_script(MEASURE, "filter-k", "10", "change")))
            driver.execute_script("document.getElementById('search').value = 'cardiooma hepato'")
            timings.append(("another search", driver.execute_script(MEASURE, "filter-k", "10", "change")))
            start = time.perf_counter()
            driver.find_element("id", "next").click()
            timings.append(("next page (click to drawn)", 1000 * (time.perf_counter() - start)))
        finally:
            driver.quit()
        print_table(f"medlama report: {args.runs} runs x {args.queries:,} queries", ["what", "value"],
                    [["page size (MB)", f"{page.stat().st_size / 1e6:.1f}"], ["medlama report (s)", f"{build:.1f}"]]
                    + [[what, f"{ms:,.0f} ms"] for what, ms in timings])


if __name__ == "__main__":
    main()
