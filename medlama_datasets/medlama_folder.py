"""The MedLAMA folder that ``medlama build medlama`` writes: Parquet per config, card, ``build_info.json``.

A thin layer over :class:`medlama.datasets.medlama.MedlamaBuilder` (through ``build_medlama``): the
folder's README declares every config of the builder that has rows, so that ``load_dataset(DIR,
"hard")`` works offline, and the same folder works on the Hub.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from medlama.datasets.export import relation_ranges, write_folder
from medlama.datasets.medlama import SETS, SPLIT, MedlamaBuild, build_medlama, candidate_features
from medlama.core.errors import MedlamaInputError
from medlama.loaders import medlama_release as release
from medlama.core.defaults import BUILD_INFO
from medlama.core.atomic import claim_directory
from medlama.datasets.card import render_medlama_card
from medlama.datasets.statistics import medlama_statistics
from medlama.datasets.records import has_choices, has_record
from medlama.datasets.choices import mc_config

#: The command that writes (and alone may replace) a MedLAMA folder: its ownership record.
KIND = "build medlama"


def config_layout(build: MedlamaBuild) -> dict[str, dict[str, list[str]]]:
    """Config name -> split -> the Parquet files it holds (relative, before they are named after their content),
    for every config that has rows.

    A config without rows (``build.report.empty_configs``) is left out: ``datasets`` cannot load a
    split of 0 rows ("corresponds to no data"), so declaring one would only move the failure into
    the user's ``load_dataset``; undeclared, it is "not found" with the available configs listed.
    The card names every file of a config, never a glob: a stray copy beside them is never read.
    """
    layout: dict[str, list[str]] = {}
    for set_name in SETS:
        files = [f"data/{set_name}/{rel}.parquet" for rel in release.RELATIONS
                 if f"{set_name}_{rel}" not in build.report.empty_configs]
        layout[set_name] = files
        for file in files:
            layout[f"{set_name}_{file.split('/')[-1].removesuffix('.parquet')}"] = [file]
    for config in list(layout):
        layout[f"candidates_{config}"] = [f"candidates/{config}.parquet"]
    for set_name in SETS:  # the multiple-choice configs: the same rows with choices and label
        for config in [name for name in list(layout) if name == set_name or name.startswith(f"{set_name}_")]:
            layout[mc_config(config)] = [file.replace(f"data/{set_name}/", f"data/{mc_config(set_name)}/")
                                         for file in layout[config]]
    return {config: {SPLIT: files} for config, files in layout.items()}


def write_medlama(out_dir: str | Path, source: str | Path | None = None, *, tokenizer=None,
                  **options) -> tuple[MedlamaBuild, list[dict]]:
    """Build MedLAMA and write it to ``out_dir`` atomically; return the build and its statistics.

    ``options`` as :func:`~medlama.datasets.medlama.build_medlama`. An earlier build in ``out_dir`` is
    replaced only once the new one is completely written: any error (bad input, a full disk, an
    interrupt) leaves it as it was. A folder that is neither empty nor an earlier MedLAMA build (its
    ownership record names :data:`KIND`) is refused before the build starts, and so is a second build
    into the same folder while one runs (the folder's lock is held from that check to the swap).
    """
    with claim_directory(out_dir, marker=BUILD_INFO, kind=KIND):  # before the build, not after it
        return _write_medlama(out_dir, source, tokenizer=tokenizer, **options)


def _write_medlama(out_dir: str | Path, source: str | Path | None, *, tokenizer, **options):
    # datasets loads when this runs, not when medlama.datasets.medlama_folder is imported
    from datasets import Dataset


    build = build_medlama(source, **options)
    if not build.datasets["hard"].num_rows:  # the default config would be empty (see config_layout)
        rule = build.report.rule
        raise MedlamaInputError(f"no query is hard with match threshold {rule['match_threshold']} and ROUGE-L "
                                f"threshold {rule['rouge_threshold']}: the hard set, the folder's default "
                                "config, would be empty; raise the thresholds (nothing was written)")
    stats = medlama_statistics(build.datasets, tokenizer=tokenizer)
    layout = config_layout(build)
    tables = {}
    for set_name in (*SETS, *map(mc_config, SETS)):
        data = build.choices[set_name] if set_name in build.choices else build.datasets[set_name]
        for rel, rows in relation_ranges(data["relation"]).items():
            tables[f"data/{set_name}/{rel}.parquet"] = data.select(rows)
    for config, names in build.candidates.items():  # configs with rows only (see build_medlama)
        tables[layout[f"candidates_{config}"][SPLIT][0]] = Dataset.from_dict({"name": names},
                                                                             features=candidate_features())
    info = {"dataset": "medlama", "report": asdict(build.report), "statistics": stats,
            "choices": build.choices_record.as_dict()}
    write_folder(out_dir, tables, layout, lambda folder, configs: render_medlama_card(build, configs, stats, folder),
                 info, kind=KIND, claimed=True)
    return build, stats


def cached_build(source: str | Path | None = None, cache_dir: str | Path | None = None) -> Path:
    """A MedLAMA folder with the release's thresholds, built once into the cache and reused.

    For commands that need MedLAMA but were not given a built folder (``medlama probe`` without
    ``--data``). The folder is keyed by the pinned commit, so a new pin builds anew.
    """
    from medlama.core.cache import cache_root  # the one cache root ($MEDLAMA_CACHE)

    root = cache_root(cache_dir)
    out = root / "datasets" / f"medlama-{release.COMMIT[:12]}"
    if not has_record(out) or not has_choices(out):  # none yet, or built before files (or choices) were recorded
        write_medlama(out, source, cache_dir=root / "builder")
    return out
