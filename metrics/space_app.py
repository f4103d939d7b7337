"""The Gradio widget of a metric Space (``medlama push-metric`` uploads this file as ``app.py``).

``evaluate``'s generic ``launch_gradio_widget`` drops every row that has an empty cell, so a table whose
optional columns (acc@k's ``groups``, UCM's ranks of the added and context entities, ``triple_id``,
``relation``) are left blank reaches the metric with no rows at all. Here a blank cell means "not given":

* a column left blank in every row is not passed to the metric (an optional column is then "not given";
  a required one gets the metric's own "required columns missing" error);
* a blank cell in a column that has other values is ``None`` for that row (the metrics accept ``None``
  per record in an optional column);
* a row blank in every cell is ignored (the empty rows at the bottom of the table).

Cells are read by the metric's feature type: numbers as numbers, booleans as true/false (yes/no, 1/0),
strings with or without surrounding double quotes, lists as JSON (``["fever", "cough"]``, ``[3, 7]``).

Self-contained on purpose: a Space holds only this file, the metric script, its card and requirements.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

#: The metric this Space serves; ``push-metric`` writes the repository id here.
REPO_ID = "<repo_id>"
_TRUE = {"true", "yes", "1", "t", "y"}
_FALSE = {"false", "no", "0", "f", "n"}


def is_blank(cell: Any) -> bool:
    """Whether a table cell holds nothing (``None``, an empty or blank string, or NaN)."""
    if cell is None:
        return True
    if isinstance(cell, float) and cell != cell:  # NaN: pandas' empty cell
        return True
    return isinstance(cell, str) and not cell.strip()


def _kind(feature: Any) -> str:
    """``number``, ``bool``, ``str`` or ``json`` for a ``datasets`` feature (a ``Value`` or anything else)."""
    dtype = getattr(feature, "dtype", None)
    if type(feature).__name__ != "Value" or dtype is None:
        return "json"
    if dtype == "bool":
        return "bool"
    if dtype.startswith(("int", "uint", "float")):
        return "number"
    return "str" if dtype in ("string", "large_string") else "json"


def parse_cell(cell: Any, kind: str, where: str) -> Any:
    """One non-blank cell as the metric expects it; a clear ``ValueError`` naming ``where`` otherwise."""
    text = cell.strip() if isinstance(cell, str) else cell
    if kind == "str":
        text = str(text)
        return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text
    if kind == "bool":
        if isinstance(text, bool):
            return text
        if str(text).lower() in _TRUE:
            return True
        if str(text).lower() in _FALSE:
            return False
        raise ValueError(f"{where}: {cell!r} is not true or false")
    if kind == "number":
        if isinstance(text, bool):
            raise ValueError(f"{where}: {cell!r} is not a number")
        if isinstance(text, (int, float)):
            return int(text) if float(text).is_integer() else text
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"{where}: {cell!r} is not a number") from None
        return int(number) if number.is_integer() else number
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        raise ValueError(f"{where}: {cell!r} is not JSON (a list is written [\"a\", \"b\"] or [1, 2])") from None


def parse_inputs(headers: Sequence[str], rows: Sequence[Sequence[Any]], features: Mapping[str, Any]) -> dict:
    """The metric's inputs from the widget's table: ``headers`` (column names), ``rows`` (cell values).

    See the module docstring for what blank cells mean. Unknown columns are an error.
    """
    unknown = [name for name in headers if name not in features]
    if unknown:
        raise ValueError(f"unknown column(s) {unknown}; the metric's columns are {list(features)}")
    rows = [list(row) + [None] * (len(headers) - len(row)) for row in rows]
    rows = [row for row in rows if not all(is_blank(cell) for cell in row)]
    inputs: dict[str, list] = {}
    for index, name in enumerate(headers):
        cells = [row[index] for row in rows]
        if all(is_blank(cell) for cell in cells):
            continue  # not given
        kind = _kind(features[name])
        inputs[name] = [None if is_blank(cell) else parse_cell(cell, kind, f"{name}, row {number}")
                        for number, cell in enumerate(cells, start=1)]
    return inputs


def _features(module) -> dict:
    features = module.features[0] if isinstance(module.features, list) else module.features
    return dict(features)


def launch(repo_id: str = REPO_ID) -> None:
    """Load the metric and serve its widget (needs ``gradio``, as every Gradio Space has)."""
    # evaluate and gradio load when the Space app starts, not on import
    import evaluate
    import gradio as gr

    module = evaluate.load(repo_id)
    features = _features(module)
    headers = list(features)

    def compute(table):
        values = table.values.tolist() if hasattr(table, "values") else table
        try:
            return json.dumps(module.compute(**parse_inputs(headers, values, features)), indent=2)
        except ValueError as error:
            return f"Error: {error}"

    gr.Interface(
        fn=compute,
        inputs=gr.Dataframe(headers=headers, col_count=(len(headers), "fixed"), row_count=3, datatype="str",
                            type="array"),
        outputs=gr.Textbox(label=module.name),
        title=f"Metric: {module.name}",
        description=module.info.description + "\nLeave an optional column blank when it is not known; lists are "
                                              'JSON, e.g. ["fever", "cough"].',
    ).launch()


if __name__ == "__main__":
    launch()
