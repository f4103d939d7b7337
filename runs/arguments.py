"""A probe's arguments, checked before any data is read or model loaded: the Python API
(:func:`medlama.probe`, :func:`medlama.load_medlama`) checks them as strictly as ``medlama probe``'s
parser does, with a :class:`~medlama.core.errors.MedlamaInputError` naming the argument (and the row and field of
a bad query row).

* :class:`ProbeArguments`: ``ks``, ``top_k``, ``match``, ``limit`` and ``device``, checked from their fields
  (:func:`medlama.core.settings.check`) and the device against this machine.
* :func:`relation_names`: ``relations`` as a tuple (one name given as a string is that one relation, never
  its letters); :func:`check_relations`: an unknown relation is an error listing the known ones.
* :func:`check_query_rows`: every row of a loaded MedLAMA ``Dataset`` has the fields a query needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from medlama.core.errors import MedlamaInputError
from medlama.core.models import check_device
from medlama.core.settings import check, did_you_mean, setting
from medlama.datasets.registry import declarations

MATCHES = ("exact", "normalized")


@dataclass(frozen=True)
class ProbeArguments:
    """The scoring and running arguments of :func:`medlama.probe`; no invalid one can be built."""

    ks: tuple[int, ...] | None = setting(None, help="cut-offs to score (none: the dataset's)", min=1)
    top_k: int = setting(10, help="predictions kept per query", min=1)
    match: Literal["exact", "normalized"] | None = setting(None, help="answer matching (none: the dataset's)")
    limit: int | None = setting(None, help="first N queries of each relation (none: all)", min=1)
    device: str | None = setting(None, help="cpu, cuda, cuda:N or mps (none: cuda when there is one, else cpu)")

    def __post_init__(self) -> None:
        check(self)
        if self.ks is not None and not self.ks:
            raise MedlamaInputError("setting 'ks' must list at least one cut-off, e.g. [1, 5, 10] (or be None)")
        check_device(self.device, name="device")


def relation_names(relations: Any, *, name: str = "relations") -> tuple[str, ...] | None:
    """``relations`` as a tuple of names (``None`` or empty: all relations). A string is one relation's name:
    ``"may_treat"`` means ``["may_treat"]``, never its letters."""
    if relations is None:
        return None
    if isinstance(relations, str):
        relations = [relations]
    if isinstance(relations, (bytes, dict)) or not isinstance(relations, Iterable):
        raise MedlamaInputError(f"{name} must be a relation name or a list of them, got {relations!r}")
    names = tuple(relations)
    for position, relation in enumerate(names):
        if not isinstance(relation, str) or not relation:
            raise MedlamaInputError(f"{name}[{position}] must be a relation name (a non-empty string), "
                                    f"got {relation!r}")
    return names or None


def check_relations(wanted: Sequence[str] | None, known: Iterable[str], *, file: str | Path | None = None) -> None:
    """Refuse relations of ``wanted`` that are not ``known``, naming the nearest known one and all of them."""
    known = sorted(set(known))
    unknown = [relation for relation in dict.fromkeys(wanted or ()) if relation not in known]
    if unknown:
        raise MedlamaInputError(f"unknown relation(s) {', '.join(did_you_mean(r, known) for r in unknown)}; "
                                f"known: {', '.join(known)}", file=file)


def check_release_relations(dataset: str, data: Any, relations: Sequence[str] | None) -> None:
    """Before a dataset is built from its release (no ``data`` folder given), refuse relations the release does not
    have, where its declaration knows them without reading it (MedLAMA's)."""
    known = next((d.release_relations for d in declarations() if d.name == dataset), None)
    if known is not None and data is None and relations:
        check_relations(relations, known())


def _text_problem(value: Any) -> str | None:
    return None if isinstance(value, str) and value.strip() else f"must be a non-empty string, got {value!r}"


def _answers_problem(value: Any) -> str | None:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        return f"must be a non-empty list of answer names, got {value!r}"
    for answer in value:
        if _text_problem(answer):
            return f"must hold answer names (non-empty strings), got {answer!r} in {list(value)!r}"
    return None


def check_query_rows(data: Any, prompt_column: str) -> None:
    """Refuse a loaded MedLAMA ``Dataset`` with a row whose ``id``, ``relation``, ``head_name``, prompt or
    ``answer_names`` cannot make a query, naming the row (its index in ``data``) and the field."""
    checks = {"id": lambda v: None if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v) else
              f"must be a query id, got {v!r}",
              "relation": _text_problem, "head_name": _text_problem, prompt_column: _text_problem,
              "answer_names": _answers_problem}
    for column, problem_of in checks.items():
        for row, value in enumerate(data[column]):
            problem = problem_of(value)
            if problem is not None:
                raise MedlamaInputError(f"not a MedLAMA query: {column} {problem}", row=row, field=column)
