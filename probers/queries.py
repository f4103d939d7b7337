"""The probing front end shared by every prober: queries, gold answers and candidates of a dataset, and
:func:`load_queries`, which finds them from a :class:`QuerySource` (dataset, built folder or Hub dataset id,
config, ...); :func:`queries_from` takes anything the Python API's ``data`` does through the same route.
Where the data is, and what identifies it, is :mod:`medlama.datasets.folders`' job."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from medlama.datasets.folders import DataFolder, folder_configs, identity, load_config, resolve_folder
from medlama.defaults import MASK_PLACEHOLDER
from medlama.errors import MedlamaInputError
from medlama.probers.arguments import check_query_rows, check_relations, check_release_relations, relation_names
from medlama.settings import check, setting

PROMPT_COLUMNS = ("query_human", "query_default")


@dataclass(frozen=True)
class QuerySet:
    """Cloze queries with the object slot as ``[Y]``, their gold answers, and the candidate names.

    Probers fill ``[Y]`` with their own model's mask token (``with_mask``).
    """

    ids: list[str]
    relations: list[str]
    texts: list[str]
    gold: list[list[str]]
    candidates: list[str]
    name: str = "queries"
    #: What identifies the data (dataset, config, relations, release commit or Hub revision, content hash):
    #: the ``data`` block of a result's provenance. Never a local path.
    info: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        sizes = {len(self.ids), len(self.relations), len(self.texts), len(self.gold)}
        if len(sizes) != 1:
            raise ValueError(f"query set columns differ in length: {sorted(sizes)}")
        for index, text in enumerate(self.texts):
            if text.count(MASK_PLACEHOLDER) != 1:
                raise MedlamaInputError(f"query {self.ids[index]!r} has {text.count(MASK_PLACEHOLDER)} "
                                        f"{MASK_PLACEHOLDER} slots, needs exactly one: {text!r}")

    def __len__(self) -> int:
        return len(self.texts)

    def with_mask(self, mask_token: str) -> list[str]:
        """The queries with ``[Y]`` replaced by ``mask_token``."""
        return [text.replace(MASK_PLACEHOLDER, mask_token) for text in self.texts]

    def subset(self, indices: Sequence[int], name: str | None = None) -> "QuerySet":
        pick = list(indices)
        return QuerySet([self.ids[i] for i in pick], [self.relations[i] for i in pick],
                        [self.texts[i] for i in pick], [self.gold[i] for i in pick], self.candidates,
                        name or self.name, {**self.info, "subset": len(pick)} if self.info else {})

    def limit_per_relation(self, limit: int) -> "QuerySet":
        """The first ``limit`` queries of each relation, in query order, with the same candidates (a quick
        check; its scores are not the benchmark's, though a hit means what it means in a full run). Named
        ``<name>[first N per relation]``, and recorded as ``limit_per_relation`` in :attr:`info`."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise MedlamaInputError(f"the query limit must be an integer >= 1, got {limit!r}")
        seen: dict[str, int] = {}
        pick = []
        for index, relation in enumerate(self.relations):
            seen[relation] = seen.get(relation, 0) + 1
            if seen[relation] <= limit:
                pick.append(index)
        if len(pick) == len(self):
            return self
        subset = self.subset(pick, name=f"{self.name}[first {limit} per relation]")
        return QuerySet(subset.ids, subset.relations, subset.texts, subset.gold, subset.candidates, subset.name,
                        {**self.info, "limit_per_relation": limit} if self.info else {})


def load_medlama_queries(data: str | Path | DataFolder, config: str = "hard", *,
                         relations: Sequence[str] | None = None, prompt_column: str = "query_human") -> QuerySet:
    """Queries of MedLAMA for ``config`` (``hard`` or ``full``) from ``data``: a built folder (``medlama build
    medlama``), a ``push-dataset`` dry run or a Hub dataset id (:func:`~medlama.datasets.folders.resolve_folder`).

    The candidate set is the config's exported one (all answer and head names of the evaluated
    relations), as the reference probe builds it; a relation subset gets the union of its relations'.
    """
    folder = data if isinstance(data, DataFolder) else resolve_folder(data, dataset="medlama")
    if prompt_column not in PROMPT_COLUMNS:
        raise MedlamaInputError(f"unknown prompt column {prompt_column!r}; choose from {list(PROMPT_COLUMNS)}")
    rows = load_config(folder.path, config, "test")
    relations = relation_names(relations)
    if relations:
        check_relations(relations, rows["relation"], file=folder.path)
        rows = rows.filter(lambda batch: [r in set(relations) for r in batch["relation"]], batched=True)
        names: set[str] = set()
        for rel in relations:
            names.update(load_config(folder.path, f"candidates_{config}_{rel}", "test")["name"])
        candidates = sorted(names)
        name = f"{config}[{','.join(relations)}]"
    else:
        candidates = list(load_config(folder.path, f"candidates_{config}", "test")["name"])
        name = config
    info = {"dataset": "medlama", "config": config, "relations": list(relations) if relations else "all",
            **folder.info}
    return QuerySet(ids=list(rows["id"]), relations=list(rows["relation"]), texts=list(rows[prompt_column]),
                    gold=[list(g) for g in rows["answer_names"]], candidates=candidates, name=name, info=info)


def queries_from_dataset(data, *, relations: Sequence[str] | None = None, prompt_column: str = "query_human",
                         name: str = "dataset") -> QuerySet:
    """Queries of an already loaded MedLAMA ``datasets.Dataset`` (or a ``DatasetDict`` with one split, or a
    ``test`` split), e.g. ``load_dataset("<folder or Hub id>", "hard")``.

    The candidates are the answer and head names of the rows probed, sorted: the rule by which the built
    ``candidates_<config>[_<relation>]`` configs are made, so the scores equal those of the folder.
    """
    from datasets import DatasetDict

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
    if relations:
        check_relations(relations, data.unique("relation"))
        wanted = set(relations)
        data = data.filter(lambda batch: [r in wanted for r in batch["relation"]], batched=True)
        name = f"{name}[{','.join(relations)}]"
    names = set(data["head_name"])
    for answers in data["answer_names"]:
        names.update(answers)
    info = {"dataset": "medlama", "config": name, "relations": list(relations) if relations else "all",
            "fingerprint": getattr(data, "_fingerprint", None)}
    return QuerySet(ids=list(data["id"]), relations=list(data["relation"]), texts=list(data[prompt_column]),
                    gold=[list(g) for g in data["answer_names"]], candidates=sorted(names), name=name, info=info)


# -- which queries to probe: the dataset, its built folder, config, split and relations ------------------

DATASETS = ("medlama", "biolama")
#: Query sets each dataset offers (and one per relation: MedLAMA ``hard_<relation>``, BioLAMA ``<source>_<PID>``).
CONFIGS = {"medlama": ("hard", "full"), "biolama": ("all", "ctd", "umls", "wikidata")}


@dataclass(frozen=True)
class QuerySource:
    """Where the queries of a probe come from (``medlama probe``'s data flags)."""

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
                                            "or <source>_<PID>; none: the first (hard, all)")
    split: str = setting("test", help="BioLAMA split to probe: train, dev or test")
    relations: tuple[str, ...] | None = setting(None, help="probe only these relations (none: all)", metavar="REL")
    prompt_column: str = setting("query_human", choices=PROMPT_COLUMNS,
                                 help="MedLAMA: which prompt builds the query (the human prompt, as the reference)")

    def __post_init__(self) -> None:
        check(self)
        check_release_relations(self.dataset, self.data, self.relations)


