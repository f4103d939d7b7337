"""Dataset cards: the template in ``dataset_cards/`` plus configs, schema and statistics from the data."""

from __future__ import annotations

import re

from medlama.dataset_cards import card_path

STATS_BLOCK = re.compile(r"(<!-- statistics:start -->\n).*?(\n<!-- statistics:end -->)", re.DOTALL)


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


def render_card(template: str, layout: dict[str, str], default_config: str, infos: dict, table: str,
                split: str = "test") -> str:
    """A README for a dataset folder: the template's metadata and text, configs and schemas added.

    ``layout`` maps config name to data-file glob; ``infos`` maps config name to ``DatasetInfo`` for
    the configs whose schema the YAML should state. The YAML is written by ``datasets``' own
    ``MetadataConfigs`` / ``DatasetInfosDict``, the same code ``push_to_hub`` uses.
    """
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard

    card = DatasetCard.load(card_path(template))
    configs = MetadataConfigs({
        name: {"data_files": [{"split": split, "path": path}], **({"default": True} if name == default_config else {})}
        for name, path in layout.items()
    })
    configs.to_dataset_card_data(card.data)
    DatasetInfosDict(infos).to_dataset_card_data(card.data)
    card.text = fill_statistics(card.text, table)
    return str(card)


def render_medlama_card(build, layout: dict[str, str], stats: list[dict]) -> str:
    from datasets import DatasetInfo, SplitDict, SplitInfo

    from medlama.datasets.medlama import DEFAULT_CONFIG, SPLIT, candidate_features, features
    from medlama.datasets.statistics import statistics_markdown

    infos = {}
    for set_name in ("full", "hard"):
        for config, feats, rows in ((set_name, features(), len(build.datasets[set_name])),
                                    (f"candidates_{set_name}", candidate_features(), len(build.candidates[set_name]))):
            splits = SplitDict()
            splits.add(SplitInfo(name=SPLIT, num_examples=rows))
            infos[config] = DatasetInfo(features=feats, config_name=config, splits=splits)
    return render_card("medlama", layout, DEFAULT_CONFIG, infos, statistics_markdown(stats), split=SPLIT)
