"""Shared test setup: offline Hugging Face libraries, the real data in ../shared, one MedLAMA build."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

# Before any Hugging Face import: nothing may reach a hub, and no user cache is read or written.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_EVALUATE_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
if "HF_HOME" not in os.environ:
    _hf_home = tempfile.mkdtemp(prefix="medlama-tests-hf-")
    os.environ["HF_HOME"] = _hf_home
    atexit.register(shutil.rmtree, _hf_home, ignore_errors=True)  # leave nothing behind in /tmp
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("MEDLAMA_SHARED", REPO.parent / "shared"))


def shared_path(*parts: str) -> Path:
    """A path under ../shared; missing data fails in CI and skips elsewhere (a third party's clone)."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        message = f"real data not found at {path} (set MEDLAMA_SHARED to the shared/ folder)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def medlama_source() -> Path:
    """The local copy of the MedLAMA release (byte-identical to the pinned commit)."""
    return shared_path("data", "medlama")


@pytest.fixture(scope="session")
def elicit_corpora() -> Path:
    """The released rewiring corpora (10 x 10k PubMed sentences, 10k Wikipedia sentences)."""
    return shared_path("data", "elicit_corpora")


@pytest.fixture(scope="session")
def medlama_build(tmp_path_factory, medlama_source):
    """MedLAMA built once per session with the real builder: ``(folder, MedlamaBuild, statistics)``."""
    from medlama.datasets.medlama import write_medlama

    out = tmp_path_factory.mktemp("built") / "medlama"
    build, stats = write_medlama(out, medlama_source, progress=False)
    return out, build, stats


@pytest.fixture(scope="session")
def medlama_dir(medlama_build) -> Path:
    """Folder of the session's MedLAMA build, loadable with ``load_dataset(folder, config)``."""
    return medlama_build[0]


@pytest.fixture(scope="session")
def make_tiny_bert(tmp_path_factory):
    """``make_tiny_bert(name, *, mlm=False, layers=2, seed=0)``: a random BERT (hidden 32, 2 heads, 128
    positions) with the bundled model's 30k-token vocabulary, with or without an MLM head, saved in a new
    folder like a user's checkpoint and returned as that folder."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, BertModel

    from medlama.defaults import default_model_path

    def make(name: str, *, mlm: bool = False, layers: int = 2, seed: int = 0) -> Path:
        folder = tmp_path_factory.mktemp(name)
        tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
        config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=layers,
                            num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
        torch.manual_seed(seed)
        (BertForMaskedLM if mlm else BertModel)(config).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        return folder

    return make
