"""``medlama export mteb``: MedLAMA written in MTEB's retrieval layout, for those who upload it to the Hub.

The folder holds, per relation (one MTEB subset each, as :func:`~medlama.integrations.mteb.task.mteb_task`
builds them: the same pools, ids, queries and relevant names):

* ``<relation>/corpus.jsonl``: ``{"_id", "title", "text"}`` per candidate name (``title`` empty);
* ``<relation>/queries.jsonl``: ``{"_id", "text"}`` per query, the object slot filled with one fixed filler
  (a static file knows no model: :data:`~medlama.integrations.mteb.data.BLANK` unless ``--mask-token``);
* ``<relation>/qrels/test.tsv``: ``query-id``, ``corpus-id``, ``score`` (1), one row per gold name;

which is the BEIR layout MTEB 1.x and BEIR read; ``<relation>/qrels/test.jsonl``, the same rows as JSON Lines,
and a ``README.md`` whose YAML declares the JSON Lines files as the configs MTEB 2.x loads from a Hub repository
or a local folder (``<relation>-corpus``, ``<relation>-queries``, ``<relation>-qrels``, split ``test``; one
format for all, since ``datasets`` reads every config of a repository with one builder), gated to UMLS
licensees as every UMLS-derived dataset medlama writes.
:data:`MARKER` records what was exported (config, relations, filler, counts, the data's identity).

The folder is written atomically and owned (:func:`medlama.core.atomic.atomic_directory`, kind
:data:`KIND`): an earlier export is replaced, a folder of anyone else's is refused with nothing changed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medlama.core.atomic import atomic_directory, check_replaceable
from medlama.datasets.card import gate
from medlama.integrations.mteb.data import (BLANK, MAIN_SCORE, REFERENCE, UMLS_LICENCE, RelationData,
                                            check_task_arguments, fill_slot, relation_data, task_name)
from medlama.runs.queries import queries_from

__all__ = ["KIND", "MARKER", "export_mteb"]

#: The record every export holds (and the marker by which an earlier export is known).
MARKER = "mteb_export.json"
#: The command that owns an export folder.
KIND = "export mteb"


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def _write_subset(folder: Path, subset: RelationData, filler: str) -> dict:
    base = folder / subset.relation
    (base / "qrels").mkdir(parents=True)
    corpus = [{"_id": cid, "title": "", "text": name} for cid, name in zip(subset.corpus_ids, subset.names)]
    queries = [{"_id": qid, "text": fill_slot(text, filler)} for qid, text in zip(subset.query_ids, subset.templates)]
    qrels = [(qid, cid) for qid in subset.query_ids for cid in subset.relevant[qid]]
    (base / "corpus.jsonl").write_text(_jsonl(corpus), encoding="utf-8")
    (base / "queries.jsonl").write_text(_jsonl(queries), encoding="utf-8")
    (base / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{c}\t1\n" for q, c in qrels), encoding="utf-8")
    (base / "qrels" / "test.jsonl").write_text(
        _jsonl([{"query-id": q, "corpus-id": c, "score": 1} for q, c in qrels]), encoding="utf-8")
    return {"corpus": len(corpus), "queries": len(queries), "qrels": len(qrels)}


def _card(subsets: Sequence[RelationData], record: dict) -> str:
    # datasets and huggingface_hub stay out of `medlama export`'s argument checks (the card is written last)
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard, DatasetCardData

    data = DatasetCardData(language=["en"], license="other", license_name="umls-metathesaurus",
                           license_link=record["license"], task_categories=["text-retrieval"],
                           tags=["mteb", "biomedical", "knowledge-probing", "umls", "arxiv:2110.08173"],
                           pretty_name=f"MedLAMA ({record['config']}) for MTEB")
    configs = {}
    for subset in subsets:
        for part, path in (("corpus", "corpus.jsonl"), ("queries", "queries.jsonl"),
                                  ("qrels", "qrels/test.jsonl")):
            configs[f"{subset.relation}-{part}"] = {
                "data_files": [{"split": "test", "path": f"{subset.relation}/{path}"}]}
    MetadataConfigs(configs).to_dataset_card_data(data)
    gate(data)
    text = f"""# MedLAMA ({record['config']} set) in MTEB's retrieval layout

Written by `medlama export mteb` from MedLAMA ([Meng et al., ACL 2022]({REFERENCE})): one subset per
relation ({len(subsets)}), each with its candidate pool as corpus (`<relation>/corpus.jsonl`), its queries
(`<relation>/queries.jsonl`) and every gold name of a query as a relevant document (`<relation>/qrels/test.tsv`,
the BEIR layout, and the same rows in `<relation>/qrels/test.jsonl`).
MTEB 2.x loads a subset as the configs `<relation>-corpus`, `<relation>-queries` and `<relation>-qrels`
(split `test`); MTEB's main score for it, `{MAIN_SCORE}`, is MedLAMA's acc@10 under the per-relation pool rule.

* Queries: the human prompts with the object slot filled by `{record['filled_with']}` (fixed in these files;
  `medlama.mteb_task(...)` fills it with each model's own mask token instead, as
  `medlama probe --preset sentence-transformers` does).
* Corpus ids: `name-` and the name's position in the relation's pool (sorted by name), six digits.
* Counts and the identity of the data: `{MARKER}`.

**Licence.** The names come from the UMLS Metathesaurus: use and share this folder only under a UMLS licence
({record['license']}); on the Hub, keep it gated (this card's `extra_gated_*` fields ask for one).
"""
    return str(DatasetCard(f"---\n{data.to_yaml()}\n---\n\n{text}"))


def export_mteb(data: Any, out: str | Path, *, config: str = "hard", relations: Sequence[str] | str | None = None,
                mask_token: str | None = None) -> dict:
    """Write MedLAMA ``config`` of ``data`` (as ``medlama.probe``'s ``data``) for ``relations`` (default all) in
    MTEB's retrieval layout into ``out`` (module docstring), the slot filled with ``mask_token`` (default
    :data:`~medlama.integrations.mteb.data.BLANK`). Returns the record written to :data:`MARKER`."""

    relations = check_task_arguments(config, relations, None, mask_token)
    filler = BLANK if mask_token is None else mask_token
    source = Path(data).expanduser() if isinstance(data, (str, Path)) else None
    reads = (source,) if source is not None and source.exists() else ()
    check_replaceable(out, marker=MARKER, kind=KIND, reads=reads)  # before any data is read
    queries = queries_from(data, config=config, relations=relations, candidates="relation")
    subsets = relation_data(queries)
    record = {"format": "mteb-retrieval", "task": task_name(config), "config": config,
              "relations": [s.relation for s in subsets], "filled_with": filler, "main_score": MAIN_SCORE,
              "candidate_rule": "relation", "license": UMLS_LICENCE, "data": dict(queries.info), "subsets": {}}
    with atomic_directory(out, marker=MARKER, kind=KIND, reads=reads) as staging:
        for subset in subsets:
            record["subsets"][subset.relation] = _write_subset(staging, subset, filler)
        (staging / "README.md").write_text(_card(subsets, record), encoding="utf-8")
        (staging / MARKER).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def describe(record: dict, out: str | Path) -> str:
    """One line per export for the command's output."""
    counts = record["subsets"]
    queries = sum(c["queries"] for c in counts.values())
    return (f"wrote {len(counts)} MTEB subset(s), {queries:,} queries, to {Path(out)} (task {record['task']}; "
            f"slot filled with {record['filled_with']!r}; UMLS-derived: share only gated)")
