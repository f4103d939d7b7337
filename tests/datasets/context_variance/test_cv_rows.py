"""Compact context-variance rows and sharded files: a stored row holds its segments once with their layout, and
its inputs, rebuilt when read (:func:`row_inputs`, :func:`with_inputs`), are exactly the inputs of
:func:`build_contexts` (the incremental inputs of figure 2), row for row: on random documents, on the tiny MIMIC
notes and PMC article, and on PubMed sentences of the shared data with MedLAMA triples of the release. The data
files are split into shards of bounded size that load as the same rows; a row's size grows linearly with its
document."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.datasets.context_variance import (
    BuildSettings,
    CorpusSpec,
    Entity,
    EntityMatcher,
    Triple,
    build_contexts,
    row_inputs,
    with_inputs,
)
from medlama.datasets.context_variance.export import build_context_variance
from medlama.datasets.context_variance.kb_adapters import knowledge_base_from_medlama, triple_id
from medlama.datasets.context_variance.layout import features
from medlama.datasets.context_variance.triple_rows import sequence_rows

import cv_inputs


def expected_inputs(triple, text, mentions, row, build: BuildSettings) -> list[str]:
    """The inputs of ``row`` as :func:`build_contexts` makes them (the build's seed for its triple and document)."""
    contexts = build_contexts(triple, text, mentions, context_types=build.context_types, negative=build.negative,
                              seed=f"{build.seed}:{triple_id(triple)}:{row['doc_id']}",
                              random_mode=build.random_mode, separator=build.separator,
                              knowledge_end=build.knowledge_end, max_segments=build.max_segments)
    return [step.text for step in contexts[(row["context_type"], row["negative"])].inputs]


# ------------------------------------------------------------------------------------------ random documents
WORDS = ["cough", "fever", "wheeze", "asthma", "rash", "and", "no", ",", ".", "the", "  ", "\n"]


@functools.cache
def random_document_triple() -> tuple[Triple, EntityMatcher]:
    subject = Entity("D1", "asthma")
    pool = [Entity("S1", "cough"), Entity("S2", "fever"), Entity("S3", "wheeze"), Entity("S4", "rash")]
    triple = Triple(subject, "r", pool[0], (pool[0], pool[2]), pool, "[X] has [Y] .")
    return triple, EntityMatcher([subject, *pool])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=40), st.integers(0, 5),
       st.sampled_from(["shuffle", "insert"]), st.sampled_from([(", ", "."), (" ; ", ""), ("", "!")]),
       st.sampled_from([None, 1, 2, 4]))
def test_stored_rows_rebuild_the_inputs_of_random_documents(words, place, mode, joining, max_segments):
    """Property: whatever the document, its spacing, the knowledge-random mode, the joining of knowledge contexts
    and ``max_segments``, every row's rebuilt inputs are :func:`build_contexts`'s."""
    triple, matcher = random_document_triple()
    words = list(words)
    at = min(place, len(words))
    words[at:at] = ["asthma", "cough"]  # the subject and the target named
    text = " ".join(words)
    mentions = matcher.match(text)
    build = BuildSettings(random_mode=mode, separator=joining[0], knowledge_end=joining[1], max_segments=max_segments)
    rows = sequence_rows(triple, "x", "7", text, mentions, build, {})
    assert rows
    for row in rows:
        assert row_inputs(row) == expected_inputs(triple, text, mentions, row, build)
        assert len(row_inputs(row)) == len(row["added_entities"]) == len(row["segments"]) + 1


# ------------------------------------------------------------------------------------------ built folders
def check_folder_rows(folder: Path, kb, documents: dict[str, str], build: BuildSettings) -> int:
    """Every row of every config of ``folder`` (loaded with ``datasets``, inputs by :func:`with_inputs`) against
    :func:`build_contexts`; every sequence the pipeline makes of ``documents`` is there once. Returns the rows."""
    from datasets import load_dataset

    info = json.loads((folder / "build_info.json").read_text())
    matcher = EntityMatcher(kb.entities.values())
    triples = {triple_id(t): t for t in kb}
    mentions = {doc_id: matcher.match(text) for doc_id, text in documents.items()}
    [source] = [s["source"] for s in info["sources"]]
    named = {doc_id: {e for m in found for e in m.entity_ids} for doc_id, found in mentions.items()}
    expected_ids = sorted(row["id"] for doc_id, text in documents.items() for t in kb
                          if {t.subject.id, t.target.id} <= named[doc_id]
                          for row in sequence_rows(t, source, doc_id, text, mentions[doc_id], build, {}))
    everything = load_dataset(str(folder), source, split="test").with_transform(with_inputs)
    assert sorted(everything[:]["id"]) == expected_ids
    for row in everything:
        text = documents[row["doc_id"]]
        assert row["inputs"] == expected_inputs(triples[row["triple_id"]], text, mentions[row["doc_id"]], row, build)
    return len(expected_ids)


