"""``medlama report``'s page in a real browser (headless Chromium, from ``file://``): what it shows after
filtering by relation and by hit or miss of each run, after a search, and page by page, checked against the
runs' ``predictions.jsonl``; names and inputs holding markup and quotes show as written and run nothing."""

from __future__ import annotations

import pytest

from browser import browser, wait_for  # noqa: F401 - tests/helpers: the fixture and its wait
from probe_outputs import predictions  # tests/helpers
from report_runs import MARKUP_NAMES, written_runs  # tests/helpers

from medlama.cli import main
from medlama.analysis import CompareSettings, compare_runs, load_runs

#: What the page shows of every query card in view, read from the page itself.
SHOWN = """return Array.from(document.querySelectorAll('#queries article.query')).map((card) => ({
  id: card.getAttribute('data-id'),
  relation: card.querySelector('.query-relation').textContent,
  input: card.querySelector('.query-input').textContent,
  gold: Array.from(card.querySelectorAll('.gold-list li')).map((li) => li.textContent),
  runs: Array.from(card.querySelectorAll('.run')).map((run) => ({
    label: run.querySelector('.run-label').textContent,
    rank: run.querySelector('.gold-rank').textContent,
    predictions: Array.from(run.querySelectorAll('td.prediction')).map((td) => td.textContent),
    scores: Array.from(run.querySelectorAll('td.score')).map((td) => td.textContent),
    marked: Array.from(run.querySelectorAll('tr.is-gold td.prediction')).map((td) => td.textContent),
    hit10: run.querySelector('.badge[data-k="10"]').textContent}))}));"""


def _select(driver, element_id: str, text: str) -> None:
    from selenium.webdriver.support.ui import Select  # the test extra

    Select(driver.find_element("id", element_id)).select_by_visible_text(text)


def _shown(driver, expected_count: int) -> list[dict]:
    wait_for(driver, lambda d: d.find_element("id", "browser-section").get_attribute("data-shown") == str(expected_count))
    return driver.execute_script(SHOWN)


def _check_cards(cards: list[dict], rows: dict[str, dict[str, dict]]) -> None:
    """Every card shows its query's rows as predictions.jsonl holds them, each run side by side."""
    for card in cards:
        first = rows["base"][card["id"]]
        assert card["relation"] == first["relation"] and card["input"] == first["input"]
        assert sorted(card["gold"]) == sorted(first["gold"])
        assert [run["label"] for run in card["runs"]] == ["base", "better"]
        for run in card["runs"]:
            row = rows[run["label"]][card["id"]]
            assert run["predictions"] == row["predictions"]
            assert [float(s) for s in run["scores"]] == pytest.approx(row["scores"])
            assert run["marked"] == [p for p in row["predictions"] if p in row["gold"]]
            assert run["rank"] == (f"gold rank {row['gold_rank']}" if row["gold_rank"] else "gold not ranked")
            assert run["hit10"] == ("hit@10" if row["hit@10"] else "miss@10")


