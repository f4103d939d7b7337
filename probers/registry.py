"""Probing methods by name, as ``medlama probe --method`` spells them: each method's prober class, its
settings dataclass and its named presets, and :func:`make_prober` building a prober from typed settings.

The one table of method names: ``medlama ucm``'s rankers (:mod:`medlama.ucm_eval.rankers`) are the methods of
this table that rank a whole pool at one slot, and take their names and (but for retrieval's) settings
from here."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from medlama.core.errors import MedlamaInputError
from medlama.core.loaded import LoadedModel
from medlama.core.models import read_config, resolve_model
from medlama.probers.prober import Prober
from medlama.probers.causal.scoring import check_causal_config
from medlama.probers.mlm import check_masked_config, check_seq2seq_config
from medlama.probers.causal.prober import CausalConstrainedProber, CausalGenerateProber, CausalLikelihoodProber, \
    ConstrainedSettings, GenerateSettings, LikelihoodSettings
from medlama.probers.generative import GenerativeProber, GenerativeSettings
from medlama.probers.mask_average import MaskAverageProber, MaskAverageSettings
from medlama.probers.mask_predict import PRESETS as MASK_PREDICT_PRESETS
from medlama.probers.mask_predict import MaskPredictProber, MaskPredictSettings
from medlama.probers.masked_likelihood import MaskedLikelihoodProber, MaskedLikelihoodSettings
from medlama.probers.retrieval import PRESETS as RETRIEVAL_PRESETS
from medlama.probers.retrieval import RetrievalProber, RetrievalSettings
from medlama.core.settings import settings_from


class Method(NamedTuple):
    """A probing method: its prober class, its settings dataclass, its presets (the first is the default) and the
    check of a model's config its prober's loader makes (``(config, path, method)``), told before any weights
    load (``None``: any encoder, as retrieval takes)."""

    prober: type[Prober]
    settings: type
    presets: Mapping[str, Any]
    check_config: Callable[[Any, str, str], None] | None = None


#: method name -> (prober class, settings class, presets, config check).
METHODS: dict[str, Method] = {
    "retrieval": Method(RetrievalProber, RetrievalSettings, RETRIEVAL_PRESETS),
    "mask-average": Method(MaskAverageProber, MaskAverageSettings, {}, check_masked_config),
    "mask-predict": Method(MaskPredictProber, MaskPredictSettings, MASK_PREDICT_PRESETS, check_masked_config),
    # masked LMs scored as causal-likelihood scores causal LMs: the (pseudo-)log-likelihood of the statement
    "masked-likelihood": Method(MaskedLikelihoodProber, MaskedLikelihoodSettings, {}, check_masked_config),
    "generative": Method(GenerativeProber, GenerativeSettings, {}, check_seq2seq_config),
    # decoder-only causal LMs (GPT-2, BioGPT, Llama family): exact ranking, fast ranking, free text
    "causal-likelihood": Method(CausalLikelihoodProber, LikelihoodSettings, {}, check_causal_config),
    "causal-constrained": Method(CausalConstrainedProber, ConstrainedSettings, {}, check_causal_config),
    "causal-generate": Method(CausalGenerateProber, GenerateSettings, {}, check_causal_config),
}


def method_name(method: str, known: Collection[str] | None = None, *, what: str = "probing method") -> str:
    """``method``, checked against the method names.

    ``known``: the names the caller takes (default: every method of :data:`METHODS`); any other is an
    error that calls the name ``what``.
    """
    choices = METHODS if known is None else known
    if method not in choices:
        raise MedlamaInputError(f"unknown {what} {method!r}; choose from {sorted(choices)}")
    return method


def method_names(methods: Iterable[str], known: Collection[str] | None = None, *, flag: str = "--method"
                 ) -> list[str]:
    """The methods a command's ``flag`` gave (one per value, in order), checked: names not in ``known``
    (default: every method of :data:`METHODS`) are one error naming them all, raised before any work starts."""
    methods = list(methods)
    choices = METHODS if known is None else known
    unknown = [method for method in methods if method not in choices]
    if unknown:
        raise MedlamaInputError(f"unknown {flag} {', '.join(map(repr, unknown))}; known methods: "
                                f"{', '.join(sorted(choices))}")
    return methods


def settings_for(method: str, values: Mapping[str, Any] | None = None, *, preset: str | None = None) -> Any:
    """``method``'s settings: its ``preset`` (default: its first, or the class defaults) with ``values``
    replacing fields. An unknown preset, or an unknown or misspelt setting name, is an error."""
    name = method_name(method)
    cls, presets = METHODS[name].settings, METHODS[name].presets
    if preset is not None and preset not in presets:
        known = f"choose from {sorted(presets)}" if presets else "it has none"
        raise MedlamaInputError(f"unknown {name} preset {preset!r}; {known}")
    base = presets[preset] if preset is not None else next(iter(presets.values()), None)
    return settings_from(cls, values, base=base, what=name)


def check_model(method: str, model: str | Path) -> None:
    """Refuse a model folder or Hub id that ``method`` cannot probe, from its config alone (no weights load):
    what its prober's loader would refuse, told before any model of a probe is ranked."""
    fits = METHODS[method_name(method)].check_config
    if fits is not None:
        path = resolve_model(model)
        fits(read_config(path), path, method)


def make_prober(method: str, model: str | Path | LoadedModel, settings: Any = None, *,
                device: str | None = None) -> Prober:
    """A prober for ``method`` on ``model`` (a folder, a Hub id, or a model in memory with its tokenizer).

    ``settings``: the method's settings dataclass, or a mapping of its fields (over the method's default
    preset; an unknown or misspelt name is an error), or ``None`` for the default preset.
    """
    name = method_name(method)
    entry = METHODS[name]
    if settings is None or isinstance(settings, Mapping):
        settings = settings_for(name, settings)
    elif not isinstance(settings, entry.settings):
        raise MedlamaInputError(f"{name} takes {entry.settings.__name__}, not {type(settings).__name__}")
    return entry.prober(model, settings, device=device)
