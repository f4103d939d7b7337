"""A context-sequence row as it is stored, and its inputs materialised when read.

A row stores each of its segments once, with its layout, so that its size grows linearly with the
document (storing every input in full grew with the square of it: the last input alone repeats the
whole context). The inputs are rebuilt from the row when read:

* ``segments``: S1..SN in the order they are added (real text, or the pool mention of a knowledge
  context);
* ``layout``: the S numbers in the order they appear in the full context;
* ``prompt``: the filled prompt with its ``[Y]`` slot;
* ``knowledge_separator`` / ``knowledge_end``: how a knowledge context joins its mentions and ends
  (the build's ``separator`` and ``knowledge_end``; a real context ignores them).

``input0`` is the prompt alone; ``input_k`` is S1..Sk in layout order, then one space, then the prompt.
A real context's segments are consecutive pieces of the document (S1 holds the centre and each next
segment borders the ones before it, :mod:`.segmentation`), so its context is their concatenation, trimmed;
a knowledge context is its mentions joined by the separator, then the end mark.

:func:`row_inputs` gives the inputs of one row and :func:`with_inputs` those of a batch, as a
``datasets`` transform::

    from datasets import load_dataset
    from medlama.datasets.context_variance import with_inputs

    real = load_dataset("path/to/sets", "ehr_real", split="test").with_transform(with_inputs)
    real[0]["inputs"]            # ['asthma may have finding [Y] .', '... wheeze ... asthma may have ...', ...]

These are exactly the inputs of :class:`~.contexts.ContextSequence` (``[step.text for step in
sequence.inputs]``), which the tests check row for row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from medlama.core.errors import MedlamaInputError
from medlama.datasets.context_variance.contexts import REAL
#: The columns :func:`row_inputs` reads.
INPUT_COLUMNS = ("context_type", "prompt", "segments", "layout", "knowledge_separator", "knowledge_end")


def row_inputs(row: Mapping) -> list[str]:
    """``input0 .. inputN`` of a context-sequence row (a dict with :data:`INPUT_COLUMNS`).

    A row of a folder built before rows were stored compactly has its ``inputs`` column: it is returned as is.
    """
    if "inputs" in row and row["inputs"] is not None:
        return list(row["inputs"])
    missing = [name for name in INPUT_COLUMNS if name not in row]
    if missing:
        raise MedlamaInputError(f"sequence {row.get('id')!r}: a context-sequence row needs {list(INPUT_COLUMNS)} to "
                                f"rebuild its inputs; missing {missing}", field=missing[0])
    return materialise(row["context_type"], row["prompt"], row["segments"], row["layout"],
                       row["knowledge_separator"], row["knowledge_end"], row_id=row.get("id"))


def materialise(context_type: str, prompt: str, segments: Sequence[str], layout: Sequence[int],
                separator: str, end: str, *, row_id: str | None = None) -> list[str]:
    """The inputs of a sequence whose k-th added segment is ``segments[k - 1]``, placed as ``layout`` says."""
    count = len(segments)
    if sorted(layout) != list(range(1, count + 1)):
        raise MedlamaInputError(f"sequence {row_id!r}: the layout {list(layout)} is not an order of S1..S{count}",
                                field="layout")
    place = {number: position for position, number in enumerate(layout)}
    inputs = [prompt]
    shown: list[int] = []  # S numbers of the current input, in layout order
    for k in range(1, count + 1):
        _insert(shown, k, place)
        pieces = [segments[number - 1] for number in shown]
        context = "".join(pieces).strip() if context_type == REAL else separator.join(pieces) + end
        inputs.append(f"{context} {prompt}" if context else prompt)
    return inputs


def with_inputs(batch: Mapping[str, list]) -> dict[str, list]:
    """A batch of rows with their ``inputs`` added: ``Dataset.with_transform(with_inputs)`` (or ``map(with_inputs,
    batched=True)`` to store them)."""
    columns = list(batch)
    size = len(batch[columns[0]]) if columns else 0
    inputs = [row_inputs({name: batch[name][i] for name in columns}) for i in range(size)]
    return {**batch, "inputs": inputs}


def _insert(shown: list[int], number: int, place: Mapping[int, int]) -> None:
    """Put ``number`` into ``shown`` (kept in layout order)."""
    at = len(shown)
    while at > 0 and place[shown[at - 1]] > place[number]:
        at -= 1
    shown.insert(at, number)
