"""The BioLAMA folder that ``medlama build biolama`` writes: Parquet per relation and split, card, build_info.json.

A thin layer over :class:`medlama.datasets.biolama.BiolamaBuilder` (through ``build_biolama``): the
folder's README declares the configs ``all``, one per source and one per relation, so that
``load_dataset(DIR, "umls")`` works offline, and the same folder works on the Hub.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict
from pathlib import Path

from medlama.datasets.biolama import DEFAULT_CONFIG, SOURCES, SPLITS, BiolamaBuild, build_biolama, features, \
    relation_config
from medlama.datasets.export import relation_ranges, write_folder
from medlama.datasets.statistics import biolama_statistics, biolama_statistics_markdown
from medlama.core.errors import MedlamaInputError
from medlama.loaders import biolama_release as release
from medlama.core.defaults import BUILD_INFO
from medlama.datasets.card import render_card
from medlama.core.atomic import claim_directory
import os
from medlama.core.cache import cache_root
from medlama.datasets.records import has_choices, has_record
from medlama.datasets.choices import mc_config, mc_dataset
from medlama.datasets.card import CHOICES_MARKER, choices_paragraph

#: The command that writes (and alone may replace) a BioLAMA folder: its ownership record.
KIND = "build biolama"


def config_layout(build: BiolamaBuild) -> dict[str, dict[str, list[str]]]:
    """Config name -> split -> the Parquet files it holds (relative, before they are named after their content)."""
    layout = {}
    for mc in (False, True):  # the ranking configs, then the same as multiple choice (``_mc``)
        def files(configs: list[str]) -> dict[str, list[str]]:
            # a split none of the configs' relations has a record of is not declared: datasets reads no split of
            # no rows ("corresponds to no data"), so a relation without dev records is a config without dev
            return {split: [relation_file(config, split, mc) for config in configs] for split in SPLITS
                    if any(build.rows[config][split] for config in configs)}

        name = mc_config if mc else str
        layout[name(DEFAULT_CONFIG)] = files(build.relation_configs())
        for src in build.report.sources:
            layout[name(src)] = files(build.relation_configs(src))
        for config in build.relation_configs():
            layout[name(config)] = files([config])
    return layout


def relation_file(config: str, split: str, multiple_choice: bool = False) -> str:
    """The file of one relation config's split, ``data/<source>/<relation>/<split>.parquet`` (multiple choice:
    ``data/mc/<source>/<relation>/<split>.parquet``)."""
    source, _, relation = config.partition("_")
    return f"data/{'mc/' if multiple_choice else ''}{source}/{relation}/{split}.parquet"


def render_biolama_card(build: BiolamaBuild, layout: dict[str, dict[str, list[str]]], stats: list[dict],
                        folder: Path) -> str:
    """The README of a built folder whose files are in ``folder``: the template's text, every config with its
    files and sizes, statistics filled."""
    totals = {(r["source"], r["relation"]): r for r in stats}
    state = "verified" if build.report.checksums_verified else "**not verified against a trusted SHA-256**"
    # Tags name the sources actually built; `umls` marks UMLS-derived data (gated on the Hub).
    return render_card(
        "biolama", folder=folder, default_config=DEFAULT_CONFIG, statistics=biolama_statistics_markdown(stats),
        configs=layout, licence_tags=build.report.sources, replace_tags=SOURCES,
        rows=sum(totals[("all", "all")][split] for split in SPLITS),
        replacements={"<!-- provenance -->": f"This build's input: {build.report.verification} ({state})."
                                             f"{digest_note(build)}{empty_splits_note(build)}"
                                             f"{dropped_answers_note(build)}",
                      CHOICES_MARKER: choices_paragraph(build.choices_record)})


#: What each ``digest_source`` (build_info.json's ``report.digest_source``) means, for the card.
_DIGEST_WORDS = {
    "pinned": "the digest the authors publish, pinned in medlama",
    "given": "a hash given with --sha256",
    "environment": "a hash given in $BIOLAMA_SHA256",
    "supplied": "none: the authors publish no digest of data.tar.gz, so this is the digest of the archive the "
                "user supplied, recorded to compare builds by, not checked",
    "downloaded": "none (--no-verify): the digest of the download, recorded, not checked",
}


def digest_note(build: BiolamaBuild) -> str:
    """`` Digest source: ...``: what the archive's SHA-256 was checked against (``""`` for a folder)."""
    source = build.report.digest_source
    if source is None:
        return ""
    return f" Digest source (`digest_source` in build_info.json): `{source}`, {_DIGEST_WORDS.get(source, source)}."


