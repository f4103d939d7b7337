"""Statistics of a built MedLAMA or BioLAMA, as the dataset cards and the ``medlama build`` tables show them."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean

from medlama.loaders.biolama_release import SPLITS as BIOLAMA_SPLITS
from medlama.core.defaults import default_model_path


def single_token_share(names: list[str], tokenizer) -> float | None:
    """Share of ``names`` that the tokenizer encodes as exactly one token (no special tokens); None for none.

    None rather than NaN: the statistics go to ``build_info.json``, and NaN is not JSON.
    """
    if not names:
        return None
    ids = tokenizer(names, add_special_tokens=False)["input_ids"]
    return sum(len(tokens) == 1 for tokens in ids) / len(names)


def medlama_statistics(datasets, tokenizer=None) -> list[dict]:
    """One row per relation plus a final ``all`` row.

    ``single_token_answers`` is the share of *distinct* answer names of the full set that the
    tokenizer keeps as one token; ``single_token_answer_occurrences`` counts every answer of every
    query instead. By default the tokenizer is the bundled model's, an uncased BERT WordPiece
    vocabulary like ``bert-base-uncased`` (the paper reports 2.6% without saying which count it used).
    """
    if tokenizer is None:
        # transformers loads when this runs, not when medlama.datasets.statistics is imported
        from transformers import AutoTokenizer


        tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    full, hard = datasets["full"], datasets["hard"]
    groups: dict[str, dict[str, list]] = {}
    for set_name, data in (("full", full), ("hard", hard)):
        for relation, names in zip(data["relation"], data["answer_names"]):
            groups.setdefault(relation, {"full": [], "hard": []})[set_name].append(names)

    def row(label: str, full_answers: list, hard_answers: list) -> dict:
        distinct = sorted({name for names in full_answers for name in names})
        return {
            "relation": label,
            "full": len(full_answers),
            "hard": len(hard_answers),
            "answers_per_query_full": fmean(len(names) for names in full_answers),
            "answers_per_query_hard": fmean(len(names) for names in hard_answers) if hard_answers else None,
            "distinct_answers": len(distinct),
            "single_token_answers": single_token_share(distinct, tokenizer),
            "single_token_answer_occurrences": single_token_share([n for names in full_answers for n in names],
                                                                  tokenizer),
        }

    rows = [row(relation, group["full"], group["hard"]) for relation, group in sorted(groups.items())]
    rows.append(row("all", [n for g in groups.values() for n in g["full"]], [n for g in groups.values() for n in g["hard"]]))
    return rows


def statistics_markdown(rows: list[dict]) -> str:
    """The statistics as a Markdown table."""
    def number(value: float | None, fmt: str) -> str:
        return "–" if value is None else format(value, fmt)

    lines = ["| Relation | Full | Hard | Answers / query (full) | Answers / query (hard) | Distinct answers "
             "| Single-token (distinct) | Single-token (occurrences) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        label = f"**{r['relation']}**" if r["relation"] == "all" else f"`{r['relation']}`"
        shares = [r["single_token_answers"], r["single_token_answer_occurrences"]]
        lines.append(f"| {label} | {r['full']:,} | {r['hard']:,} | {r['answers_per_query_full']:.2f} | "
                     f"{number(r['answers_per_query_hard'], '.2f')} | {r['distinct_answers']:,} | "
                     + " | ".join("–" if x is None else f"{100 * x:.1f}%" for x in shares) + " |")
    return "\n".join(lines)


def biolama_statistics(build) -> list[dict]:
    """One row per relation, then one per source and a final ``all`` row.

    ``objects_per_query`` and ``answers_per_query`` (gold labels plus aliases, distinct) are over all
    splits; ``distinct_objects`` counts distinct object labels over all splits.
    """

    def row(source: str, relation: str, configs: Sequence[str], template: str) -> dict:
        counts = {split: sum(len(build.rows[c][split]) for c in configs) for split in BIOLAMA_SPLITS}
        everything = [r for c in configs for split in BIOLAMA_SPLITS for r in build.rows[c][split]]
        total = len(everything)
        return {
            "source": source, "relation": relation, "relations": len(configs), **counts, "total": total,
            "objects_per_query": sum(len(r["obj_labels"]) for r in everything) / total if total else float("nan"),
            "answers_per_query": sum(len(r["answers"]) for r in everything) / total if total else float("nan"),
            "distinct_objects": len({label for r in everything for label in r["obj_labels"]}),
            "template": template,
        }

    rows = []
    for src in build.report.sources:
        for config in build.relation_configs(src):
            rows.append(row(src, config.split("_", 1)[1], [config], build.templates[config]))
    for src in build.report.sources:
        rows.append(row(src, "all", build.relation_configs(src), ""))
    rows.append(row("all", "all", build.relation_configs(), ""))
    return rows


def biolama_statistics_markdown(rows: list[dict]) -> str:
    """BioLAMA's statistics as a Markdown table."""
    lines = ["| Source | Relation | Train | Dev | Test | Objects / query | Answers / query (with aliases) "
             "| Distinct objects | Manual prompt |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        total = r["relation"] == "all"
        source = f"**{r['source']}**" if total else r["source"]
        relation = f"**all ({r['relations']})**" if total else f"`{r['relation']}`"
        template = r["template"].replace("|", "\\|")
        lines.append(f"| {source} | {relation} | {r['train']:,} | {r['dev']:,} | {r['test']:,} | "
                     f"{r['objects_per_query']:.2f} | {r['answers_per_query']:.2f} | {r['distinct_objects']:,} | "
                     f"{f'`{template}`' if template else ''} |")
    return "\n".join(lines)
