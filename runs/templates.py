"""Prompt templates as a run dimension (``medlama probe --templates FILE|release``, ``medlama.probe(...,
templates=...)``): what a template set is, how it is read and checked, and the query set each template gives.

* A template set (:class:`TemplateSet`) holds, per MedLAMA relation, one or more cloze templates with one
  ``[X]`` (the head name) and one ``[Y]`` (the answer slot), as the release's ``prompts.csv``. Read from a
  file (:func:`read_templates`): CSV with the header ``relation,template``, or JSON lines with those two keys
  (``.jsonl`` / ``.json``); rows of a relation in file order, so the j-th row of each relation is template
  ``Tj``. Or the release's own two prompts (``release``): ``default_prompt`` and ``human_prompt``, the built
  folder's ``query_default`` and ``query_human`` columns (how a plain probe reads its ``--prompt-column``).
* Every problem of a file is one error naming the file and the row (CSV: the data row, 1-based; JSON lines:
  the line): a missing or doubled slot, an unknown relation, an empty template, a row repeated.
* Template ``j`` of a probe is one run: every probed relation's j-th template, so each probed relation must
  have the same number of templates (the runs then hold the same queries, and ``compare`` can pair them).
  :func:`template_queries` makes the query set of each template, from the rows' head names; what results
  record of it (:meth:`TemplateSet.record`: the set, the file's SHA-256, the template's name and texts) goes
  into the query set's ``info``, so it is part of each run's ``data`` (and of a resumed run's manifest).

Probing them, and the aggregates over templates, is :mod:`medlama.runs.template_runs`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from medlama.core.defaults import MASK_PLACEHOLDER, SUBJECT_PLACEHOLDER
from medlama.core.errors import MedlamaInputError
from medlama.core.json_lines import json_lines
from medlama.core.settings import Checked, did_you_mean, setting
from medlama.datasets.prompts import fill_prompt
from medlama.loaders.medlama_release import RELATIONS
from medlama.probers.query_set import QuerySet

#: The built-in set: the release's two prompts, as the built folder's query columns hold them filled.
RELEASE = "release"
RELEASE_COLUMNS = {"default_prompt": "query_default", "human_prompt": "query_human"}
#: The keys (CSV header, JSON line keys) of a template file.
KEYS = ("relation", "template")


@dataclass(frozen=True)
class TemplateOptions(Checked):
    """Which templates a probe runs (``medlama probe --templates``)."""

    templates: str | None = setting(None, metavar="FILE|release", show_default="the --prompt-column alone",
                                    help="probe each template as its own run: a CSV (header relation,template) or "
                                         "JSON-lines file of templates with one [X] and one [Y] (several per "
                                         "relation: the j-th of each relation is run Tj), or 'release' (the "
                                         "release's default_prompt and human_prompt); adds best-of, mean, ensemble "
                                         "(with --log-all-scores) and the spread across templates")


@dataclass(frozen=True)
class TemplateSet:
    """Templates per relation (see the module docstring). ``source``: ``release`` or the file's name (never
    a path); ``sha256``: of the file's bytes (the release set: of its description); ``texts``: ``{relation:
    (template, ...)}`` in file order (empty for the release set, whose queries are the built columns)."""

    source: str
    sha256: str
    texts: Mapping[str, tuple[str, ...]]

    @property
    def is_release(self) -> bool:
        return self.source == RELEASE and not self.texts

    def names(self, relations: Sequence[str]) -> list[str]:
        """The template names of a probe of ``relations`` (``T1``, ``T2``, ...; the release's prompt names),
        refusing a relation without templates or relations with unequal numbers of them."""
        if self.is_release:
            return list(RELEASE_COLUMNS)
        counts = {}
        for relation in dict.fromkeys(relations):
            if relation not in self.texts:
                raise MedlamaInputError(f"relation {relation!r} is probed but has no template; add its templates or "
                                        "leave it out with --relations", file=self.source)
            counts[relation] = len(self.texts[relation])
        if len(set(counts.values())) > 1:
            listed = ", ".join(f"{relation}: {count}" for relation, count in counts.items())
            raise MedlamaInputError(f"the probed relations have different numbers of templates ({listed}); template "
                                    "Tj is one run of every relation's j-th template, so give each probed relation "
                                    "the same number", file=self.source)
        return [f"T{j}" for j in range(1, next(iter(counts.values()), 0) + 1)]

    def record(self, name: str, relations: Sequence[str]) -> dict:
        """What a run records of its template ``name`` (its ``data["template"]``): the set, its SHA-256, the
        name and, per probed relation, the template text (the release set: the query column)."""
        entry: dict[str, Any] = {"set": self.source, "sha256": self.sha256, "name": name}
        if self.is_release:
            entry["column"] = RELEASE_COLUMNS[name]
        else:
            j = int(name[1:]) - 1
            entry["per_relation"] = {relation: self.texts[relation][j] for relation in sorted(set(relations))}
        return entry


def release_templates() -> TemplateSet:
    """The built-in set: the release's ``default_prompt`` and ``human_prompt``."""
    description = json.dumps({"set": RELEASE, "columns": RELEASE_COLUMNS}, sort_keys=True)
    return TemplateSet(RELEASE, hashlib.sha256(description.encode()).hexdigest(), {})


def resolve_templates(templates: str | Path | TemplateSet | None) -> TemplateSet | None:
    """``None``, the built-in set (``"release"``), a :class:`TemplateSet`, or the set of a file (checked)."""
    if templates is None or isinstance(templates, TemplateSet):
        return templates
    if not isinstance(templates, (str, Path)) or not str(templates).strip():
        raise MedlamaInputError(f"templates must be a template file or 'release', not {templates!r}")
    if str(templates) == RELEASE:
        return release_templates()
    return read_templates(templates)


def _rows(path: Path, text: str) -> list[tuple[int, Any]]:
    """``(row number, record)`` of a CSV (data rows from 1) or JSON-lines (lines from 1) file."""
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = reader.fieldnames or []
        if sorted(header) != sorted(KEYS):
            raise MedlamaInputError(f"the header must be {','.join(KEYS)}, got {','.join(header) or 'nothing'}",
                                    file=path)
        rows = []
        for number, record in enumerate(reader, start=1):
            if None in record or any(record[key] is None for key in KEYS):
                raise MedlamaInputError("wrong number of fields (a template holding a comma must be quoted)",
                                        file=path, row=number)
            rows.append((number, record))
        return rows
    if path.suffix.lower() not in (".jsonl", ".json"):
        raise MedlamaInputError("a template file is CSV (.csv, header relation,template) or JSON lines (.jsonl)",
                                file=path)
    rows = []
    for number, record in json_lines(text.splitlines(), path):
        if not isinstance(record, dict) or sorted(record) != sorted(KEYS) or not all(
                isinstance(record[key], str) for key in KEYS):
            raise MedlamaInputError('each line must be an object {"relation": "...", "template": "..."} of two '
                                    "strings", file=path, row=number)
        rows.append((number, record))
    return rows


def read_templates(file: str | Path) -> TemplateSet:
    """The :class:`TemplateSet` of ``file``, every row checked (module docstring)."""
    path = Path(file)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise MedlamaInputError("no such template file (give a CSV or JSON-lines file, or 'release')",
                                file=path) from None
    except OSError as error:
        raise MedlamaInputError(f"cannot read the template file: {error.strerror or error}", file=path) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise MedlamaInputError(f"not UTF-8 text (byte {error.start})", file=path) from None
    texts: dict[str, list[str]] = {}
    seen: dict[tuple[str, str], int] = {}
    for number, record in _rows(path, text):
        relation, template = record["relation"].strip(), record["template"]
        where = {"file": path, "row": number}
        if relation not in RELATIONS:
            raise MedlamaInputError(f"unknown relation {did_you_mean(relation, RELATIONS)}; MedLAMA's relations are "
                                    f"{', '.join(RELATIONS)}", field="relation", **where)
        if not template.strip():
            raise MedlamaInputError("empty template", field="template", **where)
        for slot, what in ((SUBJECT_PLACEHOLDER, "the head name"), (MASK_PLACEHOLDER, "the answer")):
            count = template.count(slot)
            if count != 1:
                raise MedlamaInputError(f"template {template!r} has {count} {slot} slot(s), needs exactly one "
                                        f"({slot}: {what})", field="template", **where)
        key = (relation, " ".join(template.split()))
        if key in seen:
            raise MedlamaInputError(f"duplicate row: relation {relation!r} has this template already at row "
                                    f"{seen[key]}", field="template", **where)
        seen[key] = number
        texts.setdefault(relation, []).append(template)
    if not texts:
        raise MedlamaInputError("no templates in the file", file=path)
    return TemplateSet(path.name, hashlib.sha256(data).hexdigest(),
                       {relation: tuple(values) for relation, values in texts.items()})


def query_rows(rows: Any, queries: QuerySet) -> dict[str, dict[str, str]]:
    """``{query id: {"head_name", "query_default", "query_human"}}`` of the probed ``queries``, from the rows
    they were read from (a ``datasets.Dataset`` of a MedLAMA config); a query missing there is an error."""
    columns = [column for column in ("head_name", *RELEASE_COLUMNS.values()) if column in rows.column_names]
    if "head_name" not in columns:
        raise MedlamaInputError("templates fill [X] with each query's head name, and these rows have no head_name "
                                "column")
    wanted = set(queries.ids)
    table = {"id": rows["id"], **{column: rows[column] for column in columns}}
    found = {qid: {column: table[column][i] for column in columns} for i, qid in enumerate(table["id"])
             if qid in wanted}
    missing = [qid for qid in queries.ids if qid not in found]
    if missing:
        raise MedlamaInputError(f"query {missing[0]!r} is not among the rows its templates are filled from")
    return found


def template_queries(queries: QuerySet, rows: Mapping[str, Mapping[str, str]],
                     templates: TemplateSet) -> list[tuple[str, QuerySet]]:
    """``(template name, its query set)`` of every template: ``queries`` with each text made from the
    template (``[X]`` filled with the row's head name; the release set: the row's query column), and the
    template's record (:meth:`TemplateSet.record`) in ``info["template"]``. The set they were cut from
    (``whole``, where few-shot examples are drawn) is made from the same template, so a template's examples
    read as its queries do, whatever ``--limit`` cut; ``rows`` covers it."""
    out = []
    for name in templates.names(queries.relations):
        record = templates.record(name, queries.relations)

        def texts(part: QuerySet) -> list[str]:
            if templates.is_release:
                return [rows[qid][RELEASE_COLUMNS[name]] for qid in part.ids]
            per = record["per_relation"]
            # a relation of the whole set that is not probed keeps its text (no example is drawn from it)
            return [fill_prompt(per[relation], rows[qid]["head_name"]) if relation in per else text
                    for qid, relation, text in zip(part.ids, part.relations, part.texts)]

        whole = None if queries.whole is None else replace(queries.whole, texts=texts(queries.whole))
        out.append((name, replace(queries, texts=texts(queries), info={**queries.info, "template": record},
                                  whole=whole)))
    return out


__all__ = ["KEYS", "RELEASE", "RELEASE_COLUMNS", "TemplateOptions", "TemplateSet", "query_rows", "read_templates",
           "release_templates", "resolve_templates", "template_queries"]