def empty_splits_note(build: BiolamaBuild) -> str:
    """`` This build has no train and dev splits: ...`` for a release without records of them, else ``""``."""
    empty = build.report.empty_splits
    if not empty:
        return ""
    return (f" This build has no {' and '.join(empty)} split{'s' if len(empty) > 1 else ''}: the release has no "
            f"record of {'them' if len(empty) > 1 else 'it'} (build_info.json: report.empty_splits). Probing "
            "(test) is unaffected; what trains on train or selects on dev (medlama optiprompt) refuses it.")


def dropped_answers_note(build: BiolamaBuild) -> str:
    """`` N gold answers were left out ...`` where the build dropped answers no prediction can match, else ``""``."""
    dropped = build.report.dropped_answers
    if not dropped:
        return ""
    records = len({(entry["config"], entry["split"], entry["uuid"]) for entry in dropped})
    return (f" {len(dropped)} gold answer{'s' if len(dropped) > 1 else ''} of {records} record"
            f"{'s' if records > 1 else ''} (object labels or aliases such as `.`, `A`, `The`) "
            f"{'are' if len(dropped) > 1 else 'is'} left out of `answers`: acc@k's normalized matching reduces "
            "them to nothing, so no prediction could match them; each record keeps its other answers and its raw "
            "`obj_labels`/`obj_aliases` (build_info.json: report.dropped_answers).")


def write_biolama(out_dir: str | Path, source: str | Path | None = None, **options) -> tuple[BiolamaBuild, list[dict]]:
    """Build BioLAMA and write it to ``out_dir`` atomically; return the build and its statistics.

    ``options`` as :func:`~medlama.datasets.biolama.build_biolama`. An earlier build in ``out_dir`` is
    replaced only once the new one is completely written; a folder written by another command (its
    ownership record does not name :data:`KIND`) is refused before the build starts, and so is a second
    build into the same folder while one runs.
    """
    with claim_directory(out_dir, marker=BUILD_INFO, kind=KIND):  # before the build, not after it
        return _write_biolama(out_dir, source, **options)


def _write_biolama(out_dir: str | Path, source: str | Path | None, **options) -> tuple[BiolamaBuild, list[dict]]:
    build = build_biolama(source, **options)
    stats = biolama_statistics(build)
    layout = config_layout(build)
    tables = {}
    for split in build.splits():  # a split no relation has a record of is not declared (datasets reads none)
        data = build.datasets[split]
        ranges = relation_ranges([relation_config(s, r) for s, r in zip(data["source"], data["relation"])])
        for config in build.relation_configs():
            tables[relation_file(config, split)] = data.select(ranges.get(config, range(0)))
            tables[relation_file(config, split, True)] = mc_dataset(build.choice_rows[config][split], features())
    info = {"dataset": "biolama", "report": asdict(build.report), "statistics": stats,
            "choices": build.choices_record.as_dict()}
    write_folder(out_dir, tables, layout, lambda folder, configs: render_biolama_card(build, configs, stats, folder),
                 info, kind=KIND, claimed=True)
    return build, stats


def _fingerprint(source: str | Path | None, sha256: str | None) -> str:
    """A cache key for the input: the archive's SHA-256, or for a folder the names, sizes and times of its files."""
    source = source or os.environ.get(release.SOURCE_ENV)
    if source is None:
        expected = release.expected_sha256(sha256)
        return expected[:16] if expected else "unverified"
    path = Path(source).expanduser()
    if path.is_file():
        return release.sha256_of(path)[:16]
    if not path.exists():
        raise MedlamaInputError("BioLAMA source not found", file=path)
    digest = hashlib.sha256(str(path.resolve()).encode())
    for file in sorted(path.rglob("*.jsonl")):
        stat = file.stat()
        digest.update(f"{file.relative_to(path)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return "folder-" + digest.hexdigest()[:16]


def cached_build(source: str | Path | None = None, cache_dir: str | Path | None = None, **options) -> Path:
    """A BioLAMA folder built once into the cache and reused (``medlama probe --dataset biolama`` without ``--data``).

    Keyed by the input: the archive's SHA-256, or a fingerprint of an extracted folder.
    """

    root = cache_root(cache_dir)
    out = root / "datasets" / f"biolama-{_fingerprint(source, options.get('sha256'))}"
    if not has_record(out) or not has_choices(out):  # none yet, or built before files (or choices) were recorded
        write_biolama(out, source, cache_dir=root / "builder", **options)
    return out