def test_report_page_filters_searches_and_shows_text_as_text(browser, tmp_path):
    runs = written_runs(tmp_path / "runs")
    page = tmp_path / "page.html"
    assert main(["report", *map(str, runs), "--out", str(page), "--resamples", "100"]) == 0
    rows = {label: {row["id"]: row for row in predictions(folder)} for label, folder in zip(("base", "better"), runs)}
    order = list(rows["base"])  # the first run's query order
    browser.get(page.as_uri())
    wait_for(browser, lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "true")

    # the leaderboard is compare's, and the chart has one bar per run and relation
    record = compare_runs(load_runs(runs), CompareSettings(resamples=100))
    table = browser.execute_script("return Array.from(document.querySelectorAll('#leaderboard tr')).slice(1)"
                                   ".map((tr) => Array.from(tr.cells).map((td) => td.textContent))")
    for cells, entry in zip(table, record["leaderboard"], strict=True):
        value, (low, high) = entry["acc@10"]["value"], entry["acc@10"]["interval"]
        assert cells[0] == entry["label"] and cells[3] == f"{100 * value:.2f} [{100 * low:.2f}, {100 * high:.2f}]"
    assert len(browser.find_elements("css selector", "#chart svg rect.bar")) == 2 * 3

    # page by page: 10 per page, in the first run's order
    _select(browser, "page-size", "10")
    _check_cards(cards := _shown(browser, len(order)), rows)
    assert [card["id"] for card in cards] == order[:10]
    assert browser.find_element("id", "count").text == f"queries 1-10 of {len(order)}, page 1/4"
    browser.find_element("id", "next").click()
    assert [card["id"] for card in _shown(browser, len(order))] == order[10:20]
    _select(browser, "page-size", "100")

    # by relation
    _select(browser, "filter-relation", "may_treat")
    wanted = [qid for qid in order if rows["base"][qid]["relation"] == "may_treat"]
    _check_cards(cards := _shown(browser, len(wanted)), rows)
    assert [card["id"] for card in cards] == wanted
    _select(browser, "filter-relation", "all relations")

    # missed by the first run and hit by the second, at k = 10 and then at k = 1
    selects = browser.find_elements("css selector", "select.filter-run")
    from selenium.webdriver.support.ui import Select  # the test extra

    Select(selects[0]).select_by_value("miss")
    Select(selects[1]).select_by_value("hit")
    for k in (10, 1):
        _select(browser, "filter-k", str(k))
        wanted = [qid for qid in order if not rows["base"][qid][f"hit@{k}"] and rows["better"][qid][f"hit@{k}"]]
        assert wanted  # the runs differ on some queries
        _check_cards(cards := _shown(browser, len(wanted)), rows)
        assert [card["id"] for card in cards] == wanted
    Select(selects[0]).select_by_value("")
    Select(selects[1]).select_by_value("")

    # hit or miss in either run: the runs disagree, and missed by at least one
    for how, keep in (("the runs disagree", lambda a, b: a != b), ("missed by at least one", lambda a, b: not (a and b))):
        _select(browser, "filter-across", how)
        wanted = [qid for qid in order if keep(rows["base"][qid]["hit@1"], rows["better"][qid]["hit@1"])]
        _check_cards(cards := _shown(browser, len(wanted)), rows)
        assert [card["id"] for card in cards] == wanted
    _select(browser, "filter-across", "any")

    # a search, case-insensitive, over the id, input, gold answers and every run's predictions
    browser.find_element("id", "search").send_keys("ONERROR")
    term = "onerror"
    wanted = [qid for qid in order if any(
        term in text.lower() for label in rows for text in (qid, rows[label][qid]["input"], *rows[label][qid]["gold"],
                                                            *rows[label][qid]["predictions"]))]
    assert 0 < len(wanted) < len(order)
    _check_cards(cards := _shown(browser, len(wanted)), rows)
    assert [card["id"] for card in cards] == wanted

    # markup in names and inputs is shown as written, and nothing of it ran or became an element
    assert any(MARKUP_NAMES[1] in card["gold"] for card in cards)
    cell = browser.execute_script("return Array.from(document.querySelectorAll('td.prediction'))"
                                  ".find((td) => td.textContent === arguments[0])", MARKUP_NAMES[0])
    assert cell.text == MARKUP_NAMES[0]
    assert browser.execute_script("return window.__ran === undefined && "
                                  "document.querySelectorAll('#queries script, #queries img, #queries b, "
                                  "#queries i').length === 0")
    assert browser.execute_script("return document.querySelectorAll('script').length") == 2  # data and code

    # and the page's policy stands behind that: markup that reached the page some other way runs no handler
    browser.execute_script("document.addEventListener('securitypolicyviolation', () => { window.__refused = true; });"
                           "document.body.insertAdjacentHTML('beforeend', '<img src=\"x\" onerror=\"window.__ran = 1\">');")
    wait_for(browser, lambda d: d.execute_script("return window.__refused === true"))
    assert browser.execute_script("return window.__ran === undefined")
