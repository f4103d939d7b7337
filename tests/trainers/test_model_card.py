"""The rewired model's card through ``huggingface_hub``'s card classes: the YAML header (licence, language,
base model, library, pipeline, tags, widget; ``datasets`` only for a probed Hub dataset), probing scores as ``model-index`` entries, and the
text pushed to a repository (no placeholder id, no training-pair widgets). No model is trained here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from medlama.core.defaults import default_model_path
from medlama.core.errors import MedlamaInputError
from medlama.trainers.config import RewireConfig
from medlama.trainers.model_card import (
    MODEL_ID_PLACEHOLDER,
    card_for_repo,
    checkpoint_card,
    update_model_card_scores,
    write_rewire_card,
)

BUNDLED = "sentence-transformers/all-MiniLM-L6-v2"


def record(name: str = BUNDLED, path: str | None = None) -> dict:
    return {
        "config": RewireConfig.preset("paper").to_dict(),
        "base_model": {"name": name, "path": path or str(default_model_path()), "layers_total": 6, "layers_used": 6},
        "mask_token": "[MASK]",
        "corpus": [{"path": "/data/pubmed_sents_no_punkt_10k_3", "name": "pubmed_sents_no_punkt_10k_3",
                    "sha256": "ab" * 32, "lines": 10_000}],
        "cloze": {"pairs": 10_000, "skipped_short": 0},
        "command": "medlama rewire --corpus /data/pubmed_sents_no_punkt_10k_3 --out /runs/minilm --preset paper",
        "training": {"global_step": 200, "checkpoints": ["checkpoint-200"], "precision": "fp32", "final_loss": 1.5},
        "versions": {"medlama": "0.1.0", "sentence-transformers": "6.2.0"},
    }


def written(folder: Path, run: dict) -> ModelCard:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rewire_config.json").write_text(json.dumps(run))
    write_rewire_card(folder, run)
    return ModelCard.load(folder / "README.md")


def test_card_header_follows_the_hub_conventions(tmp_path):
    card = written(tmp_path / "minilm", record())
    data = card.data.to_dict()
    assert data["license"] == "apache-2.0" and data["language"] == "en" and data["base_model"] == BUNDLED
    # the Hub reads `datasets` as dataset repository ids: a local corpus file is named in the body instead
    assert "datasets" not in data and "`pubmed_sents_no_punkt_10k_3` (10,000 lines" in card.text
    assert ("| Max length | 48 tokens in rewiring, saved as the model's `max_seq_length`: `SentenceTransformer` "
            "cuts longer inputs at 48 tokens") in card.text
    assert (data["library_name"], data["pipeline_tag"]) == ("sentence-transformers", "sentence-similarity")
    assert {"contrastive-probe", "medlama", "biomedical", "loss:ClozeInfoNCELoss"} <= set(data["tags"])
    assert "generated_from_trainer" not in data["tags"]
    assert data["widget"] == [{"source_sentence": "metformin might treat [MASK] .",
                               "sentences": ["type 2 diabetes mellitus", "hypertension", "asthma"]}]
    assert "model-index" not in data and "model_name" not in data and card.data.eval_results is None
    assert f'SentenceTransformer("{MODEL_ID_PLACEHOLDER}")' in card.text
    assert "Not measured yet" in card.text and "## Licence\n\n`apache-2.0`" in card.text
    # the card sentence-transformers wrote on save() is replaced, not extended
    assert "This is a [sentence-transformers]" not in card.text and card.text.count("## Probing scores") == 1


def test_licence_and_base_model_of_other_bases(tmp_path):
    base = tmp_path / "my-bert"
    base.mkdir()
    (base / "README.md").write_text("---\nlicense: mit\n---\n# my bert\n")
    data = written(tmp_path / "a", record(str(base), str(base))).data.to_dict()
    assert data["license"] == "mit" and "base_model" not in data  # a local folder has no Hub id
    # a sentence-transformers folder: the card is beside its Transformer module's folder
    st = tmp_path / "st"
    (st / "0_Transformer").mkdir(parents=True)
    (st / "modules.json").write_text("[]")
    (st / "README.md").write_text("---\nlicense: cc-by-4.0\n---\n")
    assert written(tmp_path / "b", record(str(st), str(st / "0_Transformer"))).data.license == "cc-by-4.0"
    # no card at hand: no licence declared, and the card says so
    bare = tmp_path / "bare"
    bare.mkdir()
    card = written(tmp_path / "c", record(str(bare), str(bare)))
    assert card.data.license is None and "Not recorded: the base model's card was not at hand" in card.text
    # a snapshot in the Hugging Face cache is known by its repository
    snapshot = tmp_path / "hub" / "models--microsoft--BiomedNLP-PubMedBERT" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    assert written(tmp_path / "d", record(str(snapshot), str(snapshot))).data.base_model == \
        "microsoft/BiomedNLP-PubMedBERT"
    # a Hub id given as --model
    assert written(tmp_path / "e", record("dmis-lab/biobert-v1.1", "dmis-lab/biobert-v1.1")).data.base_model == \
        "dmis-lab/biobert-v1.1"


def test_probing_scores_are_eval_results(tmp_path):
    folder = tmp_path / "minilm"
    written(folder, record())
    update_model_card_scores(folder, {"MedLAMA hard": {"acc@1": 4.49, "acc@10": 21.74}}, source="the recipe",
                             dataset="someone/medlama")
    card = ModelCard.load(folder / "README.md")
    results = card.data.eval_results
    assert [(r.metric_type, r.metric_value) for r in results] == [("acc@1", 4.49), ("acc@10", 21.74)]
    assert {(r.task_type, r.dataset_type, r.dataset_name, r.dataset_config) for r in results} == {
        ("fill-mask", "someone/medlama", "MedLAMA hard", "hard")}
    index = card.data.to_dict()["model-index"]
    assert index[0]["name"] == f"{BUNDLED} rewired with Contrastive-Probe"
    assert index[0]["results"][0]["metrics"] == [{"type": "acc@1", "value": 4.49, "name": "acc@1"},
                                                 {"type": "acc@10", "value": 21.74, "name": "acc@10"}]
    assert card.data.datasets == ["someone/medlama"]  # the probed dataset's Hub id
    assert "| MedLAMA hard acc@1 | 4.49 |" in card.text and "Probed on the recipe." in card.text
    # again: replaced, not added; the header keeps its other fields
    update_model_card_scores(folder, {"full acc@1": 5.71})
    card = ModelCard.load(folder / "README.md")
    assert [(r.dataset_name, r.dataset_config, r.dataset_type, r.metric_type, r.metric_value)
            for r in card.data.eval_results] == [("MedLAMA full", "full", "medlama", "acc@1", 5.71)]
    assert card.data.license == "apache-2.0" and card.text.count("## Probing scores") == 1
    assert "MedLAMA hard acc@1" not in card.text


def test_scores_on_a_card_sentence_transformers_wrote(tmp_path):
    (tmp_path / "README.md").write_text("---\nlibrary_name: sentence-transformers\n---\n\n# some model\n")
    update_model_card_scores(tmp_path, {"hard": {"acc@1": 1.0}})
    card = ModelCard.load(tmp_path / "README.md")
    assert card.data.to_dict()["model-index"][0]["name"] == tmp_path.name
    assert card.data.eval_results[0].dataset_config == "hard" and "| hard acc@1 | 1 |" in card.text
    with pytest.raises(MedlamaInputError, match="score 'hard acc@1' is not a finite number: inf"):
        update_model_card_scores(tmp_path, {"hard": {"acc@1": float("inf")}})


def test_card_for_repo_names_the_repository(tmp_path):
    folder = tmp_path / "minilm"
    written(folder, record())
    update_model_card_scores(folder, {"MedLAMA hard": {"acc@10": 21.74}})
    pushed = card_for_repo((folder / "README.md").read_text(), "someone/minilm-medlama", revision="v1")
    assert MODEL_ID_PLACEHOLDER not in pushed
    assert "model = SentenceTransformer(\"someone/minilm-medlama\", revision='v1')\n" in pushed
    assert "medlama probe --model someone/minilm-medlama" in pushed
    card = ModelCard(pushed)
    assert card.data.model_name == "someone/minilm-medlama" and card.data.eval_results[0].metric_value == 21.74
    assert card.data.widget[0]["source_sentence"] == "metformin might treat [MASK] ."
    # sentence-transformers' training card: its widget examples are cut from training pairs and go
    st_card = ("---\ntags:\n- generated_from_trainer\nwidget:\n- source_sentence: 'the and [MASK] '\n  sentences:\n"
               "  - '64'\n---\n\n```python\nmodel = SentenceTransformer(\"sentence_transformers_model_id\")\n```\n")
    pushed = card_for_repo(st_card, "me/m")
    assert ModelCard(pushed).data.get("widget") is None and 'SentenceTransformer("me/m")' in pushed
    # nothing to change in the header: the text is kept as it is, byte for byte
    plain = "---\nlicense: mit\n---\n\nno placeholder here\n"
    assert card_for_repo(plain, "me/m") == plain


def test_checkpoint_card(tmp_path):
    text = checkpoint_card("me/m", "checkpoints/checkpoint-150", revision="v1")
    card = ModelCard(text)
    assert card.data.library_name == "sentence-transformers" and card.data.get("widget") is None
    assert "# Step 150 of [me/m](https://huggingface.co/me/m)" in text
    assert "snapshot_download('me/m', revision='v1', allow_patterns=['checkpoints/checkpoint-150/*'])" in text
