"""MedLAMA (Meng et al., ACL 2022) as a Hugging Face dataset folder.

``build_medlama`` reads the release (``medlama.loaders.medlama_release``), recomputes both hardness
scores with the project's own code, derives the hard set from the full set alone, and checks both
against the release. ``write_medlama`` writes the result as Parquet files plus a README dataset card
whose YAML declares the configs, so that ``load_dataset(DIR, "hard")`` (and, from DIR's parent,
``load_dataset("medlama", "hard")``) works offline, and the same folder works on the Hub.

Configs: ``hard`` (default) and ``full``; ``hard_<relation>`` and ``full_<relation>`` for each of the
19 relations; and ``candidates_<config>`` for every one of those: the answer-candidate vocabulary the
reference probe ranks (all answer names plus all head names of the config's files). Every config has
one split, ``test``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from medlama.datasets.hardness import HardnessRule, avg_match, avg_rouge_l, split_answers
from medlama.defaults import MASK_PLACEHOLDER
from medlama.errors import MedlamaInputError
from medlama.loaders import medlama_release as release

SPLIT = "test"
SETS = ("full", "hard")
DEFAULT_CONFIG = "hard"
#: Scores are compared with the released columns to this tolerance.
SCORE_TOLERANCE = 1e-6


def features():
    """The declared schema of a query row."""
    from datasets import Features, List, Value

    return Features({
        "id": Value("string"),
        "relation": Value("string"),
        "head_cui": Value("string"),
        "head_name": Value("string"),
        "answer_cuis": List(Value("string")),
        "answer_names": List(Value("string")),
        "answer_count": Value("int32"),
        "query_human": Value("string"),
        "query_default": Value("string"),
        "avg_match": Value("float64"),
        "avg_rouge_l": Value("float64"),
        "is_hard": Value("bool"),
    })


def candidate_features():
    from datasets import Features, Value

    return Features({"name": Value("string")})


def check_threshold(value: float, name: str) -> float:
    """``value`` if it is a usable hard-set threshold, else a :class:`MedlamaInputError` naming ``name``.

    Both scores lie in [0, 1] and a row is hard when they are *strictly* below the thresholds, so a
    threshold of 0 or less makes the hard set empty and one above 1 makes it the full set. Neither is
    a choice anyone needs (the full set is already there); both are typos, e.g. 10 for 0.1.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value <= 1:
        raise MedlamaInputError(f"{name} must be a number in (0, 1] (the scores lie in [0, 1] and a query is hard "
                                f"when they are below the thresholds), got {value!r}")
    return float(value)


def fill_prompt(prompt: str, head_name: str) -> str:
    """The query: ``[X]`` replaced by the head name, ``[Y]`` left as the mask placeholder."""
    return prompt.replace("[X]", head_name).replace("[Y]", MASK_PLACEHOLDER)


@dataclass
class ScoreMismatch:
    id: str
    file: str
    row: int
    score: str
    released: float
    recomputed: float


@dataclass
class BuildReport:
    """What the build checked. Empty lists mean the recomputation agrees with the release."""

    source: str
    commit: str
    checksums_verified: bool
    rule: dict
    score_mismatches: list[ScoreMismatch] = field(default_factory=list)
    #: ids derived as hard but absent from the released hard file, and the other way round.
    hard_only_derived: list[str] = field(default_factory=list)
    hard_only_released: list[str] = field(default_factory=list)
    released_hard_checked: bool = False
    #: configs with no rows (``hard_<relation>`` under strict thresholds): not declared in a written folder.
    empty_configs: list[str] = field(default_factory=list)

    @property
    def matches_release(self) -> bool:
        return not (self.score_mismatches or self.hard_only_derived or self.hard_only_released)


@dataclass
class MedlamaBuild:
    """A built MedLAMA: the query sets, candidate vocabularies per config, and the check report."""

    datasets: "DatasetDict"  # noqa: F821  keys "full" and "hard", one row per query
    candidates: dict[str, list[str]]
    report: BuildReport

    def config_names(self) -> list[str]:
        return list(self.candidates)


