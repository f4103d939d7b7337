"""What ``medlama frequency`` reads, made in a test: a corpus of a few dozen sentences written here, its
context-variance index built by the datatrove pipeline as ``medlama build context-variance`` builds it, and a
probe output folder whose facts and hits are known (saved by :meth:`ProbeResult.save`, the probe's writer).

Every count of :data:`EXPECTED` is worked out by hand from :data:`CORPUS` in the comments beside it."""

from __future__ import annotations

from pathlib import Path

#: The knowledge base the index matched: (id, name, aliases).
ENTITIES = (
    ("D1", "asthma", ("asthmatic disease",)), ("S1", "cough", ()), ("S2", "wheeze", ("wheezing",)),
    ("D2", "diabetes", ()), ("S3", "polyuria", ()), ("S4", "chest pain", ()), ("S5", "pain", ()),
    ("D3", "migraine", ()), ("S6", "aura", ()), ("D4", "gout", ()), ("S7", "tophus", ()),
    ("D5", "malaria", ()), ("S8", "fever", ()),
)

#: One document per line (a text corpus read per line); sentences as the rule cuts them, numbered s0, s1.
CORPUS = [
    "Asthma often causes cough. Cough is worse at night.",   # 1: asthma+cough in s0 only
    "Asthma is common. Patients report cough and wheeze.",   # 2: asthma s0; cough, wheeze s1
    "In asthma, cough and wheezing are typical!",            # 3: one sentence; 'wheezing' is an alias of wheeze
    "ASTHMA: COUGH.",                                        # 4: case ignored; ':' ends no sentence
    "Diabetes presents with polyuria. Diabetes also causes thirst; polyuria again.",  # 5: both in s0 and s1
    "Migraine with aura and pain. Migraine again.",          # 6: migraine, aura, pain in s0 (counted once)
    "Chest pain is not migraine.",                           # 7: 'pain' inside 'chest pain' still matches
    "Chest pain and pain elsewhere.",                        # 8: chest pain, then a separate pain
    "Gout and diabetes.",                                    # 9: gout without tophus
    "A tophus with cough.",                                  # 10
    "Cough alone.",                                          # 11: one entity: the index does not store it
    "Asthma e.g. cough",                                     # 12: 'e.g.' ends a sentence: asthma s0, cough s1
    *["Malaria causes fever."] * 12,                         # 13-24: twelve documents of one sentence
]

#: (id, relation, subject, gold, hit@1, hit@5) of the probed facts.
FACTS = (
    ("q1", "has_symptom", "asthma", ["cough"], True, True),
    ("q2", "has_symptom", "asthma", ["wheeze"], False, True),
    ("q3", "has_symptom", "diabetes", ["polyuria"], True, True),
    ("q4", "has_symptom", "migraine", ["aura", "pain"], False, False),
    ("q5", "has_symptom", "gout", ["tophus"], False, True),
    ("q6", "has_symptom", "hay fever", ["cough"], True, True),
    ("q7", "has_symptom", "chest pain", ["pain"], True, True),
    ("q8", "has_symptom", "malaria", ["fever"], True, True),
)

#: {id: (sentence count, segment count)} by hand, names only (aliases="names"); None: not counted.
EXPECTED = {
    "q1": (3, 5),  # sentences: line 1 s0, line 3, line 4; segments: lines 1, 2, 3, 4, 12
    "q2": (0, 1),  # line 2 only, in different sentences; 'wheezing' (line 3) is not the name 'wheeze'
    "q3": (2, 1),  # line 5: both sentences
    "q4": (2, 2),  # line 6 s0 (aura and pain: once), line 7 (pain inside chest pain)
    "q5": (0, 0),  # gout never with tophus
    "q6": None,    # 'hay fever' is no form of the index
    "q7": (1, 1),  # line 7: pain overlaps chest pain (not counted); line 8: a separate pain
    "q8": (12, 12),
}
#: What changes with aliases="entity": 'wheezing' counts for wheeze (line 3, one sentence).
EXPECTED_ENTITY = {**EXPECTED, "q2": (1, 2)}


def build_index(tmp: Path) -> Path:
    """The corpus written to ``tmp/corpus.txt`` and its index built into ``tmp/index`` by the datatrove pipeline
    (what ``medlama build context-variance`` runs for a ``text`` corpus read per line)."""
    from medlama.datasets.context_variance.index.format import entity_payload
    from medlama.datasets.context_variance.index.pipeline import build_file_index
    from medlama.datasets.context_variance.knowledge import Entity
    from medlama.datasets.context_variance.settings import IndexEngine
    from medlama.loaders.corpora import corpus_files, corpus_fingerprint

    corpus = tmp / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    entities = [Entity(entity_id, name, aliases) for entity_id, name, aliases in ENTITIES]
    directory = tmp / "index"
    assert build_file_index(corpus_files([corpus], "text", per="line"), "text", {"per": "line"},
                            entity_payload(entities), directory,
                            fingerprint=corpus_fingerprint([corpus], "text", per="line"),
                            engine=IndexEngine(tasks=1, num_buckets=3))
    return directory


def probe_folder(out: Path, *, label: str = "tiny", subjects: bool = True) -> Path:
    """A probe output folder of :data:`FACTS` (acc@1 and acc@5 as their hits say; acc@10 as acc@5), written by
    the probe's writer; without ``subjects``, rows as a medlama that did not record them wrote."""
    from medlama.probers.query_set import QuerySet
    from medlama.runs.result import ProbeResult
    from medlama.runs.scores import score

    names = sorted({name for *_, gold, _, _ in FACTS for name in gold} | {"other 1", "other 2", "other 3", "other 4"})
    ids = [fact[0] for fact in FACTS]
    queries = QuerySet(ids, [fact[1] for fact in FACTS], [f"{fact[2]} has symptom [Y]." for fact in FACTS],
                       [fact[3] for fact in FACTS], names, "hard",
                       {"dataset": "medlama", "config": "hard", "relations": "all", "fingerprint": "f0"},
                       subject_names=[fact[2] for fact in FACTS] if subjects else None)
    fillers = [name for name in names if name.startswith("other")]
    predictions = []
    for _, _, _, gold, at1, at5 in FACTS:
        ranked = [gold[0]] + fillers if at1 else fillers[:2] + [gold[0]] + fillers[2:] if at5 else list(fillers)
        predictions.append(ranked)
    result = ProbeResult(label=label, query_set=queries.name, settings={"method": "test"}, ids=queries.ids,
                         relations=queries.relations, gold=queries.gold, predictions=predictions,
                         metrics=score(queries, predictions), seconds=0.0,
                         data={**queries.info, "candidates": queries.pool_record()},
                         query_fields={"subject": queries.subject_names} if subjects else {})
    return result.save(out)