def test_tiny_notes_and_article_rows_rebuild_their_inputs(built, medlama_folder, corpora):
    sets, _ = built
    kb = knowledge_base_from_medlama(medlama_folder, "full")
    notes, pmc = corpora
    for spec, source in ((CorpusSpec.make(notes, "mimic"), "ehr"), (CorpusSpec.make(pmc, "pmc"), "pmc")):
        documents = {record["doc_id"]: record["text"] for record in spec.load()}
        info = json.loads((sets / "build_info.json").read_text())
        rows = load_dataset_rows(sets, source)
        assert len(rows) == sum(v for s in info["sources"] if s["source"] == source for v in s["sequences"].values())
        matcher = EntityMatcher(kb.entities.values())
        for row in rows:
            triple = next(t for t in kb if triple_id(t) == row["triple_id"])
            text = documents[row["doc_id"]]
            assert row["inputs"] == expected_inputs(triple, text, matcher.match(text), row, BuildSettings())


def load_dataset_rows(folder: Path, config: str) -> list[dict]:
    from datasets import load_dataset

    return list(load_dataset(str(folder), config, split="test").with_transform(with_inputs))


@pytest.fixture(scope="module")
def pubmed(tmp_path_factory, elicit_corpora, medlama_source):
    """MedLAMA ``may_treat`` and ``may_prevent`` rows of the release, and the PubMed sentences of three files of the
    shared corpora that name one of their subjects and one of their answers (a corpus of several files)."""
    root = tmp_path_factory.mktemp("cv-pubmed")
    rows, prompts = [], {}
    for relation in ("may_treat", "may_prevent"):
        more, prompt = cv_inputs.release_rows(medlama_source, relation, 1000)
        rows += more
        prompts.update(prompt)
    heads = {name.lower() for _, _, _, name, _, _ in rows}
    answers = {name.lower() for *_, found, _ in rows for _, name in found}
    files = []
    for index in range(3):
        lines = (elicit_corpora / f"pubmed_sents_no_punkt_10k_{index}").read_text(encoding="utf-8").splitlines()
        kept = [line for line in lines if _names(line, heads) and _names(line, answers)][:40]
        files.append(root / f"pubmed_{index}.txt")
        files[-1].write_text("\n".join(kept) + "\n", encoding="utf-8")
    folder = cv_inputs.write_medlama_folder(root / "medlama", rows, prompts)
    return knowledge_base_from_medlama(folder, "full"), files, root


def _names(line: str, names: set[str]) -> bool:
    words = line.lower().replace(",", " ").replace(".", " ").split()
    return any(" ".join(words[i:i + n]) in names for n in range(1, 6) for i in range(len(words)))


