"""Self-contained HTML pages that carry their data as JSON: a page opens from ``file://`` with no network, and a
name holding markup (``<script>``, quotes, ``</script>``) is data, never code.

* :func:`json_script`: ``data`` as a ``<script type="application/json">`` element. The JSON is made safe for
  the inside of a script element by escaping ``<``, ``>`` and ``&`` (so no ``</script>`` or ``<!--`` can end or
  change the element) and U+2028/U+2029 as ``\\uXXXX``; ``JSON.parse`` reads the same values back. The page's
  own script reads it with ``JSON.parse(document.getElementById(id).textContent)`` and must put names on the
  page as text (``textContent``, ``createTextNode``), never as HTML.
* :func:`html_page`: the whole document: a title (escaped), a style sheet, a body, the data element and the
  page's script, under a Content-Security-Policy that fetches nothing (``default-src 'none'``) and lets only
  the page's own script and style sheet run, named by their SHA-256 (:func:`csp_source`): markup that reached
  the page some other way (an inline handler, another script element) would run nothing.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from typing import Any

#: What JSON may hold that would change the meaning of the script element around it.
_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def json_for_script(data: Any) -> str:
    """``data`` as JSON text that is safe inside a ``<script>`` element (module docstring)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return "".join(_UNSAFE.get(char, char) for char in text)


def json_script(data: Any, element_id: str) -> str:
    """``<script type="application/json" id="element_id">...</script>`` holding ``data``."""
    return (f'<script type="application/json" id="{html.escape(element_id, quote=True)}">'
            f"{json_for_script(data)}</script>")


def csp_source(text: str) -> str:
    """The Content-Security-Policy source allowing exactly the inline element whose content is ``text``."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def html_page(*, title: str, style: str, body: str, data: Any, data_id: str, script: str) -> str:
    """A complete self-contained HTML document: ``title`` (text), ``style`` (CSS), ``body`` (the page's own
    markup, trusted), ``data`` (JSON in the element ``data_id``) and ``script`` (the page's JavaScript, run
    after the data element). Neither ``style`` nor ``script`` may hold ``</``, which would end its element."""
    for name, code in (("style", style), ("script", script)):
        if "</" in code:
            raise ValueError(f"the page's {name} holds '</', which would end its element early")
    style, script = f"\n{style}\n", f"\n{script}\n"  # the elements' exact content, as hashed for the policy
    policy = (f"default-src 'none'; style-src {csp_source(style)}; script-src {csp_source(script)}; "
              "img-src data:; base-uri 'none'; form-action 'none'")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{style}</style>\n</head>\n<body>\n{body}\n"
            f"{json_script(data, data_id)}\n<script>{script}</script>\n</body>\n</html>\n")
