"""The benchmark protocols as the probe run reads them: each is declared once, with its dataset
(:mod:`medlama.datasets.registry`; the :class:`Benchmark` protocol is :mod:`medlama.datasets.benchmark`), and
looked up here by ``--dataset`` name, so the CLI and ``medlama.probe`` cannot score one benchmark two ways.

The candidate pool a prober ranks against is the second thing that moves a number: its rules, the pools
they give and what a result records of its pool live in :mod:`medlama.probers.pools`.
"""

from __future__ import annotations

from typing import Any

from medlama.core.errors import MedlamaInputError
from medlama.datasets.benchmark import Benchmark
from medlama.datasets.folders import DataFolder, identity, resolve_folder
from medlama.datasets.registry import declarations, probed

def benchmarks() -> dict[str, Benchmark]:
    """The benchmarks ``medlama probe`` runs, by ``--dataset`` name (the declared datasets with a query reader)."""
    return {d.name: d.benchmark for d in probed()}


def scored() -> list[Benchmark]:
    """Every declared benchmark, the probed ones and those another command scores (context variance: ``ucm``)."""
    return [d.benchmark for d in declarations() if d.benchmark is not None]


def benchmark(name: str) -> Benchmark:
    """The declaration of ``name`` (``medlama``, ``biolama`` or another declared dataset with a query reader)."""
    found = benchmarks()
    try:
        return found[name]
    except KeyError:
        raise MedlamaInputError(f"unknown dataset {name!r}; choose from {list(found)}") from None


def resolve_data(source: Any) -> DataFolder:
    """The dataset folder of ``source`` and its identity: ``source.data`` (a folder, a dry run or a Hub id),
    else a folder built once into the cache from the release."""
    if source.data is not None:
        return resolve_folder(source.data, dataset=source.dataset)
    build = benchmark(source.dataset).cached_build
    if build is None:
        raise MedlamaInputError(f"{source.dataset} has no release to build from: give its folder with --data")
    folder = build(source.source)
    return DataFolder(folder, identity(folder, "build", source.dataset))
