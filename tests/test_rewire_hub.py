"""``medlama push-model``: the dry run writes exactly the files that would be uploaded (no network here)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from medlama.cli import main
from medlama.errors import MedlamaInputError
from medlama.trainers.hub import plan_upload, push_model

MODEL_FILES = ["1_Pooling/config.json", "README.md", "config.json", "config_sentence_transformers.json",
               "model.safetensors", "modules.json", "rewire_config.json", "sentence_bert_config.json",
               "tokenizer.json", "tokenizer_config.json"]


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory) -> Path:
    """A rewired-model-shaped folder: a tiny CLS-pooled model, a run record, checkpoints with trainer state."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from medlama.trainers.contrastive_probe import build_rewire_model

    root = tmp_path_factory.mktemp("hub")
    bert = root / "bert"
    bert.mkdir()
    (bert / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "gene", "cell"]) + "\n")
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=7, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=16, max_position_embeddings=32)).save_pretrained(bert)
    BertTokenizerFast(vocab_file=str(bert / "vocab.txt")).save_pretrained(bert)
    model, _ = build_rewire_model(bert)
    folder = root / "rewired"
    model.save(str(folder))
    (folder / "rewire_config.json").write_text(json.dumps(
        {"base_model": {"name": "tiny"}, "training": {"global_step": 4}}))
    for step in (2, 4):
        checkpoint = folder / "checkpoints" / f"checkpoint-{step}"
        model.save(str(checkpoint))
        for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin", "trainer_state.json"):
            (checkpoint / name).write_bytes(b"state")
    (folder / "checkpoints" / "rewire_config.json").write_text("{}")
    (folder / ".hidden").write_text("not for upload")
    return folder


def test_plan_leaves_out_checkpoints_and_hidden_files(model_folder):
    assert plan_upload(model_folder) == MODEL_FILES
    with_checkpoints = plan_upload(model_folder, include_checkpoints=True)
    for step in (2, 4):
        assert f"checkpoints/checkpoint-{step}/model.safetensors" in with_checkpoints
        assert f"checkpoints/checkpoint-{step}/trainer_state.json" in with_checkpoints
        assert f"checkpoints/checkpoint-{step}/optimizer.pt" not in with_checkpoints
        assert f"checkpoints/checkpoint-{step}/rng_state.pth" not in with_checkpoints
    assert "checkpoints/rewire_config.json" not in with_checkpoints and ".hidden" not in with_checkpoints


def test_dry_run_writes_exactly_what_would_be_uploaded(model_folder, tmp_path):
    target = tmp_path / "dry"
    manifest = push_model(model_folder, "someone/minilm-rewired", private=True, revision="v1", dry_run=target)
    written = sorted(p.relative_to(target / "files").as_posix() for p in (target / "files").rglob("*") if p.is_file())
    assert written == MODEL_FILES
    for name in MODEL_FILES:
        assert (target / "files" / name).read_bytes() == (model_folder / name).read_bytes()
    on_disk = json.loads((target / "manifest.json").read_text())
    assert on_disk == manifest
    assert (on_disk["repo_id"], on_disk["repo_type"], on_disk["private"], on_disk["revision"]) == (
        "someone/minilm-rewired", "model", True, "v1")
    assert on_disk["commit_message"] == "Upload tiny rewired with Contrastive-Probe (4 steps)"
    assert [f["path"] for f in on_disk["files"]] == MODEL_FILES
    weights = next(f for f in on_disk["files"] if f["path"] == "model.safetensors")
    assert weights["sha256"] == hashlib.sha256((model_folder / "model.safetensors").read_bytes()).hexdigest()
    assert weights["size"] == (model_folder / "model.safetensors").stat().st_size
    # a second dry run into the same folder replaces the first
    push_model(model_folder, "someone/other", dry_run=target, include_checkpoints=True)
    assert json.loads((target / "manifest.json").read_text())["repo_id"] == "someone/other"
    assert (target / "files" / "checkpoints" / "checkpoint-2" / "model.safetensors").is_file()


def test_cli_dry_run(model_folder, tmp_path, capsys):
    target = tmp_path / "dry"
    assert main(["push-model", str(model_folder), "me/model", "--dry-run", str(target), "--message", "hello"]) == 0
    assert f"dry run: {len(MODEL_FILES)} files" in capsys.readouterr().out
    assert json.loads((target / "manifest.json").read_text())["commit_message"] == "hello"


def test_push_errors(model_folder, tmp_path, monkeypatch, capsys):
    with pytest.raises(MedlamaInputError, match="not a sentence-transformers model folder"):
        push_model(tmp_path, "me/model", dry_run=tmp_path / "dry")
    with pytest.raises(MedlamaInputError, match="nope: model folder not found"):
        push_model(tmp_path / "nope", "me/model", dry_run=tmp_path / "dry")
    with pytest.raises(MedlamaInputError, match="invalid repository id 'not a/valid id'"):
        push_model(model_folder, "not a/valid id", dry_run=tmp_path / "dry")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine.txt").write_text("keep")
    with pytest.raises(MedlamaInputError, match="busy: the dry-run folder exists and is not an earlier dry run"):
        push_model(model_folder, "me/model", dry_run=busy)
    assert (busy / "mine.txt").read_text() == "keep"
    with pytest.raises(MedlamaInputError, match="the dry-run folder must be outside the model folder"):
        push_model(model_folder, "me/model", dry_run=model_folder / "dry")
    # a real upload needs a token; without one it stops before any network call
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setattr("huggingface_hub.get_token", lambda: None)
    assert main(["push-model", str(model_folder), "me/model"]) == 2
    assert "no Hugging Face token: set HF_TOKEN or log in with `hf auth login`" in capsys.readouterr().err
