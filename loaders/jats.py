"""PMC articles as JATS XML: :func:`parse_jats` gives an article's PMC id, title and text (title, abstract and
body paragraphs, one per line), for :func:`medlama.loaders.corpora.read_pmc_articles`.

Parsing is safe without defusedxml: a document declaring entities is refused, and the standard library's
expat parser never fetches external DTDs.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

from medlama.core.errors import MedlamaInputError

_ENTITY_DECLARATION = re.compile(rb"<!ENTITY", re.IGNORECASE)
#: Inline elements whose text is not running prose of a paragraph.
_SKIPPED = {"table-wrap", "fig", "disp-formula", "inline-formula", "tex-math", "math"}
#: Block elements that may sit inside a paragraph: their text is set off by spaces.
_BLOCKS = {"p", "list", "list-item", "disp-quote", "title", "boxed-text", "def-list", "def-item", "term", "def"}


def parse_jats(data: bytes, *, file: str | Path | None = None, default_id: str | None = None) -> dict[str, str]:
    """``doc_id``, ``title`` and ``text`` of one JATS article (bytes of its XML).

    ``doc_id`` is the article's PMC id, else ``default_id``, else the file name without extension.

    Parsing is safe without defusedxml: a document declaring entities (``<!ENTITY``, the way to
    billion-laughs expansion and external entities) is refused, and the standard library's expat
    parser never fetches external DTDs.
    """
    if _ENTITY_DECLARATION.search(data):
        raise MedlamaInputError("XML entity declarations are not accepted (unsafe XML)", file=file)
    try:
        root = ET.fromstring(data)
    except ET.ParseError as error:
        line = error.position[0] if getattr(error, "position", None) else None
        raise MedlamaInputError(f"bad XML: {error}", file=file, row=line) from None
    if _local(root.tag) != "article":
        found = next((el for el in root.iter() if _local(el.tag) == "article"), None)
        if found is None:
            raise MedlamaInputError(f"not a JATS article (root element <{_local(root.tag)}>)", file=file)
        root = found
    meta = next((el for el in root.iter() if _local(el.tag) == "article-meta"), None)
    doc_id = None
    title = ""
    abstract: list[str] = []
    if meta is not None:
        ids = {el.get("pub-id-type"): _clean("".join(el.itertext()))
               for el in meta if _local(el.tag) == "article-id"}
        pmc = ids.get("pmc") or ids.get("pmcid")
        if pmc:
            doc_id = pmc if pmc.upper().startswith("PMC") else f"PMC{pmc}"
        title_el = next((el for el in meta.iter() if _local(el.tag) == "article-title"), None)
        title = _clean("".join(title_el.itertext())) if title_el is not None else ""
        for el in meta.iter():
            if _local(el.tag) == "abstract":
                abstract.extend(_paragraphs(el))
    body = next((el for el in root if _local(el.tag) == "body"), None)
    paragraphs = [title] if title else []
    paragraphs += abstract + (_paragraphs(body) if body is not None else [])
    if doc_id is None:
        doc_id = default_id if default_id is not None else Path(str(file)).stem if file is not None else ""
    return {"doc_id": doc_id, "title": title, "text": "\n".join(p for p in paragraphs if p)}


def _local(tag) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _clean(text: str) -> str:
    return " ".join(text.split())


def _paragraphs(element: ET.Element) -> list[str]:
    """Outermost ``<p>`` elements under ``element`` (a nested ``<p>`` is part of its parent's text)."""
    found: list[str] = []

    def walk(el: ET.Element) -> None:
        for child in el:
            name = _local(child.tag)
            if name in _SKIPPED:
                continue
            if name == "p":
                found.append(_clean("".join(_text(child))))
            else:
                walk(child)

    walk(element)
    return found


def _text(element: ET.Element) -> Iterator[str]:
    """``itertext`` without the skipped elements (formulas, tables, figures)."""
    if element.text:
        yield element.text
    for child in element:
        name = _local(child.tag)
        if name not in _SKIPPED:
            block = name in _BLOCKS
            if block:
                yield " "
            yield from _text(child)
            if block:
                yield " "
        if child.tail:
            yield child.tail