def resolve_data(source: QuerySource) -> DataFolder:
    """The dataset folder of ``source`` and its identity: ``source.data`` (a folder, a dry run or a Hub id),
    else a folder built once into the cache from the release."""
    if source.data is not None:
        return resolve_folder(source.data, dataset=source.dataset)
    if source.dataset == "biolama":
        from medlama.datasets.biolama import cached_build as cached_biolama

        folder = cached_biolama(source.source)
    else:
        from medlama.datasets.medlama import cached_build

        folder = cached_build(source.source)
    return DataFolder(folder, identity(folder, "build", source.dataset))


def medlama_config(config: str, relations: Sequence[str] | None = None) -> tuple[str, list[str] | None]:
    """``(set, relations)`` of a MedLAMA config name: ``hard``, ``full``, or ``hard_<relation>`` /
    ``full_<relation>`` (the folder's per-relation configs), which selects that relation."""
    set_name, _, relation = config.partition("_")
    if set_name not in CONFIGS["medlama"]:
        raise MedlamaInputError(f"unknown MedLAMA config {config!r}; choose from {list(CONFIGS['medlama'])} or "
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
        raise MedlamaInputError(f"unknown MedLAMA config {config!r}; this dataset has {configs}", file=folder.path)


def load_queries(source: QuerySource) -> QuerySet:
    """The :class:`QuerySet` that ``source`` describes."""
    config = source.config or CONFIGS[source.dataset][0]
    relations = list(source.relations) if source.relations else None
    if source.dataset == "biolama":
        from medlama.probers.biolama_queries import load_biolama_queries

        if source.prompt_column != "query_human":
            raise MedlamaInputError("--prompt-column is a MedLAMA option; BioLAMA queries use its manual prompts")
        return load_biolama_queries(resolve_data(source), config, split=source.split, relations=relations)
    set_name, relations = medlama_config(config, relations)
    if source.split != "test":
        raise MedlamaInputError("MedLAMA has one split, test")
    folder = resolve_data(source)
    _check_medlama_config(folder, config)
    return load_medlama_queries(folder, set_name, relations=relations, prompt_column=source.prompt_column)


def queries_from(data=None, *, dataset: str = "medlama", config: str | None = None,
                 relations: Sequence[str] | None = None) -> QuerySet:
    """The :class:`QuerySet` that ``data`` names, for the Python API and the evaluator.

    ``data``: ``None`` (the build kept in the cache), a built folder, a ``push-dataset`` dry run or a Hub
    dataset id (``you/medlama``, ``you/medlama@REVISION``), all read by :func:`load_queries` exactly as
    ``medlama probe --data`` reads them (so the Hub commit goes into :attr:`QuerySet.info`); a loaded
    MedLAMA ``datasets.Dataset`` / ``DatasetDict`` (:func:`queries_from_dataset`); or a ``QuerySet``
    (``relations`` picks from it).
    """
    relations = relation_names(relations)
    if isinstance(data, QuerySet):
        if not relations:
            return data
        check_relations(relations, data.relations)
        wanted = set(relations)  # the candidates stay the QuerySet's own
        return data.subset([i for i, r in enumerate(data.relations) if r in wanted],
                           name=f"{data.name}[{','.join(relations)}]")
    if data is None or isinstance(data, (str, Path)):
        folder = None if data is None else Path(data).expanduser()
        return load_queries(QuerySource(dataset=dataset, data=folder, config=config,
                                        relations=tuple(relations) if relations else None))
    if hasattr(data, "column_names"):  # a datasets.Dataset or DatasetDict
        if dataset != "medlama":
            raise MedlamaInputError("a loaded Dataset is read as MedLAMA queries; give BioLAMA as a built folder "
                                    "or a Hub dataset id")
        return queries_from_dataset(data, relations=relations, name=config or "dataset")
    raise MedlamaInputError("data must be a built folder, a Hub dataset id, a Dataset/DatasetDict or a QuerySet, "
                            f"not {type(data).__name__}")
