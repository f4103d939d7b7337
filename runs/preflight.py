"""Every model of a probe checked before any is ranked: ``probe --model A B`` with a ``B`` its method cannot
use, or that its learned prompts were not trained for, is refused at once, not after ``A``'s ranking (and
nothing is left beside ``--out`` that a corrected rerun would have to get past).

* The model's kind, from its config alone (no weights load): what its method's loader would refuse
  (:func:`medlama.probers.registry.check_model`), for each model folder or Hub id and each checkpoint of a
  ``--checkpoints`` sweep.
* Learned prompts (``mask-predict --prompts``): trained for one model's weights and tokenizer, which only the
  loaded model can show; each such model's prober is made here and handed on to the ranking, so the model is
  loaded once (all of them are held until their turn: masked LMs of BERT size).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from medlama.core.batching import is_auto, starting_size
from medlama.core.models import loading_with
from medlama.probers import registry
from medlama.probers.prober import Prober
from medlama.runs.resume import Unit

__all__ = ["check_units"]


def check_units(units: Sequence[Unit], device: str | None = None) -> dict[str, Prober]:
    """Refuse, before anything is ranked, a unit (:class:`~medlama.runs.resume.Unit`) whose model its method
    cannot probe, or that its learned prompts were not trained for (:class:`MedlamaInputError` naming it). A
    model in memory was checked when its prober was made. The probers made to check learned prompts, by unit
    label: the ranking's (:func:`~medlama.runs.resume.rank_units` ``probers``), so no model loads twice."""
    for unit in units:
        if not isinstance(unit.model, (str, Path)):
            continue
        with loading_with(unit.load):
            registry.check_model(unit.method, unit.model)
    made = {}
    for unit in units:
        if isinstance(unit.model, (str, Path)) and getattr(unit.settings, "prompts", None) is not None:
            size = starting_size(unit.settings) if is_auto(unit.settings) else None
            made[unit.label] = unit.prober(device, size)  # its loader checks the prompts' base model and tokenizer
    return made
