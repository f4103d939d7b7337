"""Inverse consistency (``medlama consistency RUN``): does a model that knows a fact know it both ways?

The release's inverse relation pairs ``(r, r')`` are declared once
(:data:`medlama.loaders.medlama_release.INVERSE_PAIRS`). A fact (s, r, o) and its inverse (o, r', s) are paired
by CUI, from what each ``predictions.jsonl`` row names (``head_cui``, and ``answer_cuis`` aligned with
``gold``): the query (s, r) holding o among its answers, and the query (o, r') holding s among its. A fact is
*right in r* when o's name (its ``gold`` entry) is among the top k predictions of the query (s, r), by the
run's own answer matching (the acc@k module, the name scored alone); *right in r'* likewise for s's name and
the query (o, r'). A fact whose subject is its object (s = o) is not a fact about two concepts and is left out;
a concept the release asks twice in one relation, under two of its names (e.g. C0812287, "MYCN Gene" and
"Oncogene MYCN"), pairs once per query asking it, each query being its own probe.

For each run, each k it scored (up to the :data:`~medlama.runs.outputs.KEEP_PREDICTIONS` names a row keeps)
and each pair probed in both directions (and all pairs together, ``"all"``): the facts paired, the share right
in both, in r only, in r' only and in neither, and the conditional accuracies P(right in r' | right in r) and
P(right in r | right in r'), each with its percentile-bootstrap interval (:func:`medlama.core.intervals.
bootstrap_mean_ci`: the paired facts resampled; a conditional accuracy's over the facts it is conditioned on).
The record holds how the numbers were computed and each run's identity (:func:`~medlama.analysis.comparison.
input_record`), and is written atomically to ``consistency.json`` in the run's folder (or elsewhere).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from medlama.analysis.comparison import CompareSettings, input_record
from medlama.analysis.runs import Run, load_runs
from medlama.core.atomic_files import atomic_write_text
from medlama.core.errors import MedlamaInputError
from medlama.core.intervals import bootstrap_mean_ci
from medlama.core.provenance import provenance
from medlama.core.settings import check, setting
from medlama.loaders.medlama_release import INVERSE_PAIRS
from medlama.metrics import load as load_metric
from medlama.runs.outputs import KEEP_PREDICTIONS, PREDICTIONS_FILE

#: The file the record is written to in the run's folder, unless told otherwise.
CONSISTENCY_FILE = "consistency.json"
#: The record's format marker.
FORMAT_KEY, FORMAT = "medlama_consistency", 1
#: The four outcomes of a fact, in the order the tables show them.
OUTCOMES = ("both", "forward_only", "backward_only", "neither")


@dataclass(frozen=True)
class ConsistencyOutput:
    """Where ``medlama consistency`` writes its record and how it shows it."""

    out: Path | None = setting(None, metavar="FILE.json", show_default=f"RUN/{CONSISTENCY_FILE}",
                               help="the JSON file to write the record to")
    overwrite: bool = setting(False, switch=True, show_default="refuse",
                              help="replace an existing record (--out, or the run's own)")
    json: bool = setting(False, switch=True, help="print the record as JSON instead of the table")

    def __post_init__(self) -> None:
        check(self)
        if self.out is not None and not isinstance(self.out, Path):
            object.__setattr__(self, "out", Path(self.out))


@dataclass(frozen=True)
class Fact:
    """One fact probed both ways: its pair, subject and object (CUI and name), and the two queries' rows."""

    pair: str
    subject: str
    object: str
    forward: dict
    backward: dict
    subject_name: str
    object_name: str


def pair_name(pair: tuple[str, str]) -> str:
    return f"{pair[0]} <-> {pair[1]}"


