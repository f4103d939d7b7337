"""The one dataset-card renderer: a template in ``dataset_cards/`` plus configs, schemas, statistics and tags.

:func:`render_card` serves every builder (MedLAMA, BioLAMA, the context-variance sets). The YAML is
written by ``datasets``' own ``MetadataConfigs`` / ``DatasetInfosDict``, the same code ``push_to_hub``
uses; the text keeps the template's prose with its ``<!-- statistics:start -->`` ...
``<!-- statistics:end -->`` block filled and any ``<!-- marker -->`` replaced.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from medlama.dataset_cards import card_path

STATS_BLOCK = re.compile(r"(<!-- statistics:start -->\n).*?(\n<!-- statistics:end -->)", re.DOTALL)
#: Upper bounds of the Hub's ``size_categories`` (rows), smallest first.
_SIZES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
          (10_000_000, "1M<n<10M"))


def fill_statistics(text: str, table: str) -> str:
    """Replace the statistics block of a card with ``table``."""
    if not STATS_BLOCK.search(text):
        raise ValueError("card template has no <!-- statistics:start --> ... <!-- statistics:end --> block")
    return STATS_BLOCK.sub(lambda m: m.group(1) + table + m.group(2), text)


def statistics_block(text: str) -> str:
    """The current content of a card's statistics block."""
    match = re.search(r"<!-- statistics:start -->\n(.*?)\n<!-- statistics:end -->", text, re.DOTALL)
    if match is None:
        raise ValueError("card has no statistics block")
    return match.group(1)


def size_category(rows: int) -> str:
    """The Hub's ``size_categories`` value for ``rows`` rows."""
    return next((name for bound, name in _SIZES if rows < bound), "n>10M")


def render_card(kind: str, *legacy, configs: Mapping[str, str | Mapping[str, str]] | None = None,
                default_config: str | None = None, statistics: str = "",
                schemas: Mapping[str, tuple] | None = None, licence_tags: Sequence[str] = (),
                replace_tags: Sequence[str] = (), replacements: Mapping[str, str] | None = None,
                rows: int | None = None, split: str = "test") -> str:
    """The README of a built folder of dataset ``kind`` (template ``dataset_cards/<kind>.md``).

    ``configs``: config name -> its data files: one path glob (for the single split ``split``) or a
    mapping split -> path glob. ``default_config`` is marked ``default``. ``statistics``: the Markdown
    that fills the statistics block. ``schemas``: config name -> ``(Features, {split: rows} or None)``
    for the configs whose schema (and split sizes) the YAML states. ``licence_tags``: tags for what
    this build holds that carries its own terms (``umls``, ``mimic``, a BioLAMA source; ``medlama
    push-dataset`` gates on ``umls`` and ``mimic``), added to the template's tags after removing
    ``replace_tags`` (the tags the build decides on, e.g. every possible source). ``replacements``:
    marker text -> text (e.g. ``{"<!-- provenance -->": "..."}``). ``rows``: the build's total rows,
    which sets ``size_categories`` (the template's value stays when None).

    ``render_card(kind, layout, default_config, infos, table, split=...)`` with ``infos`` of
    ``DatasetInfo`` is the older positional form, kept while the context-variance builder uses it.
    """
    from datasets import DatasetInfo, SplitDict, SplitInfo
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard

    if legacy:
        configs, default_config, infos, statistics = legacy
    else:
        infos = {}
        for name, (features, counts) in (schemas or {}).items():
            splits = None
            if counts is not None:
                splits = SplitDict()
                for split_name, count in counts.items():
                    splits.add(SplitInfo(name=split_name, num_examples=count))
            infos[name] = DatasetInfo(features=features, config_name=name, splits=splits)
    card = DatasetCard.load(card_path(kind))
    MetadataConfigs({
        name: {"data_files": [{"split": split, "path": files}] if isinstance(files, str) else
               [{"split": split_name, "path": path} for split_name, path in files.items()],
               **({"default": True} if name == default_config else {})}
        for name, files in (configs or {}).items()
    }).to_dataset_card_data(card.data)
    DatasetInfosDict(infos).to_dataset_card_data(card.data)
    if licence_tags or replace_tags:
        dropped = set(replace_tags) | set(licence_tags)
        card.data.tags = [tag for tag in (card.data.tags or []) if tag not in dropped] + list(licence_tags)
    if rows is not None:
        card.data.size_categories = [size_category(rows)]
    card.text = fill_statistics(card.text, statistics)
    for marker, text in (replacements or {}).items():
        card.text = card.text.replace(marker, text)
    return str(card)


def render_medlama_card(build, layout: dict[str, str], stats: list[dict]) -> str:
    """MedLAMA's card: configs of ``layout``, schemas of the full and hard sets and their candidates."""
    from medlama.datasets.medlama import DEFAULT_CONFIG, SPLIT, candidate_features, features
    from medlama.datasets.statistics import statistics_markdown

    schemas = {}
    for set_name in ("full", "hard"):
        schemas[set_name] = (features(), {SPLIT: len(build.datasets[set_name])})
        schemas[f"candidates_{set_name}"] = (candidate_features(), {SPLIT: len(build.candidates[set_name])})
    return render_card("medlama", configs=layout, default_config=DEFAULT_CONFIG, statistics=statistics_markdown(stats),
                       schemas=schemas, split=SPLIT)