def test_pubmed_rows_in_shards_rebuild_their_inputs(pubmed):
    from datasets import load_dataset

    kb, files, root = pubmed
    spec = CorpusSpec.make(files, "text", "pubmed")
    build = BuildSettings(max_docs=None)
    sharded = build_context_variance(kb, [spec], root / "sharded", settings=build, index_root=root / "idx",
                                     progress=False, max_shard_bytes=4096)
    documents = {record["doc_id"]: record["text"] for record in spec.load()}
    assert {doc_id.split(":")[0] for doc_id in documents} == {f.name for f in files}  # every file gave documents
    assert check_folder_rows(root / "sharded", kb, documents, build) > 40

    # shards: numbered, each recorded with its rows and SHA-256, listed in the card, and the rows as one file holds them
    single = build_context_variance(kb, [spec], root / "single", settings=build, index_root=root / "idx",
                                    progress=False)
    info = json.loads((root / "sharded" / "build_info.json").read_text())
    real = sharded.configs["pubmed_real"]["test"]
    assert len(real) > 1 and len(single.configs["pubmed_real"]["test"]) == 1
    assert [name.split("/")[-1][:len("target-00000-of-00003")] for name in real] == [
        f"target-{i:05d}-of-{len(real):05d}" for i in range(len(real))]
    card = yaml.safe_load((root / "sharded" / "README.md").read_text().split("---")[1])
    listed = {c["config_name"]: c["data_files"][0]["path"] for c in card["configs"]}
    for config, splits in sharded.configs.items():
        files_of = splits["test"]
        assert listed[config] == (files_of if len(files_of) > 1 else files_of[0])
        for name in files_of:
            assert (root / "sharded" / name).is_file() and info["record"]["files"][name]["sha256"]
    for config in ("pubmed", "pubmed_real", "pubmed_knowledge-random_negative", "pools"):
        rows = load_dataset(str(root / "sharded"), config, split="test")
        assert rows.features == load_dataset(str(root / "single"), config, split="test").features
        assert rows.to_list() == load_dataset(str(root / "single"), config, split="test").to_list(), config
    assert sum(info["record"]["files"][name]["rows"] for name in real) == sharded.sources[0].sequences["real"]


# ------------------------------------------------------------------------------------------ size
def test_a_row_grows_linearly_with_its_document():
    """A document with n pool mentions: the stored row grows as n, the inputs it stands for as n squared."""
    import pyarrow as pa

    pool = [Entity(f"S{i}", f"finding{i}") for i in range(400)]
    triple = Triple(Entity("D1", "asthma"), "r", pool[0], (pool[0],), pool, "[X] has [Y] .")
    matcher = EntityMatcher([triple.subject, *pool])
    sizes = {}
    for n in (100, 200, 400):
        text = "asthma with finding0. " + " ".join(f"Then some words about finding{i}." for i in range(1, n))
        [row] = [r for r in sequence_rows(triple, "x", "1", text, matcher.match(text), BuildSettings(), {})
                 if r["context_type"] == "real" and not r["negative"]]
        stored = pa.Table.from_pylist([row], schema=features().arrow_schema).nbytes
        inputs = sum(len(t.encode()) for t in row_inputs(row))
        sizes[n] = stored, inputs
    assert sizes[400][0] < 4.5 * sizes[100][0]  # linear
    assert sizes[400][1] > 12 * sizes[100][1]  # what was stored before: quadratic
    assert sizes[400][1] > 100 * sizes[400][0]


# ------------------------------------------------------------------------------------------ bad input
def test_a_bad_row_or_shard_size_is_a_named_error(tmp_path, capsys, medlama_folder, corpora):
    row = {"id": "r", "context_type": "real", "prompt": "p [Y]", "segments": ["a", "b"], "layout": [1, 1],
           "knowledge_separator": ", ", "knowledge_end": "."}
    with pytest.raises(MedlamaInputError, match=r"sequence 'r': the layout \[1, 1\] is not an order of S1..S2"):
        row_inputs(row)
    with pytest.raises(MedlamaInputError, match=r"missing \['knowledge_end'\]"):
        row_inputs({k: v for k, v in row.items() if k != "knowledge_end"})
    assert row_inputs({**row, "layout": [2, 1]}) == ["p [Y]", "a p [Y]", "ba p [Y]"]
    assert row_inputs({"inputs": ["x [Y]"]}) == ["x [Y]"]  # a folder built before: its stored inputs
    notes, _ = corpora
    assert main(["build", "context-variance", "--medlama", str(medlama_folder), "--mimic", str(notes),
                 "--max-shard-mb", "0", "--out", str(tmp_path / "o")]) == 2
    assert "--max-shard-mb must be at least 1" in capsys.readouterr().err and not (tmp_path / "o").exists()
    kb = knowledge_base_from_medlama(medlama_folder, "full")
    with pytest.raises(MedlamaInputError, match="max_shard_bytes must be a positive number of bytes"):
        build_context_variance(kb, [CorpusSpec.make(notes, "mimic")], tmp_path / "p", max_shard_bytes=0)
    assert not (tmp_path / "p").exists()