def _rows_for_relation(rel: str, rows: Sequence[release.ReleaseRow], prompt: release.Prompt,
                       rule: HardnessRule, report: BuildReport) -> list[dict]:
    out = []
    for row in rows:
        answers = split_answers(row.tail_names_raw)
        match = avg_match(row.head_name, answers)
        rouge = avg_rouge_l(row.head_name, answers)
        query_id = f"{rel}-{row.row:04d}"
        for name, released, recomputed in (("avg_match", row.released_avg_match, match),
                                           ("avg_rouge_l", row.released_avg_rouge_l, rouge)):
            if abs(released - recomputed) > SCORE_TOLERANCE:
                report.score_mismatches.append(ScoreMismatch(query_id, row.file, row.row, name, released, recomputed))
        out.append({
            "id": query_id,
            "relation": rel,
            "head_cui": row.head_cui,
            "head_name": row.head_name,
            "answer_cuis": list(row.tail_cuis),
            "answer_names": list(row.tail_names),
            "answer_count": len(row.tail_names),
            "query_human": fill_prompt(prompt.human_prompt, row.head_name),
            "query_default": fill_prompt(prompt.default_prompt, row.head_name),
            "avg_match": match,
            "avg_rouge_l": rouge,
            "is_hard": rule.is_hard(match, rouge),
        })
    return out


def _compare_with_released(rel: str, derived: list[dict], full_rows: Sequence[release.ReleaseRow],
                           released_path: Path, report: BuildReport) -> None:
    released_keys = [row.key() for row in release.read_relation_file(released_path, rel)]
    id_of = {row.key(): f"{rel}-{row.row:04d}" for row in full_rows}
    unknown = [key for key in released_keys if key not in id_of]
    if unknown:
        raise MedlamaInputError(f"{len(unknown)} row(s) of the released hard set are not in the full set, "
                                f"first head {unknown[0][1]!r}", file=released_path)
    released_ids = {id_of[key] for key in released_keys}
    derived_ids = {row["id"] for row in derived if row["is_hard"]}
    report.hard_only_derived += sorted(derived_ids - released_ids)
    report.hard_only_released += sorted(released_ids - derived_ids)


def candidate_names(rows) -> list[str]:
    """The reference probe's candidate set: every answer name and every head name, sorted."""
    names = set()
    for row in rows:
        names.add(row["head_name"])
        names.update(row["answer_names"])
    return sorted(names)


def build_medlama(source: str | Path | None = None, *, rule: HardnessRule = HardnessRule(),
                  verify_checksums: bool = True, compare_with_release: bool = True,
                  progress: bool = True) -> MedlamaBuild:
    """Build MedLAMA from its release: full and hard sets, candidate sets, and the check report.

    ``source``: a folder or archive of the release, else ``$MEDLAMA_SOURCE``, else the pinned download.
    ``rule``: the hard-set thresholds (the release's by default). With the default rule the derived
    hard set equals the released one; ``report`` lists any row where it does not.
    """
    from datasets import Dataset, DatasetDict, concatenate_datasets
    from tqdm.auto import tqdm

    check_threshold(rule.match_threshold, "match_threshold")
    check_threshold(rule.rouge_threshold, "rouge_threshold")
    schema = features()
    with release.open_release(source, verify_checksums=verify_checksums) as found:
        prompts = release.read_prompts(found.root / "prompts.csv")
        report = BuildReport(source=str(source or "download"), commit=release.COMMIT,
                             checksums_verified=found.verified, rule=asdict(rule))
        per_set: dict[str, list] = {name: [] for name in SETS}
        candidates: dict[str, list[str]] = {}
        hard_files_present = True
        for rel in tqdm(release.RELATIONS, desc="MedLAMA relations", unit="relation", disable=not progress):
            if rel not in prompts:
                raise MedlamaInputError(f"no prompt for relation {rel!r}", file=found.root / "prompts.csv")
            full_rows = release.read_relation_file(found.full_file(rel), rel)
            rows = _rows_for_relation(rel, full_rows, prompts[rel], rule, report)
            if compare_with_release:
                try:
                    released_path = found.hard_file(rel)
                except MedlamaInputError:
                    if verify_checksums:
                        raise
                    hard_files_present = False
                else:
                    _compare_with_released(rel, rows, full_rows, released_path, report)
            for set_name, subset in (("full", rows), ("hard", [row for row in rows if row["is_hard"]])):
                if subset:
                    per_set[set_name].append(Dataset.from_list(subset, features=schema))
                    candidates[f"{set_name}_{rel}"] = candidate_names(subset)
                else:  # from_list([]) cannot match the declared features ("Keys mismatch")
                    per_set[set_name].append(Dataset.from_dict({name: [] for name in schema}, features=schema))
                    report.empty_configs.append(f"{set_name}_{rel}")
        report.released_hard_checked = compare_with_release and hard_files_present
    datasets = DatasetDict({name: concatenate_datasets(parts) for name, parts in per_set.items()})
    for set_name in SETS:
        candidates[set_name] = candidate_names(datasets[set_name])
    return MedlamaBuild(datasets=datasets, candidates=candidates, report=report)


