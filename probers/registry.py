"""Probing methods by name, as ``medlama probe --method`` spells them."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from medlama.errors import MedlamaInputError
from medlama.probers.base import Prober


def _contrastive(model: str | Path, options: argparse.Namespace) -> Prober:
    from medlama.probers.contrastive import ContrastiveProber, settings_from

    settings = settings_from(getattr(options, "preset", None) or "reference",
                             layer=getattr(options, "layer", None), pooling=getattr(options, "pooling", None),
                             distance=getattr(options, "distance", None),
                             batch_size=getattr(options, "batch_size", None))
    return ContrastiveProber(model, settings, layers=getattr(options, "layers", None))


# -- the baseline probers (mask average, mask predict, generative; issue 5) ---------------------------

def _no_layers(method: str, options: argparse.Namespace) -> None:
    if getattr(options, "layers", None):
        raise MedlamaInputError(f"--layers applies to --method contrastive only, not {method}")


def _mask_average(model: str | Path, options: argparse.Namespace) -> Prober:
    from medlama.probers.mask_average import MaskAverageProber, settings_from

    _no_layers("mask-average", options)
    return MaskAverageProber(model, settings_from(max_tokens=getattr(options, "max_tokens", None),
                                                  batch_size=getattr(options, "batch_size", None)))


def _mask_predict(model: str | Path, options: argparse.Namespace) -> Prober:
    from medlama.probers.mask_predict import MaskPredictProber, settings_from

    _no_layers("mask-predict", options)
    settings = settings_from(getattr(options, "mask_predict_preset", None) or "paper",
                             max_masks=getattr(options, "max_masks", None),
                             beam_size=getattr(options, "beam_size", None), init=getattr(options, "init", None),
                             refine=getattr(options, "refine", None),
                             max_iterations=getattr(options, "max_iterations", None),
                             rescore=getattr(options, "rescore", None) or None,
                             to_candidates=False if getattr(options, "raw_predictions", False) else None,
                             batch_size=getattr(options, "batch_size", None))
    return MaskPredictProber(model, settings)


def _generative(model: str | Path, options: argparse.Namespace) -> Prober:
    from medlama.probers.generative import GenerativeProber, settings_from

    _no_layers("generative", options)
    settings = settings_from(max_answer_tokens=getattr(options, "max_answer_tokens", None),
                             to_candidates=False if getattr(options, "raw_predictions", False) else None,
                             batch_size=getattr(options, "batch_size", None))
    return GenerativeProber(model, settings)


#: method name -> factory(model path, options) building a prober.
METHODS: dict[str, Callable[[str | Path, argparse.Namespace], Prober]] = {
    "contrastive": _contrastive,
    "mask-average": _mask_average,
    "mask-predict": _mask_predict,
    "generative": _generative,
}


def make_prober(method: str, model: str | Path, options: argparse.Namespace | None = None) -> Prober:
    if method not in METHODS:
        raise MedlamaInputError(f"unknown probing method {method!r}; choose from {sorted(METHODS)}")
    return METHODS[method](model, options or argparse.Namespace())
