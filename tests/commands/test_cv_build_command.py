"""``medlama build context-variance``'s command layer: corpus strings become typed corpus specs, and the
flags made from the settings classes keep their spellings, and a build claims its output folder once (the build
itself: ``tests/datasets/context_variance``)."""

from __future__ import annotations

import argparse
import contextlib

import pytest
from cv_inputs import write_corpora, write_medlama_folder

from medlama.cli import main
from medlama.commands.build_context_variance import CorpusFlags, RunSettings, parse_corpus, register
from medlama.datasets.context_variance import BuildSettings, CorpusSpec, KnowledgeSpec, export
from medlama.core.errors import MedlamaInputError
from medlama.core.settings import settings_from


def test_corpus_specs():
    spec = parse_corpus("pubmed:text:/data/sents_0")
    assert (spec.name, spec.format, spec.paths) == ("pubmed", "text", ("/data/sents_0",))
    spec = parse_corpus("jsonl:/data/notes.jsonl.gz")
    assert (spec.name, spec.format) == ("notes", "jsonl")
    assert CorpusSpec.make("NOTEEVENTS.csv", "mimic").name == "ehr"
    assert CorpusSpec.make(["a.xml"], "pmc").name == "pmc"
    assert parse_corpus("text:C:/data/x.txt", per="file").options == (("per", "file"),)  # PATH may hold ':'
    for name in ("mimic", "pmc", "jsonl", "text"):  # a source named like a format, explicitly NAME:FORMAT:PATH
        spec = parse_corpus(f"{name}:jsonl:notes.jsonl")
        assert (spec.name, spec.format, spec.paths) == (name, "jsonl", ("notes.jsonl",))
    with pytest.raises(MedlamaInputError, match="write FORMAT:PATH or NAME:FORMAT:PATH"):
        parse_corpus("nonsense")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser


def test_flags_keep_their_spellings_and_make_typed_settings():
    from medlama.commands.flags import given_settings

    args = _parser().parse_args([
        "context-variance", "--out", "o", "--medlama", "m", "--config", "full", "--relations", "a", "b",
        "--limit", "2", "--prompt-column", "query_default", "--mimic", "n.csv", "--context-types", "real",
        "knowledge-only", "--no-negative", "--max-docs", "3", "--max-segments", "4", "--seed", "5",
        "--random-mode", "insert"])
    assert given_settings(args, BuildSettings) == {
        "context_types": ("real", "knowledge-only"), "negative": False, "max_docs": 3, "max_segments": 4,
        "seed": 5, "random_mode": "insert"}
    assert given_settings(args, KnowledgeSpec) == {"config": "full", "relations": ("a", "b"), "limit": 2,
                                                   "prompt_column": "query_default"}
    defaults = _parser().parse_args(["context-variance", "--out", "o", "--biolama", "b", "--pmc", "p"])
    assert given_settings(defaults, BuildSettings) == {} and given_settings(defaults, KnowledgeSpec) == {}
    run, corpora = (settings_from(cls, given_settings(defaults, cls)) for cls in (RunSettings, CorpusFlags))
    assert (run.num_proc, run.index_dir, corpora.text_per, corpora.text_field) == (1, None, "line", "text")


def test_a_build_claims_its_output_folder_once(tmp_path, monkeypatch):
    claims = []
    real = export.claim_directory

    @contextlib.contextmanager
    def counted(target, **kwargs):
        claims.append((target, kwargs.get("reads")))
        with real(target, **kwargs):
            yield

    monkeypatch.setattr(export, "claim_directory", counted)
    notes, _ = write_corpora(tmp_path / "corpora")
    medlama = write_medlama_folder(tmp_path / "medlama")
    assert main(["build", "context-variance", "--out", str(tmp_path / "out"), "--medlama", str(medlama),
                 "--mimic", str(notes), "--index-dir", str(tmp_path / "idx"), "--json"]) == 0
    assert claims == [(tmp_path / "out", [medlama, str(notes)])]  # once, with the inputs it may not be
    assert (tmp_path / "out" / "build_info.json").is_file()
