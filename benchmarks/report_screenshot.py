"""Regenerate docs/report.png, the README's picture of `medlama report`'s page, from real probe runs.

    medlama probe --source ../shared/data/medlama --limit 12 --layers 3 6 --out out/layers
    python benchmarks/report_screenshot.py out/layers               # writes docs/report.png

Writes the page of the runs given (`medlama report RUN ... --out`, in a temporary folder), opens it in
headless Chromium (Debian's chromium and chromium-driver; selenium from the test extra), filters the query
browser to the queries the first run misses and the second hits at the largest k, and saves the top of the
page (leaderboard, chart, the first query cards) as a PNG.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "helpers"))  # the test helpers' browser (one way to start Chromium)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="output folders of medlama probe or recipe")
    parser.add_argument("--png", type=Path, default=REPO / "docs" / "report.png")
    parser.add_argument("--height", type=int, default=2400, help="pixels of the page kept, from the top")
    args = parser.parse_args()

    from browser import start_chromium

    from medlama.reports import ReportSettings, write_report

    with tempfile.TemporaryDirectory() as tmp:
        page = write_report(args.runs, ReportSettings(out=Path(tmp) / "report.html"))
        driver = start_chromium(Path(tmp), size=f"1300,{args.height}")
        try:
            driver.get(page.as_uri())
            driver.execute_script("""
                const filters = document.querySelectorAll('select.filter-run');
                if (filters.length > 1) { filters[0].value = 'miss'; filters[1].value = 'hit'; }
                document.getElementById('chart-order').value = 'value';
                document.getElementById('chart-order').dispatchEvent(new Event('change'));
                document.getElementById('filter-k').dispatchEvent(new Event('change'));""")
            driver.save_screenshot(str(args.png))
        finally:
            driver.quit()
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
