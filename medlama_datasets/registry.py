"""Every dataset declared once: a :class:`Declaration` says what its ``medlama build`` sub-command is (flags,
builder), which card template its folders get, the ownership kind ``push-dataset`` accepts, the benchmark
protocol it is scored by and which query reader ``medlama probe --dataset`` reads it with.

The places that used to name the datasets read this registry instead: ``medlama build`` adds one sub-command
per declaration, ``push-dataset`` accepts every declaration's :attr:`~Declaration.kind`, the probe's
``--dataset`` choices and :func:`medlama.runs.benchmarks.benchmark` are the declared benchmarks, and
:func:`medlama.runs.queries.load_queries` calls the declaration's reader. As in MTEB (a task is a class with
static metadata) and lm-eval (a ``TaskConfig``), a declaration is data: adding a dataset is one module in
``medlama_datasets/declared/`` holding ``DECLARATION = Declaration(...)`` (found by :func:`declarations`
without being named anywhere), plus its builder and reader code. :func:`register` adds one at run time
(a plugin, a test).

What lives above this floor is never imported from here: the query reader (:mod:`medlama.runs`) is named by
its dotted path, and a hand-made command line is found by the CLI itself (its module ``build_<name>``).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from medlama.core.errors import MedlamaInputError
from medlama.dataset_cards import card_path
from medlama.datasets.benchmark import Benchmark
from medlama.datasets.licences import PRIVATE_TERMS, TERMS, strictest


@dataclass(frozen=True)
class BuildCommand:
    """``medlama build <name>``: its help, and either a settings class with the build it runs, or a command
    line one settings class cannot make (``hand_made``)."""

    help: str
    description: str
    #: The settings dataclass whose fields are the sub-command's flags (``--json`` is added to them).
    settings: type | None = None
    #: The build: ``run(settings, as_json)`` builds the folder, prints its report and returns the exit status.
    run: Callable[[Any, bool], int] | None = None
    #: Instead of ``settings`` and ``run``: the CLI's own module ``build_<name>`` adds the parser (repeatable
    #: flags, a choice of two paths); the CLI finds it, this floor (below the commands) never names it.
    hand_made: bool = False

    def __post_init__(self) -> None:
        if (not self.hand_made) == (self.settings is None or self.run is None):
            raise ValueError("a build command has settings and run, or a parser module, not both")


@dataclass(frozen=True)
class Declaration:
    """One dataset, declared once (see the module docstring)."""

    #: The ``medlama build`` sub-command and ``--dataset`` name.
    name: str
    build: BuildCommand
    #: The card template (``dataset_cards/<card>.md``) its folders' README is rendered from.
    card: str
    #: The protocol it is scored by (:mod:`medlama.datasets.benchmark`); ``None``: not scored.
    benchmark: Benchmark | None = None
    #: ``module:function`` of :mod:`medlama.runs` that reads a ``QuerySource`` of it into a ``QuerySet``; with
    #: one, ``medlama probe --dataset NAME`` probes it.
    query_reader: str | None = None
    #: The command that scores it (``medlama list`` says so).
    scored_by: str = "medlama probe"
    #: Its relations, known without reading the release (``--relations`` is checked before a build from it).
    release_relations: Callable[[], Sequence[str]] | None = None
    #: Place in listings (``medlama build --help``, ``medlama list``), lowest first.
    listed: int = 100
    #: The terms of its rows (:data:`~medlama.datasets.licences.TERMS`), which a probe's per-query rows quote:
    #: ``push-results`` gates or refuses a run's upload by them. Default: private only (deny by default).
    terms: str = PRIVATE_TERMS
    #: Parts of it with other terms: ``(prefix, terms)``, for a config or relation named ``prefix`` or
    #: ``prefix_...`` (BioLAMA's ``umls`` source, and its ``all`` config that holds it).
    part_terms: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("-", "").isalnum() or self.name != self.name.lower():
            raise ValueError(f"a dataset name is lower-case letters, digits and '-', not {self.name!r}")
        if any(terms not in TERMS for terms in (self.terms, *dict(self.part_terms).values())):
            raise ValueError(f"{self.name}: terms are one of {TERMS}")
        if self.query_reader is not None and (self.benchmark is None or ":" not in self.query_reader):
            raise ValueError(f"{self.name}: a query reader is 'module:function' and comes with a benchmark")
        if not card_path(self.card).is_file():
            raise ValueError(f"{self.name}: no card template {card_path(self.card)}")

    def terms_of(self, config: str | None = None, relations: Iterable[str] = ()) -> str:
        """The terms of the rows of ``config`` and ``relations``: the strictest of the parts they name
        (:attr:`part_terms`), the dataset's own (:attr:`terms`) where they name none."""
        names = [str(name).lower() for name in (config or "", *relations) if name]
        named = [terms for prefix, terms in self.part_terms
                 if any(name == prefix or name.startswith(prefix + "_") for name in names)]
        return strictest(named) if named else self.terms

    @property
    def kind(self) -> str:
        """What its folders' ownership records name (the command that wrote them): ``push-dataset`` uploads them."""
        return f"build {self.name}"


#: Declarations added by :func:`register` (the built-in ones are found in ``medlama.datasets.declared``).
_REGISTERED: dict[str, Declaration] = {}
_BUILT_IN: dict[str, Declaration] = {}


def _built_in() -> dict[str, Declaration]:
    """The declarations of the modules of ``medlama.datasets.declared``, found once."""
    if not _BUILT_IN:
        # Found by walking the package, so that a new module is declared by being there (no list names it).
        package = importlib.import_module("medlama.datasets.declared")
        for module in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            declaration = importlib.import_module(module.name).DECLARATION
            _BUILT_IN[declaration.name] = declaration
    return _BUILT_IN


def declarations() -> tuple[Declaration, ...]:
    """Every declared dataset, in listing order."""
    found = {**_built_in(), **_REGISTERED}
    return tuple(sorted(found.values(), key=lambda d: (d.listed, d.name)))


def register(declaration: Declaration) -> Declaration:
    """Declare ``declaration``'s dataset (a second, different declaration of a name is refused); returns it."""
    held = {d.name: d for d in declarations()}.get(declaration.name)
    if held is not None and held != declaration:
        raise MedlamaInputError(f"dataset {declaration.name!r} is already declared")
    _REGISTERED[declaration.name] = declaration
    return declaration


def unregister(name: str) -> None:
    """Forget a dataset :func:`register` declared (the built-in ones stay)."""
    _REGISTERED.pop(name, None)


def declared(name: str) -> Declaration:
    """The declaration of ``name``; an unknown name is refused naming the declared ones."""
    found = {d.name: d for d in declarations()}
    if name not in found:
        raise MedlamaInputError(f"unknown dataset {name!r}; choose from {list(found)}")
    return found[name]


def probed() -> tuple[Declaration, ...]:
    """The datasets ``medlama probe`` reads (those with a query reader), in listing order."""
    return tuple(d for d in declarations() if d.query_reader is not None)


class ProbedNames(Sequence[str]):
    """The names of :func:`probed`, read when asked: the ``--dataset`` choices of a settings field, which a
    dataset registered after the field was made is among."""

    def __getitem__(self, index):  # type: ignore[override]
        return tuple(d.name for d in probed())[index]

    def __len__(self) -> int:
        return len(probed())

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(d.name for d in probed()))

    def __repr__(self) -> str:
        return repr(list(self))


#: The probed datasets' names (``medlama probe --dataset`` / ``medlama list --dataset`` choices).
PROBED_NAMES = ProbedNames()
