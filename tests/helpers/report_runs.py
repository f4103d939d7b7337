"""Small probe runs with a scored ranking (input, scores, gold rank), for the pages medlama writes: names in the
pool hold markup and quotes, so a page that ran or parsed them would show it."""

from __future__ import annotations

from pathlib import Path

from probe_outputs import TOY_NAMES, toy_queries

#: Candidate names a page must show as written: markup that would run, quotes of both kinds, an entity.
MARKUP_NAMES = ('<script>window.__ran = "script"</script>',
                '<img src=x onerror="window.__ran=\'img\'">',
                'He said "it\'s <b>fine</b>" &amp; left')
#: The pool: the toy names and the markup names.
NAMES = tuple(TOY_NAMES) + MARKUP_NAMES


def ranked_queries(per_relation: int = 12):
    """:func:`probe_outputs.toy_queries` over :data:`NAMES` (the markup names among the gold answers too)."""
    return toy_queries(per_relation, candidates=NAMES)


def ranked_result(queries, label: str, skill: float, seed: int):
    """A scored run on ``queries`` with its :class:`~medlama.probers.ranking.Ranking` (scores in (0, 1),
    descending; the gold's rank among the top 10; an input holding markup), whose top 10 puts a gold answer
    first with probability ``skill`` and always ranks the first markup name somewhere in the top 10."""
    import numpy as np

    from medlama.probers.ranking import Ranking
    from medlama.runs.result import ProbeResult
    from medlama.runs.scores import score

    rng = np.random.default_rng(seed)
    predictions, scores = [], []
    for gold in queries.gold:
        ranked = [str(name) for name in rng.permutation(queries.candidates)[:10]]
        if rng.random() < skill:
            ranked = [gold[0]] + [name for name in ranked if name != gold[0]][:9]
        if MARKUP_NAMES[0] not in ranked:
            ranked[int(rng.integers(1, 10))] = MARKUP_NAMES[0]
        predictions.append(ranked)
        scores.append(sorted((round(float(x), 4) for x in rng.uniform(0.1, 0.9, size=10)), reverse=True))
    inputs = [f"{text} <i>as fed</i> to {label}" for text in queries.texts]
    ranking = Ranking.from_names(queries.gold, predictions, scores=scores, inputs=inputs)
    return ProbeResult(label=label, query_set=queries.name, settings={"method": "test"}, ids=queries.ids,
                       relations=queries.relations, gold=queries.gold, predictions=predictions,
                       metrics=score(queries, predictions), seconds=0.0,
                       data={**queries.info, "candidates": queries.pool_record()}, ranking=ranking)


def written_runs(root: Path, specs=(("base", 0.3, 1), ("better", 0.6, 2)), per_relation: int = 12) -> list[Path]:
    """One probe output folder per ``(label, skill, seed)`` under ``root`` (``results.json`` and
    ``predictions.jsonl`` by the probe's own writer, without its plots)."""
    from medlama.runs.outputs import write_probe_results

    queries = ranked_queries(per_relation)
    folders = []
    for label, skill, seed in specs:
        folder = Path(root) / label
        folder.mkdir(parents=True)
        write_probe_results(folder, [ranked_result(queries, label, skill, seed)])
        folders.append(folder)
    return folders
