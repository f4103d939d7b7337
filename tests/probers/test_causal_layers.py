"""``causal-likelihood --layers``: the logit lens (:mod:`medlama.probers.causal.lens`).

* The last layer's lens scores are the plain scores (every candidate, both tiny models, sum and mean), and the
  ranking at the last layer is the plain ranking (of a pool, and of each query's own choices).
* A middle layer's scores equal a hand computation: the full sentence run once with ``output_hidden_states``,
  that layer's hidden states through the final norm and the output head, log-softmax, the candidate's tokens
  summed.
* ``medlama probe --layers`` writes one result per layer (labelled ``<model> L<layer>``, ``layer`` in its
  settings) and the per-layer plot; the layer figure reads them; a layer out of range, best-first search
  with layers, a model whose logits the lens cannot reproduce (scaled, or not its head of the last state) is
  refused with one line.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.probers.query_set import QuerySet

from fp32 import fp32_sum_atol  # tests/helpers (pytest pythonpath)
from tiny_causal import NAMES, save_causal  # tests/helpers: tiny causal LMs with locally trained tokenizers

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)

TEXTS = ["aspirin may treat [Y] .", "asthma may cause [Y] .", "the cold may cause [Y] and headache ."]


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def tiny(request, tmp_path_factory):
    return save_causal(tmp_path_factory.mktemp(f"lens-{request.param}"), request.param)


def queries() -> QuerySet:
    return QuerySet([f"q{i}" for i in range(len(TEXTS))], ["rel"] * len(TEXTS), TEXTS,
                    [["pain"], ["cough"], ["fever"]], list(NAMES), "q")


def hand_lens(folder, text: str, answer: str, layer: int) -> float:
    """log P(answer + rest | text before [Y]) at ``layer``: hidden state -> final norm -> head -> log-softmax."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    start = len(tokenizer(text.split("[Y]")[0].rstrip())["input_ids"])
    ids = tokenizer(text.replace("[Y]", answer))["input_ids"]
    norm = model.transformer.ln_f if hasattr(model, "transformer") else model.model.norm
    with torch.no_grad():
        hidden = model(torch.tensor([ids]), output_hidden_states=True).hidden_states[layer]
        lp = model.get_output_embeddings()(norm(hidden))[0].double().log_softmax(-1)
    return sum(lp[t - 1, ids[t]].item() for t in range(start, len(ids)))


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_last_layer_is_the_plain_scores(tiny, reduction):
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings

    plain = CausalLikelihoodProber(tiny, LikelihoodSettings(reduction=reduction, search="exhaustive"))
    lensed = CausalLikelihoodProber(tiny, LikelihoodSettings(reduction=reduction, layers=(1, -1), batch_size=4))
    expected = plain.scores(queries())
    by_layer = lensed.rank_layers_scored(queries(), top_k=len(NAMES), all_scores=True)
    assert sorted(by_layer) == [1, 2]
    got = np.array([pool.scores for pool in by_layer[2].pools])
    np.testing.assert_allclose(got, expected, rtol=0, atol=fp32_sum_atol(got, expected, terms=12))
    assert by_layer[2].names == plain.rank_scored(queries(), top_k=len(NAMES)).names
    assert not np.allclose(np.array([pool.scores for pool in by_layer[1].pools]), expected)


def test_multiple_choice_last_layer_is_the_plain_ranking(tiny):
    """A multiple-choice set (each query against its own choices) through the lens: the last layer is the plain
    ranking of the choices, scores included."""
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings
    from medlama.probers.pools import rank_choices

    choices = [["pain", "fever", "asthma attack"], ["cough", "diabetes"], ["fever", "back pain", "headache"]]
    mc = QuerySet([f"q{i}" for i in range(3)], ["rel"] * 3, TEXTS, [["pain"], ["cough"], ["fever"]],
                  sorted({name for row in choices for name in row}), "mc", rule="choices", choices=choices)
    plain = rank_choices(CausalLikelihoodProber(tiny, LikelihoodSettings()), mc, 3)
    lensed = rank_choices(CausalLikelihoodProber(tiny, LikelihoodSettings(layers=(-1,))), mc, 3, layers=True)
    assert list(lensed) == [2] and lensed[2].names == plain.names
    for got, expected in zip(lensed[2].scores, plain.scores):
        np.testing.assert_allclose(got, expected, rtol=0, atol=fp32_sum_atol(got, expected, terms=12))