def load_medlama(source: str | Path | None = None, **options) -> "DatasetDict":  # noqa: F821
    """MedLAMA straight from the release as a ``DatasetDict`` with keys ``"full"`` and ``"hard"``.

    For users who never touch the CLI; options as ``build_medlama``.
    """
    return build_medlama(source, **options).datasets


# --------------------------------------------------------------------------- writing the folder


def _config_layout(build: MedlamaBuild) -> dict[str, str]:
    """Config name -> Parquet path inside the folder (relative), for every config that has rows.

    A config without rows (``build.report.empty_configs``) is left out: ``datasets`` cannot load a
    split of 0 rows ("corresponds to no data"), so declaring one would only move the failure into
    the user's ``load_dataset``; undeclared, it is "not found" with the available configs listed.
    """
    layout = {}
    for set_name in SETS:
        layout[set_name] = f"data/{set_name}/*.parquet"
        for rel in release.RELATIONS:
            if f"{set_name}_{rel}" not in build.report.empty_configs:
                layout[f"{set_name}_{rel}"] = f"data/{set_name}/{rel}.parquet"
    for config in list(layout):
        layout[f"candidates_{config}"] = f"candidates/{config}.parquet"
    return layout


def write_medlama(out_dir: str | Path, source: str | Path | None = None, *, tokenizer=None,
                  **options) -> tuple[MedlamaBuild, list[dict]]:
    """Build MedLAMA and write it to ``out_dir`` atomically; return the build and its statistics.

    An earlier build in ``out_dir`` is replaced only once the new one is completely written: any
    error (bad input, a full disk, an interrupt) leaves it as it was. A folder that is neither empty
    nor an earlier build (no ``build_info.json``) is refused before the build starts.
    """
    from datasets import Dataset

    from medlama.atomic import atomic_directory, check_replaceable
    from medlama.datasets.card import render_medlama_card
    from medlama.datasets.statistics import medlama_statistics

    check_replaceable(out_dir, marker="build_info.json")  # before the build, not after it (atomic_directory)
    build = build_medlama(source, **options)
    if not build.datasets["hard"].num_rows:  # the default config would be empty (see _config_layout)
        rule = build.report.rule
        raise MedlamaInputError(f"no query is hard with match threshold {rule['match_threshold']} and ROUGE-L "
                                f"threshold {rule['rouge_threshold']}: the hard set, the folder's default "
                                "config, would be empty; raise the thresholds (nothing was written)")
    stats = medlama_statistics(build.datasets, tokenizer=tokenizer)
    layout = _config_layout(build)
    with atomic_directory(out_dir, marker="build_info.json") as staging, _quiet_datasets():
        for set_name in SETS:
            data = build.datasets[set_name]
            for rel, rows in _relation_ranges(data["relation"]).items():
                _to_parquet(data.select(rows), staging / f"data/{set_name}/{rel}.parquet")
        for config, names in build.candidates.items():  # configs with rows only (see build_medlama)
            table = Dataset.from_dict({"name": names}, features=candidate_features())
            _to_parquet(table, staging / layout[f"candidates_{config}"])
        (staging / "README.md").write_text(render_medlama_card(build, layout, stats), encoding="utf-8")
        info = {"report": asdict(build.report), "statistics": stats,
                "configs": {name: path for name, path in layout.items()}}
        (staging / "build_info.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return build, stats


def _relation_ranges(relations: list[str]) -> dict[str, range]:
    """Row ranges per relation; the builder keeps each relation's rows contiguous."""
    ranges, start = {}, 0
    for index in range(1, len(relations) + 1):
        if index == len(relations) or relations[index] != relations[start]:
            ranges[relations[start]] = range(start, index)
            start = index
    return ranges


@contextmanager
def _quiet_datasets():
    """No per-file progress bars from ``datasets`` while writing dozens of small Parquet files."""
    from datasets.utils.logging import disable_progress_bar, enable_progress_bar, is_progress_bar_enabled

    was_enabled = is_progress_bar_enabled()
    disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            enable_progress_bar()


def cached_build(source: str | Path | None = None, cache_dir: str | Path | None = None) -> Path:
    """A MedLAMA folder with the release's thresholds, built once into the cache and reused.

    For commands that need MedLAMA but were not given a built folder (``medlama probe`` without
    ``--data``). The folder is keyed by the pinned commit, so a new pin builds anew.
    """
    import os

    root = Path(cache_dir or os.environ.get(release.CACHE_ENV) or Path.home() / ".cache" / "medlama")
    out = root / "datasets" / f"medlama-{release.COMMIT[:12]}"
    if not (out / "build_info.json").is_file():
        write_medlama(out, source)
    return out


def _to_parquet(dataset, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    dataset.to_parquet(str(path))
