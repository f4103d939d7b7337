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


#: method name -> factory(model path, options) building a prober.
METHODS: dict[str, Callable[[str | Path, argparse.Namespace], Prober]] = {
    "contrastive": _contrastive,
}


def make_prober(method: str, model: str | Path, options: argparse.Namespace | None = None) -> Prober:
    if method not in METHODS:
        raise MedlamaInputError(f"unknown probing method {method!r}; choose from {sorted(METHODS)}")
    return METHODS[method](model, options or argparse.Namespace())