def test_middle_layer_is_the_hand_computation(tiny):
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings

    prober = CausalLikelihoodProber(tiny, LikelihoodSettings(layers=(0, 1)))
    by_layer = prober.rank_layers_scored(queries(), top_k=3, all_scores=True)
    for layer in (0, 1):
        for q, text in enumerate(TEXTS):
            got = by_layer[layer].pools[q].scores
            expected = np.array([hand_lens(tiny, text, name, layer) for name in NAMES])
            np.testing.assert_allclose(got, expected, rtol=0, atol=fp32_sum_atol(got, expected, terms=12))


def test_probe_layers_writes_a_result_per_layer(tmp_path, medlama_tiny, tiny_gpt2, capsys):
    out = tmp_path / "out"
    assert main(["probe", "--data", str(medlama_tiny), "--config", "full", "--model", str(tiny_gpt2),
                 "--method", "causal-likelihood", "--layers", "0", "1", "2", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert [(r["label"], r["settings"]["layer"]) for r in results] == [
        (f"{tiny_gpt2.name} L{layer}", layer) for layer in (0, 1, 2)]
    assert all(r["settings"]["search"] == "exhaustive" for r in results)
    assert (out / "layers.png").is_file()
    plain = tmp_path / "plain"
    assert main(["probe", "--data", str(medlama_tiny), "--config", "full", "--model", str(tiny_gpt2),
                 "--method", "causal-likelihood", "--out", str(plain)]) == 0
    (last,) = json.loads((plain / "results.json").read_text())
    assert results[-1]["metrics"]["acc@10"] == last["metrics"]["acc@10"]
    figure = tmp_path / "figure.png"
    assert main(["figure", "layers", str(out), "--out", str(figure)]) == 0
    assert figure.is_file()
    capsys.readouterr()
    assert main(["probe", "--data", str(medlama_tiny), "--config", "full", "--model", str(tiny_gpt2),
                 "--method", "causal-likelihood", "--layers", "5", "--out", str(tmp_path / "bad")]) == 2
    assert "medlama: error: layer 5 out of range" in capsys.readouterr().err
    with pytest.raises(MedlamaInputError, match="search 'best-first' does not apply"):
        from medlama.probers.causal.prober import LikelihoodSettings

        LikelihoodSettings(layers=(1,), search="best-first")


def test_a_model_the_lens_cannot_reproduce_is_refused(tmp_path):
    """Logits post-processed beyond the head (a config's ``logit_scale``), or a last hidden state whose head is not
    the model's logits: refused, never scored otherwise than the model scores."""
    from medlama.probers.causal.prober import CausalLikelihoodProber, LikelihoodSettings

    model = save_causal(tmp_path / "scaled", "gpt2")
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "logit_scale": 0.5}))
    with pytest.raises(MedlamaInputError, match=r"post-processes its logits \(logit_scale\)"):
        CausalLikelihoodProber(model, LikelihoodSettings(layers=(1,)))
    (model / "config.json").write_text(json.dumps(config))
    prober = CausalLikelihoodProber(model, LikelihoodSettings(layers=(1,)))
    other = torch.nn.Linear(prober.lens.head.in_features, prober.lens.head.out_features, bias=False)
    prober.lens.head = other  # a head that is not the model's own: the last layer no longer gives its logits
    with pytest.raises(MedlamaInputError, match="cannot score its layers as it scores the last"):
        prober.rank_layers_scored(queries(), top_k=3)
