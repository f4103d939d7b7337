"""MedLAMA (Meng et al., ACL 2022) as a ``datasets`` builder: :class:`MedlamaBuilder`.

The builder reads the release (``medlama.loaders.medlama_release``; a local folder or archive, else the
pinned files through the download manager, each checked against its SHA-256), recomputes both hardness
scores with the project's own code, derives the hard set from the full set alone under the config's
thresholds; :func:`check_release` (or ``builder.check_release()``) compares both with the release::

    builder = MedlamaBuilder(config_name="hard", source="path/to/data/medlama")
    builder.download_and_prepare()
    hard = builder.as_dataset(split="test")
    report = builder.check_release()   # BuildReport: score mismatches, hard-set differences, checksums

Configs (:data:`CONFIG_NAMES`): ``hard`` (default) and ``full``; ``hard_<relation>`` and
``full_<relation>`` for each of the 19 relations; ``candidates_<config>`` for every one of those:
the answer-candidate vocabulary the reference probe ranks (all answer names plus all head names of the
config's rows); ``<config>_mc`` (``hard_mc``, ``hard_may_treat_mc``, ...): the rows as multiple choice (columns
``choices``, ``label``; :mod:`medlama.datasets.choices`). Every config has one split, ``test``. Config parameters
(:class:`MedlamaConfig`): ``source``, ``match_threshold`` / ``rouge_threshold`` (the hard-set rule),
``verify_checksums``, ``compare_with_release``, ``url``, ``choices`` (distractors per query), ``choices_seed``.

:func:`build_medlama` / :func:`load_medlama_sets` are the one-call forms; ``write_medlama`` (the folder that
``medlama build medlama`` writes, in ``medlama.datasets.medlama_folder``) is a thin layer over them.

One module, as ``datasets``' packaged builders are: the config, the builder and its generation steps are
read together; the folder export, prompts, downloads and multiple-choice draws live apart.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import datasets

from medlama.datasets.choices import DEFAULT_CHOICES, DEFAULT_SEED, ChoicesRecord, check_choices, is_mc, mc_config, \
    mc_dataset, mc_features, ranking_config, with_medlama_choices
from medlama.datasets.downloads import builder_cache, download_config, fetch_verified
from medlama.datasets.export import input_errors_unwrapped, prepare_fresh
from medlama.datasets.hardness import HardnessRule, avg_match, avg_rouge_l, split_answers
from medlama.datasets.prompts import PROMPT_COLUMNS, fill_prompt
from medlama.core.errors import MedlamaInputError
from medlama.loaders import medlama_release as release
from datasets import Features, List, Value
from datasets.builder import Key

SPLIT = "test"
SETS = ("full", "hard")
DEFAULT_CONFIG = "hard"
#: Scores are compared with the released columns to this tolerance.
SCORE_TOLERANCE = 1e-6
#: Every config name: full, hard, per relation, and a candidates_ config for each.
QUERY_CONFIGS = (*SETS, *(f"{s}_{rel}" for s in SETS for rel in release.RELATIONS))
CONFIG_NAMES = (*QUERY_CONFIGS, *(f"candidates_{name}" for name in QUERY_CONFIGS),
                *(mc_config(name) for name in QUERY_CONFIGS))
_OFFLINE_HINT = f"offline, pass --source (source=) with a local copy or set ${release.SOURCE_ENV}"


def features():
    """The declared schema of a query row."""
    return Features({
        "id": Value("string"),
        "relation": Value("string"),
        "head_cui": Value("string"),
        "head_name": Value("string"),
        "answer_cuis": List(Value("string")),
        "answer_names": List(Value("string")),
        "answer_count": Value("int32"),
        **{column: Value("string") for column in PROMPT_COLUMNS},  # query_human, query_default
        "avg_match": Value("float64"),
        "avg_rouge_l": Value("float64"),
        "is_hard": Value("bool"),
    })


def candidate_features():
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
    #: files in the release folder that the release does not have (never read; a warning says so).
    unexpected_files: list[str] = field(default_factory=list)
    #: release files whose SHA-256 is not the pinned one, and pinned files not there to check (``--no-verify``
    #: builds only: a checked build stops at the first); ``checksums_verified`` is False when either has any.
    checksum_mismatches: list[str] = field(default_factory=list)
    checksums_unchecked: list[str] = field(default_factory=list)

    @property
    def matches_release(self) -> bool:
        return not (self.score_mismatches or self.hard_only_derived or self.hard_only_released)


@dataclass
class MedlamaBuild:
    """A built MedLAMA: the query sets, candidate vocabularies per config, and the check report."""

    datasets: "DatasetDict"  # noqa: F821  keys "full" and "hard", one row per query
    candidates: dict[str, list[str]]
    report: BuildReport
    choices: "DatasetDict | None" = None  # noqa: F821  "full_mc", "hard_mc": the sets as multiple choice
    choices_record: ChoicesRecord | None = None

    def config_names(self) -> list[str]:
        return list(self.candidates)


def _query_id(rel: str, row: release.ReleaseRow) -> str:
    return f"{rel}-{row.row:04d}"


def _rows_for_relation(rel: str, rows: Sequence[release.ReleaseRow], prompt: release.Prompt,
                       rule: HardnessRule) -> list[dict]:
    out = []
    for row in rows:
        answers = split_answers(row.tail_names_raw)
        match = avg_match(row.head_name, answers)
        rouge = avg_rouge_l(row.head_name, answers)
        out.append({
            "id": _query_id(rel, row),
            "relation": rel,
            "head_cui": row.head_cui,
            "head_name": row.head_name,
            "answer_cuis": list(row.tail_cuis),
            "answer_names": list(row.tail_names),
            "answer_count": len(row.tail_names),
            **dict(zip(PROMPT_COLUMNS, (fill_prompt(prompt.human_prompt, row.head_name),
                                        fill_prompt(prompt.default_prompt, row.head_name)))),
            "avg_match": match,
            "avg_rouge_l": rouge,
            "is_hard": rule.is_hard(match, rouge),
        })
    return out


def _score_mismatches(rel: str, derived: dict[str, dict], full_rows: Sequence[release.ReleaseRow]
                      ) -> list[ScoreMismatch]:
    out = []
    for row in full_rows:
        query = derived[_query_id(rel, row)]
        for name, released in (("avg_match", row.released_avg_match), ("avg_rouge_l", row.released_avg_rouge_l)):
            if abs(released - query[name]) > SCORE_TOLERANCE:
                out.append(ScoreMismatch(query["id"], row.file, row.row, name, released, query[name]))
    return out


def _compare_with_released(rel: str, derived: list[dict], full_rows: Sequence[release.ReleaseRow],
                           released_path: Path, report: BuildReport) -> None:
    released_keys = [row.key() for row in release.read_relation_file(released_path, rel)]
    id_of = {row.key(): _query_id(rel, row) for row in full_rows}
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


@dataclass
class MedlamaConfig(datasets.BuilderConfig):
    """One MedLAMA config: which rows (``subset``, ``relation``, ``candidates``) and how to build them."""

    subset: str = DEFAULT_CONFIG  # "full" or "hard"
    relation: str | None = None  # one relation's rows, else all 19
    candidates: bool = False  # the candidate names of those rows instead of the rows
    multiple_choice: bool = False  # the rows with ``choices`` and ``label`` (the ``_mc`` configs)
    choices: int = DEFAULT_CHOICES  # distractors per query of a multiple-choice config
    choices_seed: int = DEFAULT_SEED
    #: A local folder or archive of the release; None: ``$MEDLAMA_SOURCE``, else the pinned download.
    source: str | None = None
    match_threshold: float = HardnessRule().match_threshold
    rouge_threshold: float = HardnessRule().rouge_threshold
    verify_checksums: bool = True
    #: Also read the released hard files and report where the derived hard set differs.
    compare_with_release: bool = True
    #: Base URL of the pinned release files (``<url>/<path in SHA256>``).
    url: str = release.BASE_URL

    @property
    def rule(self) -> HardnessRule:
        return HardnessRule(self.match_threshold, self.rouge_threshold)


def _config(name: str) -> MedlamaConfig:
    query = ranking_config(name.removeprefix("candidates_"))
    subset, _, relation = query.partition("_")
    kind = "candidate names of " if name.startswith("candidates_") else "multiple choice of " if is_mc(name) else ""
    return MedlamaConfig(name=name, subset=subset, relation=relation or None, candidates=name.startswith("candidates_"),
                         multiple_choice=is_mc(name), description=f"MedLAMA {kind}{query}")


@dataclass
class _ReleaseFiles:
    """Where the release files are: a local release (folder read in place) or the downloaded files."""

    prompt_file: Path
    full_files: dict[str, Path]
    hard_file: object  # relation -> Path, raising MedlamaInputError when absent
    verified: bool
    unexpected_files: tuple[str, ...] = ()
    checksum_mismatches: tuple[str, ...] = ()
    checksums_unchecked: tuple[str, ...] = ()


@contextmanager
def _opened(config: MedlamaConfig, downloaded: _ReleaseFiles | None) -> Iterator[tuple[_ReleaseFiles, str]]:
    """The release files of ``config`` and where they came from: ``downloaded`` (the pinned files, already in
    the download cache), else the local release, opened (an archive extracted) for as long as the block runs."""
    if downloaded is not None:
        yield downloaded, "download"
        return
    source = config.source or os.environ.get(release.SOURCE_ENV)
    with release.open_release(source, verify_checksums=config.verify_checksums) as found:
        yield _ReleaseFiles(found.root / "prompts.csv", {rel: found.full_file(rel) for rel in release.RELATIONS},
                            found.hard_file, found.verified, found.unexpected_files,
                            found.checksum_mismatches, found.checksums_unchecked), str(source)


def _download(config: MedlamaConfig, dl_manager) -> _ReleaseFiles | None:
    """The pinned release files through ``dl_manager`` (each checked against its SHA-256); None when the
    config (or ``$MEDLAMA_SOURCE``) names a local release instead."""
    if config.source or os.environ.get(release.SOURCE_ENV):
        return None
    urls = {relative: f"{config.url.rstrip('/')}/{relative}" for relative in release.SHA256}
    paths = fetch_verified(dl_manager, urls, release.SHA256, offline_hint=_OFFLINE_HINT)
    hard = {path.split("/")[1].rsplit("_", 2)[0]: paths[path] for path in paths if path.endswith("_hard.csv")}
    return _ReleaseFiles(paths["prompts.csv"], {rel: paths[f"{release.RELEASE}/{rel}_1000.csv"]
                                                for rel in release.RELATIONS}, hard.__getitem__, verified=True)


def _relations(config: MedlamaConfig) -> list[str]:
    return [config.relation] if config.relation else list(release.RELATIONS)


class MedlamaBuilder(datasets.ArrowBasedBuilder):
    """MedLAMA as a ``datasets`` builder; :meth:`check_release` says how the build compares with the release.

    ``cache_dir`` defaults to ``$MEDLAMA_CACHE/builder`` (prepared configs and downloads).
    """

    BUILDER_CONFIG_CLASS = MedlamaConfig
    BUILDER_CONFIGS = [_config(name) for name in CONFIG_NAMES]
    DEFAULT_CONFIG_NAME = DEFAULT_CONFIG

    def __init__(self, *args, cache_dir: str | Path | None = None, **kwargs) -> None:
        super().__init__(*args, cache_dir=str(builder_cache(cache_dir)), **kwargs)
        self.downloads = download_config(builder_cache(cache_dir))  # where the pinned files are cached

    def download_and_prepare(self, *args, **kwargs) -> None:
        """As ``datasets``; a bad release file is a :class:`MedlamaInputError` naming it (not wrapped)."""
        with input_errors_unwrapped():
            super().download_and_prepare(*args, **kwargs)

    def check_release(self, rows: Sequence[dict] | None = None) -> BuildReport:
        """:func:`check_release` of this builder's config (downloads from this builder's cache)."""
        return check_release(self.config, rows, downloads=self.downloads)

    def _info(self) -> datasets.DatasetInfo:
        check_threshold(self.config.match_threshold, "match_threshold")
        check_threshold(self.config.rouge_threshold, "rouge_threshold")
        check_choices(self.config.choices, self.config.choices_seed)
        schema = mc_features(features()) if self.config.multiple_choice else features()
        return datasets.DatasetInfo(description=self.config.description,
                                    features=candidate_features() if self.config.candidates else schema,
                                    homepage="https://github.com/cambridgeltl/medlama")

    def _split_generators(self, dl_manager):
        return [datasets.SplitGenerator(name=SPLIT, gen_kwargs={"relations": _relations(self.config),
                                                                 "downloaded": _download(self.config, dl_manager)})]

    def _generate_tables(self, relations, downloaded: _ReleaseFiles | None) -> Iterator:
        # pyarrow loads when this runs, not when medlama.datasets.medlama is imported
        import pyarrow as pa

        config = self.config
        chosen = []
        with _opened(config, downloaded) as (files, _):  # a local archive stays extracted while rows are made
            prompts = release.read_prompts(files.prompt_file)
            for index, rel in enumerate(relations):
                if rel not in prompts:
                    raise MedlamaInputError(f"no prompt for relation {rel!r}", file=files.prompt_file)
                rows = _rows_for_relation(rel, release.read_relation_file(files.full_files[rel], rel), prompts[rel],
                                          config.rule)
                if config.subset == "hard":
                    rows = [row for row in rows if row["is_hard"]]
                if not rows:
                    continue
                if config.candidates:
                    chosen += rows
                else:
                    chosen.append(rel)
                    if config.multiple_choice:
                        rows = with_medlama_choices(rows, config.choices, config.choices_seed)
                    yield Key(0, index), pa.Table.from_pylist(rows, schema=self.info.features.arrow_schema)
        if not chosen:  # `datasets` cannot hold a split of 0 rows
            raise MedlamaInputError(f"config {config.name!r} has no rows with match threshold "
                                    f"{config.match_threshold} and ROUGE-L threshold {config.rouge_threshold}")
        if config.candidates:
            yield Key(0, 0), pa.table({"name": candidate_names(chosen)}, schema=candidate_features().arrow_schema)


def check_release(config: MedlamaConfig, rows: Sequence[dict] | None = None, *, downloads=None) -> BuildReport:
    """What a build of ``config`` checked: its release files' checksums, the recomputed hardness scores
    against the released ones, and the derived hard set against the released hard files.

    ``rows``: the query rows of ``config``'s relations with their recomputed scores (``id``, ``relation``,
    ``avg_match``, ``avg_rouge_l``, ``is_hard``), every row, hard or not: the ``full`` build's; None:
    recomputed here. ``downloads``: the ``DownloadConfig`` of the cache holding the pinned files (when no local
    release is named; default: the builder's default cache).
    """
    dl_manager = datasets.DownloadManager(download_config=downloads or download_config())
    with input_errors_unwrapped(), _opened(config, _download(config, dl_manager)) as (files, origin):
        report = BuildReport(source=origin, commit=release.COMMIT, checksums_verified=files.verified,
                             rule=asdict(config.rule), unexpected_files=list(files.unexpected_files),
                             checksum_mismatches=list(files.checksum_mismatches),
                             checksums_unchecked=list(files.checksums_unchecked))
        given: dict[str, list[dict]] = {}
        for row in rows or ():
            given.setdefault(row["relation"], []).append(row)
        prompts = release.read_prompts(files.prompt_file) if rows is None else {}
        hard_files_present = True
        for rel in _relations(config):
            if rows is None and rel not in prompts:
                raise MedlamaInputError(f"no prompt for relation {rel!r}", file=files.prompt_file)
            full_rows = release.read_relation_file(files.full_files[rel], rel)
            derived = given.get(rel, []) if rows is not None else _rows_for_relation(rel, full_rows, prompts[rel],
                                                                                      config.rule)
            report.score_mismatches += _score_mismatches(rel, {row["id"]: row for row in derived}, full_rows)
            if config.compare_with_release:
                try:
                    released_path = files.hard_file(rel)
                except (MedlamaInputError, KeyError):
                    if config.verify_checksums:
                        raise
                    hard_files_present = False
                else:
                    _compare_with_released(rel, derived, full_rows, released_path, report)
            kept = [row for row in derived if row["is_hard"]] if config.subset == "hard" else derived
            if not kept:
                report.empty_configs.append(f"{config.subset}_{rel}")
        report.released_hard_checked = config.compare_with_release and hard_files_present
    return report


def build_medlama(source: str | Path | None = None, *, rule: HardnessRule = HardnessRule(),
                  verify_checksums: bool = True, compare_with_release: bool = True, progress: bool = True,
                  cache_dir: str | Path | None = None, url: str = release.BASE_URL, choices: int = DEFAULT_CHOICES,
                  choices_seed: int = DEFAULT_SEED) -> MedlamaBuild:
    """Build MedLAMA from its release: full and hard sets, candidate sets, and the check report.

    One fresh run of :class:`MedlamaBuilder`'s ``full`` config; the hard set is its rows with
    ``is_hard``, exactly the ``hard`` config's rows. ``source``: a folder or archive of the release, else
    ``$MEDLAMA_SOURCE``, else the pinned download (cached below ``cache_dir``). ``rule``: the hard-set
    thresholds (the release's by default). With the default rule the derived hard set equals the
    released one; ``report`` lists any row where it does not. ``choices`` distractors per query (drawn with
    ``choices_seed``) make the multiple-choice sets (:attr:`MedlamaBuild.choices`).
    """
    check_threshold(rule.match_threshold, "match_threshold")
    check_threshold(rule.rouge_threshold, "rouge_threshold")
    check_choices(choices, choices_seed)
    builder, data = prepare_fresh(
        MedlamaBuilder, "full", download_config=download_config(cache_dir), progress=progress,
        source=None if source is None else str(source), match_threshold=rule.match_threshold,
        rouge_threshold=rule.rouge_threshold, verify_checksums=verify_checksums,
        compare_with_release=compare_with_release, url=url)
    full = data[SPLIT]
    hard = full.select([index for index, is_hard in enumerate(full["is_hard"]) if is_hard])
    report = check_release(builder.config, full.select_columns(["id", "relation", "avg_match", "avg_rouge_l",
                                                                 "is_hard"]).to_list(),
                           downloads=download_config(cache_dir))
    candidates: dict[str, list[str]] = {}
    # Each set as plain rows once: a Dataset's own row iterator formats every row anew on every pass
    listed = {"full": full.to_list(), "hard": hard.to_list()}
    for set_name, rows in listed.items():
        by_relation: dict[str, list[dict]] = {}
        for row in rows:
            by_relation.setdefault(row["relation"], []).append(row)
        for rel in release.RELATIONS:
            if rel in by_relation:
                candidates[f"{set_name}_{rel}"] = candidate_names(by_relation[rel])
            elif set_name == "hard":
                report.empty_configs.append(f"hard_{rel}")
    for set_name, rows in listed.items():
        candidates[set_name] = candidate_names(rows)
    record = ChoicesRecord(distractors=choices, seed=choices_seed)
    drawn = datasets.DatasetDict({mc_config(name): mc_dataset(with_medlama_choices(
        rows, choices, choices_seed, record, mc_config(name)), features()) for name, rows in listed.items()})
    return MedlamaBuild(datasets=datasets.DatasetDict({"full": full, "hard": hard}), candidates=candidates,
                        report=report, choices=drawn, choices_record=record)


def load_medlama_sets(source: str | Path | None = None, **options) -> "datasets.DatasetDict":
    """MedLAMA's two query sets straight from the release: a ``DatasetDict`` with keys ``"full"`` and ``"hard"``.

    Options as ``build_medlama``. (``medlama.load_medlama`` is the other one-call form: one config of a built
    folder, the Hub or the cached build, as the ``Dataset`` a probe takes.)
    """
    return build_medlama(source, **options).datasets

