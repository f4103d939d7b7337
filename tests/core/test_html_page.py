"""Data inside a self-contained page: JSON that no name can break out of, read back unchanged."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest

from medlama.core.html_page import html_page, json_for_script, json_script

TRICKY = ["</script><script>alert(1)</script>", "<!-- <script>", '"quoted" & \'single\'', "line\u2028para\u2029",
          "</SCRIPT >", "plain"]


def test_json_for_a_script_element_reads_back_and_holds_no_tag():
    text = json_for_script({"names": TRICKY})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"names": TRICKY}


def test_the_page_holds_one_data_element_and_refuses_code_that_ends_its_element():
    page = html_page(title="<b>t</b>", style="body {}", body="<main></main>", data=TRICKY, data_id="d",
                     script="const x = 1;")
    assert "<title>&lt;b&gt;t&lt;/b&gt;</title>" in page
    assert len(re.findall(r"</script>", page, re.I)) == 2  # the data element's and the script's, no other
    inner = page.split('<script type="application/json" id="d">', 1)[1].split("</script>", 1)[0]
    assert json.loads(inner) == TRICKY
    assert json_script([], 'a"b') == '<script type="application/json" id="a&quot;b">[]</script>'
    with pytest.raises(ValueError, match="script holds '</'"):
        html_page(title="t", style="", body="", data=None, data_id="d", script="s = '</div>';")


def test_the_policy_runs_only_the_pages_own_script_and_style_and_fetches_nothing():
    script, style = "document.body.dataset.ready = 1;", "p { color: red; }"
    page = html_page(title="t", style=style, body="", data={}, data_id="d", script=script)
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1)
    inline = {tag: re.search(rf"<{tag}>(.*?)</{tag}>", page, re.S).group(1) for tag in ("script", "style")}
    digest = {tag: base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() for tag, text in inline.items()}
    assert "default-src 'none'" in policy and "unsafe" not in policy
    assert f"script-src 'sha256-{digest['script']}'" in policy and f"style-src 'sha256-{digest['style']}'" in policy
    assert inline["script"].strip() == script and inline["style"].strip() == style
