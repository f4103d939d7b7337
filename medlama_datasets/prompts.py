"""Queries from prompt templates: ``[X]`` is the subject, ``[Y]`` the slot a prober fills."""

from __future__ import annotations

from medlama.core.defaults import SUBJECT_PLACEHOLDER

#: MedLAMA's query columns, one per prompt of the release (the human-written prompt, and the default one).
PROMPT_COLUMNS = ("query_human", "query_default")
#: The prompt the reference probes with.
DEFAULT_PROMPT_COLUMN = PROMPT_COLUMNS[0]


def fill_prompt(prompt: str, head_name: str) -> str:
    """The query: ``[X]`` replaced by the head name, ``[Y]`` left as the mask placeholder."""
    return prompt.replace(SUBJECT_PLACEHOLDER, head_name)
