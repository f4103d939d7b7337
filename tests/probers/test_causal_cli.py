"""``medlama probe --method causal-*`` end to end on a tiny GPT-2 and tiny MedLAMA and BioLAMA folders: the
flags reach the settings, the predictions are the Python API's, constrained predictions are candidates,
and a model of the wrong class or a flag of another method exits 2 with a message saying what to use.
The loading options, on CPU: bf16 weights (scores close to fp32), ``device_map="auto"`` (reaches
``from_pretrained``) and the chat template (the scored prefix is the tokenizer's own rendering)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.runs.workflow import probe
from medlama.runs.queries import load_queries
from medlama.probers.query_set import QuerySet
from medlama.probers.registry import make_prober

from probe_outputs import predictions  # tests/helpers: per-query rows of predictions.jsonl
from tiny_causal import NAMES, save_causal  # tests/helpers: tiny causal LMs with locally trained tokenizers

CAUSAL = ("causal-likelihood", "causal-constrained", "causal-generate")


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (tests/conftest.py)


def run_probe(tmp_path, name, *flags) -> list[dict]:
    """``results.json``'s runs, each with ``"rows"``: its per-query lines of ``predictions.jsonl``."""
    out = tmp_path / name
    assert main(["probe", *flags, "--out", str(out)]) == 0
    return [{**result, "rows": predictions(out, result["label"])}
            for result in json.loads((out / "results.json").read_text())]


def test_probe_causal_likelihood_end_to_end(tiny_gpt2, medlama_tiny, tmp_path, capsys):
    data = ["--data", str(medlama_tiny), "--config", "full", "--model", str(tiny_gpt2)]
    (result,) = run_probe(tmp_path, "likelihood", *data, "--method", "causal-likelihood", "--reduction", "mean",
                          "--batch-size", "3", "--no-kv-cache", "--dtype", "fp32")
    assert "acc@1" in capsys.readouterr().out
    settings = result["settings"]
    assert settings["method"] == "causal-likelihood"
    assert (settings["reduction"], settings["batch_size"], settings["kv_cache"], settings["dtype"],
            settings["device_map"], settings["chat_template"]) == ("mean", 3, False, "fp32", None, False)
    # the same numbers as the Python API with the same settings
    queries = load_queries(_source(medlama_tiny))
    expected = probe(make_prober("causal-likelihood", tiny_gpt2, {"reduction": "mean", "batch_size": 3,
                                                                  "kv_cache": False}), queries, top_k=10)
    assert [q["predictions"] for q in result["rows"]] == [p[:10] for p in expected.predictions]
    assert result["metrics"]["acc@10"] == pytest.approx(expected.metrics["acc@10"])
    assert len(queries) == 6 and all(len(q["predictions"]) == min(10, len(queries.candidates)) for q in result["rows"])



def test_search_flag_is_recorded_and_changes_no_prediction(tiny_gpt2, medlama_tiny, tmp_path):
    data = ["--data", str(medlama_tiny), "--config", "full", "--model", str(tiny_gpt2), "--method", "causal-likelihood"]
    runs = {}
    for search in ("best-first", "exhaustive", None):
        (result,) = run_probe(tmp_path, f"search-{search}", *data, *(["--search", search] if search else []))
        runs[search] = (result["settings"]["search"], result["metrics"], [q["predictions"] for q in result["rows"]])
        ran = result["settings"].get("search_ran")
        # which search ranked the queries (of the first shard): best-first to the end, or handed to exhaustive
        assert (ran is None) if search == "exhaustive" else \
            (set(ran) == {"best-first", "switched to exhaustive"} and sum(ran.values()) >= 1), ran
    assert [runs[s][0] for s in runs] == ["best-first", "exhaustive", "best-first"]  # the default, resolved
    assert runs["best-first"][1:] == runs["exhaustive"][1:] == runs[None][1:]

def _source(folder):
    from medlama.runs.queries import QuerySource

    return QuerySource(data=folder, config="full")


