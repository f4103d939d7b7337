// medlama's results page: renders the JSON data embedded in #page-data. Every piece of data is set with
// textContent (or as an attribute value), never parsed as markup; only the page of queries in view is drawn.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("page-data").textContent);
  const runs = data.runs, names = data.names, Q = data.queries, n = Q.id.length;
  const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                  "#bcbd22", "#17becf"];
  const SVG = "http://www.w3.org/2000/svg";
  const level = data.method.settings.level;

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function pct(x) { return x === null || x === undefined ? "-" : (100 * x).toFixed(2); }
  function withCi(entry, signed) {
    let value = entry.value !== undefined ? entry.value : entry.difference;
    if (signed && Math.abs(value) < 5e-5) value = 0;
    let text = signed ? (value >= 0 ? "+" : "") + (100 * value).toFixed(2) : pct(value);
    if (entry.interval) text += " [" + pct(entry.interval[0]) + ", " + pct(entry.interval[1]) + "]";
    return text;
  }
  function pValue(p) { return p < 0.001 ? p.toPrecision(2) : p.toFixed(3); }
  function row(table, cells, header) {
    const tr = el("tr");
    cells.forEach((cell) => tr.appendChild(el(header ? "th" : "td", {}, cell)));
    table.appendChild(tr);
    return tr;
  }
  function swatch(i) { return el("span", {class: "swatch", "data-color": String(i % COLORS.length)}); }

  // ------------------------------------------------------------------ calibration (Brier, ECE of the top-1)
  function drawCalibration(percent) {
    const cal = data.calibration, table = document.getElementById("calibration");
    const diffs = document.getElementById("calibration-differences");
    if (!cal) { document.getElementById("calibration-section").remove(); return; }
    function num(entry, signed) {
      const value = entry.value !== undefined ? entry.value : entry.difference;
      let text = (signed && value >= 0 ? "+" : "") + value.toFixed(4);
      if (entry.interval) text += " [" + entry.interval[0].toFixed(4) + ", " + entry.interval[1].toFixed(4) + "]";
      return text;
    }
    row(table, ["run", "queries", "Brier", "ECE", "note"], true);
    cal.leaderboard.forEach((e) => row(table, e.absent ? [e.label, "-", "-", "-", e.absent]
      : [e.label, e.queries.toLocaleString("en"), num(e.brier), num(e.ece), ""]));
    document.getElementById("calibration-caption").textContent =
      "confidence: " + cal.method.confidence + "; Brier: " + cal.method.brier + "; ECE: " + cal.method.ece +
      ". [" + percent + " bootstrap interval]; the differences: " + cal.method.difference + ".";
    if (!cal.comparisons.length) { diffs.remove(); return; }
    row(diffs, ["run minus " + cal.comparisons[0].baseline, "queries", "Δ Brier", "Δ ECE", "note"], true);
    cal.comparisons.forEach((c) => row(diffs, c.absent ? [c.run, "-", "-", "-", c.absent]
      : [c.run, c.queries.toLocaleString("en"), num(c.brier, true), num(c.ece, true), ""]));
  }

  // ------------------------------------------------------------------ header and leaderboard
  document.title = data.title;
  document.getElementById("title").textContent = data.title;
  const ds = data.dataset;
  document.getElementById("subtitle").textContent =
    [ds.dataset, ds.config].filter(Boolean).join(" ") + ": " + n.toLocaleString("en") + " queries, " +
    data.relations.length + " relation" + (data.relations.length === 1 ? "" : "s") + ", " + runs.length +
    " run" + (runs.length === 1 ? "" : "s");

  const ks = data.ks, percent = (100 * level).toString() + "%";
  const board = document.getElementById("leaderboard");
  row(board, ["run"].concat(ks.map((k) => "acc@" + k), ks.map((k) => "macro acc@" + k)), true);
  data.leaderboard.forEach((entry, i) => {
    const tr = row(board, [entry.label].concat(ks.map((k) => withCi(entry["acc@" + k])),
                                              ks.map((k) => withCi(entry["acc@" + k + "_macro"]))));
    tr.firstChild.prepend(swatch(i));
  });
  document.getElementById("leaderboard-caption").textContent =
    "acc@k in %, [" + percent + " bootstrap interval, " + data.method.settings.resamples +
    " resamples, seed " + data.method.settings.seed + "]; micro: over queries; macro: mean over relations " +
    "(stratified bootstrap). The same numbers as medlama compare.";
  drawCalibration(percent);
  const diff = document.getElementById("differences");
  if (data.comparisons.length) {
    // runs probed with templates are each paired with the first run of their own template (medlama compare)
    const paired = data.comparisons.some((c) => c.templates) ||
      new Set(data.comparisons.map((c) => c.baseline)).size > 1;
    const base = paired ? "its baseline" : data.comparisons[0].baseline;
    const template = (t) => (t ? t.name : "-");
    row(diff, ["run minus " + base].concat(paired ? ["baseline", "templates"] : [],
                                           ...ks.map((k) => ["Δ acc@" + k, "b/c", "p"]),
                                           ks.map((k) => "Δ macro acc@" + k)), true);
    data.comparisons.forEach((c) => row(diff, [c.run].concat(
      paired ? [c.baseline, c.templates ? template(c.templates.run) + " vs " + template(c.templates.baseline) : ""]
             : [],
      ...ks.map((k) => [withCi(c["acc@" + k], true), c["acc@" + k].a_only + "/" + c["acc@" + k].b_only,
                        pValue(c["acc@" + k].p_value)]),
      ks.map((k) => withCi(c["acc@" + k + "_macro"], true)))));
    document.getElementById("differences-caption").textContent =
      "percentage points, on the same queries; [" + percent + " paired bootstrap interval]; b/c: queries only " +
      (paired ? "the baseline" : base) + " / only the run gets right; p: McNemar's exact test" +
      (paired ? "; baseline: the first run of the same template (else the first run)." : ".");
  } else {
    diff.remove();
  }

  // ------------------------------------------------------------------ inverse consistency (medlama consistency)
  const consistency = data.consistency || [];
  if (consistency.length) {
    const table = document.getElementById("consistency");
    const share = (s) => withCi(s) + " (" + s.count + "/" + s.of + ")";
    row(table, ["run", "k", "pair", "facts", "both", "r only", "r' only", "neither", "P(r'|r)", "P(r|r')"], true);
    consistency.forEach((entry) => Object.entries(entry.by_k).forEach(([k, pairs]) =>
      Object.entries(pairs).forEach(([pair, s]) => row(table, [entry.label, k, pair, String(s.facts),
        share(s.both), share(s.forward_only), share(s.backward_only), share(s.neither),
        share(s.backward_given_forward), share(s.forward_given_backward)]))));
    document.getElementById("consistency-caption").textContent =
      "Facts (s, r, o) of an inverse relation pair whose inverse (o, r', s) was probed too, paired by CUI: right " +
      "in r when o is in the top k of (s, r), in r' when s is in the top k of (o, r'); % with [" +
      (100 * consistency[0].level) + "% bootstrap interval] (facts resampled), counts in brackets. From each " +
      "run's consistency.json.";
  } else {
    document.getElementById("consistency-section").remove();
  }
  // ------------------------------------------------------------------ across templates (medlama probe --templates)
  const section = document.getElementById("leaderboard-section");
  (data.templates || []).forEach((t) => {
    const s = t.summary, table = el("table"), wrap = el("div", {class: "table-wrap"});
    row(table, ["template (" + t.folder + ", " + s.set + ")"].concat(ks.map((k) => "acc@" + k),
                                                                  ks.map((k) => "macro acc@" + k)), true);
    const cells = (entry) => ks.map((k) => pct(entry["acc@" + k]))
      .concat(ks.map((k) => pct(entry["acc@" + k + "_macro"])));
    s.templates.forEach((e) => row(table, [e.run].concat(cells(s.per_template[e.name]))));
    row(table, ["best-of (chosen on test)"].concat(cells(s.best_of)));
    row(table, ["mean over templates"].concat(cells(s.mean)));
    row(table, ["ensemble"].concat(cells(s.ensemble)));
    wrap.appendChild(table);
    section.appendChild(wrap);
    section.appendChild(el("p", {class: "caption"}, "acc@k in % across templates. best-of: " + s.best_of.caveat +
      ". ensemble: " + (s.ensemble.run ? s.method.ensemble : s.ensemble.note) + "."));
  });

  // ------------------------------------------------------------------ acc@k per relation (inline SVG)
  const chartK = document.getElementById("chart-k"), chartOrder = document.getElementById("chart-order");
  ks.forEach((k) => chartK.appendChild(el("option", {value: String(k)}, "acc@" + k)));
  chartK.value = String(ks[ks.length - 1]);
  const legend = document.getElementById("chart-legend");
  runs.forEach((run, i) => {
    const item = el("span", {class: "legend-item"});
    item.appendChild(swatch(i));
    item.appendChild(document.createTextNode(run.label));
    legend.appendChild(item);
  });
  function drawChart() {
    const k = chartK.value, chart = document.getElementById("chart");
    clear(chart);
    let relations = data.relations.slice();
    if (chartOrder.value === "value") {  // highest mean acc over the runs first; ties by name
      const mean = (r) => runs.reduce((sum, run) => sum + run.per_relation[k][r].value, 0) / runs.length;
      relations.sort((a, b) => mean(b) - mean(a) || (a < b ? -1 : 1));
    }
    const longest = Math.max(...relations.map((r) => r.length));
    const bar = 12, gap = 10, labelWidth = Math.min(380, 16 + 6.6 * longest), plotWidth = 620, top = 24;
    const groupHeight = runs.length * bar + gap, height = top + relations.length * groupHeight + 8;
    let high = 0;
    runs.forEach((run) => relations.forEach((r) => {
      const e = run.per_relation[k][r];
      high = Math.max(high, e.interval ? e.interval[1] : e.value);
    }));
    // a round axis: the smallest step giving at most 6 ticks, the axis ending at the first tick past the data
    const step = [0.01, 0.02, 0.05, 0.1, 0.2, 0.25].find((s) => Math.ceil(Math.max(high, 0.01) / s) <= 6) || 0.25;
    const ticks = Math.max(1, Math.ceil(Math.min(1, Math.max(high, 0.01)) / step - 1e-9));
    const scale = Math.min(1, ticks * step);
    const x = (v) => labelWidth + plotWidth * v / scale;
    const root = svg("svg", {viewBox: "0 0 " + (labelWidth + plotWidth + 20) + " " + height, role: "img",
                            "aria-label": "acc@" + k + " per relation"});
    for (let t = 0; t <= ticks; t++) {
      const v = Math.min(1, t * step);
      root.appendChild(svg("line", {x1: x(v), x2: x(v), y1: top - 4, y2: height - 8, class: "grid"}));
      root.appendChild(svg("text", {x: x(v), y: top - 8, class: "tick", "text-anchor": "middle"},
                           (100 * v).toFixed(0) + "%"));
    }
    relations.forEach((relation, j) => {
      const y0 = top + j * groupHeight;
      const label = svg("text", {x: labelWidth - 8, y: y0 + runs.length * bar / 2 + 4, class: "label",
                                 "text-anchor": "end"}, relation);
      root.appendChild(label);
      runs.forEach((run, i) => {
        const e = run.per_relation[k][relation], y = y0 + i * bar;
        const rect = svg("rect", {x: labelWidth, y: y + 1, width: Math.max(0, x(e.value) - labelWidth),
                                  height: bar - 2, class: "bar c" + (i % COLORS.length)});
        rect.appendChild(svg("title", {}, run.label + ", " + relation + ": acc@" + k + " = " + pct(e.value) +
          "%" + (e.interval ? " [" + pct(e.interval[0]) + ", " + pct(e.interval[1]) + "]" : "") + ", " +
          e.queries + " queries"));
        root.appendChild(rect);
        if (e.interval) {
          const ym = y + bar / 2;
          root.appendChild(svg("line", {x1: x(e.interval[0]), x2: x(e.interval[1]), y1: ym, y2: ym, class: "err"}));
        }
      });
    });
    chart.appendChild(root);
    document.getElementById("chart-caption").textContent =
      "acc@" + k + " of each relation's queries, with the " + percent + " percentile-bootstrap interval of " +
      "that relation's queries (" + data.method.settings.resamples + " resamples, seed " +
      data.method.settings.seed + ").";
  }
  chartK.addEventListener("change", drawChart);
  chartOrder.addEventListener("change", drawChart);
  drawChart();

  // ------------------------------------------------------------------ query browser
  const fRelation = document.getElementById("filter-relation"), fK = document.getElementById("filter-k");
  const search = document.getElementById("search"), pageSize = document.getElementById("page-size");
  data.relations.forEach((r, i) => fRelation.appendChild(el("option", {value: String(i)}, r)));
  ks.forEach((k) => fK.appendChild(el("option", {value: String(k)}, String(k))));
  fK.value = String(ks[ks.length - 1]);
  const runFilters = runs.map((run, i) => {
    const label = el("label", {}, run.label + " ");
    label.prepend(swatch(i));
    const select = el("select", {class: "filter-run", "data-run": String(i)});
    [["", "any"], ["hit", "hit"], ["miss", "miss"]].forEach(([v, t]) => select.appendChild(el("option", {value: v}, t)));
    label.appendChild(select);
    document.getElementById("filter-runs").appendChild(label);
    return select;
  });

  const across = document.getElementById("filter-across");
  if (runs.length < 2) document.getElementById("across-label").remove();
  function acrossRuns(how, q, k) {  // the "across runs" filter: hits of every run at k, taken together
    let hits = 0;
    for (const run of runs) if (run.hits[k].charCodeAt(q) === 49) hits++;
    return how === "some-hit" ? hits > 0 : how === "some-miss" ? hits < runs.length : how === "all-hit" ?
      hits === runs.length : how === "all-miss" ? hits === 0 : hits > 0 && hits < runs.length;
  }

  let haystack = null;  // lower-cased text of each query, made on the first search
  function searchText(q) {
    const parts = [Q.id[q], Q.input ? Q.input[q] || "" : ""];
    Q.gold[q].forEach((g) => parts.push(names[g]));
    runs.forEach((run) => {
      run.predictions[q].forEach((p) => parts.push(names[p]));
      if (run.inputs && run.inputs[q]) parts.push(run.inputs[q]);
    });
    return parts.join("\u0000").toLowerCase();
  }

  let shown = [], page = 0;
  function applyFilters() {
    const relation = fRelation.value === "" ? -1 : Number(fRelation.value), k = fK.value;
    const wanted = runFilters.map((s) => s.value), term = search.value.trim().toLowerCase();
    if (term && haystack === null) {
      haystack = new Array(n);
      for (let q = 0; q < n; q++) haystack[q] = searchText(q);
    }
    shown = [];
    for (let q = 0; q < n; q++) {
      if (relation >= 0 && Q.relation[q] !== relation) continue;
      let keep = true;
      for (let i = 0; i < runs.length && keep; i++) {
        if (!wanted[i]) continue;
        const hit = runs[i].hits[k].charCodeAt(q) === 49;
        keep = wanted[i] === "hit" ? hit : !hit;
      }
      if (keep && across.value && !acrossRuns(across.value, q, k)) keep = false;
      if (keep && term && haystack[q].indexOf(term) < 0) keep = false;
      if (keep) shown.push(q);
    }
    page = 0;
    drawQueries();
  }

  function runColumn(run, i, q, goldSet) {
    const column = el("div", {class: "run", "data-run": String(i)});
    const head = el("div", {class: "run-head"});
    head.appendChild(swatch(i));
    head.appendChild(el("span", {class: "run-label"}, run.label));
    column.appendChild(head);
    const rank = run.gold_rank[q];
    const facts = el("div", {class: "run-facts"});
    facts.appendChild(el("span", {class: "gold-rank"}, rank !== null ? "gold rank " + rank : run.ranked ? "gold not ranked" : "gold rank not recorded"));
    if (run.gold_score[q] !== null) facts.appendChild(el("span", {class: "gold-score"}, "score " + run.gold_score[q]));
    ks.forEach((k) => {
      const hit = run.hits[k].charCodeAt(q) === 49;
      facts.appendChild(el("span", {class: "badge " + (hit ? "hit" : "miss"), "data-k": String(k)},
                           (hit ? "hit" : "miss") + "@" + k));
    });
    column.appendChild(facts);
    if (run.inputs && run.inputs[q] !== null && run.inputs[q] !== Q.input[q]) {
      column.appendChild(el("div", {class: "run-input"}, run.inputs[q]));
    }
    const table = el("table", {class: "predictions"});
    run.predictions[q].forEach((p, j) => {
      const tr = el("tr", {class: goldSet.has(p) ? "is-gold" : ""});
      tr.appendChild(el("td", {class: "rank"}, j + 1));
      tr.appendChild(el("td", {class: "prediction"}, names[p]));
      tr.appendChild(el("td", {class: "score"}, run.scores && run.scores[q][j] !== null ? run.scores[q][j] : ""));
      table.appendChild(tr);
    });
    column.appendChild(table);
    return column;
  }

  function queryCard(q) {
    const card = el("article", {class: "query", "data-id": Q.id[q]});
    const head = el("div", {class: "query-head"});
    head.appendChild(el("span", {class: "query-id"}, Q.id[q]));
    head.appendChild(el("span", {class: "query-relation"}, data.relations[Q.relation[q]]));
    card.appendChild(head);
    const input = Q.input ? Q.input[q] : null;
    card.appendChild(el("div", {class: "query-input" + (input === null ? " muted" : "")},
                        input === null ? "(the input was not recorded)" : input));
    const gold = el("div", {class: "gold"});
    gold.appendChild(el("span", {class: "gold-title"}, "gold: "));
    const list = el("ul", {class: "gold-list"});
    Q.gold[q].forEach((g) => list.appendChild(el("li", {}, names[g])));
    gold.appendChild(list);
    card.appendChild(gold);
    const goldSet = new Set(Q.gold[q]);
    const grid = el("div", {class: "runs", "data-columns": String(Math.min(runs.length, 4))});
    runs.forEach((run, i) => grid.appendChild(runColumn(run, i, q, goldSet)));
    card.appendChild(grid);
    return card;
  }

  function drawQueries() {
    const size = Number(pageSize.value), pages = Math.max(1, Math.ceil(shown.length / size));
    page = Math.min(Math.max(0, page), pages - 1);
    const container = document.getElementById("queries");
    clear(container);
    const fragment = document.createDocumentFragment();
    shown.slice(page * size, (page + 1) * size).forEach((q) => fragment.appendChild(queryCard(q)));
    container.appendChild(fragment);
    const text = shown.length === 0 ? "no query matches" :
      "queries " + (page * size + 1).toLocaleString("en") + "-" +
      Math.min(shown.length, (page + 1) * size).toLocaleString("en") + " of " + shown.length.toLocaleString("en") +
      (shown.length !== n ? " (" + n.toLocaleString("en") + " in all)" : "") + ", page " + (page + 1) + "/" + pages;
    ["count", "count-bottom"].forEach((id) => { document.getElementById(id).textContent = text; });
    ["prev", "prev-bottom"].forEach((id) => { document.getElementById(id).disabled = page === 0; });
    ["next", "next-bottom"].forEach((id) => { document.getElementById(id).disabled = page >= pages - 1; });
    document.getElementById("browser-section").setAttribute("data-shown", String(shown.length));
  }
  function turn(by) {
    return () => { page += by; drawQueries(); document.getElementById("filters").scrollIntoView(); };
  }
  ["prev", "prev-bottom"].forEach((id) => document.getElementById(id).addEventListener("click", turn(-1)));
  ["next", "next-bottom"].forEach((id) => document.getElementById(id).addEventListener("click", turn(1)));
  [fRelation, fK, across, ...runFilters].forEach((s) => s.addEventListener("change", applyFilters));
  pageSize.addEventListener("change", () => { page = 0; drawQueries(); });
  let pending = null;
  search.addEventListener("input", () => {
    if (pending !== null) clearTimeout(pending);
    pending = setTimeout(() => { pending = null; applyFilters(); }, 150);
  });

  // ------------------------------------------------------------------ inputs and provenance
  const inputs = document.getElementById("inputs");
  row(inputs, ["run", "folder", "model", "method", "results.json SHA-256", "predictions.jsonl SHA-256"], true);
  (data.inputs || []).forEach((entry, i) => {
    const model = entry.model && typeof entry.model === "object" ?
      (entry.model.name || entry.model.id || JSON.stringify(entry.model)) : entry.model;
    row(inputs, [entry.label, entry.folder, model || "-", runs[i].method || "-",
                 String(entry.results_sha256).slice(0, 16) + "…", String(entry.predictions_sha256).slice(0, 16) + "…"]);
  });
  const prov = data.provenance || {};
  document.getElementById("provenance").textContent =
    "Written by medlama " + ((prov.versions || {}).medlama || "") + (prov.date ? " on " + prov.date : "") +
    "; data: " + JSON.stringify(data.dataset) + ". Scores are shown to 6 significant digits.";

  applyFilters();
  document.body.setAttribute("data-ready", "true");
})();
