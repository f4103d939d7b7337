"""``medlama build context-variance``: knowledge-base adapters, retrieval into a dataset folder, configs, card,
index reuse, parallel equality, and bad input.

The inputs (``cv_inputs``, in ``tests/helpers``): MIMIC-III ``NOTEEVENTS.csv`` notes and a PMC JATS article,
read by the project's own loaders, and a tiny MedLAMA-shaped folder (same schema and configs as
``medlama build medlama`` writes); for the BioLAMA adapter, the fixture release of
conftest's ``biolama_fx`` built with the real BioLAMA builder. The fixtures ``medlama_folder``,
``corpora`` and ``built`` (the folder the command builds) are in this folder's ``conftest.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from medlama.core.atomic import write_owner
from medlama.cli import main
from medlama.datasets.context_variance import BuildSettings, CorpusSpec, EntityMatcher, build_contexts, with_inputs
from medlama.datasets.context_variance.export import build_context_variance
from medlama.datasets.context_variance.kb_adapters import (
    knowledge_base_from_biolama,
    knowledge_base_from_medlama,
    pool_id,
    triple_id,
)
from medlama.datasets.context_variance.knowledge import Entity, EntityPool, KnowledgeBase
from medlama.datasets.context_variance.layout import features
from medlama.datasets.context_variance.triple_rows import sequence_rows
from medlama.core.errors import MedlamaInputError

from cv_inputs import FINDING, NOTES, TREAT


# ------------------------------------------------------------------------------------------ adapters
def test_medlama_adapter_triples_pools_and_correct_objects(medlama_folder):
    kb = knowledge_base_from_medlama(medlama_folder, "hard")
    ids = [triple_id(t) for t in kb]
    # one triple per answer of every hard row; the head answering itself (pneumonia) is no triple
    assert ids == [f"{FINDING}-0001:C101", f"{FINDING}-0001:C102", f"{FINDING}-0002:C103", f"{FINDING}-0002:C102",
                   f"{FINDING}-0002:C106", f"{FINDING}-0002:C107", f"{FINDING}-0004:C107", f"{TREAT}-0001:C001",
                   f"{TREAT}-0002:C002"]
    wheeze = kb.triples[0]
    assert wheeze.subject == Entity("C001", "asthma") and wheeze.target.name == "wheeze"
    assert wheeze.correct_ids == {"C101", "C102"}
    assert wheeze.prompt() == "asthma may have finding [Y] ."
    # the pool is the relation's answer set in the FULL set (gastritis's answers are not hard) ...
    assert pool_id(wheeze) == FINDING
    assert wheeze.pool.ids == {"C101", "C102", "C103", "C104", "C105", "C106", "C107", "C004"}
    # ... a concept named differently in two rows has the other name as alias
    assert wheeze.pool["C107"].surface_forms == ("shortness of breath", "dyspnea")
    assert wheeze.incorrect_ids == {"C103", "C104", "C105", "C106", "C107", "C004"}
    treat = kb.triples[-1]
    assert pool_id(treat) == TREAT and treat.pool.ids == {"C001", "C002"} and treat.incorrect_ids == {"C001"}
    # the pneumonia row: its subject is not a candidate of its own triple
    pneumonia = kb.triples[6]
    assert not pneumonia.in_pool("C004") and pneumonia.correct_ids == {"C107"}
    assert set(kb.entities) >= {"C001", "C201", "C202", "C004"}
    assert len(KnowledgeBase(kb.triples).entities) == len(kb.entities)  # the same entity table as the base class
    assert KnowledgeBase(kb.triples).entities == kb.entities

    only = knowledge_base_from_medlama(medlama_folder, "full", relations=[TREAT])
    assert [triple_id(t) for t in only] == [f"{TREAT}-0001:C001", f"{TREAT}-0002:C002"]
    assert len(knowledge_base_from_medlama(medlama_folder, "full", limit=1)) == 3  # first row of each relation
    with pytest.raises(MedlamaInputError, match=r"unknown relation\(s\) \['may_cure'\]"):
        knowledge_base_from_medlama(medlama_folder, relations=["may_cure"])
    with pytest.raises(MedlamaInputError, match="not a built dataset folder"):
        knowledge_base_from_medlama(medlama_folder / "data")


def built_biolama_fixture(tmp_path: Path, fx):
    """The BioLAMA fixture release (conftest's ``biolama_fx``) built into ``tmp_path / "biolama"``; ``fx``."""
    from medlama.datasets.biolama_folder import write_biolama

    fx.write_release(tmp_path / "release")
    write_biolama(tmp_path / "biolama", tmp_path / "release", progress=False)
    return fx


def test_biolama_adapter_types_aliases_and_relation_pools(tmp_path, biolama_fx):
    fx = built_biolama_fixture(tmp_path, biolama_fx)
    kb = knowledge_base_from_biolama(tmp_path / "biolama", "all")
    assert len(kb) == sum(len(objects) for source in fx.RELEASE.values() for _, subjects in source.values()
                          for (_, _, objects), split in zip(subjects, fx.SPLIT_OF) if split == "test")
    relations = {t.relation for t in kb}
    assert relations == {"ctd_CD1", "ctd_CG1", "umls_UR44", "umls_UR116", "wikidata_P2175", "wikidata_P780"}
    by_target = {(t.relation, t.target.name): t for t in kb}
    # wikidata: typed pools, shared by relations whose objects have the same type (treat + symptoms)
    wheeze = by_target[("wikidata_P780", "wheeze")]
    assert pool_id(wheeze) == "wikidata:Q12136"
    names = {e.name for e in wheeze.pool}
    assert {"fever", "cough", "pain", "asthma", "headache"} <= names  # objects of both relations, all splits
    assert wheeze.pool[wheeze.target.id].surface_forms == ("wheeze", "wheezing")
    assert wheeze.correct_ids == {wheeze.target.id, by_target[("wikidata_P780", "dyspnea")].target.id}
    # the subject "asthma" is also a disease object (same URI) of the pool: never a candidate of its own triple
    assert wheeze.subject.name == "asthma" and wheeze.subject.id in wheeze.pool
    assert wheeze.subject.id not in {e.id for e in wheeze.candidates()}
    # CTD has no object types: the pool is the relation's objects
    stroke = by_target[("ctd_CD1", "Rickets")]
    assert pool_id(stroke) == "ctd:relation:CD1"
    assert {e.name for e in stroke.pool} == {o for _, _, objects in fx.RELEASE["ctd"]["CD1"][1] for o, _ in objects}
    assert stroke.prompt() == "Vitamin D prevents diseases such as [Y] ."
    only = knowledge_base_from_biolama(tmp_path / "biolama", "umls", relations=["UR44"], include_subjects=False)
    assert {t.relation for t in only} == {"umls_UR44"}
    with pytest.raises(MedlamaInputError, match=r"unknown relation\(s\)"):
        knowledge_base_from_biolama(tmp_path / "biolama", "umls", relations=["P780"])


# ------------------------------------------------------------------------------------------ the build
def test_folder_configs_schema_and_card(built):
    from datasets import load_dataset

    sets, _ = built
    info = json.loads((sets / "build_info.json").read_text())
    assert info["default_config"] == "ehr_real" and [s["source"] for s in info["sources"]] == ["ehr", "pmc"]
    ehr, pmc = info["sources"]
    assert ehr["documents"] == 4 and pmc["documents"] == 1  # the ISERROR note is skipped
    default = load_dataset(str(sets), split="test")
    real = load_dataset(str(sets), "ehr_real", split="test")
    assert default["id"] == real["id"]
    assert real.features == features()
    assert set(real["context_type"]) == {"real"} and not any(real["negative"])
    assert sorted(real["triple_id"]) == sorted([f"{FINDING}-0001:C101", f"{FINDING}-0001:C102",
                                                f"{FINDING}-0002:C103", f"{FINDING}-0002:C102",
                                                f"{FINDING}-0002:C106", f"{FINDING}-0002:C107",
                                                f"{FINDING}-0004:C107", f"{TREAT}-0001:C001"])
    everything = load_dataset(str(sets), "ehr", split="test")
    counts = {}
    for context_type, negative in zip(everything["context_type"], everything["negative"]):
        counts[context_type + ("_negative" if negative else "")] = counts.get(context_type + ("_negative" if negative
                                                                                               else ""), 0) + 1
    assert counts == ehr["sequences"] and len(everything) == sum(ehr["sequences"].values())
    for config, count in ehr["sequences"].items():
        assert load_dataset(str(sets), f"ehr_{config}", split="test").num_rows == count
    inputs = everything.with_transform(with_inputs)[:]["inputs"]  # the card's one-liner
    assert ehr["triples_with_context"] == 8 and ehr["records"] == sum(len(x) - 1 for x in inputs)
    assert ehr["inputs"] == sum(len(x) for x in inputs)
    negative = load_dataset(str(sets), "pmc_real_negative", split="test")
    assert set(negative["center_name"]) == {"nausea"}  # the first O_incor of influenza's S order
    assert load_dataset(str(sets), "pmc_real", split="test")["triple_id"] == [
        f"{FINDING}-0002:C103", f"{FINDING}-0002:C102", f"{TREAT}-0002:C002"]
    pools = load_dataset(str(sets), "pools", split="test")
    assert set(pools["pool_id"]) == {FINDING, TREAT}
    assert len(pools) == 8 + 2
    card = (sets / "README.md").read_text()
    assert "config_name: ehr_knowledge-random_negative" in card and "default: true" in card
    assert "| `ehr` (mimic) | 4 | 11 | 8 |" in card and "<!-- build-summary -->" not in card
    assert "triples from MedLAMA `full`; sources `ehr`, `pmc`" in card
    # licences: MedLAMA is UMLS-derived, `ehr` quotes MIMIC-III notes; push-dataset reads these tags
    tags = yaml.safe_load(card.split("---")[1])["tags"]
    assert tags[-2:] == ["umls", "mimic"] and len(set(tags)) == len(tags)
    assert "The rows of `ehr` quote MIMIC clinical notes (tag `mimic`)" in card
    assert info["origin"] == "MedLAMA `full`" and [s["format"] for s in info["sources"]] == ["mimic", "pmc"]


def test_rows_equal_the_segmentation_of_the_document(built, medlama_folder):
    from datasets import load_dataset

    sets, _ = built
    kb = knowledge_base_from_medlama(medlama_folder, "full")
    triple = next(t for t in kb if triple_id(t) == f"{FINDING}-0001:C101")
    matcher = EntityMatcher(kb.entities.values())
    expected = build_contexts(triple, NOTES[0], matcher.match(NOTES[0]), seed=f"0:{triple_id(triple)}:1")
    rows = [r for r in load_dataset(str(sets), "ehr", split="test").with_transform(with_inputs)
            if r["triple_id"] == triple_id(triple)]
    assert len(rows) == len(expected) == 8
    for row in rows:
        sequence = expected[(row["context_type"], row["negative"])]
        assert row["inputs"] == [step.text for step in sequence.inputs]
        assert row["added_entities"] == [step.added_entity for step in sequence.inputs]
        assert row["added_is_correct"] == [step.added_is_correct for step in sequence.inputs]
        assert row["layout"] == list(sequence.layout)
        assert row["center_id"] == sequence.center_entity and row["doc_id"] == "1"
        assert row["correct_ids"] == ["C101", "C102"] and row["pool_id"] == FINDING
    real = next(r for r in rows if r["context_type"] == "real" and not r["negative"])
    assert real["inputs"][0] == "asthma may have finding [Y] ."
    assert real["added_entities"][1:] == ["C101", "C102", "C104"]  # wheeze, then cough, then heartburn
    assert real["inputs"][-1] == ("Asthma flare. The patient reports wheeze and cough at night, no rash, mild "
                                  "heartburn. Given salbutamol for asthma. asthma may have finding [Y] .")


def test_index_is_reused_and_parallel_build_is_identical(built, medlama_folder, corpora, tmp_path, capsys):
    sets, indexes = built
    notes, pmc = corpora
    argv = ["build", "context-variance", "--medlama", str(medlama_folder), "--config", "full", "--mimic", str(notes),
            "--pmc", str(pmc), "--index-dir", str(indexes), "--json"]
    assert main([*argv, "--out", str(tmp_path / "again")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [s["index_reused"] for s in report["sources"]] == [True, True]
    # two worker processes, two triples per task: the files do not depend on the scheduling
    kb = knowledge_base_from_medlama(medlama_folder, "full")
    build_context_variance(kb, [CorpusSpec.make(notes, "mimic"), CorpusSpec.make(pmc, "pmc")], tmp_path / "parallel",
                           num_proc=2, chunk_triples=2, index_root=indexes, progress=False,
                           origin="MedLAMA `full`")  # UMLS-derived: inferred from the origin, as the command says
    for part in sorted((sets / "data").rglob("*.parquet")):
        relative = part.relative_to(sets)
        assert part.read_bytes() == (tmp_path / "again" / relative).read_bytes(), relative
        assert part.read_bytes() == (tmp_path / "parallel" / relative).read_bytes(), relative
    assert (tmp_path / "parallel" / "README.md").read_text() == (sets / "README.md").read_text()


def test_umls_tag_follows_the_biolama_sources(tmp_path, biolama_fx):
    """BioLAMA sets are UMLS-derived only with the `umls` source; no MIMIC source, no `mimic` tag."""
    from datasets import load_dataset

    built_biolama_fixture(tmp_path, biolama_fx)
    kb = knowledge_base_from_biolama(tmp_path / "biolama", "all")
    sentences = tmp_path / "sentences.txt"  # a sentence naming the subject and the target of every triple
    sentences.write_text("".join(f"{t.subject.name} is linked with {t.target.name}.\n" for t in kb), encoding="utf-8")
    base = ["build", "context-variance", "--biolama", str(tmp_path / "biolama"), "--corpus",
            f"sents:text:{sentences}", "--index-dir", str(tmp_path / "idx")]
    tags = {}
    for config in ("all", "wikidata"):
        assert main([*base, "--config", config, "--out", str(tmp_path / config)]) == 0
        card = (tmp_path / config / "README.md").read_text()
        tags[config] = yaml.safe_load(card.split("---")[1])["tags"]
        assert "quote MIMIC clinical notes" not in card and str(tmp_path) not in card
    assert "umls" in tags["all"] and "umls" not in tags["wikidata"]
    assert "mimic" not in tags["all"] + tags["wikidata"]
    relations = set(load_dataset(str(tmp_path / "all"), "sents", split="test")["relation"])
    assert any(r.startswith("umls_") for r in relations)  # the umls rows are really there


def test_a_corpus_edited_in_place_with_its_size_and_time_kept_is_indexed_again(tmp_path, biolama_fx, capsys):
    """A corpus file rewritten with the same size and its modification time put back (``cp -p``, ``rsync -t``,
    ``tar x``) is another corpus: its index is built again and the sets quote the new text, never the old."""
    import os

    from datasets import load_dataset

    built_biolama_fixture(tmp_path, biolama_fx)
    kb = knowledge_base_from_biolama(tmp_path / "biolama", "all")
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("".join(f"{t.subject.name} is linked with {t.target.name}.\n" for t in kb), encoding="utf-8")
    base = ["build", "context-variance", "--biolama", str(tmp_path / "biolama"), "--config", "all", "--corpus",
            f"sents:text:{sentences}", "--index-dir", str(tmp_path / "idx"), "--json"]

    def build(out: str) -> tuple[bool, str]:
        assert main([*base, "--out", str(tmp_path / out)]) == 0
        reused = json.loads(capsys.readouterr().out)["sources"][0]["index_reused"]
        rows = load_dataset(str(tmp_path / out), "sents", split="test")
        return reused, " ".join(str(value) for row in rows for value in row.values())

    reused, text = build("first")
    assert reused is False and "is linked with" in text
    stat = sentences.stat()
    sentences.write_text(sentences.read_text(encoding="utf-8").replace(" linked ", " joined "), encoding="utf-8")
    os.utime(sentences, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (sentences.stat().st_size, sentences.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    reused, text = build("second")
    assert reused is False and "is joined with" in text and "is linked with" not in text
    assert build("third")[0] is True  # the same bytes again: the index is reused


def test_subject_named_only_by_the_target_gives_no_context():
    symptom = Entity("S1", "cough")
    pool = EntityPool([symptom, Entity("S2", "fever")], type="p")
    # the subject's name is also the target's: one mention stands for both
    kb = KnowledgeBase([_triple(Entity("D1", "cough"), symptom, pool)])
    triple = kb.triples[0]
    matcher = EntityMatcher(kb.entities.values())
    text = "cough and fever"
    assert sequence_rows(triple, "x", "1", text, matcher.match(text), BuildSettings(), {}) == []
    text = "Cough and fever; cough again."  # still no separate subject mention
    assert sequence_rows(triple, "x", "1", text, matcher.match(text), BuildSettings(), {}) == []


def _triple(subject, target, pool):
    from medlama.datasets.context_variance.kb_adapters import IdentifiedTriple

    return IdentifiedTriple(subject, "r", target, (target,), pool, "[X] has [Y].", triple_id="t")


# ------------------------------------------------------------------------------------------ bad input
def test_bad_input_is_reported(medlama_folder, corpora, tmp_path, capsys):
    notes, _ = corpora
    base = ["build", "context-variance", "--medlama", str(medlama_folder), "--index-dir", str(tmp_path / "idx")]
    assert main([*base, "--corpus", f"x:docx:{notes}", "--out", str(tmp_path / "o")]) == 2
    assert "unknown corpus format 'docx'" in capsys.readouterr().err
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    assert main([*base, "--corpus", f"blank:text:{empty}", "--out", str(tmp_path / "o")]) == 2
    assert "corpus 'blank' is empty" in capsys.readouterr().err
    unrelated = tmp_path / "unrelated.txt"
    unrelated.write_text("wheeze and cough\nasthma alone\nfever\n", encoding="utf-8")
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "build_info.json").write_text("{}")  # with the record: an earlier build, which may be replaced
    write_owner(tmp_path / "o", "build context-variance")
    (tmp_path / "o" / "keep.txt").write_text("earlier output")
    assert main([*base, "--corpus", f"notes:text:{unrelated}", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "no triple found any context" in err and "notes: 3 documents" in err
    assert (tmp_path / "o" / "keep.txt").read_text() == "earlier output"  # the earlier output is left alone
    assert main([*base, "--out", str(tmp_path / "o")]) == 2
    assert "no corpus given" in capsys.readouterr().err
    assert main([*base, "--corpus", "nonsense", "--out", str(tmp_path / "o")]) == 2
    assert "write FORMAT:PATH or NAME:FORMAT:PATH" in capsys.readouterr().err
    assert main([*base, "--mimic", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "o")]) == 2
    assert "missing.csv: no such MIMIC notes CSV file or folder" in capsys.readouterr().err
    assert main([*base, "--mimic", str(notes), "--context-types", "fake", "--out", str(tmp_path / "o")]) == 2
    assert "unknown context type(s) ['fake']" in capsys.readouterr().err
    with pytest.raises(MedlamaInputError, match="bad source name 'pools'"):
        CorpusSpec.make(notes, "mimic", "pools")
    with pytest.raises(MedlamaInputError, match="is given as 'mimic' and as 'text'"):
        build_context_variance(knowledge_base_from_medlama(medlama_folder), [
            CorpusSpec.make(notes, "mimic", "a"), CorpusSpec.make(unrelated, "text", "a")], tmp_path / "p")

