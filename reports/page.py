"""The results page's document (:func:`render_page`): its fixed markup (below), its style and script (the
package's ``assets/results.css`` and ``assets/results.js``), and its data embedded as JSON
(:func:`medlama.core.html_page.html_page`). The script renders every name, query and label with
``textContent`` (never as markup), only the page of queries in view, and filters and searches in memory, so
the full hard set with several runs stays responsive."""

from __future__ import annotations

from importlib import resources

from medlama.core.html_page import html_page

#: The id of the data element the script reads.
DATA_ID = "page-data"

#: The page's fixed markup: empty containers the script fills from the data.
BODY = """<header>
<h1 id="title">medlama results</h1>
<p id="subtitle" class="muted"></p>
</header>
<noscript><p>This page draws its tables, chart and query browser with JavaScript; allow scripts for this file.</p></noscript>
<main>
<section id="leaderboard-section">
<h2>Leaderboard</h2>
<div class="table-wrap"><table id="leaderboard"></table></div>
<p id="leaderboard-caption" class="caption"></p>
<div class="table-wrap"><table id="differences"></table></div>
<p id="differences-caption" class="caption"></p>
</section>
<section id="calibration-section">
<h2>Calibration of the top-1 prediction</h2>
<div class="table-wrap"><table id="calibration"></table></div>
<p id="calibration-caption" class="caption"></p>
<div class="table-wrap"><table id="calibration-differences"></table></div>
</section>
<section id="chart-section">
<h2>acc@k per relation</h2>
<div class="controls"><label>k <select id="chart-k"></select></label>
<label>order <select id="chart-order"><option value="name">by name</option><option value="value">by acc, highest first</option></select></label></div>
<div id="chart-legend" class="legend"></div>
<div id="chart"></div>
<p id="chart-caption" class="caption"></p>
</section>
<section id="consistency-section">
<h2>Inverse consistency</h2>
<div class="table-wrap"><table id="consistency"></table></div>
<p id="consistency-caption" class="caption"></p>
</section>
<section id="browser-section">
<h2>Queries</h2>
<div class="controls" id="filters">
<label>relation <select id="filter-relation"><option value="">all relations</option></select></label>
<label>hit/miss at k <select id="filter-k"></select></label>
<span id="filter-runs"></span>
<label id="across-label">across runs <select id="filter-across"><option value="">any</option><option value="some-hit">hit by at least one</option><option value="some-miss">missed by at least one</option><option value="all-hit">hit by all</option><option value="all-miss">missed by all</option><option value="disagree">the runs disagree</option></select></label>
<label class="grow">search <input id="search" type="search" placeholder="query, id, gold answer or prediction" autocomplete="off"></label>
<label>per page <select id="page-size"><option>10</option><option selected>25</option><option>50</option><option>100</option></select></label>
</div>
<div class="pager"><button id="prev" type="button">&#8249; previous</button><span id="count"></span><button id="next" type="button">next &#8250;</button></div>
<div id="queries"></div>
<div class="pager"><button id="prev-bottom" type="button">&#8249; previous</button><span id="count-bottom"></span><button id="next-bottom" type="button">next &#8250;</button></div>
</section>
<section id="about-section">
<h2>Runs and provenance</h2>
<div class="table-wrap"><table id="inputs"></table></div>
<p id="provenance" class="caption"></p>
</section>
</main>"""


def _asset(name: str) -> str:
    return resources.files("medlama.reports").joinpath("assets", name).read_text(encoding="utf-8")


def render_page(data: dict) -> str:
    """The self-contained HTML of the page's ``data`` (:func:`medlama.reports.page_data.page_data`)."""
    return html_page(title=data["title"], style=_asset("results.css"), script=_asset("results.js"), body=BODY,
                     data=data, data_id=DATA_ID)
