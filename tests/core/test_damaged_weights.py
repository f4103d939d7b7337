"""A damaged ``model.safetensors`` (empty, truncated, not safetensors) is a ``MedlamaInputError`` naming the file,
for every way a model is loaded to probe or to rewire, never a raw safetensors traceback."""

from __future__ import annotations

import shutil

import pytest

import medlama
from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.probers.causal.scoring import load_causal_lm
from medlama.probers.encoding import load_encoder
from medlama.probers.mlm import load_masked_lm
from medlama.probers.query_set import QuerySet
from medlama.trainers.model import build_rewire_model

pytestmark = pytest.mark.usefixtures("one_thread")

DAMAGES = {"empty": lambda data: b"", "truncated": lambda data: data[:len(data) // 2],
           "not safetensors": lambda data: b"\x00" * 64}


@pytest.fixture(scope="module")
def tiny_mlm(make_tiny_bert):
    return make_tiny_bert("damaged-weights-mlm", mlm=True)


def damaged(source, folder, damage):
    shutil.copytree(source, folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(DAMAGES[damage](weights.read_bytes()))
    return folder, weights


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_every_loader_names_the_damaged_file(tiny_mlm, tmp_path, damage):
    folder, weights = damaged(tiny_mlm, tmp_path / "model", damage)
    loads = {"encoder": lambda: load_encoder(folder), "masked LM": lambda: load_masked_lm(folder),
             "rewiring encoder": lambda: build_rewire_model(folder, device="cpu")}
    for what, load in loads.items():
        with pytest.raises(MedlamaInputError, match="the weights file is damaged, truncated or empty") as error:
            load()
        assert error.value.file == weights, what


def test_a_damaged_causal_lm_is_named(tmp_path):
    import tiny_causal  # tests/helpers

    source = tmp_path / "gpt2"
    tiny_causal.save_causal(source, "gpt2")
    folder, weights = damaged(source, tmp_path / "model", "truncated")
    with pytest.raises(MedlamaInputError, match="cannot load the causal LM: the weights file is damaged") as error:
        load_causal_lm(folder, "causal-likelihood")
    assert error.value.file == weights


def test_probe_and_rewire_name_the_damaged_file(tiny_mlm, tmp_path, capsys):
    folder, weights = damaged(tiny_mlm, tmp_path / "model", "truncated")
    queries = QuerySet(["q0"], ["may_treat"], ["aspirin may treat [Y] ."], [["pain"]], ["pain", "fever"])
    with pytest.raises(MedlamaInputError, match="damaged, truncated or empty") as error:
        medlama.probe(str(folder), queries)
    assert error.value.file == weights
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("aspirin may treat a headache in adults\n" * 4, encoding="utf-8")
    assert main(["rewire", "--corpus", str(corpus), "--out", str(tmp_path / "out"), "--model", str(folder),
                 "--preset", "demo", "--steps", "1", "--batch-size", "2"]) == 2
    err = capsys.readouterr().err
    assert f"medlama: error: {weights}: cannot load the encoder: the weights file is damaged" in err
    assert "Traceback" not in err
