"""acc@k against how often each probed fact occurs in a corpus (``medlama frequency RUN --index INDEX``).

* Each query of the run (a probe output folder, :func:`medlama.analysis.runs.load_runs`) is a fact: its
  ``subject`` (the prediction rows' subject name), relation and gold answers. Its subject-object co-occurrences
  in the corpus of a context-variance index are counted twice, per sentence and per segment (document), by
  :class:`~medlama.analysis.cooccurrence.CooccurrenceCounter` (its matching rule is recorded).
* The counts are binned on a log scale: by default 0, 1, 2-10, 11-100 and more than 100 (``bins``: the
  inclusive upper bounds of every bin but the last), and each run's acc@k in each bin is given with its
  percentile-bootstrap interval over the bin's facts (:func:`medlama.core.intervals.bootstrap_mean_ci`;
  none with fewer than two facts). Facts that cannot be counted (a name the index never matched) are in no bin.
* The record names its inputs by content: the run's files' SHA-256 (:func:`~medlama.analysis.comparison.
  input_record`) and the index's corpus and entity fingerprints, counts and the SHA-256 of its manifest and
  form table.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from medlama.analysis.comparison import input_record
from medlama.analysis.cooccurrence import ALIASES, CooccurrenceCounter, matching_rule
from medlama.analysis.runs import Run, load_runs
from medlama.core.atomic_files import atomic_write_text
from medlama.core.checksums import sha256_of
from medlama.core.errors import MedlamaInputError
from medlama.core.intervals import bootstrap_mean_ci
from medlama.core.provenance import provenance
from medlama.core.settings import check, setting
from medlama.datasets.context_variance.index.corpus_index import CorpusIndex
from medlama.runs.outputs import PREDICTIONS_FILE
from medlama.analysis.statistics import IntervalSettings

#: The windows counted: sentence and segment (a document of the index).
WINDOWS = ("sentence", "segment")


@dataclass(frozen=True)
class FrequencySettings(IntervalSettings):
    """How ``medlama frequency`` matches names, bins the counts and computes its intervals (all recorded)."""

    bins: tuple[int, ...] = setting(
        (0, 1, 10, 100), metavar="N",
        help="inclusive upper bounds of every frequency bin but the last, increasing (0 1 10 100: bins 0, 1, 2-10, "
             "11-100 and >100)")
    aliases: Literal["names", "entity"] = setting(
        "names", choices=ALIASES,
        help="names: match the run's subject and gold names only; entity: also every other form (alias) of the "
             "index entities they are forms of")
    def __post_init__(self) -> None:
        check(self)
        bins = self.bins
        if not bins or any(isinstance(b, bool) or not isinstance(b, int) for b in bins):
            raise MedlamaInputError(f"the bins must be integers, got {list(bins)}", field="bins")
        if bins[0] < 0 or any(b >= c for b, c in zip(bins, bins[1:])):
            raise MedlamaInputError(f"the bins' upper bounds must be >= 0 and increasing, got {list(bins)}",
                                    field="bins")


def bin_table(bounds: Sequence[int]) -> list[dict]:
    """``[{"bin", "low", "high"}, ...]``: the bins of the upper ``bounds`` (``high`` None: no upper bound)."""
    table, low = [], 0
    for high in bounds:
        table.append({"bin": str(high) if low == high else f"{low}-{high}", "low": low, "high": high})
        low = high + 1
    table.append({"bin": f">{bounds[-1]}", "low": low, "high": None})
    return table


def bin_of(count: int, bounds: Sequence[int]) -> int:
    """The position of ``count``'s bin (:func:`bin_table`)."""
    return int(np.searchsorted(np.asarray(bounds), count, side="left"))