def test_probe_causal_constrained_and_generate(tiny_gpt2, medlama_tiny, tmp_path):
    data = ["--data", str(medlama_tiny), "--config", "full", "--model", str(tiny_gpt2)]
    constrained, generated = run_probe(tmp_path, "fast", *data, "--method", "causal-constrained", "causal-generate",
                                       "--num-beams", "3", "--close-tokens", "1", "--max-answer-tokens", "4",
                                       "--answer-match", "normalized")
    candidates = set(load_queries(_source(medlama_tiny)).candidates)
    assert constrained["settings"]["method"] == "causal-constrained" and constrained["settings"]["num_beams"] == 3
    rows = [q["predictions"] for q in constrained["rows"]]
    assert all(row and len(row) <= 3 and set(row) <= candidates for row in rows)
    assert generated["settings"]["method"] == "causal-generate"
    assert (generated["settings"]["num_beams"], generated["settings"]["max_answer_tokens"],
            generated["settings"]["answer_match"], generated["settings"]["to_candidates"]) == (3, 4, "normalized", True)
    (raw,) = run_probe(tmp_path, "raw", *data, "--method", "causal-generate", "--num-beams", "1", "--raw-predictions")
    assert raw["settings"]["to_candidates"] is False and all(len(q["predictions"]) <= 1 for q in raw["rows"])


def test_wrong_model_class_and_foreign_flags_exit_2(make_tiny_bert, tiny_gpt2, medlama_tiny, tmp_path, capsys):
    data = ["--data", str(medlama_tiny), "--config", "full", "--out", str(tmp_path / "o")]
    encoder = make_tiny_bert("cli-causal-encoder")
    assert main(["probe", *data, "--model", str(encoder), "--method", "causal-likelihood"]) == 2
    err = capsys.readouterr().err
    assert "'bert' is an encoder-only (bidirectional) model; --method causal-likelihood needs a decoder-only " \
           "causal language model" in err and "--method retrieval for encoders" in err
    assert "Traceback" not in err
    assert main(["probe", *data, "--model", str(tiny_gpt2), "--method", "mask-average"]) == 2
    assert "'gpt2' is a decoder-only causal LM: use --method causal-likelihood" in capsys.readouterr().err
    assert main(["probe", *data, "--model", str(tiny_gpt2), "--method", "generative"]) == 2
    assert "'gpt2' is not a sequence-to-sequence model" in (err := capsys.readouterr().err) and \
        "use --method causal-likelihood, causal-constrained or causal-generate" in err
    assert main(["probe", *data, "--model", str(tiny_gpt2), "--method", "retrieval", "--dtype", "bf16"]) == 2
    assert capsys.readouterr().err == ("medlama: error: --dtype applies to masked-likelihood and causal-likelihood and "
                                       "causal-constrained and causal-generate, not retrieval\n")
    assert main(["probe", *data, "--model", str(tiny_gpt2), "--method", "causal-likelihood", "--num-beams", "2"]) == 2
    assert "--num-beams applies to causal-constrained and causal-generate, not causal-likelihood" in \
        capsys.readouterr().err


def test_biolama_with_causal_methods(biolama_dir, tiny_gpt2, tmp_path):
    from medlama.runs.biolama_queries import load_biolama_queries

    built = biolama_dir
    queries = load_biolama_queries(built, "wikidata")
    # a prompt that does not end in "[Y] ." (BioLAMA's may not): the text after the slot is scored too
    first = queries.subset([0])
    odd = QuerySet(first.ids, first.relations, [first.texts[0].replace("[Y] .", "[Y], as reported")], first.gold,
                   first.candidates)
    prober = make_prober("causal-likelihood", tiny_gpt2)
    split = prober.lm.split(odd.texts[0])
    assert prober.lm.decode(split.suffix) == ", as reported"
    assert len(prober.rank(odd, 3)[0]) == 3
    likelihood, constrained = run_probe(tmp_path, "biolama", "--dataset", "biolama", "--data", str(built),
                                        "--config", "wikidata", "--model", str(tiny_gpt2),
                                        "--method", "causal-likelihood", "causal-constrained", "--num-beams", "5")
    for result in (likelihood, constrained):
        assert result["query_set"] == queries.name and len(result["rows"]) == len(queries)
        assert all(set(q["predictions"]) <= set(queries.candidates) for q in result["rows"])
        assert set(result["metrics"]) >= {"acc@1", "acc@5"}
        assert set(result["extra"]["by_source"]) == {"wikidata"}


