"""The probing front end shared by every prober: queries, gold answers and candidates of a dataset, and
:func:`load_queries`, which finds them from a :class:`QuerySource` (dataset, built folder, config, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from medlama.defaults import MASK_PLACEHOLDER
from medlama.errors import MedlamaInputError
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
    #: the ``data`` block of a result's provenance (:func:`data_info`). Never a local path.
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
        check; its scores are not the benchmark's). Named ``<name>[first N per relation]``."""
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
        return self.subset(pick, name=f"{self.name}[first {limit} per relation]")


def load_medlama_queries(data_dir: str | Path, config: str = "hard", *, relations: Sequence[str] | None = None,
                         prompt_column: str = "query_human") -> QuerySet:
    """Queries of a built MedLAMA folder (``medlama build medlama``) for ``config`` (``hard`` or ``full``).

    The candidate set is the config's exported one (all answer and head names of the evaluated
    relations), as the reference probe builds it; a relation subset gets the union of its relations'.
    """
    from datasets import load_dataset

    data_dir = Path(data_dir)
    if not (data_dir / "README.md").is_file():
        raise MedlamaInputError("not a built dataset folder (no README.md); run `medlama build medlama --out DIR`",
                                file=data_dir)
    if prompt_column not in PROMPT_COLUMNS:
        raise MedlamaInputError(f"unknown prompt column {prompt_column!r}; choose from {list(PROMPT_COLUMNS)}")
    try:
        data = load_dataset(str(data_dir), config, split="test")
    except ValueError as error:
        raise MedlamaInputError(f"cannot load config {config!r}: {error}", file=data_dir) from None
    known = sorted(set(data["relation"]))
    if relations:
        unknown = sorted(set(relations) - set(known))
        if unknown:
            raise MedlamaInputError(f"unknown relation(s) {unknown}; known: {known}", file=data_dir)
        data = data.filter(lambda batch: [r in set(relations) for r in batch["relation"]], batched=True)
        names: set[str] = set()
        for rel in relations:
            names.update(load_dataset(str(data_dir), f"candidates_{config}_{rel}", split="test")["name"])
        candidates = sorted(names)
        name = f"{config}[{','.join(relations)}]"
    else:
        candidates = list(load_dataset(str(data_dir), f"candidates_{config}", split="test")["name"])
        name = config
    return QuerySet(ids=list(data["id"]), relations=list(data["relation"]), texts=list(data[prompt_column]),
                    gold=[list(g) for g in data["answer_names"]], candidates=candidates, name=name,
                    info=data_info(data_dir, "medlama", config, relations))


def data_info(folder: str | Path, dataset: str, config: str, relations: Sequence[str] | None = None,
              **more) -> dict:
    """What identifies the probed data of a built ``folder``: the dataset, config and relations, the release
    commit its build recorded (``build_info.json``), and a hash of its files (never its local path)."""
    import json

    from medlama.provenance import folder_hash

    folder = Path(folder)
    info: dict = {"dataset": dataset, "config": config, "relations": list(relations) if relations else "all", **more}
    try:
        report = json.loads((folder / "build_info.json").read_text(encoding="utf-8")).get("report") or {}
        info["release_commit"] = report.get("commit")
    except (OSError, ValueError, AttributeError):
        info["release_commit"] = None
    info["folder_sha256"] = folder_hash(folder)
    return info


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
    if relations:
        unknown = sorted(set(relations) - set(data.unique("relation")))
        if unknown:
            raise MedlamaInputError(f"unknown relation(s) {unknown}; known: {sorted(set(data.unique('relation')))}")
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
#: Query sets each dataset offers (BioLAMA also has one config per relation, ``<source>_<PID>``).
CONFIGS = {"medlama": ("hard", "full"), "biolama": ("all", "ctd", "umls", "wikidata")}


@dataclass(frozen=True)
class QuerySource:
    """Where the queries of a probe come from (``medlama probe``'s data flags)."""

    dataset: str = setting("medlama", choices=DATASETS,
                           help="benchmark to probe; biolama is scored as BioLAMA does: normalised match against "
                                "labels and aliases, acc@1 and acc@5")
    data: Path | None = setting(None, help="a built folder of the dataset; none: build once into the cache from "
                                           "--source / $MEDLAMA_SOURCE or $BIOLAMA_SOURCE / the pinned download")
    source: str | None = setting(None, help="the dataset's release (folder or archive), used when --data is not "
                                            "given")
    config: str | None = setting(None, help="query set: MedLAMA hard or full; BioLAMA all, ctd, umls, wikidata "
                                            "or <source>_<PID>; none: the first (hard, all)")
    split: str = setting("test", help="BioLAMA split to probe: train, dev or test")
    relations: tuple[str, ...] | None = setting(None, help="probe only these relations (none: all)", metavar="REL")
    prompt_column: str = setting("query_human", choices=PROMPT_COLUMNS,
                                 help="MedLAMA: which prompt builds the query (the human prompt, as the reference)")

    def __post_init__(self) -> None:
        check(self)


def data_folder(source: QuerySource) -> Path:
    """The built dataset folder: ``source.data``, else one built once into the cache from the release."""
    if source.data is not None:
        return Path(source.data)
    if source.dataset == "biolama":
        from medlama.datasets.biolama import cached_build as cached_biolama

        return cached_biolama(source.source)
    from medlama.datasets.medlama import cached_build

    return cached_build(source.source)


def load_queries(source: QuerySource) -> QuerySet:
    """The :class:`QuerySet` that ``source`` describes."""
    config = source.config or CONFIGS[source.dataset][0]
    relations = list(source.relations) if source.relations else None
    if source.dataset == "biolama":
        from medlama.probers.biolama_queries import load_biolama_queries

        if source.prompt_column != "query_human":
            raise MedlamaInputError("--prompt-column is a MedLAMA option; BioLAMA queries use its manual prompts")
        folder = data_folder(source)
        queries = load_biolama_queries(folder, config, split=source.split, relations=relations)
        if not queries.info:
            from dataclasses import replace

            queries = replace(queries, info=data_info(folder, "biolama", config, relations, split=source.split))
        return queries
    if config not in CONFIGS["medlama"]:
        raise MedlamaInputError(f"unknown MedLAMA config {config!r}; choose from {list(CONFIGS['medlama'])}")
    if source.split != "test":
        raise MedlamaInputError("MedLAMA has one split, test")
    return load_medlama_queries(data_folder(source), config, relations=relations,
                                prompt_column=source.prompt_column)


def first_per_relation(queries: QuerySet, limit: int | None) -> QuerySet:
    """The first ``limit`` queries of each relation (all when ``limit`` is ``None``), for quick checks; the
    candidates stay those of the whole set, so a hit means what it means in a full run."""
    if limit is None:
        return queries
    if limit < 1:
        raise MedlamaInputError(f"limit must be >= 1, got {limit}")
    seen: dict[str, int] = {}
    keep = []
    for index, relation in enumerate(queries.relations):
        seen[relation] = seen.get(relation, 0) + 1
        if seen[relation] <= limit:
            keep.append(index)
    subset = queries.subset(keep)
    return QuerySet(subset.ids, subset.relations, subset.texts, subset.gold, subset.candidates, subset.name,
                    {**queries.info, "limit_per_relation": limit} if queries.info else {})
