"""BioLAMA for the probers: queries, gold answers and candidates of a built folder, and per-source scores.

Every prober takes a ``QuerySet``; this module makes one from a folder written by
``medlama build biolama``, so every probing method runs on BioLAMA unchanged. BioLAMA's own scoring is
acc@1 and acc@5 with normalised matching against the gold labels and their aliases, macro-averaged over
the relations of each source (``by_source``), as table 7 of Meng et al. (2022) reports it.

* Queries: the ``query`` column (the manual prompt, ``[X]`` filled, ``[Y]`` kept).
* Gold: the ``answers`` column, every object label and alias of the record.
* Relation (the acc@k group) of a query: ``<source>_<PID>``, e.g. ``umls_UR44``, so that groups of
  different sources never mix and each group names its source.
* Candidates (for retrieval probers): the distinct subject labels and object labels of the evaluated
  relations in the probed split, sorted, as the MedLAMA reference probe builds its candidate set from
  the evaluated files. Aliases are gold answers but not candidates (``candidates="labels+aliases"``
  adds them).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from medlama.core.display import print_table
from medlama.datasets.folders import DataFolder, load_config, resolve_folder
from medlama.core.errors import MedlamaInputError
from medlama.datasets.declared.biolama import BIOLAMA, SOURCES, by_source, group_of
from medlama.runs.benchmarks import resolve_data
from medlama.probers.pools import check_rule
from medlama.probers.query_set import QuerySet, choice_queries
from medlama.runs.tables import percent
from medlama.datasets.prompts import DEFAULT_PROMPT_COLUMN

#: BioLAMA's cut-offs and matching, as its declaration gives them.
BIOLAMA_KS = BIOLAMA.ks
BIOLAMA_MATCH = BIOLAMA.match
CANDIDATE_SETS = ("labels", "labels+aliases")


def load_biolama_queries(data: str | Path | DataFolder, config: str = "all", *, split: str = "test",
                         relations: Sequence[str] | None = None, candidates: str = "labels",
                         rule: str = "evaluated") -> QuerySet:
    """Queries of BioLAMA for ``config`` (``all``, a source, or ``<source>_<PID>``) and ``split`` from ``data``:
    a built folder (``medlama build biolama``), a ``push-dataset`` dry run or a Hub dataset id.

    ``relations`` keeps only these relations, named ``UR44`` or ``umls_UR44``. ``rule``: the candidate pool
    (:data:`~medlama.probers.pools.CANDIDATE_RULES`): the evaluated relations' rows (default), each
    relation's own rows, or all rows of the config and split.
    """
    folder = data if isinstance(data, DataFolder) else resolve_folder(data, dataset="biolama")
    data_dir = folder.path
    if candidates not in CANDIDATE_SETS:
        raise MedlamaInputError(f"unknown candidate set {candidates!r}; choose from {list(CANDIDATE_SETS)}")
    check_rule(rule)
    data = load_config(data_dir, config, split)
    if "answers" not in data.column_names or "query" not in data.column_names:
        raise MedlamaInputError(f"config {config!r} is not BioLAMA (no 'query' and 'answers' columns)", file=data_dir)
    groups = [group_of(s, r) for s, r in zip(data["source"], data["relation"])]
    per_group: dict[str, set[str]] = {}
    for group, subject, labels, answers in zip(groups, data["sub_label"], data["obj_labels"], data["answers"]):
        per_group.setdefault(group, set()).update([subject, *labels, *(answers if candidates != "labels" else ())])
    name = f"biolama {config}/{split}"
    if relations:
        known = sorted(set(groups))
        wanted = set()
        for rel in relations:
            matches = [g for g in known if rel in (g, g.split("_", 1)[1])]
            if not matches:
                raise MedlamaInputError(f"unknown relation {rel!r} in config {config!r}; known: {known}", file=data_dir)
            wanted.update(matches)
        keep = [i for i, g in enumerate(groups) if g in wanted]
        data = data.select(keep)
        groups = [groups[i] for i in keep]
        name += f"[{','.join(relations)}]"
    info = {"dataset": "biolama", "config": config, "split": split,
            "relations": list(relations) if relations else "all", **folder.info}
    if "choices" in data.column_names:  # multiple choice: each query ranked against its own choices
        return choice_queries(data, list(data["query"]), data["answers"], rule, name=name, info=info, relations=groups,
                              subject_names=list(data["sub_label"]),
                              subjects=list(data["sub_uri"]) if "sub_uri" in data.column_names else None)
    evaluated = sorted(set(groups)) if rule != "config" else sorted(per_group)
    names = sorted(set().union(*(per_group[g] for g in evaluated)))
    pools = {g: sorted(per_group[g]) for g in evaluated} if rule == "relation" else None
    return QuerySet(ids=list(data["id"]), relations=groups, texts=list(data["query"]),
                    gold=[list(g) for g in data["answers"]], candidates=names, name=name, info=info,
                    rule=rule, pools=pools,
                    subjects=list(data["sub_uri"]) if "sub_uri" in data.column_names else None,
                    subject_names=list(data["sub_label"]))


def load_biolama_source(source) -> QuerySet:
    """BioLAMA's loader (:data:`~medlama.datasets.declared.biolama.BIOLAMA`) for a
    :class:`~medlama.runs.queries.QuerySource`."""
    if source.prompt_column != DEFAULT_PROMPT_COLUMN:
        raise MedlamaInputError("--prompt-column is a MedLAMA option; BioLAMA queries use its manual prompts")
    return load_biolama_queries(resolve_data(source), source.config or BIOLAMA.configs[0], split=source.split,
                                relations=list(source.relations) if source.relations else None,
                                rule=source.candidates)


def print_source_table(results, ks: Sequence[int] = BIOLAMA_KS) -> None:
    """Table 7 of the paper: per run, macro acc@k (%) of each source."""
    tables = [by_source(r.metrics, ks) for r in results]
    sources = [s for s in SOURCES if any(s in t for t in tables)] + sorted(
        {s for t in tables for s in t} - set(SOURCES))
    columns = ["run"] + [f"{s} acc@{k}" for s in sources for k in ks]
    rows = [[r.label] + [percent(t[s][f"acc@{k}"]) if s in t else "-" for s in sources for k in ks]
            for r, t in zip(results, tables)]
    print_table("BioLAMA: macro acc@k over each source's relations (%)", columns, rows,
                caption="normalised match against gold labels and aliases (BioLAMA's scoring)")
