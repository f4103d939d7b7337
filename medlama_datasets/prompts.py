"""Queries from prompt templates: ``[X]`` is the subject, ``[Y]`` the slot a prober fills."""

from __future__ import annotations

from medlama.core.defaults import MASK_PLACEHOLDER


def fill_prompt(prompt: str, head_name: str) -> str:
    """The query: ``[X]`` replaced by the head name, ``[Y]`` left as the mask placeholder."""
    return prompt.replace("[X]", head_name).replace("[Y]", MASK_PLACEHOLDER)
