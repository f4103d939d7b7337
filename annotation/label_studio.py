"""Label Studio, for teams: the sheet as import tasks, the labeling config that shows the five levels, and the
ratings read back from Label Studio's JSON export (full, or JSON-MIN).

* :func:`tasks`: one task per sheet item; its ``data`` holds ``sheet``, ``item``, ``query_id``, ``relation``,
  ``query`` and ``prediction`` (Label Studio shows ``$query`` and ``$prediction`` as text).
* :data:`CONFIG`: a ``Choices`` control named ``rating`` with one choice per level, its value the level's
  number and wording (``5: Perfectly answers the query``).
* :func:`entries`: ``(where, data, rating)`` of each exported task: ``data`` the task's fields, ``rating`` the
  level chosen (``None``: not rated). A task with several annotations (several raters in one export) is refused:
  export one file per rater (Label Studio's export filters by annotator); so is an annotation with several
  choices picked (or several results of the rating control), which gives no one level. Each refusal names the
  file and the task (its number in the file, and Label Studio's task id).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

from medlama.annotation.sheet import LEVELS, Sheet
from medlama.core.errors import MedlamaInputError

#: The control's name (the key of a JSON-MIN export's rating).
CONTROL = "rating"


def choice_value(level: int) -> str:
    """The value a choice carries: the level's number and wording."""
    return f"{level}: {LEVELS[level]}"


CONFIG = "\n".join([
    "<View>",
    '  <Header value="$query"/>',
    '  <Text name="prediction" value="$prediction"/>',
    f'  <Choices name="{CONTROL}" toName="prediction" choice="single" required="true">',
    *(f"    <Choice value={quoteattr(choice_value(level))}/>" for level in LEVELS),
    "  </Choices>",
    "</View>",
    "",
])


def tasks(sheet: Sheet) -> list[dict]:
    """The import tasks of ``sheet`` (module docstring)."""
    return [{"data": {"sheet": sheet.id, "item": item, "query_id": query.id, "relation": query.relation,
                      "query": query.text, "prediction": prediction}} for item, query, prediction in sheet.items()]


def _one(values: list, where: str, file: Path) -> Any:
    """The one value of ``values`` (``None``: none), or the error: several levels picked for one prediction."""
    if len(values) > 1:
        picked = ", ".join(map(repr, values))
        raise MedlamaInputError(f"{where} has {len(values)} levels picked for one prediction ({picked}): pick one "
                                "choice per task (the config's Choices is single)", file=file)
    return values[0] if values else None


def _level_of(result: dict, where: str, file: Path) -> Any:
    value = result.get("value") or {}
    if "choices" in value:
        choices = value["choices"]
        return _one(choices if isinstance(choices, list) else [choices], where, file)
    return value.get("rating")


def _rating(task: dict, where: str, file: Path) -> Any:
    """The level one full-export task holds (``None``: not rated)."""
    annotations = [a for a in task.get("annotations") or [] if isinstance(a, dict) and not a.get("was_cancelled")]
    if len(annotations) > 1:
        raise MedlamaInputError(f"{where} holds {len(annotations)} annotations of one task; export one file per "
                                "rater (filter Label Studio's export by annotator)", file=file)
    if not annotations:
        return None
    found = [_level_of(r, where, file) for r in annotations[0].get("result") or []
             if isinstance(r, dict) and r.get("from_name") == CONTROL]
    return _one([level for level in found if level is not None], where, file)


def entries(payload: list, file: Path) -> list[tuple[str, dict, Any]]:
    """``(where, task data, rating)`` of each task of a Label Studio export (module docstring)."""
    out = []
    for number, task in enumerate(payload, start=1):
        where = f"task {number}"
        if not isinstance(task, dict):
            raise MedlamaInputError(f"{where} is not a JSON object", file=file)
        if task.get("id") is not None:
            where += f" (Label Studio id {task['id']})"
        if isinstance(task.get("data"), dict):  # the full export: data and annotations
            out.append((where, task["data"], _rating(task, where, file)))
        else:  # JSON-MIN: the data's fields and the control's value side by side (several choices: a list)
            rating = task.get(CONTROL)
            if isinstance(rating, dict):
                rating = rating.get("choices")
            if isinstance(rating, list):
                rating = _one(rating, where, file)
            out.append((where, task, rating))
    return out