def open_index(folder: str | Path) -> CorpusIndex:
    """The index in ``folder``, or one error naming it (not a folder, not an index, incomplete)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MedlamaInputError("not a folder: give a context-variance index (a folder with manifest.json, as "
                                "`medlama build context-variance` keeps under --index-dir)", file=folder)
    try:
        return CorpusIndex(folder)
    except MedlamaInputError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise MedlamaInputError(f"not a readable context-variance index ({type(error).__name__}: {error}); rebuild "
                                "it", file=folder) from None


def index_record(index: CorpusIndex) -> dict:
    """What identifies the index and its corpus: fingerprints, counts, and its manifest's and forms' SHA-256."""
    manifest = index.manifest
    return {"folder": index.directory.resolve().name,
            **{key: manifest.get(key) for key in ("format", "version", "corpus_fingerprint", "entities_fingerprint",
                                                  "num_documents", "num_stored_documents", "num_entities",
                                                  "min_entities")},
            "num_forms": len(index.forms),
            "manifest_sha256": sha256_of(index.directory / "manifest.json"),
            "forms_sha256": sha256_of(index.directory / "forms.json")}


def facts_of(runs: Sequence[Run]) -> dict[str, dict]:
    """``{query id: {"id", "relation", "subject", "gold"}}`` of every run's rows; a row without its subject's name,
    or a query whose fact differs between runs, is refused naming the file."""
    facts: dict[str, dict] = {}
    for run in runs:
        file = run.folder / PREDICTIONS_FILE
        for qid, relation, gold, row in zip(run.ids, run.relations, run.gold, run.rows):
            subject = row.get("subject")
            if not isinstance(subject, str) or not subject.strip():
                raise MedlamaInputError(
                    f"run {run.label!r}: query {qid!r} has no subject name (the rows' `subject`); the run was written "
                    "by an older medlama or from queries without subjects: probe again", file=file)
            fact = {"id": qid, "relation": relation, "subject": subject, "gold": list(gold)}
            if facts.setdefault(qid, fact) != fact:
                raise MedlamaInputError(f"run {run.label!r}: query {qid!r} is another fact than in an earlier run of "
                                        "the folder", file=file)
    return facts


def frequency_runs(runs: Sequence[Run], index: CorpusIndex, settings: FrequencySettings = FrequencySettings()) -> dict:
    """The record (module docstring) of ``runs`` against ``index``: ``facts`` with their counts, ``bins``, each
    run's acc@k per bin and window, and how it was all computed."""
    facts = facts_of(runs)
    counter = CooccurrenceCounter(index, aliases=settings.aliases)
    try:
        for fact in facts.values():
            counts = counter.count(fact["subject"], fact["gold"])
            if isinstance(counts, str):
                fact.update(sentence=None, segment=None, uncounted=counts)
            else:
                fact.update(sentence=counts.sentence, segment=counts.segment)
    except MedlamaInputError:
        raise
    except (OSError, ValueError, KeyError) as error:  # a damaged part or bucket (pyarrow's errors are these)
        raise MedlamaInputError(f"the index cannot be read ({type(error).__name__}: {error}); rebuild it",
                                file=index.directory) from None
    counted = [fact for fact in facts.values() if fact["sentence"] is not None]
    if not counted:
        example = next(iter(facts.values()))
        raise MedlamaInputError(
            f"none of the run's {len(facts)} facts can be counted: their names are no forms of this index (e.g. "
            f"query {example['id']!r}: {example['uncounted']}); give the index built for this data",
            file=index.directory)
    bins = bin_table(settings.bins)
    options = {"resamples": settings.resamples, "seed": settings.seed, "level": settings.level}
    results = []
    for run in runs:
        entry: dict[str, Any] = {"label": run.label, "ks": run.ks}
        for window in WINDOWS:
            rows = []
            at = [(i, bin_of(facts[qid][window], settings.bins)) for i, qid in enumerate(run.ids)
                  if facts[qid][window] is not None]
            for position, info in enumerate(bins):
                members = [i for i, b in at if b == position]
                cell: dict[str, Any] = {**info, "facts": len(members)}
                for k in run.ks:
                    hits = run.hits[k][members].astype(np.float64)
                    ci = bootstrap_mean_ci(hits, **options) if len(members) else None
                    cell[f"acc@{k}"] = {"value": float(hits.mean()) if len(members) else None,
                                        "interval": list(ci) if ci else None}
                rows.append(cell)
            entry[window] = rows
        results.append(entry)
    return {"facts": list(facts.values()), "bins": bins, "runs": results,
            "summary": {"facts": len(facts), "counted": len(counted), "uncounted": len(facts) - len(counted)},
            "matching": matching_rule(settings.aliases), "index": index_record(index),
            "method": {"settings": {"bins": list(settings.bins), "aliases": settings.aliases, **options},
                       "bins": "a fact's count falls in the first bin whose upper bound it does not exceed; the "
                               "last bin holds every count above the last bound",
                       "interval": "percentile bootstrap over the bin's facts, seeded; none with fewer than two"}}


def frequency_folder(run: str | Path, index: str | Path, settings: FrequencySettings = FrequencySettings(), *,
                     argv: Sequence[str] | None = None) -> dict:
    """What ``medlama frequency RUN --index INDEX`` computes: :func:`frequency_runs` of every run of the probe
    output folder ``run`` against the index in ``index``, with the run's record and the record's provenance."""
    if not isinstance(settings, FrequencySettings):
        raise TypeError(f"settings must be FrequencySettings, not {type(settings).__name__}")
    opened = open_index(index)  # first: it is quick, and reading the run scores its hits again
    runs = load_runs([run], at_least=1, purpose="a frequency analysis")
    record = frequency_runs(runs, opened, settings)
    record["inputs"] = [input_record(r) for r in runs]
    record["provenance"] = provenance(argv=argv)
    return record


def write_record(record: dict, path: str | Path) -> Path:
    """Write the record as JSON to ``path`` atomically (a reader never sees half of it)."""
    atomic_write_text(path, json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return Path(path)
