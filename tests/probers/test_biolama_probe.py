"""Probing BioLAMA: queries, gold (labels + aliases), candidates, BioLAMA's scoring, and every prober by one command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from datasets import load_dataset

from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.probers.prober import Prober
from medlama.runs.workflow import probe
from medlama.datasets.declared.biolama import by_source
from medlama.runs.biolama_queries import load_biolama_queries
from medlama.probers.registry import METHODS
from probe_outputs import predictions


@pytest.fixture(scope="module")
def tiny_mlm(make_tiny_bert) -> Path:
    """A 2-layer BERT with an MLM head and the bundled model's vocabulary: usable by encoder and MLM probers."""
    return make_tiny_bert("tiny-bert-mlm", mlm=True)


def test_queries_gold_and_candidates(biolama_fx, biolama_dir):
    queries = load_biolama_queries(biolama_dir, "umls")
    test = load_dataset(str(biolama_dir), "umls", split="test")
    assert len(queries) == biolama_fx.counts("umls") == test.num_rows
    assert queries.ids == test["id"]
    assert set(queries.relations) == {"umls_UR44", "umls_UR116"}
    assert queries.gold == test["answers"]
    assert queries.subject_names == test["sub_label"]  # the prediction rows' `subject` (what `frequency` looks up)
    assert queries.subset([1, 2]).subject_names == test["sub_label"][1:3]  # a subset keeps its queries' subjects
    assert all(text.count("[Y]") == 1 for text in queries.texts)
    expected = set(test["sub_label"]) | {label for labels in test["obj_labels"] for label in labels}
    assert queries.candidates == sorted(expected)
    assert "blood clot" not in queries.candidates  # aliases are gold, not candidates
    assert "blood clot" in load_biolama_queries(biolama_dir, "umls", candidates="labels+aliases").candidates
    # relation filter: both spellings; other splits; per-relation configs
    for names in (["UR44"], ["umls_UR44"]):
        subset = load_biolama_queries(biolama_dir, "all", relations=names)
        assert set(subset.relations) == {"umls_UR44"} and len(subset) == 4
    assert len(load_biolama_queries(biolama_dir, "wikidata_P780", split="dev")) == 2
    with pytest.raises(MedlamaInputError, match=r"unknown relation 'UR999'"):
        load_biolama_queries(biolama_dir, "umls", relations=["UR999"])
    with pytest.raises(MedlamaInputError, match="cannot load config 'mesh'"):
        load_biolama_queries(biolama_dir, "mesh")


def variant(answer: str) -> str:
    """The same answer after BioLAMA's normalisation, but not character for character."""
    return f"The {answer.upper()}."


class Scripted(Prober):
    """Ranks a gold string (as ``variant``) first for UR44, third for UR116, never for other relations."""

    method = "scripted"

    def rank(self, queries, top_k=10):
        out = []
        for relation, gold in zip(queries.relations, queries.gold):
            hit = variant(gold[-1])  # the last gold string: an alias where the record has one
            out.append({"umls_UR44": [hit, "x", "y"], "umls_UR116": ["x", "y", hit]}.get(relation, ["x", "y"])[:top_k])
        return out


def test_biolama_scoring_labels_aliases_normalised(biolama_dir):
    queries = load_biolama_queries(biolama_dir, "all")
    normalized = probe(Scripted(), queries, ks=(1, 5), match="normalized")
    assert normalized.metrics["groups"]["umls_UR44"]["acc@1"] == 1.0
    assert normalized.metrics["groups"]["umls_UR116"]["acc@1"] == 0.0
    assert normalized.metrics["groups"]["umls_UR116"]["acc@5"] == 1.0
    table = by_source(normalized.metrics)
    assert table["umls"] == {"relations": 2, "queries": 8, "acc@1": 0.5, "acc@5": 1.0}
    assert table["ctd"]["acc@5"] == table["wikidata"]["acc@5"] == 0.0
    exact = probe(Scripted(), queries, ks=(1, 5), match="exact")
    assert by_source(exact.metrics)["umls"]["acc@5"] == 0.0


#: Methods that take a seq2seq model; every other method takes a BERT-like (masked LM) model, but the causal ones.
SEQ2SEQ_METHODS = {"generative"}
CAUSAL_METHODS = {"causal-likelihood", "causal-constrained", "causal-generate"}


