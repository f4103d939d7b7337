"""Statistics of a built MedLAMA, as the dataset card and the ``medlama build`` table show them."""

from __future__ import annotations

from statistics import fmean


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
        from transformers import AutoTokenizer

        from medlama.defaults import default_model_path

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
