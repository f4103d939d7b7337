"""A second probe of the same model on the same pool encodes no candidate: the candidates' vectors come from
medlama's cache, with every number the same, and ``results.json`` says the cache served them; any change to
what the vectors depend on (the model's files, the batch size, the names) encodes them again."""

from __future__ import annotations

import shutil

import pytest

import medlama
from medlama.probers.encoding import Encoder

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """The cache on, in a folder of this test's own; counts the candidate encodings."""
    monkeypatch.setenv("MEDLAMA_EMBEDDING_CACHE", "1")
    monkeypatch.setenv("MEDLAMA_CACHE", str(tmp_path / "cache"))
    calls = []
    encode = Encoder.encode

    def counting(self, texts, max_length, **options):
        if options.get("role") == "document":
            calls.append(len(texts))
        return encode(self, texts, max_length, **options)

    monkeypatch.setattr(Encoder, "encode", counting)
    return calls


def rows(result):
    return [(r["predictions"], r["scores"], r["gold_rank"]) for r in result.prediction_rows()]


def test_a_second_probe_encodes_no_candidate(make_tiny_bert, biolama_dir, tmp_path, counted):
    model = make_tiny_bert("cached-encoder")
    probe = dict(data=str(biolama_dir), dataset="biolama", config="umls", settings={"batch_size": 4})
    first = medlama.probe(str(model), **probe)
    assert counted and first.settings["candidate_embeddings"] == "stored"
    encoded = len(counted)
    second = medlama.probe(str(model), **probe)
    assert len(counted) == encoded and second.settings["candidate_embeddings"] == "served"
    assert rows(second) == rows(first) and second.metrics == first.metrics
    # another batch size rounds otherwise: encoded again, and kept under its own key
    assert medlama.probe(str(model), **{**probe, "settings": {"batch_size": 3}}).settings["candidate_embeddings"] \
        == "stored"
    changed = tmp_path / "changed"
    shutil.copytree(model, changed)
    (changed / "config.json").write_text((changed / "config.json").read_text() + " ")  # other files, same weights
    assert medlama.probe(str(changed), **probe).settings["candidate_embeddings"] == "stored"
    assert medlama.probe(str(model), **probe, relations=["UR44"]).settings["candidate_embeddings"] == "stored"


def test_the_cache_can_be_turned_off(make_tiny_bert, biolama_dir, counted, monkeypatch):
    monkeypatch.setenv("MEDLAMA_EMBEDDING_CACHE", "0")
    model = make_tiny_bert("uncached-encoder")
    probe = dict(data=str(biolama_dir), dataset="biolama", config="umls", settings={"batch_size": 4})
    assert medlama.probe(str(model), **probe).settings["candidate_embeddings"] == "off"
    assert medlama.probe(str(model), **probe).settings["candidate_embeddings"] == "off" and len(counted) == 2


def test_the_key_holds_how_the_model_was_loaded(tmp_path, monkeypatch):
    """A LoRA adapter merged into the same base folder gives other vectors: it is part of the key."""
    import torch

    from medlama.probers.embedding_cache import cache_key

    monkeypatch.setenv("MEDLAMA_EMBEDDING_CACHE", "1")
    encoder = type("Stand", (), {"model_path": str(tmp_path), "borrowed": False, "layers": [1], "pooling": "cls",
                                 "max_length": 8, "batch_size": 4, "device": "cpu",
                                 "model": torch.nn.Linear(1, 1)})()
    plain = cache_key(encoder, ["a", "b"], 8, {"peft": None, "revision": None})
    adapted = cache_key(encoder, ["a", "b"], 8, {"peft": {"name": "lora", "sha256": "0" * 64}, "revision": None})
    assert plain and adapted and plain != adapted
    assert cache_key(encoder, ["a", "c"], 8, {"peft": None, "revision": None}) != plain