def test_every_prober_by_one_command(biolama_fx, biolama_dir, tiny_mlm, tmp_path, capsys):
    """Table 7 in one run: the registered methods on all three sources, normalised acc@1 and acc@5."""
    methods = sorted(set(METHODS) - SEQ2SEQ_METHODS - CAUSAL_METHODS)
    out = tmp_path / "probe"
    status = main(["probe", "--dataset", "biolama", "--data", str(biolama_dir), "--model", str(tiny_mlm),
                   "--label", "tiny", "--method", *methods, "--out", str(out)])
    captured = capsys.readouterr()
    assert status == 0, captured.err[-2000:]
    assert "BioLAMA: macro acc@k over each source's relations" in captured.out
    assert "umls acc@5" in captured.out
    results = json.loads((out / "results.json").read_text())
    assert [r["label"] for r in results] == (["tiny"] if len(methods) == 1 else [f"{m}:tiny" for m in methods])
    for result in results:
        assert result["metrics"]["match"] == "normalized" and result["metrics"]["k"] == [1, 5, 10]
        assert len(predictions(out, result["label"])) == biolama_fx.counts(None, "test")
        assert set(result["extra"]["by_source"]) == {"ctd", "umls", "wikidata"}
        for source, scores in result["extra"]["by_source"].items():
            groups = [g for g in result["metrics"]["groups"] if g.startswith(source + "_")]
            assert scores["acc@1"] == pytest.approx(sum(result["metrics"]["groups"][g]["acc@1"] for g in groups) / 2)
    assert (out / "relations.png").read_bytes()[:4] == b"\x89PNG"
    assert not (out / "answer_length.png").exists()  # that figure rescores exactly: left out for normalised runs


@pytest.mark.skipif(not SEQ2SEQ_METHODS <= set(METHODS), reason="no seq2seq prober registered")
def test_seq2seq_probers(biolama_dir, tmp_path, capsys):
    from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer

    pieces = ["<pad>", "</s>", "<unk>", "▁fever", "▁cough", "▁pain", "▁has", "▁symptoms", "▁such", "▁as",
              "▁."]
    tokenizer = T5Tokenizer(vocab=[(piece, -float(i)) for i, piece in enumerate(pieces)], extra_ids=3)
    torch.manual_seed(0)
    model = tmp_path / "tiny-t5"
    T5ForConditionalGeneration(T5Config(vocab_size=len(tokenizer), d_model=16, d_ff=32, num_layers=1, num_heads=2,
                                        d_kv=8, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
                               ).save_pretrained(model)
    tokenizer.save_pretrained(model)
    out = tmp_path / "probe"
    status = main(["probe", "--dataset", "biolama", "--data", str(biolama_dir), "--config", "wikidata",
                   "--model", str(model), "--method", *sorted(SEQ2SEQ_METHODS), "--out", str(out)])
    assert status == 0, capsys.readouterr().err[-2000:]
    for result in json.loads((out / "results.json").read_text()):
        assert set(result["extra"]["by_source"]) == {"wikidata"} and len(predictions(out, result["label"])) == 8


def test_probe_options_config_split_match_ks(biolama_dir, tiny_mlm, tmp_path, capsys):
    out = tmp_path / "probe"
    assert main(["probe", "--dataset", "biolama", "--data", str(biolama_dir), "--config", "umls", "--split", "dev",
                 "--relations", "UR44", "--model", str(tiny_mlm), "--match", "exact", "--ks", "1", "3",
                 "--out", str(out)]) == 0
    assert "acc@3" in capsys.readouterr().out
    result = json.loads((out / "results.json").read_text())[0]
    assert result["query_set"] == "biolama umls/dev[UR44]" and len(predictions(out)) == 2
    assert "queries" not in result  # per-query rows are in predictions.jsonl only
    assert result["metrics"]["match"] == "exact" and result["metrics"]["k"] == [1, 3, 5, 10]
    assert main(["probe", "--dataset", "biolama", "--data", str(biolama_dir), "--config", "mesh",
                 "--model", str(tiny_mlm), "--out", str(out), "--overwrite"]) == 2
    assert "cannot load config 'mesh'" in capsys.readouterr().err
    # a MedLAMA-only option is refused, not silently ignored
    assert main(["probe", "--dataset", "biolama", "--data", str(biolama_dir), "--prompt-column", "query_default",
                 "--model", str(tiny_mlm), "--out", str(out), "--overwrite"]) == 2
    assert "--prompt-column is a MedLAMA option" in capsys.readouterr().err


def test_probe_from_source_builds_once_into_the_cache(biolama_release_dir, tiny_mlm, tmp_path, monkeypatch):
    monkeypatch.setenv("MEDLAMA_CACHE", str(tmp_path / "cache"))
    args = ["probe", "--dataset", "biolama", "--source", str(biolama_release_dir), "--config", "ctd",
            "--model", str(tiny_mlm), "--out", str(tmp_path / "probe")]
    assert main(args) == 0
    built = [p for p in (tmp_path / "cache" / "datasets").iterdir()
             if not p.name.startswith(".") and not p.name.endswith(".lock")]  # not the lock files
    assert len(built) == 1 and built[0].name.startswith("biolama-folder-")
    stamp = (built[0] / "build_info.json").stat().st_mtime_ns
    assert main([*args, "--overwrite"]) == 0
    assert (built[0] / "build_info.json").stat().st_mtime_ns == stamp  # reused, not rebuilt
