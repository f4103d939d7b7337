"""``medlama probe --method causal-*`` end to end on a tiny GPT-2 and tiny MedLAMA and BioLAMA folders: the
flags reach the settings, the predictions are the Python API's, constrained predictions are candidates,
and a model of the wrong class or a flag of another method exits 2 with a message saying what to use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from medlama.cli import main
from medlama.probers.base import probe
from medlama.probers.queries import QuerySet, load_queries
from medlama.probers.registry import make_prober

import cv_inputs  # tests/helpers (pytest pythonpath): a MedLAMA-shaped folder of 6 queries
from tiny_causal import save_causal  # tests/helpers: tiny causal LMs with locally trained tokenizers

CAUSAL = ("causal-likelihood", "causal-constrained", "causal-generate")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory) -> Path:
    return save_causal(tmp_path_factory.mktemp("cli-tiny-gpt2"), "gpt2")


@pytest.fixture(scope="module")
def medlama_tiny(tmp_path_factory) -> Path:
    """The 6-query MedLAMA-shaped folder of ``cv_inputs`` with its ``full`` candidate set (heads and answers)."""
    from datasets import Dataset

    root = cv_inputs.write_medlama_folder(tmp_path_factory.mktemp("cli-medlama") / "medlama")
    names = sorted({row[3] for row in cv_inputs.ROWS} | {name for row in cv_inputs.ROWS for _, name in row[4]})
    (root / "candidates").mkdir()
    Dataset.from_dict({"name": names}).to_parquet(str(root / "candidates" / "full.parquet"))
    readme = (root / "README.md").read_text(encoding="utf-8")
    (root / "README.md").write_text(readme.replace(
        "configs:\n", "configs:\n- config_name: candidates_full\n  data_files:\n  - split: test\n"
                      "    path: candidates/full.parquet\n", 1), encoding="utf-8")
    return root


def run_probe(tmp_path, name, *flags) -> list[dict]:
    out = tmp_path / name
    assert main(["probe", *flags, "--out", str(out)]) == 0
    return json.loads((out / "results.json").read_text())


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
    assert [q["top10"] for q in result["queries"]] == [p[:10] for p in expected.predictions]
    assert result["metrics"]["acc@10"] == pytest.approx(expected.metrics["acc@10"])
    assert len(queries) == 6 and all(len(q["top10"]) == min(10, len(queries.candidates)) for q in result["queries"])


def _source(folder):
    from medlama.probers.queries import QuerySource

    return QuerySource(data=folder, config="full")


def test_probe_causal_constrained_and_generate(tiny_gpt2, medlama_tiny, tmp_path):
    data = ["--data", str(medlama_tiny), "--config", "full", "--model", str(tiny_gpt2)]
    constrained, generated = run_probe(tmp_path, "fast", *data, "--method", "causal-constrained", "causal-generate",
                                       "--num-beams", "3", "--close-tokens", "1", "--max-answer-tokens", "4",
                                       "--answer-match", "normalized")
    candidates = set(load_queries(_source(medlama_tiny)).candidates)
    assert constrained["settings"]["method"] == "causal-constrained" and constrained["settings"]["num_beams"] == 3
    rows = [q["top10"] for q in constrained["queries"]]
    assert all(row and len(row) <= 3 and set(row) <= candidates for row in rows)
    assert generated["settings"]["method"] == "causal-generate"
    assert (generated["settings"]["num_beams"], generated["settings"]["max_answer_tokens"],
            generated["settings"]["answer_match"], generated["settings"]["to_candidates"]) == (3, 4, "normalized", True)
    (raw,) = run_probe(tmp_path, "raw", *data, "--method", "causal-generate", "--num-beams", "1", "--raw-predictions")
    assert raw["settings"]["to_candidates"] is False and all(len(q["top10"]) <= 1 for q in raw["queries"])


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
    assert capsys.readouterr().err == ("medlama: error: --dtype applies to causal-likelihood and causal-constrained "
                                       "and causal-generate, not retrieval\n")
    assert main(["probe", *data, "--model", str(tiny_gpt2), "--method", "causal-likelihood", "--num-beams", "2"]) == 2
    assert "--num-beams applies to causal-constrained and causal-generate, not causal-likelihood" in \
        capsys.readouterr().err


def test_biolama_with_causal_methods(biolama_fx, tiny_gpt2, tmp_path_factory, tmp_path):
    from medlama.datasets.biolama import write_biolama
    from medlama.probers.biolama_queries import load_biolama_queries

    release = tmp_path_factory.mktemp("causal-biolama-release")
    biolama_fx.write_release(release)
    built = tmp_path_factory.mktemp("causal-built") / "biolama"
    write_biolama(built, release, progress=False)
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
        assert result["query_set"] == queries.name and len(result["queries"]) == len(queries)
        assert all(set(q["top10"]) <= set(queries.candidates) for q in result["queries"])
        assert set(result["metrics"]) >= {"acc@1", "acc@5"}
        assert set(result["extra"]["by_source"]) == {"wikidata"}