# -- loading options ---------------------------------------------------------------------------------------------

TEXTS = ["aspirin may treat [Y] .", "the cold may cause [Y] and headache .", "[Y] may cause cough ."]


def _queries(texts=TEXTS) -> QuerySet:
    return QuerySet([f"q{i}" for i in range(len(texts))], ["rel"] * len(texts), list(texts), [["pain"]] * len(texts),
                    NAMES, "q")


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def tiny_causal(request, tmp_path_factory) -> Path:
    return save_causal(tmp_path_factory.mktemp(f"options-{request.param}"), request.param)


def test_bf16_weights_score_close_to_fp32(tiny_causal):
    fp32 = make_prober("causal-likelihood", tiny_causal)
    bf16 = make_prober("causal-likelihood", tiny_causal, {"dtype": "bf16"})
    assert next(bf16.lm.model.parameters()).dtype == torch.bfloat16
    assert (fp32.settings()["dtype"], bf16.settings()["dtype"]) == ("fp32", "bf16")
    got, want = bf16.scores(_queries()), fp32.scores(_queries())
    assert got.dtype == np.float64 and not np.array_equal(got, want)  # really computed in bf16
    # bf16 keeps 8 significant bits (weights and activations rounded by up to 2**-9 relative); the scores,
    # -10 to -800 here, stay within 1% of fp32 (seen: 0.41% at most)
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=0)


def test_device_map_auto_reaches_from_pretrained(tiny_gpt2, monkeypatch):
    from transformers import AutoModelForCausalLM

    calls: list[dict] = []
    load = AutoModelForCausalLM.from_pretrained

    def spy(path, **kwargs):
        calls.append(kwargs)  # then loaded as usual (no sharding on a CPU test machine)
        return load(path, **{key: value for key, value in kwargs.items() if key != "device_map"})

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", spy)
    sharded = make_prober("causal-likelihood", tiny_gpt2, {"device_map": "auto"})
    assert calls[-1]["device_map"] == "auto" and calls[-1]["dtype"] == torch.float32
    assert sharded.settings()["device_map"] == "auto"
    plain = make_prober("causal-likelihood", tiny_gpt2)
    assert "device_map" not in calls[-1] and plain.settings()["device_map"] is None
    np.testing.assert_array_equal(sharded.scores(_queries()), plain.scores(_queries()))
    with pytest.raises(MedlamaInputError, match=r"unknown device map 'balanced'; choose from \['auto'\]"):
        make_prober("causal-likelihood", tiny_gpt2, {"device_map": "balanced"})


CHAT = ("{% for message in messages %}<|{{ message['role'] }}|> {{ message['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|> {% endif %}")


def test_chat_template_prefix_is_the_template_then_the_body(tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    from medlama.probers.causal.scoring import CHAT_INSTRUCTION

    folder = save_causal(tmp_path / "chat", "gpt2")
    for method in ("causal-likelihood", "causal-generate"):
        with pytest.raises(MedlamaInputError, match="chat_template is on but the tokenizer has no chat template"):
            make_prober(method, folder, {"chat_template": True})
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.chat_template = CHAT
    tokenizer.save_pretrained(folder)
    prober = make_prober("causal-likelihood", folder, {"chat_template": True})
    assert prober.settings()["chat_template"] is True

    message = CHAT_INSTRUCTION.format(query="aspirin may treat ___ .")
    start = tokenizer.apply_chat_template([{"role": "user", "content": message}], tokenize=True,
                                          add_generation_prompt=True, return_dict=False)
    rendered = tokenizer.decode(start)
    assert rendered.startswith("<|user|> Fill in the blank: aspirin may treat ___ .") and \
        rendered.endswith("\n<|assistant|> ")
    body = tokenizer("aspirin may treat", add_special_tokens=False)["input_ids"]
    scored: list[list[int]] = []
    score = prober.lm.continuation_log_probs
    monkeypatch.setattr(prober.lm, "continuation_log_probs",
                        lambda prefix, rows, **kw: scored.append(list(prefix)) or score(prefix, rows, **kw))
    assert np.isfinite(prober.scores(_queries(["aspirin may treat [Y] ."]))).all()
    assert scored == [list(start) + list(body)]
