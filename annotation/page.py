"""``annotate.html``: the rating page, one self-contained file (no network; opens from ``file://``).

Each query shows its text and relation and, below it, its predictions in the sheet's blind order, each with the
five levels as buttons. Keys: ``1``-``5`` rate the current prediction and move to the next, the arrows move
(down/right: next, up/left: previous), ``0`` or Backspace clears. A bar counts the ratings given. Every change is
saved at once in the browser (``localStorage``, under the sheet's id), so a closed tab or a reload loses
nothing; "Export ratings" saves them as ``ratings-RATER.json`` for ``medlama annotate score``. Names are data
(:mod:`medlama.core.html_page`): shown as text, never run.
"""

from __future__ import annotations

from medlama.annotation.sheet import LEVELS, Sheet
from medlama.core.html_page import html_page

#: The format marker of the JSON the page exports (read by :mod:`medlama.annotation.ratings`).
EXPORT_KEY, EXPORT_FORMAT = "medlama_annotation", 1

STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d2330;
       background: #f4f5f7; }
header { position: sticky; top: 0; z-index: 2; background: #fff; border-bottom: 1px solid #d8dce3;
         padding: 10px 24px; display: flex; flex-wrap: wrap; gap: 10px 24px; align-items: center; }
header h1 { font-size: 17px; margin: 0; }
header .sheet { color: #667085; font-size: 13px; }
#progress-bar { width: 220px; height: 10px; }
button { font: inherit; cursor: pointer; border: 1px solid #c3c8d2; background: #fff; border-radius: 6px;
         padding: 3px 10px; }
button.primary { background: #2457c5; border-color: #2457c5; color: #fff; }
#warning { display: none; background: #fff4d6; border-bottom: 1px solid #e8c66a; padding: 6px 24px; }
main { max-width: 1080px; margin: 0 auto; padding: 12px 24px 80px; }
.legend { display: grid; grid-template-columns: repeat(5, 1fr); gap: 8px; margin: 8px 0 16px; font-size: 13px; }
.legend div { background: #fff; border: 1px solid #d8dce3; border-radius: 6px; padding: 6px 8px; }
.legend b { display: inline-block; width: 1.4em; }
.query { background: #fff; border: 1px solid #d8dce3; border-radius: 8px; margin: 0 0 16px; padding: 12px 16px; }
.query h2 { font-size: 16px; margin: 0 0 2px; white-space: pre-wrap; }
.query .relation { color: #667085; font-size: 13px; margin-bottom: 8px; }
.item { display: flex; align-items: center; gap: 12px; padding: 5px 8px; border-radius: 6px;
        border: 2px solid transparent; }
.item.current { border-color: #2457c5; background: #eef3ff; }
.item .number { color: #98a2b3; width: 2.6em; text-align: right; font-size: 13px; }
.item .prediction { flex: 1; white-space: pre-wrap; overflow-wrap: anywhere; }
.item .levels button { width: 2.2em; padding: 3px 0; margin-left: 2px; }
.item .levels button.chosen { color: #fff; font-weight: 600; }
.levels button.chosen.l5 { background: #1a7f37; border-color: #1a7f37; }
.levels button.chosen.l4 { background: #4c9a2a; border-color: #4c9a2a; }
.levels button.chosen.l3 { background: #b7791f; border-color: #b7791f; }
.levels button.chosen.l2 { background: #c2410c; border-color: #c2410c; }
.levels button.chosen.l1 { background: #b42318; border-color: #b42318; }
.keys { color: #667085; font-size: 13px; }
"""

SCRIPT = r"""
"use strict";
const SHEET = JSON.parse(document.getElementById("sheet-data").textContent);
const KEY = "medlama-annotate:" + SHEET.sheet;
const items = [];
const rows = [];
let ratings = {};
let current = 0;
let saving = true;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function load() {
  try {
    const saved = JSON.parse(window.localStorage.getItem(KEY) || "null");
    if (saved && saved.sheet === SHEET.sheet) {
      ratings = saved.ratings || {};
      current = Math.min(Math.max(0, saved.current | 0), items.length - 1);
      document.getElementById("rater").value = saved.rater || "";
    }
  } catch (error) {
    warn("This browser does not keep the ratings (" + error + "): export them before closing the page.");
    saving = false;
  }
}

function save() {
  if (!saving) return;
  try {
    window.localStorage.setItem(KEY, JSON.stringify({sheet: SHEET.sheet, ratings: ratings, current: current,
                                                     rater: document.getElementById("rater").value}));
  } catch (error) {
    warn("The ratings could not be saved in this browser (" + error + "): export them before closing the page.");
  }
}

function warn(text) {
  const box = document.getElementById("warning");
  box.textContent = text;
  box.style.display = "block";
}

function build() {
  const main = document.getElementById("queries");
  const legend = document.getElementById("legend");
  for (const [level, words] of SHEET.levels) {
    const box = el("div");
    box.appendChild(el("b", "", String(level)));
    box.appendChild(document.createTextNode(words));
    legend.appendChild(box);
  }
  SHEET.queries.forEach((query, q) => {
    const card = el("section", "query");
    card.appendChild(el("h2", "", (q + 1) + ". " + query.query));
    card.appendChild(el("div", "relation", query.relation + " \u00b7 " + query.id));
    for (const prediction of query.predictions) {
      const index = items.length;
      const item = {item: index + 1, query_id: query.id, prediction: prediction};
      items.push(item);
      const row = el("div", "item");
      row.dataset.item = String(item.item);
      row.appendChild(el("span", "number", String(item.item)));
      row.appendChild(el("span", "prediction", prediction));
      const levels = el("span", "levels");
      for (let level = 1; level <= 5; level++) {
        const button = el("button", "l" + level, String(level));
        button.type = "button";
        button.title = SHEET.levels.find(pair => pair[0] === level)[1];
        button.addEventListener("click", event => { event.stopPropagation(); current = index; rate(level); });
        levels.appendChild(button);
      }
      row.appendChild(levels);
      row.addEventListener("click", () => { current = index; show(); save(); });
      card.appendChild(row);
      rows.push(row);
    }
    main.appendChild(card);
  });
}

function show() {
  rows.forEach((row, index) => {
    const given = ratings[String(index + 1)];
    row.classList.toggle("current", index === current);
    row.querySelectorAll("button").forEach((button, b) => button.classList.toggle("chosen", given === b + 1));
  });
  const done = items.filter(item => ratings[String(item.item)] !== undefined).length;
  document.getElementById("progress-bar").value = done;
  document.getElementById("progress-bar").max = items.length;
  document.getElementById("progress-text").textContent = done + " / " + items.length + " rated";
  if (rows[current]) rows[current].scrollIntoView({block: "nearest"});
}

function rate(level) {
  ratings[String(current + 1)] = level;
  if (current < items.length - 1) current += 1;
  show();
  save();
}

function move(step) {
  current = Math.min(Math.max(0, current + step), items.length - 1);
  show();
  save();
}

function nextUnrated() {
  for (let step = 1; step <= items.length; step++) {
    const index = (current + step) % items.length;
    if (ratings[String(index + 1)] === undefined) { current = index; break; }
  }
  show();
  save();
}

function exportRatings() {
  const rater = document.getElementById("rater").value.trim();
  const rated = items.filter(item => ratings[String(item.item)] !== undefined)
    .map(item => ({item: item.item, query_id: item.query_id, prediction: item.prediction,
                   rating: ratings[String(item.item)]}));
  const record = {medlama_annotation: SHEET.format, sheet: SHEET.sheet, rater: rater,
                  exported: new Date().toISOString(), items: items.length, ratings: rated};
  const blob = new Blob([JSON.stringify(record, null, 1)], {type: "application/json"});
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = "ratings-" + (rater.replace(/[^A-Za-z0-9_.-]+/g, "_") || "rater") + ".json";
  document.body.appendChild(link);
  link.click();
  link.remove();
  const missing = items.length - rated.length;
  document.getElementById("exported").textContent = missing ?
    "exported; " + missing + " still unrated" : "exported all " + items.length + " ratings";
}

document.addEventListener("keydown", event => {
  if (event.target instanceof HTMLInputElement || event.ctrlKey || event.metaKey || event.altKey) return;
  if (/^[1-5]$/.test(event.key)) { rate(Number(event.key)); event.preventDefault(); }
  else if (event.key === "ArrowDown" || event.key === "ArrowRight") { move(1); event.preventDefault(); }
  else if (event.key === "ArrowUp" || event.key === "ArrowLeft") { move(-1); event.preventDefault(); }
  else if (event.key === "0" || event.key === "Backspace" || event.key === "Delete") {
    delete ratings[String(current + 1)];
    show();
    save();
    event.preventDefault();
  }
});

build();
load();
document.getElementById("rater").addEventListener("input", save);
document.getElementById("export").addEventListener("click", exportRatings);
document.getElementById("next-unrated").addEventListener("click", nextUnrated);
show();
"""

BODY = """<header>
  <h1>Rate the predictions</h1>
  <span class="sheet" id="sheet-name"></span>
  <label>Rater <input id="rater" size="14" placeholder="your name"></label>
  <progress id="progress-bar" value="0" max="1"></progress>
  <span id="progress-text"></span>
  <button type="button" id="next-unrated">Next unrated</button>
  <button type="button" class="primary" id="export">Export ratings</button>
  <span id="exported" class="keys"></span>
</header>
<div id="warning"></div>
<main>
  <p class="keys">Rate how well each prediction answers its query. Keys: <b>1</b>-<b>5</b> rate the highlighted
  prediction and move on; arrows move; <b>0</b> clears. Ratings are saved in this browser as you go; export
  them when done and send the file back.</p>
  <div class="legend" id="legend"></div>
  <div id="queries"></div>
</main>"""


def page_html(sheet: Sheet, title: str) -> str:
    """The rating page of ``sheet`` (module docstring); ``title``: the browser tab's title."""
    data = {"format": EXPORT_FORMAT, "sheet": sheet.id, "k": sheet.k,
            "levels": [[level, words] for level, words in LEVELS.items()], "queries": sheet.to_json()}
    script = SCRIPT + 'document.getElementById("sheet-name").textContent = "sheet " + SHEET.sheet.slice(0, 12);\n'
    return html_page(title=title, style=STYLE, body=BODY, data=data, data_id="sheet-data", script=script)