def _fact_rows(run: Run) -> dict[tuple[str, str], list[dict]]:
    """``{(relation, head CUI): [row, ...]}`` of the rows of the relations of an inverse pair, checked (a
    concept the release asks twice, under two of its names, has two rows)."""
    wanted = {relation for pair in INVERSE_PAIRS for relation in pair}
    file = run.folder / PREDICTIONS_FILE
    index: dict[tuple[str, str], list[dict]] = {}
    for row in run.rows:
        if row["relation"] not in wanted:
            continue
        cui, answers = row.get("head_cui"), row.get("answer_cuis")
        if not isinstance(cui, str) or not isinstance(answers, list) or len(answers) != len(row["gold"]):
            raise MedlamaInputError(
                f"run {run.label!r}: query {row['id']!r} does not name its fact (`head_cui`, and `answer_cuis` "
                "aligned with `gold`), which pairs a fact with its inverse: probe the MedLAMA data again with "
                "this medlama, which writes them", file=file)
        index.setdefault((row["relation"], cui), []).append(row)
    return index


def paired_facts(run: Run) -> tuple[list[Fact], list[str]]:
    """The facts of ``run`` probed in both directions (module docstring), pair by pair in the declared order
    (by subject CUI, then query id), and the declared pairs the run did not probe both ways (by name). A fact
    whose subject or object the release asks under two names is paired once per pair of queries asking it."""
    index = _fact_rows(run)
    present = set(run.relations)
    facts, missing = [], []
    for pair in INVERSE_PAIRS:
        forward, backward = pair
        if not {forward, backward} <= present:
            missing.append(pair_name(pair))
            continue
        for (relation, subject), rows in sorted(index.items()):
            if relation != forward:
                continue
            for row in sorted(rows, key=lambda r: str(r["id"])):
                for object_cui, object_name in zip(row["answer_cuis"], row["gold"]):
                    if object_cui == subject:
                        continue
                    for inverse in sorted(index.get((backward, str(object_cui)), ()), key=lambda r: str(r["id"])):
                        if subject in inverse["answer_cuis"]:
                            subject_name = inverse["gold"][inverse["answer_cuis"].index(subject)]
                            facts.append(Fact(pair_name(pair), subject, str(object_cui), row, inverse,
                                              str(subject_name), str(object_name)))
    return facts, missing


