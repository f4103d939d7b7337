"""One index per corpus: an index that matched more surface forms than a knowledge base's (the union with
another knowledge base's, and forms that overlap its own) gives that knowledge base exactly the documents,
mentions and rows of an index of its own forms; a knowledge base whose forms the index matched reuses it
(no second build); one with a form it lacks extends it, and the first keeps its view."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medlama.core.errors import MedlamaInputError
from medlama.datasets.context_variance import CorpusSpec, EntityMatcher
from medlama.datasets.context_variance.export import build_context_variance
from medlama.datasets.context_variance.index.corpus_index import CorpusIndex
from medlama.datasets.context_variance.index.pipeline import open_or_build_spec_index
from medlama.datasets.context_variance.settings import IndexEngine
from medlama.datasets.context_variance.kb_adapters import knowledge_base_from_medlama
from medlama.datasets.context_variance.knowledge import Entity
from medlama.loaders.mimic_notes import read_mimic_notes

#: Forms that overlap the knowledge bases' own in the test notes, so that resolving overlaps among all the
#: index's forms would give other mentions: "cough at night" contains "cough", "nose and dyspnea" starts
#: inside "runny nose" and contains "dyspnea", "asthma flare" contains "asthma" (an alias of a knowledge-base
#: entity: a view must tell an entity's forms apart, not only its entities), and "Wheeze" is "wheeze" in
#: another case (one form to the matcher).
EXTRA = [Entity("X1", "cough at night"), Entity("X2", "nose and dyspnea"), Entity("C001", "asthma flare"),
         Entity("C101", "Wheeze")]


def build(kb, notes: Path, out: Path, index_root: Path):
    return build_context_variance(kb, [CorpusSpec.make(notes, "mimic")], out, index_root=index_root,
                                  progress=False, origin="MedLAMA `hard`")


def data_files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted((folder / "data").rglob("*.parquet"))}


def test_a_union_index_gives_each_knowledge_base_its_own_rows_and_is_reused(tmp_path, medlama_folder, corpora):
    notes, _ = corpora
    hard = knowledge_base_from_medlama(medlama_folder, "hard")
    full = knowledge_base_from_medlama(medlama_folder, "full")
    # The reference: the sets of each knowledge base from an index of its own forms only.
    reference = {name: data_files(build(kb, notes, tmp_path / f"own-{name}", tmp_path / f"own-{name}-idx").out)
                 for name, kb in (("hard", hard), ("full", full))}
    assert reference["hard"] and reference["full"]

    # The same corpus's index, extended to the union of both knowledge bases' forms and overlapping ones.
    root = tmp_path / "shared"
    build(hard, notes, tmp_path / "first", root)
    (folder,) = root.iterdir()
    union = [*hard.entities.values(), *full.entities.values(), *EXTRA]
    spec = CorpusSpec.make(notes, "mimic")
    open_or_build_spec_index(spec, union, folder, fingerprint=spec.fingerprint(), engine=IndexEngine())
    assert {"X1", "X2"} <= set(CorpusIndex(folder).entity_ids)
    stamp = (folder / "manifest.json").stat().st_mtime_ns

    # The overlaps are exercised: resolved among all the forms, a document's mentions are not hard's.
    everything, view = CorpusIndex(folder), CorpusIndex(folder, entities=hard)
    texts = {row: record["text"] for row, record in enumerate(read_mimic_notes(notes))}
    assert any(everything.document(row).mentions != view.document(row).mentions
               for row in texts if row in everything.documents_with("C102"))

    # Each knowledge base's rows from the shared index are its rows from its own index, byte for byte;
    # both reuse the one folder, built once.
    for name, kb in (("hard", hard), ("full", full)):
        result = build(kb, notes, tmp_path / f"shared-{name}", root)
        assert [stat.index_reused for stat in result.sources] == [True]
        assert data_files(result.out) == reference[name], name
    assert list(root.iterdir()) == [folder] and (folder / "manifest.json").stat().st_mtime_ns == stamp


def test_a_view_is_the_matcher_of_its_own_forms(tmp_path, medlama_folder, corpora):
    """Every document's mentions in the view are those of a matcher of the knowledge base's forms alone (the
    matcher an index of its own would store), and the rows of every triple are the documents where both are
    mentioned, with at least two of its entities."""
    notes, _ = corpora
    hard = knowledge_base_from_medlama(medlama_folder, "hard")
    spec = CorpusSpec.make(notes, "mimic")
    union = [*hard.entities.values(), *EXTRA]
    open_or_build_spec_index(spec, union, tmp_path / "idx", fingerprint="v1", engine=IndexEngine())
    view = CorpusIndex(tmp_path / "idx", entities=hard)
    matcher = EntityMatcher(hard.entities.values())
    expected = {}
    for row, record in enumerate(read_mimic_notes(notes)):
        mentions = matcher.match(record["text"])
        if len({entity_id for m in mentions for entity_id in m.entity_ids}) >= 2:
            expected[row] = mentions
    assert expected
    for row in range(view.num_documents):
        if row in expected:
            assert list(view.document(row).mentions) == expected[row], row
        else:
            with pytest.raises(KeyError):
                view.document(row)
    for triple in hard:
        named = [row for row, mentions in expected.items()
                 if {triple.subject.id, triple.target.id} <= {i for m in mentions for i in m.entity_ids}]
        assert view.documents_with(triple.subject.id, triple.target.id).tolist() == named


def test_a_form_the_index_lacks_extends_it(tmp_path, medlama_folder, corpora):
    notes, _ = corpora
    hard = knowledge_base_from_medlama(medlama_folder, "hard")
    spec = CorpusSpec.make(notes, "mimic")
    folder = tmp_path / "idx"
    first = open_or_build_spec_index(spec, hard, folder, fingerprint="v1", engine=IndexEngine())
    before = {row: first.document(row) for row in range(first.num_documents) if row in first.rows_with("C102")}
    with pytest.raises(MedlamaInputError, match="did not match the form 'asthma flare' of entity 'C001'"):
        CorpusIndex(folder, entities=EXTRA)
    assert not CorpusIndex.is_current(folder, EXTRA, "v1")
    open_or_build_spec_index(spec, EXTRA, folder, fingerprint="v1", engine=IndexEngine())
    assert CorpusIndex.is_current(folder, hard, "v1") and CorpusIndex.is_current(folder, EXTRA, "v1")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["num_entities"] == len(set(hard.entities) | {"X1", "X2"})
    again = CorpusIndex(folder, entities=hard)
    assert {row: again.document(row) for row in before} == before
    assert not CorpusIndex.is_current(folder, hard, "another corpus")
