"""Dataset cards follow the Hub's conventions: they parse with ``huggingface_hub``'s card classes, state
``dataset_info`` with the real sizes of every config, link the paper (arXiv tag, ACL Anthology), have Uses
and Limitations sections, load instructions that ``push-dataset`` points at the pushed repository, and, for
UMLS-derived data, the gate in the folder's own card (manual approval)."""

from __future__ import annotations

from pathlib import Path

import pytest
from datasets.info import DatasetInfosDict
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard, DatasetCardData

from medlama.cli import main
from medlama.datasets.biolama_folder import write_biolama
from medlama.datasets.card import name_repository
from medlama.datasets.folders import folder_configs, load_config
from medlama.datasets.licences import GATED_FIELDS, GATED_PROMPT
from medlama.publishing.hub import push_dataset

import cv_inputs as cvb  # tests/helpers: a MedLAMA-shaped folder and corpora


def check_card(folder: Path, arxiv: str, repo: str) -> DatasetCard:
    """The checks every built card passes; returns the card."""
    card = DatasetCard.load(folder / "README.md")
    DatasetCardData(**card.data.to_dict())  # the YAML is valid card metadata
    assert f"arxiv:{arxiv}" in card.data.tags and f"https://arxiv.org/abs/{arxiv}" in card.text
    assert "\n## Uses\n" in card.text and "\n## Limitations\n" in card.text
    assert f'load_dataset("<user>/{repo}"' in card.text  # push-dataset names the repository here
    configs = MetadataConfigs.from_dataset_card_data(card.data)
    infos = DatasetInfosDict.from_dataset_card_data(card.data)
    assert sorted(infos) == sorted(configs) == sorted(folder_configs(folder))
    for name, splits in folder_configs(folder).items():
        info = infos[name]
        files = {p for patterns in splits.values() for pattern in patterns for p in folder.glob(pattern)}
        assert info.download_size == sum(p.stat().st_size for p in files) > 0, name
        for split in splits:
            rows = load_config(folder, name, split)
            assert info.splits[split].num_examples == rows.num_rows, (name, split)
            # Arrow bytes summed over the config's files: the loaded table's, up to per-file buffer overhead.
            assert info.splits[split].num_bytes == pytest.approx(rows.data.nbytes, rel=0.01), (name, split)
            assert rows.data.nbytes > 0
            assert info.features == rows.features, name
        assert info.dataset_size == sum(s.num_bytes for s in info.splits.values())
    return card


def check_gated(card: DatasetCard) -> None:
    assert card.data.gated == "manual" and card.data.extra_gated_prompt == GATED_PROMPT
    assert card.data.extra_gated_fields == GATED_FIELDS


def test_medlama_card(medlama_dir, tmp_path):
    card = check_card(medlama_dir, "2110.08173", "medlama")
    assert "https://aclanthology.org/2022.acl-long.329" in card.text
    assert len(card.data.dataset_info) == 120  # hard, full, 19 relations each, their candidate sets and _mc configs
    check_gated(card)
    push_dataset(medlama_dir, "someone/medlama-umls", dry_run=tmp_path / "dry")
    pushed = DatasetCard.load(tmp_path / "dry" / "medlama-umls" / "README.md")
    assert 'load_dataset("someone/medlama-umls", "hard")' in pushed.text and "<user>/" not in pushed.text
    assert pushed.data.to_dict() == card.data.to_dict()


def test_biolama_cards_gate_only_what_holds_umls(biolama_fx, tmp_path):
    release = tmp_path / "release"
    biolama_fx.write_release(release)
    write_biolama(tmp_path / "all" / "biolama", release, progress=False)
    write_biolama(tmp_path / "open" / "biolama", release, sources=["ctd", "wikidata"], progress=False)
    card = check_card(tmp_path / "all" / "biolama", "2109.07154", "biolama")
    assert "https://aclanthology.org/2021.emnlp-main.388" in card.text
    check_gated(card)
    public = check_card(tmp_path / "open" / "biolama", "2109.07154", "biolama")
    assert "umls" not in public.data.tags and public.data.get("gated") is None
    assert public.data.get("extra_gated_prompt") is None


def test_context_variance_card(tmp_path):
    medlama = cvb.write_medlama_folder(tmp_path / "medlama")
    _, pmc = cvb.write_corpora(tmp_path / "corpora")
    assert main(["build", "context-variance", "--medlama", str(medlama), "--config", "full", "--index-dir",
                 str(tmp_path / "indexes"), "--pmc", str(pmc), "--out", str(tmp_path / "sets")]) == 0
    card = check_card(tmp_path / "sets", "2211.10265", "sets")
    check_gated(card)  # MedLAMA triples: UMLS-derived
    assert "This build: triples from MedLAMA `full`" in card.text and "| `pmc` (" in card.text


@pytest.mark.parametrize("text, expected", [
    ('load_dataset("<user>/medlama", "hard")', 'load_dataset("me/data", "hard")'),
    ("--data <user>/biolama --config umls", "--data me/data --config umls"),
    ("no placeholder", "no placeholder"),
])
def test_name_repository(text, expected):
    assert name_repository(text, "me/data") == expected
