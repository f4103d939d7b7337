"""Figure 1 (right) of Rewire-then-Probe: MedLAMA's answers by number of tokens, and where its 2.6% comes from.

The paper says 2.6% of MedLAMA's entity names are single tokens (bert-base-uncased, footnote 4) without saying
which names it counted. The dataset card counts two ways over the full set, distinct answer names (1.1%) and
every answer of every query (4.4%); neither is 2.6%. The per-relation shares of distinct answer names, averaged
over the 19 relations (a macro average, as the paper's tables average relations), give 2.57%: that is the count
that rounds to 2.6%. :func:`token_counts` computes every candidate count and the figure's record names them all,
with the one closest to the paper's figure.

Tokens are counted without special tokens (``[CLS]``/``[SEP]``), by the tokenizer given; by default the bundled
all-MiniLM-L6-v2 tokenizer, whose uncased WordPiece vocabulary is bert-base-uncased's (the paper's).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from medlama.core.defaults import default_model_path
from medlama.core.models import load_tokenizer
from medlama.figures.output import check_png, subplots, write_figure
from medlama.runs.queries import load_medlama_queries

#: The paper's single-token share of MedLAMA's entity names (section 2, footnote 4: bert-base-uncased).
PAPER_SINGLE_TOKEN = 0.026
#: Bars of the figure: 1 to ``LAST_BAR - 1`` tokens, then ``LAST_BAR`` or more.
LAST_BAR = 10
#: The ways of counting single-token names, as the record names them.
COUNTS = {
    "distinct_answers": "distinct answer names of the set, pooled (the card's 'distinct' column, 'all' row)",
    "answer_occurrences": "every answer of every query (the card's 'occurrences' column, 'all' row)",
    "distinct_answers_macro": "distinct answer names of each relation, then the mean over relations",
    "candidates": "every entity name probed against: answer and head names (the candidate set)",
}

#: The counts in a figure's title.
SHORT = {"distinct_answers": "distinct answer names", "answer_occurrences": "every answer",
         "distinct_answers_macro": "distinct answer names per relation, mean over relations",
         "candidates": "every candidate name"}


def tokenizer_record(tokenizer, name: str | None) -> dict:
    """What the counts depend on: which tokenizer, its vocabulary size and whether it lower-cases."""
    return {"name": "bundled all-MiniLM-L6-v2 (bert-base-uncased WordPiece vocabulary)" if name is None
            else Path(name).name, "class": type(tokenizer).__name__, "vocab_size": tokenizer.vocab_size,
            "lowercase": bool(getattr(tokenizer, "do_lower_case", False)
                              or tokenizer("A", add_special_tokens=False)["input_ids"]
                              == tokenizer("a", add_special_tokens=False)["input_ids"]),
            "special_tokens": "not counted"}


def lengths(names: Sequence[str], tokenizer) -> list[int]:
    """Tokens of each name, without special tokens."""
    return [len(ids) for ids in tokenizer(list(names), add_special_tokens=False)["input_ids"]] if names else []


def histogram(counts: Sequence[int]) -> dict[str, float]:
    """``{"1": share, ..., "10+": share}`` of ``counts`` (token counts), in [0, 1]."""
    tally = Counter(min(c, LAST_BAR) for c in counts)
    return {(f"{n}+" if n == LAST_BAR else str(n)): tally.get(n, 0) / len(counts) for n in range(1, LAST_BAR + 1)}


def token_counts(queries, tokenizer) -> dict:
    """Every count of :data:`COUNTS` for one query set, and the histogram of its distinct answer names."""
    distinct = sorted({name for gold in queries.gold for name in gold})
    size = dict(zip(distinct, lengths(distinct, tokenizer)))
    by_relation: dict[str, set[str]] = {}
    for relation, gold in zip(queries.relations, queries.gold):
        by_relation.setdefault(relation, set()).update(gold)
    per_relation = {rel: sum(size[n] == 1 for n in names) / len(names) for rel, names in sorted(by_relation.items())}
    occurrences = [size[n] for gold in queries.gold for n in gold]
    candidates = lengths(queries.candidates, tokenizer)
    return {
        "queries": len(queries),
        "distinct_answers": len(distinct),
        "answer_occurrences": len(occurrences),
        "candidates": len(candidates),
        "single_token": {
            "distinct_answers": sum(size[n] == 1 for n in distinct) / len(distinct),
            "answer_occurrences": sum(c == 1 for c in occurrences) / len(occurrences),
            "distinct_answers_macro": sum(per_relation.values()) / len(per_relation),
            "candidates": sum(c == 1 for c in candidates) / len(candidates) if candidates else None,
        },
        "single_token_per_relation": per_relation,
        "histogram_distinct_answers": histogram(list(size.values())),
        "histogram_answer_occurrences": histogram(occurrences),
    }


def token_figure(data: str, out: Path, *, tokenizer: str | None = None, configs: Sequence[str] = ("full", "hard"),
                 overwrite: bool = False, argv: Sequence[str] | None = None) -> tuple[Path, Path]:
    """Draw figure 1 (right) of MedLAMA ``data`` (a built folder or Hub id) into ``out`` (PNG) and its JSON
    (an existing figure is refused unless ``overwrite``)."""
    check_png(Path(out), overwrite=overwrite)
    loaded = load_tokenizer(default_model_path() if tokenizer is None else tokenizer)
    described = tokenizer_record(loaded, tokenizer)
    sets = {config: load_medlama_queries(data, config) for config in configs}
    counts = {config: token_counts(queries, loaded) for config, queries in sets.items()}
    nearest = min(((config, way) for config in counts for way in COUNTS
                   if counts[config]["single_token"][way] is not None),
                  key=lambda cw: abs(counts[cw[0]]["single_token"][cw[1]] - PAPER_SINGLE_TOKEN))
    share = counts[nearest[0]]["single_token"][nearest[1]]
    full = counts.get("full", next(iter(counts.values())))["single_token"]
    caption = (f"Answers by number of tokens ({described['name']}). The paper's 2.6% "
               f"single-token names is the {nearest[0]} set's {COUNTS[nearest[1]]}: {100 * share:.2f}%; pooled "
               f"over distinct answers {100 * full['distinct_answers']:.1f}% and over every answer "
               f"{100 * full['answer_occurrences']:.1f}% (the dataset card's two counts).")

    fig, axes = subplots(1, 2, width=11, height=4.2)
    for ax, key, title in ((axes[0][0], "histogram_distinct_answers", "distinct answer names"),
                           (axes[0][1], "histogram_answer_occurrences", "every answer of every query")):
        width = 0.8 / len(counts)
        for i, (config, count) in enumerate(counts.items()):
            bars = count[key]
            ax.bar([j + i * width for j in range(len(bars))], [100 * v for v in bars.values()], width,
                   label=f"{config} (n={count[key.split('histogram_')[1]]:,})")
        ax.set_xticks([j + 0.4 - width / 2 for j in range(LAST_BAR)], list(bars))
        ax.set_xlabel("number of tokens")
        ax.set_ylabel("answers (%)")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=8)
    record = {"tokenizer": described, "paper_single_token": PAPER_SINGLE_TOKEN,
              "counts_defined": COUNTS, "closest_to_paper": {"set": nearest[0], "count": nearest[1], "share": share},
              "sets": counts}
    sources = [{"data": queries.info} for queries in sets.values()]
    title = (f"MedLAMA answers by number of tokens ({record['tokenizer']['name']})\nthe paper's 2.6% single-token "
             f"names = {nearest[0]} set, {SHORT[nearest[1]]}: {100 * share:.2f}%")
    return write_figure(fig, out, figure="rewire-then-probe figure 1 (right)", title=title, caption=caption,
                        data=record,
                        sources=sources, settings={"tokenizer": tokenizer, "configs": list(configs)}, argv=argv)
