"""A query as a chat (``--chat-template``), and few-shot examples as chat turns (``--few-shot-as-multiturn``).

* With ``chat_template`` a query is the user turn :func:`user_message` (:data:`CHAT_INSTRUCTION`: the query with
  ``[Y]`` shown as :data:`BLANK`, whitespace collapsed), and the assistant's reply starts with the query's text
  before ``[Y]``, the candidates scored as its continuation
  (:meth:`medlama.probers.causal.scoring.CausalLM.split`).
* With ``few_shot_as_multiturn`` too, each few-shot example comes before it as two turns, lm-eval's
  ``--fewshot_as_multiturn``: the example's :func:`user_message` and, as the assistant's reply, its sentence with
  the first gold name in the slot (:func:`medlama.probers.causal.fewshot.filled`), what the instruction asks.
* The prompted text of such a query carries its turns: :func:`with_turns` joins the examples' messages and the
  query by :data:`TURN`, a control character no query holds, and :func:`turns` reads them back; only the query,
  the last part, keeps its ``[Y]``, so every reader of a prompted text finds its slot and suffix where they were.
"""

from __future__ import annotations

from collections.abc import Sequence

from medlama.core.defaults import MASK_PLACEHOLDER
from medlama.core.errors import MedlamaInputError

__all__ = ["BLANK", "CHAT_INSTRUCTION", "TURN", "turns", "user_message", "with_turns"]

#: The user turn when ``chat_template`` is on; the assistant's reply starts with the query's prefix.
CHAT_INSTRUCTION = "Fill in the blank: {query}\nAnswer with the completed sentence."
BLANK = "___"
#: Between the turns of a prompted text (ASCII record separator).
TURN = "\x1e"


def user_message(text: str) -> str:
    """The user turn of a query ``text`` (one ``[Y]``): the instruction around it, ``[Y]`` shown as a blank."""
    return CHAT_INSTRUCTION.format(query=" ".join(text.replace(MASK_PLACEHOLDER, BLANK).split()))


def with_turns(examples: Sequence[tuple[str, str]], text: str, query_id: str) -> str:
    """``text`` after the ``(user, assistant)`` turns of its examples, as one prompted text (see the module)."""
    parts = [part for pair in examples for part in pair]
    if any(TURN in part for part in [*parts, text]):
        raise MedlamaInputError(f"query {query_id!r} or one of its few-shot examples holds the control character "
                                f"{TURN!r}, which few_shot_as_multiturn keeps for itself")
    return TURN.join([*parts, text])


def turns(text: str) -> tuple[list[dict[str, str]], str]:
    """The example turns of a prompted text (chat messages, user first) and the query's own text."""
    *parts, query = text.split(TURN)
    return [{"role": ("user", "assistant")[i % 2], "content": part} for i, part in enumerate(parts)], query
