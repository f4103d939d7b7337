"""The probing front end shared by every prober: queries, gold answers and candidates of a dataset, and
:func:`load_queries`, which finds them from a :class:`QuerySource` (dataset, built folder or Hub dataset id,
config, ...); :func:`queries_from` takes anything the Python API's ``data`` does through the same route.
Where the data is, and what identifies it, is :mod:`medlama.datasets.folders`' job."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medlama.datasets.folders import DataFolder, folder_configs, load_config, loaded_from, resolve_folder
from medlama.core.errors import MedlamaInputError
from medlama.runs.arguments import check_query_rows, check_relations, check_release_relations, relation_names
from medlama.runs.benchmarks import benchmark, resolve_data
from medlama.probers.pools import CANDIDATE_RULES, check_rule, medlama_pools, row_pools
from medlama.datasets.choices import is_mc, mc_config, ranking_config
from medlama.probers.query_set import QuerySet, choice_queries, fact_columns
from medlama.core.settings import check, setting
from medlama.datasets.prompts import DEFAULT_PROMPT_COLUMN
from medlama.datasets.declared.medlama import MEDLAMA
from medlama.datasets.registry import PROBED_NAMES, declared

#: MedLAMA's prompt columns (its declaration's, :data:`~medlama.datasets.declared.medlama.MEDLAMA`).
PROMPT_COLUMNS = MEDLAMA.prompt_columns


def load_medlama_queries(data: str | Path | DataFolder, config: str = "hard", *,
                         relations: Sequence[str] | None = None, prompt_column: str = DEFAULT_PROMPT_COLUMN,
                         candidates: str = "evaluated") -> QuerySet:
    """Queries of MedLAMA for ``config`` (``hard`` or ``full``) from ``data``: a built folder (``medlama build
    medlama``), a ``push-dataset`` dry run or a Hub dataset id (:func:`~medlama.datasets.folders.resolve_folder`).

    The candidate set follows the rule ``candidates`` (:data:`~medlama.probers.pools.CANDIDATE_RULES`):
    ``evaluated`` (default) is the config's exported one (all answer and head names of the evaluated
    relations), as the reference probe builds it, and a relation subset gets the union of its relations';
    ``relation`` ranks each relation against its own; ``config`` against the config's whole pool.
    """
    folder = data if isinstance(data, DataFolder) else resolve_folder(data, dataset="medlama")
    if prompt_column not in PROMPT_COLUMNS:
        raise MedlamaInputError(f"unknown prompt column {prompt_column!r}; choose from {list(PROMPT_COLUMNS)}")
    check_rule(candidates)
    rows = load_config(folder.path, config, "test")
    known = sorted(set(rows["relation"]))
    relations = relation_names(relations)
    if relations:
        check_relations(relations, rows["relation"], file=folder.path)
        rows = rows.filter(lambda batch: [r in set(relations) for r in batch["relation"]], batched=True)
        name = f"{config}[{','.join(relations)}]"
    else:
        name = config
    info = {"dataset": "medlama", "config": config, "relations": list(relations) if relations else "all",
            **folder.info}
    if is_mc(config):
        return choice_queries(rows, list(rows[prompt_column]), rows["answer_names"], candidates, name=name, info=info,
                              subject_names=list(rows["head_name"]),
                              subjects=list(rows["head_cui"]) if "head_cui" in rows.column_names else None)
    names, pools = medlama_pools(folder.path, config, list(relations) if relations else known, candidates,
                                 whole=not relations)
    return QuerySet(ids=list(rows["id"]), relations=list(rows["relation"]), texts=list(rows[prompt_column]),
                    gold=[list(g) for g in rows["answer_names"]], candidates=names, name=name, info=info,
                    rule=candidates, pools=pools, subjects=list(rows["head_cui"]), facts=fact_columns(rows),
                    subject_names=list(rows["head_name"]))


def _whole(data) -> bool:
    """Whether ``data`` holds every row of the split it was loaded as (no selection, shuffle or filter)."""
    splits = getattr(data.info, "splits", None) or {}
    return getattr(data, "_indices", None) is None and any(
        getattr(split, "num_examples", None) == len(data) for split in splits.values())


def queries_from_dataset(data, *, relations: Sequence[str] | None = None, prompt_column: str = DEFAULT_PROMPT_COLUMN,
                         name: str = "dataset", candidates: str = "evaluated") -> QuerySet:
    """Queries of an already loaded MedLAMA ``datasets.Dataset`` (or a ``DatasetDict`` with one split, or a
    ``test`` split), e.g. ``medlama.load_medlama("hard")`` or any selection, shuffle or filter of it.

    The candidates are the pool the rule ``candidates`` gives for the config the rows come from, never the
    rows' own names: a Dataset loaded by medlama (:func:`~medlama.datasets.folders.load_config`) knows its
    folder and config, and the pools are read from there, so 20 rows are ranked against what they would
    be in a whole run. A Dataset loaded otherwise (``load_dataset("you/medlama", "hard")``) gives its pools
    only while it holds the whole split (they are then the answer and head names of its rows, the rule by
    which the built ``candidates_<config>[_<relation>]`` configs are made); a part of one is refused.
    """
    from datasets import DatasetDict  # the datasets library only when a loaded Dataset is read

    check_rule(candidates)
    if isinstance(data, DatasetDict):
        if "test" not in data and len(data) != 1:
            raise MedlamaInputError(f"a DatasetDict with splits {sorted(data)}: give the split to probe "
                                    "(MedLAMA's is 'test')")
        data = data["test"] if "test" in data else next(iter(data.values()))
    missing = {"id", "relation", "head_name", "answer_names", prompt_column} - set(data.column_names)
    if missing:
        raise MedlamaInputError(f"not MedLAMA queries: the dataset has no column(s) {sorted(missing)}")
    check_query_rows(data, prompt_column)
    relations = relation_names(relations)
    source = loaded_from(data)
    if "choices" in data.column_names:  # multiple choice: the pools are the rows' own choices, whatever the part
        if relations:
            check_relations(relations, data.unique("relation"))
            data = data.filter(lambda batch: [r in set(relations) for r in batch["relation"]], batched=True)
            name = f"{name}[{','.join(relations)}]"
        info = {"dataset": "medlama", "config": name, "relations": list(relations) if relations else "all",
                "fingerprint": getattr(data, "_fingerprint", None)}
        return choice_queries(data, list(data[prompt_column]), data["answer_names"], candidates, name=name, info=info,
                              subject_names=list(data["head_name"]),
                              subjects=list(data["head_cui"]) if "head_cui" in data.column_names else None)
    if source is None and not _whole(data):
        raise MedlamaInputError(
            "this Dataset is a part (a selection, shuffle or filter) of a MedLAMA split that was not loaded by "
            "medlama, so the candidate pool of its config cannot be known, and ranking against its own rows' "
            "names would inflate acc@k; load the config with medlama.load_medlama(config, data=FOLDER or Hub id) "
            "and take the part of that, pass the whole split, or pass a QuerySet whose candidates are the pool")
    whole_rows = data
    if relations:
        check_relations(relations, data.unique("relation"))
        wanted = set(relations)
        data = data.filter(lambda batch: [r in wanted for r in batch["relation"]], batched=True)
        name = f"{name}[{','.join(relations)}]"
    present = sorted(set(data["relation"]))
    if source is not None:
        folder, config = source
        set_name, _ = medlama_config(config)  # hard_may_treat's pools are hard's
        # The union of the present relations' pools (with every relation present, the config's pool itself).
        names, pools = medlama_pools(folder, set_name, present, candidates, whole=False)
    else:
        names, pools = row_pools(whole_rows if candidates == "config" else data, candidates)
    info = {"dataset": "medlama", "config": name, "relations": list(relations) if relations else "all",
            "fingerprint": getattr(data, "_fingerprint", None)}
    return QuerySet(ids=list(data["id"]), relations=list(data["relation"]), texts=list(data[prompt_column]),
                    gold=[list(g) for g in data["answer_names"]], candidates=names, name=name, info=info,
                    rule=candidates, pools=pools,
                    subjects=list(data["head_cui"]) if "head_cui" in data.column_names else None,
                    facts=fact_columns(data), subject_names=list(data["head_name"]))


# -- which queries to probe: the dataset, its built folder, config, split and relations ------------------

#: The datasets ``--dataset`` takes: the declared ones with a query reader (read when asked, so a dataset
#: registered later is among them).
DATASETS = PROBED_NAMES


@dataclass(frozen=True)
class QuerySource:
    """Where the queries of a probe come from: the one way every probe names its data (``medlama probe``'s
    data flags, ``medlama.probe``'s ``data=``, a trainer callback's queries; :meth:`of` turns anything the
    Python API's ``data`` takes into one). ``loaded``: queries already in memory (a MedLAMA
    ``datasets.Dataset`` / ``DatasetDict`` or a :class:`~medlama.probers.query_set.QuerySet`), read instead
    of ``data``; ``limit``: the first queries of each relation (the CLI's ``--limit``). A new way to choose
    the queries is one more field here, read by :func:`load_queries`."""

    dataset: str = setting("medlama", choices=DATASETS,
                           help="benchmark to probe; biolama is scored as BioLAMA does: normalised match against "
                                "labels and aliases, acc@1 and acc@5")
    data: Path | None = setting(None, help="the dataset as load_dataset reads it: a built folder, a push-dataset "
                                           "dry run, or a Hub dataset id (you/medlama, you/medlama@REVISION); "
                                           "none: build once into the cache from --source / $MEDLAMA_SOURCE or "
                                           "$BIOLAMA_SOURCE / the pinned download")
    source: str | None = setting(None, help="the dataset's release (folder or archive), used when --data is not "
                                            "given")
    config: str | None = setting(None, help="query set, a config of the dataset: MedLAMA hard, full or "
                                            "hard_<relation> / full_<relation>; BioLAMA all, ctd, umls, wikidata "
                                            "or <source>_<PID>; any of them + _mc (hard_mc, umls_mc): multiple "
                                            "choice, each query ranked against its own choices; none: the first "
                                            "(hard, all)")
    split: str = setting("test", help="BioLAMA split to probe: train, dev or test")
    relations: tuple[str, ...] | None = setting(None, help="probe only these relations (none: all)", metavar="REL")
    prompt_column: str = setting(DEFAULT_PROMPT_COLUMN, choices=PROMPT_COLUMNS,
                                 help="MedLAMA: which prompt builds the query (the human prompt, as the reference)")
    candidates: str = setting("evaluated", choices=CANDIDATE_RULES,
                              help="the candidate pool each query is ranked against: evaluated, the union of the "
                                   "probed relations' pools (the reference's rule: a relation's score depends on "
                                   "what else is probed); relation, each relation's own pool (its score is the "
                                   "same whatever else runs); config, the config's whole pool")
    limit: int | None = setting(None, min=1, cli=False, help="only the first N queries of each relation "
                                                             "(none: all); the CLI's --limit")
    loaded: Any = setting(None, cli=False, help="queries in memory (a MedLAMA Dataset/DatasetDict or a QuerySet), "
                                                "read instead of data")
    templates: Any = setting(None, cli=False, help="a template file or 'release' (medlama.runs.templates): each "
                                                   "template probed as its own run; the CLI's --templates")

    def __post_init__(self) -> None:
        check(self)
        if self.loaded is not None:
            _check_loaded(self)
            return  # the relations are checked against the loaded rows when they are read
        check_release_relations(self.dataset, self.data, self.relations)

    @classmethod
    def of(cls, data: Any = None, *, dataset: str = "medlama", config: str | None = None,
           relations: Sequence[str] | str | None = None, candidates: str = "evaluated",
           limit: int | None = None, templates: Any = None) -> "QuerySource":
        """The source that the Python API's ``data`` names: ``None`` (the build kept in the cache), a built
        folder, a ``push-dataset`` dry run or a Hub dataset id (``you/medlama``, ``you/medlama@REVISION``),
        read as ``medlama probe --data`` reads them; or queries in memory (``loaded``: a loaded MedLAMA
        ``Dataset`` / ``DatasetDict``, or a ``QuerySet``, whose candidates are its own)."""
        names = relation_names(relations)
        fields = dict(dataset=dataset, config=config, relations=names, candidates=candidates, limit=limit,
                      templates=templates)
        if data is None or isinstance(data, (str, Path)):
            return cls(data=None if data is None else Path(data).expanduser(), **fields)
        return cls(loaded=data, **fields)


def medlama_config(config: str, relations: Sequence[str] | None = None) -> tuple[str, list[str] | None]:
    """``(set, relations)`` of a MedLAMA config name: ``hard``, ``full``, or ``hard_<relation>`` /
    ``full_<relation>`` (the folder's per-relation configs), which selects that relation; the same with ``_mc``
    (multiple choice) gives the same set and relations."""
    set_name, _, relation = ranking_config(config).partition("_")
    if set_name not in MEDLAMA.configs:
        raise MedlamaInputError(f"unknown MedLAMA config {config!r}; choose from {list(MEDLAMA.configs)} or "
                                "hard_<relation> / full_<relation> (e.g. hard_may_treat)")
    if not relation:
        return set_name, list(relations) if relations else None
    if relations and list(relations) != [relation]:
        raise MedlamaInputError(f"config {config!r} already selects the relation {relation!r}; give "
                                f"--config {set_name} with --relations {' '.join(relations)}, or leave --relations out")
    return set_name, [relation]


def _check_medlama_config(folder: DataFolder, config: str) -> None:
    """An unknown per-relation config: say which query configs the folder has."""
    configs = [name for name in folder_configs(folder.path) if not name.startswith("candidates_")]
    if config not in configs:
        ranking = [name for name in configs if not is_mc(name)]
        also = " (each also as multiple choice, <config>_mc)" if len(ranking) < len(configs) else ""
        raise MedlamaInputError(f"unknown MedLAMA config {config!r}; this dataset has {ranking}{also}",
                                file=folder.path)


def _check_loaded(source: QuerySource) -> None:
    """Refuse, when the source is made (before anything is read), queries in memory that cannot be probed as
    asked: not a Dataset or QuerySet, given beside ``data``, or a Dataset named as BioLAMA."""
    loaded = source.loaded
    if not isinstance(loaded, QuerySet) and not hasattr(loaded, "column_names"):
        raise MedlamaInputError("data must be a built folder, a Hub dataset id, a Dataset/DatasetDict or a QuerySet, "
                                f"not {type(loaded).__name__}")
    if source.data is not None:
        raise MedlamaInputError("give the queries once: a folder or Hub id (data) or queries in memory (loaded), "
                                "not both")
    if isinstance(loaded, QuerySet):
        if source.candidates != "evaluated" and source.candidates != loaded.rule:
            raise MedlamaInputError(f"a QuerySet carries its own candidate pool (rule {loaded.rule!r}); load it "
                                    f"with candidates={source.candidates!r} instead of asking for that rule here")
    elif source.dataset != "medlama":
        raise MedlamaInputError("a loaded Dataset is read as MedLAMA queries; give BioLAMA as a built folder "
                                "or a Hub dataset id")


def load_queries(source: QuerySource) -> QuerySet:
    """The :class:`QuerySet` that ``source`` describes: queries in memory (``loaded``) as they are, else
    loaded by its benchmark's loader (config, relations, prompt column and candidate rule applied); then
    its first ``limit`` queries of each relation."""
    if source.loaded is not None:
        queries = _loaded_queries(source)
    else:
        benchmark(source.dataset)  # an unknown dataset is refused by name
        module, _, function = declared(source.dataset).query_reader.partition(":")
        # The reader is named by its declaration (a floor below, which may not import it) and imported here.
        queries = getattr(importlib.import_module(module), function)(source)
    return queries.limit_per_relation(source.limit) if source.limit else queries


def _loaded_queries(source: QuerySource) -> QuerySet:
    """The queries of ``source.loaded``: a ``QuerySet`` (``relations`` picks from it; its candidates are its
    own) or a loaded MedLAMA ``Dataset`` / ``DatasetDict`` (:func:`queries_from_dataset`)."""
    data, relations = source.loaded, source.relations
    if not isinstance(data, QuerySet):
        return queries_from_dataset(data, relations=relations, prompt_column=source.prompt_column,
                                    name=source.config or "dataset", candidates=source.candidates)
    if not relations:
        return data
    check_relations(relations, data.relations)
    wanted = set(relations)  # the candidates stay the QuerySet's own
    return data.subset([i for i, r in enumerate(data.relations) if r in wanted],
                       name=f"{data.name}[{','.join(relations)}]")


def load_medlama_source(source: QuerySource) -> QuerySet:
    """MedLAMA's loader (:data:`~medlama.datasets.declared.medlama.MEDLAMA`): config, relations and pool of
    ``source``."""
    config = source.config or MEDLAMA.default_config
    set_name, relations = medlama_config(config, list(source.relations) if source.relations else None)
    if source.split != "test":
        raise MedlamaInputError("MedLAMA has one split, test")
    folder = resolve_data(source)
    _check_medlama_config(folder, config)
    return load_medlama_queries(folder, mc_config(set_name) if is_mc(config) else set_name, relations=relations,
                                prompt_column=source.prompt_column, candidates=source.candidates)


def queries_from(data=None, *, dataset: str = "medlama", config: str | None = None,
                 relations: Sequence[str] | None = None, candidates: str = "evaluated") -> QuerySet:
    """The :class:`QuerySet` that ``data`` names (:meth:`QuerySource.of`, read by :func:`load_queries`), for
    the Python API, the evaluator and the exports: ``None`` (the build kept in the cache), a built folder, a
    ``push-dataset`` dry run or a Hub dataset id, read exactly as ``medlama probe --data`` reads them (so the
    Hub commit goes into :attr:`QuerySet.info`); a loaded MedLAMA ``datasets.Dataset`` / ``DatasetDict``
    (:func:`queries_from_dataset`); or a ``QuerySet`` (``relations`` picks from it; its candidates are its
    own). ``candidates``: the pool rule (:attr:`QuerySource.candidates`)."""
    return load_queries(QuerySource.of(data, dataset=dataset, config=config, relations=relations,
                                       candidates=candidates))
