"""Self-contained HTML pages that treat their data as data: the pages medlama writes (one file, no network,
opened from ``file://``) carry their data as JSON in a ``<script type="application/json">`` element and render
it from their own script with ``textContent``, never as markup.

* :func:`embed_json`: the JSON text of a value, safe inside that element: ``<``, ``>`` and ``&`` are written
  as ``\\u003c``, ``\\u003e``, ``\\u0026`` (so no ``</script>`` or ``<!--`` in the data can end the element or
  open a comment), and U+2028/U+2029 escaped too; ``JSON.parse`` of the element's text gives the value back.
* :func:`self_contained_page`: the whole document: its style, its one script and its data, under a
  Content-Security-Policy that lets only that script and that style run (by their SHA-256) and fetches
  nothing (``default-src 'none'``): even markup that reached the page some other way would run nothing.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from typing import Any

#: The id of the data element: the page's script reads ``document.getElementById(DATA_ID).textContent``.
DATA_ID = "page-data"

_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def embed_json(value: Any) -> str:
    """``value`` as JSON text that can stand inside ``<script type="application/json">`` as it is (module
    docstring). NaN and infinities are refused (JSON has none; the page would fail to parse them)."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return "".join(_ESCAPES.get(char, char) for char in text) if any(c in text for c in _ESCAPES) else text


def csp_source(text: str) -> str:
    """The Content-Security-Policy source allowing exactly the inline element whose content is ``text``."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def self_contained_page(*, title: str, style: str, script: str, body: str, data: Any, lang: str = "en") -> str:
    """One HTML document: ``body`` (the page's fixed markup, written by medlama, never data), ``data`` embedded
    as JSON (:func:`embed_json`, in the element with id :data:`DATA_ID`), ``style`` and ``script`` inline and
    allowed by hash alone; nothing is fetched. ``title`` is escaped."""
    for name, text, tag in (("style", style, "</style"), ("script", script, "</script")):
        if tag in text.lower():
            raise ValueError(f"the page's {name} holds {tag}, which would end its element early")
    policy = "; ".join((
        "default-src 'none'", f"script-src {csp_source(script)}", f"style-src {csp_source(style)}",
        "base-uri 'none'", "form-action 'none'"))
    return "\n".join((
        "<!DOCTYPE html>",
        f'<html lang="{html.escape(lang)}">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(policy)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{style}</style>",
        "</head>",
        "<body>",
        body,
        f'<script type="application/json" id="{DATA_ID}">{embed_json(data)}</script>',
        f"<script>{script}</script>",
        "</body>",
        "</html>",
        ""))
