"""Probing methods by name: typed settings per method, misspelt settings refused, the ``contrastive`` ->
``retrieval`` rename, and ``medlama probe`` flags refused for methods that do not take them."""

from __future__ import annotations

import json

import pytest
from transformers import GPT2Config

from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.probers.causal.scoring import check_causal_config
from medlama.probers.mlm import check_masked_config, check_seq2seq_config
from medlama.probers.registry import METHODS, check_model, make_prober, settings_for
from medlama.probers.retrieval import PRESETS, RetrievalProber, RetrievalSettings
from probe_outputs import predictions

RELATION = "associated_morphology_of"


@pytest.fixture(scope="module")
def tiny_encoder(make_tiny_bert):
    return make_tiny_bert("registry-tiny-bert")


def test_methods_name_prober_settings_and_presets():
    assert list(METHODS) == ["retrieval", "mask-average", "mask-predict", "masked-likelihood", "generative",
                             "causal-likelihood", "causal-constrained", "causal-generate"]
    entry = METHODS["retrieval"]
    assert (entry.prober, entry.settings, entry.presets) == (RetrievalProber, RetrievalSettings, PRESETS)
    assert set(METHODS["mask-predict"].presets) == {"paper", "paper-order+order", "biolama", "fill-mask"}
    assert settings_for("retrieval", {"batch_size": 4}, preset="cosine") == RetrievalSettings(distance="cosine",
                                                                                          batch_size=4)


def test_make_prober_refuses_a_misspelt_setting(tiny_encoder):
    with pytest.raises(MedlamaInputError, match=r"unknown retrieval setting\(s\): 'distnce' "
                                                r"\(did you mean 'distance'\?\)"):
        make_prober("retrieval", tiny_encoder, {"distnce": "cosine"})
    with pytest.raises(MedlamaInputError, match=r"unknown mask-predict setting\(s\): 'beam'"):
        make_prober("mask-predict", tiny_encoder, {"beam": 3})
    with pytest.raises(MedlamaInputError, match="retrieval takes RetrievalSettings, not MaskAverageSettings"):
        make_prober("retrieval", tiny_encoder, METHODS["mask-average"].settings())
    with pytest.raises(MedlamaInputError, match="unknown probing method 'contrastiv'"):
        make_prober("contrastiv", tiny_encoder)
    with pytest.raises(MedlamaInputError, match="setting 'batch_size' must be an integer or 'auto', got '8'"):
        settings_for("retrieval", {"batch_size": "8"})
    prober = make_prober("retrieval", tiny_encoder, {"pooling": "mean"})
    assert prober.settings()["method"] == "retrieval" and prober.settings()["pooling"] == "mean"


@pytest.mark.parametrize("flags, message", [
    (["--beam-size", "3"], "--beam-size applies to mask-predict, not retrieval"),
    (["--layers", "1", "2", "--method", "mask-average"], "--layers applies to retrieval and causal-likelihood, not mask-average"),
    (["--raw-predictions"], "--raw-predictions applies to mask-predict and generative and causal-generate, not retrieval"),
    (["--preset", "paper"], "--preset paper applies to mask-predict, not retrieval"),
    (["--preset", "cosine", "--method", "mask-average", "generative"],
     "--preset cosine applies to retrieval, not mask-average or generative"),
    (["--max-tokens", "2", "--method", "mask-predict", "generative"],
     "--max-tokens applies to mask-average, not mask-predict or generative"),
])
def test_a_flag_the_chosen_methods_do_not_take_is_refused(flags, message, monkeypatch, tmp_path, capsys):
    import medlama.runs.queries as queries_module

    def load_queries(source):
        raise AssertionError("queries loaded before the flags were checked")

    monkeypatch.setattr(queries_module, "load_queries", load_queries)
    assert main(["probe", "--data", str(tmp_path), "--out", str(tmp_path / "o"), *flags]) == 2
    assert capsys.readouterr().err == f"medlama: error: {message}\n"


def test_method_settings_from_flags_and_presets(capsys):
    from medlama.cli import build_parser
    from medlama.commands.method_flags import method_settings

    def settings(*flags, methods=("retrieval", "mask-predict")):
        return method_settings(build_parser().parse_args(["probe", *flags]), list(methods))

    chosen = settings("--batch-size", "4", "--preset", "paper-order+order", "--beam-size", "2", "--layer", "1",
                      "--raw-predictions")
    assert chosen["retrieval"] == RetrievalSettings(layer=1, batch_size=4)
    assert (chosen["mask-predict"].name, chosen["mask-predict"].beam_size, chosen["mask-predict"].batch_size,
            chosen["mask-predict"].to_candidates) == ("order+order", 2, 4, False)
    assert capsys.readouterr().err == ""
    assert settings("--preset", "cosine")["retrieval"] == PRESETS["cosine"]
    assert settings()["mask-predict"] == METHODS["mask-predict"].presets["paper"]


def test_each_method_carries_the_config_check_of_its_loader(tmp_path):
    """The check of a model's config is a field of the method's entry (none for retrieval: any encoder), and
    check_model tells it from the config alone, before any weights load."""
    assert {name: entry.check_config for name, entry in METHODS.items()} == {
        "retrieval": None, "mask-average": check_masked_config, "mask-predict": check_masked_config,
        "masked-likelihood": check_masked_config, "generative": check_seq2seq_config,
        "causal-likelihood": check_causal_config, "causal-constrained": check_causal_config,
        "causal-generate": check_causal_config}
    GPT2Config(n_layer=1, n_embd=8, n_head=2).save_pretrained(tmp_path / "gpt2")  # a config, no weights
    check_model("causal-likelihood", tmp_path / "gpt2")
    check_model("retrieval", tmp_path / "gpt2")
    with pytest.raises(MedlamaInputError, match="'gpt2' has no masked-LM architecture"):
        check_model("mask-predict", tmp_path / "gpt2")
