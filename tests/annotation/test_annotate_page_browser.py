"""annotate.html in a real headless Chromium, opened from file://: rated with the keyboard, reloaded (the ratings
are still there), exported, and `annotate score` reads back exactly the ratings given; names holding markup are
shown as written and run nothing."""

from __future__ import annotations

import json

from browser import browser, wait_for, wait_for_file  # noqa: F401 - browser is a fixture
from annotation_runs import RATINGS, write_runs
from medlama.annotation import ExportSettings, export_sheet, score_sheet
from medlama.annotation.ratings import read_ratings
from medlama.annotation.sheet import read_manifest


def _keys(driver, *keys):
    from selenium.webdriver.common.action_chains import ActionChains  # the test extra

    chain = ActionChains(driver)
    for key in keys:
        chain.send_keys(key)
    chain.perform()


def _shown(driver):
    """``(item, prediction text, chosen level or None)`` of every row as the page shows it."""
    return driver.execute_script("""
        return [...document.querySelectorAll('.item')].map(row => [Number(row.dataset.item),
            row.querySelector('.prediction').textContent,
            [...row.querySelectorAll('button')].findIndex(b => b.classList.contains('chosen')) + 1 || null]);""")


def test_rate_with_the_keyboard_reload_export_and_score(browser, tmp_path):
    from selenium.webdriver.common.by import By  # the test extra
    from selenium.webdriver.common.keys import Keys  # the test extra

    runs = write_runs(tmp_path / "runs")
    export_sheet(runs, tmp_path / "sheet", ExportSettings(queries=2, k=3))
    sheet, _ = read_manifest(tmp_path / "sheet")
    items = sheet.items()
    given = RATINGS["alice"]
    levels = [given[(query.id, prediction)] for _, query, prediction in items]

    browser.get((tmp_path / "sheet" / "annotate.html").as_uri())
    wait_for(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".item")) == len(items))
    # names and queries shown as written; no markup ran
    assert [text for _, text, _ in _shown(browser)] == [prediction for _, _, prediction in items]
    headings = [h.text for h in browser.find_elements(By.CSS_SELECTOR, ".query h2")]
    assert headings == [f"{i + 1}. {q.text}" for i, q in enumerate(sheet.queries)]
    assert browser.execute_script("return window.__pwned === undefined && !document.querySelector('img') && "
                                  "!document.querySelector('.prediction *, .query h2 *')")
    assert browser.title.startswith("Rate the predictions")

    # the first five by keys 1-5 (each moves on), one of them corrected with the arrows
    _keys(browser, *map(str, levels[:4]), "1", Keys.ARROW_UP, str(levels[4]))
    wait_for(browser, lambda d: d.find_element(By.ID, "progress-text").text == f"5 / {len(items)} rated")
    browser.refresh()
    wait_for(browser, lambda d: d.find_element(By.ID, "progress-text").text == f"5 / {len(items)} rated")
    assert [level for _, _, level in _shown(browser)] == [*levels[:5], *[None] * (len(items) - 5)]
    # the rest after the reload, from where the page left off; one cleared with 0 and given again
    _keys(browser, *map(str, levels[5:-1]), "4", Keys.ARROW_LEFT, Keys.ARROW_RIGHT, "0")
    wait_for(browser, lambda d: d.find_element(By.ID, "progress-text").text == f"{len(items) - 1} / {len(items)} rated")
    _keys(browser, str(levels[-1]))
    wait_for(browser, lambda d: d.find_element(By.ID, "progress-text").text == f"{len(items)} / {len(items)} rated")
    assert [level for _, _, level in _shown(browser)] == levels

    browser.find_element(By.ID, "rater").send_keys("Dr <Alice>")
    browser.find_element(By.ID, "export").click()
    exported = wait_for_file(browser.downloads, "ratings-*.json")
    assert exported.name == "ratings-Dr_Alice_.json"
    assert json.loads(exported.read_text())["rater"] == "Dr <Alice>"
    assert read_ratings(exported, sheet).ratings == given
    record = score_sheet(runs, tmp_path / "sheet", [exported])
    assert record["raters"] == ["Dr <Alice>"]
    assert record["runs"]["base"]["Dr <Alice>"]["confusion"]["gold"] == {"1": 0, "2": 0, "3": 1, "4": 0, "5": 1}
