"""Entity matching (spaCy PhraseMatcher) and the entity -> documents index."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from medlama.datasets.context_variance import (
    CorpusIndex,
    Entity,
    EntityMatcher,
    KnowledgeBase,
    Triple,
    build_contexts,
)
from medlama.core.errors import MedlamaInputError
from medlama.loaders.corpora import corpus_fingerprint
from medlama.loaders.mimic_notes import MIMIC_COLUMNS, read_mimic_notes

from cv_figures import ASSESSMENT, FIGURE_1_TEXT, FIGURE_2_REAL


# ------------------------------------------------------------------------------------------ matching
def test_longest_non_overlapping_case_insensitive():
    matcher = EntityMatcher([
        Entity("pain", "pain"), Entity("chest-pain", "chest pain"), Entity("cps", "Chest pain syndrome"),
        Entity("drip", "drip"), Entity("pnd", "postnasal drip", ("post-nasal drip", "PND")),
    ])
    text = "CHEST PAIN SYNDROME; chest pain, pain. Post-nasal drip, pnd and dripping drip."
    found = [(m.text, m.entity_id) for m in matcher.match(text)]
    assert found == [("CHEST PAIN SYNDROME", "cps"), ("chest pain", "chest-pain"), ("pain", "pain"),
                     ("Post-nasal drip", "pnd"), ("pnd", "pnd"), ("drip", "drip")]  # not inside "dripping"
    for mention in matcher.match(text):
        assert text[mention.start:mention.end] == mention.text
    assert matcher.entity_count == 5 and matcher.pattern_count == 7


def test_overlapping_spans_keep_the_longest_then_the_first():
    matcher = EntityMatcher([Entity("ab", "alpha beta"), Entity("bc", "beta gamma delta"), Entity("a", "alpha")])
    assert [m.entity_id for m in matcher.match("alpha beta gamma delta")] == ["a", "bc"]
    matcher = EntityMatcher([Entity("ab", "alpha beta"), Entity("bc", "beta gamma")])
    assert [m.entity_id for m in matcher.match("alpha beta gamma")] == ["ab"]


def test_shared_alias_carries_every_entity():
    matcher = EntityMatcher([Entity("C1", "cold", ("common cold",)), Entity("C2", "cold", ("low temperature",))])
    (mention,) = matcher.match("a Cold day")
    assert mention.entity_ids == ("C1", "C2") and mention.text == "Cold"


def test_pipe_equals_match_and_handles_empty_text():
    matcher = EntityMatcher([("x", ["wheeze", "wheezing"]), ("y", ["heartburn"])])
    texts = ["Wheezing and heartburn", "", None, "nothing here", "wheeze"]
    assert list(matcher.pipe(texts, batch_size=2)) == [matcher.match(t) for t in texts]
    assert matcher.match("") == []


def _release_entities(medlama_source) -> dict[str, list[str]]:
    """Surface forms of the real hard set's heads and tails (names by CUI), with case and spacing variants
    and aliases shared between entities, the cases where forms and patterns could part."""
    forms: dict[str, list[str]] = {}
    for path in sorted((medlama_source / "2021AA").glob("*_hard.csv"))[:8]:
        with open(path, newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                forms.setdefault(row["head_cui"], []).append(row["head_name"])
                for cui, name in zip(row["tail_cuis"].split(" || "), row["tail_names"].split(" || ")):
                    forms.setdefault(cui, []).append(name)
    ids = sorted(forms)
    for number, entity_id in enumerate(ids):
        name = forms[entity_id][0]
        if number % 7 == 0:
            forms[entity_id] += [name.upper(), name.replace(" ", "  "), f" {name.lower()} "]
        if number % 11 == 0:
            forms[entity_id].append(forms[ids[(number + 1) % len(ids)]][0])  # another entity's name
    return forms


def test_matcher_equals_phrase_matcher_of_the_tokenised_surface_forms(medlama_source, elicit_corpora):
    """The matcher (patterns made from the form table's tokens, tokenised once) finds exactly what spaCy's
    PhraseMatcher finds with every surface form tokenised as its own pattern, span for span, on real
    PubMed sentences and on sentences naming the entities in other cases and spacings."""
    import spacy
    from spacy.matcher import PhraseMatcher

    from medlama.datasets.context_variance.matching import form_table

    forms = _release_entities(medlama_source)
    nlp = spacy.blank("en")
    reference = PhraseMatcher(nlp.vocab, attr="LOWER")
    for entity_id, surface in forms.items():
        reference.add(entity_id, [doc for doc in nlp.tokenizer.pipe([f.strip() for f in surface]) if len(doc)])
    lines = (elicit_corpora / "pubmed_sents_no_punkt_10k_0").read_text(encoding="utf-8").splitlines()[:3000]
    names = [surface[0] for surface in forms.values()]
    lines += [f"{a.upper()} with {b.lower()}, then {a.title()}; {b}." for a, b in zip(names[::97], names[1::97])]

    matcher = EntityMatcher(forms.items())
    from_table = EntityMatcher.from_forms(form_table(forms.items()))
    assert from_table.forms == matcher.forms
    found = 0
    for text, raw, mentions in zip(lines, matcher.pipe_raw(lines), from_table.pipe(lines)):
        doc = nlp.make_doc(text)
        expected = {(nlp.vocab.strings[key], start, end) for key, start, end in reference(doc)}
        assert {(matcher.forms[m.form].entity_id, m.token_start, m.token_end) for m in raw} == expected, text
        assert mentions == matcher.match(text)
        found += len(expected)
    assert found > 1000 and matcher.entity_count == len(forms)


# ---------------------------------------------------------------------------------------------- index
SYMPTOMS = ["shortness of breath", "wheeze", "chest pain", "chest tightness", "hemoptysis", "heartburn",
            "sick feeling", "postnasal drip", "nasal stuffiness", "runny nose", "snoring"]


def knowledge_base() -> KnowledgeBase:
    target = Entity("C_DND", "discolored nasal discharge", ("nasal discharge",), "symptom")
    pool = [target, *(Entity(f"C_{n.replace(' ', '_')}", n, (), "symptom") for n in SYMPTOMS)]
    correct = [e for e in pool if e.name in ("shortness of breath", "postnasal drip", "nasal stuffiness",
                                             "runny nose", "snoring")]
    polyp = Entity("C_NP", "nasal polyp", ("nasal polyps",), "disease")
    asthma = Entity("C_AS", "asthma", (), "disease")
    return KnowledgeBase([
        Triple(polyp, "has symptom", target, tuple(correct), pool, "[X] has symptoms such as [Y]."),
        Triple(asthma, "has symptom", pool[2], (pool[2],), pool, "[X] has symptoms such as [Y]."),
    ])


def make_corpus(n: int = 120) -> list[dict]:
    texts = [
        FIGURE_1_TEXT,
        "Asthma with wheeze and chest pain.",
        "Nasal polyps noted; no nasal discharge today.",
        "Unrelated text about a fracture.",
        "Nasal discharge only.",
        "nasal polyp and heartburn",
    ]
    return [{"doc_id": f"note-{i}", "text": texts[i % len(texts)]} for i in range(n)]


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return knowledge_base()


@pytest.fixture(scope="module")
def index(tmp_path_factory, kb) -> CorpusIndex:
    folder = tmp_path_factory.mktemp("index") / "idx"
    return CorpusIndex.build(make_corpus(), kb, folder, fingerprint="corpus-v1", chunk_size=7, num_buckets=5,
                             spill_pairs=20)


def test_index_postings_and_documents(index, kb):
    assert index.num_documents == 120
    # Stored: documents with >= 2 distinct entities (texts 0, 1, 2 and 5 of every 6).
    assert index.num_stored_documents == 80
    polyp, target = "C_NP", "C_DND"
    assert list(index.rows_with(target)) == [r for r in range(120) if r % 6 in (0, 2)]
    assert list(index.documents_with(polyp, target)) == [r for r in range(120) if r % 6 in (0, 2)]
    assert list(index.documents_with("C_AS", "C_chest_pain")) == [r for r in range(120) if r % 6 == 1]
    assert len(index.rows_with("unknown")) == 0 and len(index.documents_with(polyp, "unknown")) == 0
    assert index.document_frequency("C_heartburn") == 40
    document = index.document(6)
    assert document.doc_id == "note-6" and document.text == FIGURE_1_TEXT
    assert document.mentions == tuple(EntityMatcher(kb.entities.values()).match(FIGURE_1_TEXT))
    with pytest.raises(KeyError):
        index.document(3)  # not stored: no entity
    with pytest.raises(KeyError):
        index.document(10_000)


def test_retrieval_cap_and_seeded_sample(index, kb):
    triple = kb.triples[0]
    everything = [d.row for d in index.retrieve(triple)]
    assert everything == [r for r in range(120) if r % 6 in (0, 2)]
    assert [d.row for d in index.retrieve(triple, max_docs=3)] == everything[:3]
    sample = [d.row for d in index.retrieve(triple, max_docs=5, seed=1)]
    assert len(sample) == 5 and sample == sorted(sample) and set(sample) <= set(everything)
    assert sample == [d.row for d in index.retrieve(triple, max_docs=5, seed=1)]
    assert {tuple(d.row for d in index.retrieve(triple, max_docs=5, seed=s)) for s in range(5)} != {tuple(sample)}


def test_retrieved_document_reproduces_figure_1(index, kb):
    triple = kb.triples[0]
    (document,) = [d for d in index.retrieve(triple, max_docs=1)]
    contexts = build_contexts(triple, document.text, document.mentions)
    assert contexts[("real", False)].render_markers() == FIGURE_2_REAL + ASSESSMENT


def test_parallel_build_equals_serial(tmp_path, index, kb):
    parallel = CorpusIndex.build(make_corpus(), kb, tmp_path / "par", num_proc=2, chunk_size=7, num_buckets=5)
    assert parallel.num_stored_documents == index.num_stored_documents
    assert parallel.manifest["num_postings"] == index.manifest["num_postings"]
    for entity_id in index.entity_ids:
        assert np.array_equal(parallel.rows_with(entity_id), index.rows_with(entity_id))
    for row in (0, 1, 2, 5, 114, 119):
        assert parallel.document(row) == index.document(row)


def test_reuse_and_rebuild(tmp_path, kb):
    folder = tmp_path / "idx"
    calls = []

    def corpus():
        calls.append(1)
        yield from make_corpus(12)

    first = CorpusIndex.open_or_build(corpus(), kb, folder, fingerprint="v1")
    assert len(calls) == 1 and first.num_documents == 12
    stamp = (folder / "manifest.json").stat().st_mtime_ns
    again = CorpusIndex.open_or_build(corpus(), kb, folder, fingerprint="v1")
    assert len(calls) == 1 and (folder / "manifest.json").stat().st_mtime_ns == stamp  # reused, not read
    assert again.manifest == first.manifest
    CorpusIndex.open_or_build(corpus(), kb, folder, fingerprint="v2")  # another corpus
    assert len(calls) == 2
    extra = list(kb.entities.values()) + [Entity("C_X", "fracture")]
    rebuilt = CorpusIndex.open_or_build(corpus(), extra, folder, fingerprint="v2")  # other entities
    assert len(calls) == 3 and "C_X" in rebuilt.entity_ids
    CorpusIndex.open_or_build(corpus(), extra, folder, fingerprint=None)  # unknown corpus: rebuilt
    assert len(calls) == 4


def test_interrupted_build_keeps_the_previous_index(tmp_path, kb):
    folder = tmp_path / "idx"
    CorpusIndex.build(make_corpus(12), kb, folder, fingerprint="v1")

    def failing():
        yield from make_corpus(10)
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        CorpusIndex.build(failing(), kb, folder, fingerprint="v2", chunk_size=3)
    assert CorpusIndex.open(folder).manifest["corpus_fingerprint"] == "v1"
    assert [p.name for p in tmp_path.iterdir() if p.name != ".idx.lock"] == ["idx"]  # no staging folder left


def test_bad_records_and_folders(tmp_path, kb):
    with pytest.raises(MedlamaInputError, match="needs a 'text'") as error:
        CorpusIndex.build([{"doc_id": "a", "text": "x"}, {"doc_id": "b"}], kb, tmp_path / "idx")
    assert error.value.row == 1
    with pytest.raises(MedlamaInputError, match="not a context-variance index"):
        CorpusIndex.open(tmp_path / "nothing")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "manifest.json").write_text(json.dumps({"format": "other", "version": 0}))
    with pytest.raises(MedlamaInputError, match="rebuild it"):
        CorpusIndex.open(tmp_path / "old")


def test_index_from_a_streaming_mimic_file(tmp_path, kb):
    path = tmp_path / "NOTEEVENTS.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(MIMIC_COLUMNS)
        for i, record in enumerate(make_corpus(30)):
            writer.writerow([str(1000 + i), "1", "2", "2100-01-01", "", "", "Discharge summary", "Report", "", "",
                             record["text"]])
    corpus = read_mimic_notes(path)
    index = CorpusIndex.open_or_build(corpus, kb, tmp_path / "idx", fingerprint=corpus_fingerprint(path, "mimic"))
    assert index.num_documents == 30
    documents = index.retrieve(kb.triples[0], max_docs=2)
    assert [d.doc_id for d in documents] == ["1000", "1002"]
    assert index.manifest["num_characters"] == sum(len(r["text"]) for r in make_corpus(30))


def test_empty_corpus_and_retrieve_all(tmp_path, kb):
    index = CorpusIndex.build([], kb, tmp_path / "empty")
    assert index.num_documents == 0 and index.num_stored_documents == 0
    assert [(t.key, docs) for t, docs in index.retrieve_all(kb)] == [(t.key, []) for t in kb]


def test_retrieve_all(index, kb):
    results = dict((t.key, [d.row for d in docs]) for t, docs in index.retrieve_all(kb, max_docs=2))
    assert results == {kb.triples[0].key: [0, 2], kb.triples[1].key: [1, 7]}
