"""The forms a corpus index matched (``forms.json``), and which of them a knowledge base's view keeps.

A form is an entity with the lower-cased tokens of one or more of its surface forms
(:func:`.matching.form_table`); its code is its position in ``forms.json``, and every raw match an index
stores names the form that matched. A view keeps the forms of its knowledge base's own entities' surface
forms, no other (:func:`allowed_forms`): an alias another knowledge base gives one of its entities is not
its own form.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from medlama.core.errors import MedlamaInputError
from medlama.datasets.context_variance.matching import Form, clean_forms


def read_forms(directory: Path) -> list[Form]:
    """The forms an index matched (``forms.json``), in form-code order."""
    path = directory / "forms.json"
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise MedlamaInputError(f"the index is incomplete ({error}); rebuild it", file=path) from None
    entity_ids = json.loads((directory / "entities.json").read_text(encoding="utf-8"))
    return [Form(entity_ids[code], tuple(tokens), tuple(surface)) for code, tokens, surface in table]


def allowed_forms(forms: Sequence[Form], payload: Sequence[tuple[str, Sequence[str]]], directory: Path) -> set[int]:
    """The codes of the forms of ``payload``'s entities among an index's ``forms``; an error naming a surface
    form the index did not match (a view of it would miss that form's mentions)."""
    codes: dict[tuple[str, str], int] = {}
    for code, form in enumerate(forms):
        for surface in form.surface_forms:
            codes[form.entity_id, surface] = code
    allowed = set()
    for entity_id, surface_forms in payload:
        for surface in clean_forms(surface_forms):
            code = codes.get((entity_id, surface))
            if code is None:
                raise MedlamaInputError(f"the index did not match the form {surface!r} of entity {entity_id!r}; "
                                        "open it with open_or_build to extend it", file=directory)
            allowed.add(code)
    return allowed


def write_forms(directory: Path, forms: Sequence[Form], entity_ids: Sequence[str]) -> None:
    """``forms.json`` of an index whose entities are ``entity_ids`` (in code order)."""
    codes = {entity_id: code for code, entity_id in enumerate(entity_ids)}
    table = [[codes[form.entity_id], list(form.tokens), list(form.surface_forms)] for form in forms]
    (directory / "forms.json").write_text(json.dumps(table, ensure_ascii=False), encoding="utf-8")