def _right(run: Run, facts: Sequence[Fact], ks: Sequence[int]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """``{k: (right in r, right in r')}`` of ``facts``: each name scored alone against its query's top k."""
    match = (run.record.get("metrics") or {}).get("match", "exact")
    checks = [(fact.forward["predictions"], fact.object_name) for fact in facts] + \
             [(fact.backward["predictions"], fact.subject_name) for fact in facts]
    groups = [str(i) for i in range(len(checks))]
    scored = load_metric("acc_at_k").compute(predictions=[list(p) for p, _ in checks],
                                             references=[[name] for _, name in checks], groups=groups,
                                             k=list(ks), match=match)
    out = {}
    for k in ks:
        right = np.array([scored["groups"][g][f"acc@{k}"] == 1.0 for g in groups], dtype=bool)
        out[k] = (right[:len(facts)], right[len(facts):])
    return out


def _share(values: np.ndarray, options: dict) -> dict:
    ci = bootstrap_mean_ci(values.astype(np.float64), **options)
    return {"value": float(values.mean()) if len(values) else None, "count": int(values.sum()),
            "of": int(len(values)), "interval": list(ci) if ci else None}


def summary(forward: np.ndarray, backward: np.ndarray, options: dict) -> dict:
    """The shares and conditional accuracies of facts right ``forward`` (in r) and ``backward`` (in r')."""
    outcomes = {"both": forward & backward, "forward_only": forward & ~backward,
                "backward_only": ~forward & backward, "neither": ~forward & ~backward}
    return {"facts": int(len(forward)), **{name: _share(outcomes[name], options) for name in OUTCOMES},
            "forward": _share(forward, options), "backward": _share(backward, options),
            "backward_given_forward": _share(backward[forward], options),
            "forward_given_backward": _share(forward[backward], options)}


def run_consistency(run: Run, settings: CompareSettings = CompareSettings()) -> dict:
    """One run's record (module docstring): ``by_k`` maps each k to each pair's :func:`summary` and ``all``'s."""
    facts, missing = paired_facts(run)
    if not facts:
        probed = ", ".join(pair_name(p) for p in INVERSE_PAIRS if pair_name(p) not in missing)
        raise MedlamaInputError(
            f"run {run.label!r} has no fact probed in both directions: "
            + (f"its queries of {probed} share no fact" if probed else
               "probe both relations of an inverse pair (" + "; ".join(missing) + "), e.g. the whole MedLAMA set"),
            file=run.folder)
    ks = [k for k in run.ks if k <= KEEP_PREDICTIONS]
    if not ks:
        raise MedlamaInputError(f"run {run.label!r} scored no cut-off k up to {KEEP_PREDICTIONS} (the predictions a "
                                f"row keeps): its ks are {run.ks}", file=run.folder)
    options = {"resamples": settings.resamples, "seed": settings.seed, "level": settings.level}
    right = _right(run, facts, ks)
    pairs = np.array([fact.pair for fact in facts], dtype=object)
    probed = [pair_name(p) for p in INVERSE_PAIRS if pair_name(p) not in missing]
    by_k = {}
    for k in ks:
        forward, backward = right[k]
        entry = {name: summary(forward[pairs == name], backward[pairs == name], options) for name in probed}
        entry["all"] = summary(forward, backward, options)
        by_k[str(k)] = entry
    return {"label": run.label, "ks": ks, "pairs": probed, "not_probed": missing, "by_k": by_k,
            "facts": [{"pair": f.pair, "subject": f.subject, "object": f.object, "subject_name": f.subject_name,
                       "object_name": f.object_name, "forward_query": f.forward["id"], "backward_query": f.backward["id"],
                       **{f"right@{k}": [bool(right[k][0][i]), bool(right[k][1][i])] for k in ks}}
                      for i, f in enumerate(facts)]}


def method_record(settings: CompareSettings) -> dict:
    """How the numbers were computed, recorded beside them."""
    return {"pairs": [list(pair) for pair in INVERSE_PAIRS],
            "pairing": "a fact (s, r, o) and its inverse (o, r', s) by CUI: the query (s, r) holding o among its "
                       "answer_cuis and the query (o, r') holding s among its; facts with s = o left out",
            "right": "the fact's other concept (its gold name) among the query's top k, by the run's answer matching "
                     "(the acc@k module, that name alone as the gold)",
            "forward": "right in r (the pair's first relation); backward: right in r'",
            "interval": "percentile bootstrap over the paired facts, seeded (a conditional accuracy's: over the "
                        "facts it is conditioned on)",
            "settings": {"resamples": settings.resamples, "seed": settings.seed, "level": settings.level}}


def consistency(folder: str | Path, settings: CompareSettings = CompareSettings(), *,
                argv: Sequence[str] | None = None) -> dict:
    """The record of every run of the probe output ``folder`` (module docstring), nothing written."""
    runs = load_runs([folder], at_least=1, purpose="inverse consistency")
    return {FORMAT_KEY: FORMAT, "runs": [run_consistency(run, settings) for run in runs],
            "method": method_record(settings), "inputs": [input_record(run) for run in runs],
            "provenance": provenance(argv=argv)}


def record_file(folder: str | Path, output: ConsistencyOutput) -> Path:
    """Where the record goes, refused before any work when it could not be written or would replace one unasked."""
    file = output.out if output.out is not None else Path(folder) / CONSISTENCY_FILE
    if output.out is not None:
        if file.suffix.lower() != ".json":
            raise MedlamaInputError("the record is written as JSON: give a file ending in .json", file=file)
        if not file.parent.is_dir():
            raise MedlamaInputError("its folder does not exist", file=file)
    if file.is_dir():
        raise MedlamaInputError("is a folder; give the JSON file to write", file=file)
    if file.exists() and not output.overwrite:
        raise MedlamaInputError("exists; give --overwrite (overwrite=True) to replace it, or another --out", file=file)
    return file


def write_consistency(folder: str | Path, settings: CompareSettings = CompareSettings(),
                      output: ConsistencyOutput = ConsistencyOutput(), *, argv: Sequence[str] | None = None
                      ) -> tuple[dict, Path]:
    """What ``medlama consistency RUN`` does: the record of :func:`consistency`, written atomically (to
    ``RUN/consistency.json`` or ``output.out``); returns the record and its file."""
    if not Path(folder).is_dir():
        raise MedlamaInputError("not a folder: give the output folder of `medlama probe`", file=folder)
    file = record_file(folder, output)
    record = consistency(folder, settings, argv=argv)
    atomic_write_text(file, json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return record, file


def read_consistency(folder: str | Path) -> dict | None:
    """The record ``medlama consistency`` wrote into a run's ``folder``, or ``None`` where there is none."""
    file = Path(folder) / CONSISTENCY_FILE
    try:
        record = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise MedlamaInputError(f"cannot read the consistency record: {error}", file=file) from None
    if not isinstance(record, dict) or record.get(FORMAT_KEY) != FORMAT:
        raise MedlamaInputError("not the record of `medlama consistency`", file=file)
    return record


def page_entries(folders: Sequence[str | Path], runs: Sequence[Run]) -> list[dict]:
    """What a results page shows of the folders' consistency records (each run's ``by_k``, without the facts):
    one entry per run of a folder holding one, refused when the record is of other files than the run's now."""
    entries = []
    current = {(run.folder.resolve(), run.label): input_record(run) for run in runs}
    for folder in map(Path, folders):
        record = read_consistency(folder)
        if record is None:
            continue
        now = {entry["run"]: entry for (where, _), entry in current.items() if where == folder.resolve()}
        for made_from, entry in zip(record.get("inputs") or [], record.get("runs") or []):
            if now.get(made_from.get("run"), {}).get("predictions_sha256") != made_from.get("predictions_sha256"):
                raise MedlamaInputError("the consistency record is of other predictions than the run's now: run "
                                        "`medlama consistency` again (with --overwrite)", file=folder / CONSISTENCY_FILE)
            entries.append({"label": now[made_from["run"]]["label"], "ks": entry["ks"], "by_k": entry["by_k"],
                            "not_probed": entry["not_probed"], "level": record["method"]["settings"]["level"]})
    return entries


def render(record: dict) -> str:
    """The terminal table: per run, k and pair, the facts and each share (with its interval) in percent."""
    level = record["method"]["settings"]["level"]
    heads = ("pair", "facts", "both", "r only", "r' only", "neither", "P(r'|r)", "P(r|r')")
    lines = []
    for run in record["runs"]:
        for k, entries in run["by_k"].items():
            lines.append(f"\n{run['label']}: facts right in both directions at k = {k} (% with {level:.0%} "
                         "bootstrap intervals)")
            table = [heads]
            for name, entry in entries.items():
                cells = [name, str(entry["facts"])]
                for key in (*OUTCOMES, "backward_given_forward", "forward_given_backward"):
                    share = entry[key]
                    if share["value"] is None:
                        cells.append(f"- (0 of {share['of']})")
                        continue
                    ci = share["interval"]
                    cells.append(f"{100 * share['value']:.1f}" + (f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci
                                                                   else "") + f" ({share['count']}/{share['of']})")
                table.append(cells)
            widths = [max(len(row[i]) for row in table) for i in range(len(heads))]
            lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in table]
        if run["not_probed"]:
            lines.append(f"not probed both ways: {'; '.join(run['not_probed'])}")
    return "\n".join(lines).lstrip("\n") + "\n"
