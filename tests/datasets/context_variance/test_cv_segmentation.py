"""Figures 1 and 2 of the context-variance paper (papers/context-variance-ucm.md) as acceptance tests.

The figure's knowledge triple is (nasal polyp, has symptom, discolored nasal discharge). Which context
entities are correct (O_cor, red in the figure) and which are not (O_incor, blue) is read off the paper:

* the Methods text names "shortness of breath" as a red entity and "wheeze" as a blue one;
* figure 1's rank-change table lists "postnasal drip" as the Correct Object and "sick feeling,
  heartburn" as the Incorrect Objects present in input4, and "nasal stuffiness" as the object added
  by S5; nasal stuffiness (nasal obstruction) is the cardinal symptom of nasal polyps, so it is O_cor;
* "hemoptysis", "chest tightness" and "chest pain" are not named; they are lower-airway / cardiac
  findings, not symptoms of nasal polyps, so they are O_incor. (No printed string depends on this
  choice: the negative target is "sick feeling", the first O_incor in S order, either way.)
* the ranking panel also ranks "runny nose" and "Snoring", which are in the pool (correct symptoms of
  nasal polyps) but not in the text.

Phrases of the text that are not delimiters in the printed figure ("sour taste", "regurgitation",
"orthopnea", "paroxysmal nocturnal dyspnea", "difficulty swallowing", "throat clearing", ...) are not
pool entities; "nasal polyp" is the subject.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medlama.datasets.context_variance import (
    CONTEXT_TYPES,
    Entity,
    EntityMatcher,
    EntityPool,
    KnowledgeBase,
    Mention,
    Triple,
    build_contexts,
    fill_template,
    segment_document,
)
from medlama.datasets.context_variance.segmentation import resolve_pool_mentions
from medlama.core.errors import MedlamaInputError

from cv_figures import ASSESSMENT, FIGURE_1_TEXT, FIGURE_2_NEGATIVE, FIGURE_2_REAL, FIGURE_2_TEXT

PROMPT = "nasal polyp has symptoms such as [Y]."
TARGET = "discolored nasal discharge"
CORRECT = ["shortness of breath", "postnasal drip", "nasal stuffiness", "runny nose", "snoring"]
INCORRECT = ["wheeze", "chest pain", "chest tightness", "hemoptysis", "heartburn", "sick feeling"]

# S1..S10 of the real context of figure 1: (side, text, the segment's pool entity).
REAL_SEGMENTS = [
    ("center", " in the chest or difficulty swallowing. There is no sense of smell or taste. There is discolored "
               "nasal discharge on the right and on the left. There is ", TARGET),
    ("left", ", sour taste in the mouth or regurgitation, warm sick feeling", "sick feeling"),
    ("right", "postnasal drip and throat clearing, and ", "postnasal drip"),
    ("left", ", orthopnea or paroxysmal nocturnal dyspnea. There is no heartburn", "heartburn"),
    ("right", "nasal stuffiness on the left." + ASSESSMENT, "nasal stuffiness"),
    ("left", ", hemoptysis", "hemoptysis"),
    ("left", ", chest tightness", "chest tightness"),
    ("left", ", chest pain", "chest pain"),
    ("left", ", wheeze", "wheeze"),
    ("left", "in the past week. There is no shortness of breath", "shortness of breath"),
]
# S1..S10 of the negative-target real context (centre: "sick feeling", the first O_incor in S order).
NEGATIVE_SEGMENTS = [
    ("center", ", sour taste in the mouth or regurgitation, warm sick feeling in the chest or difficulty "
               "swallowing. There is no sense of smell or taste. There is ", "sick feeling"),
    ("left", ", orthopnea or paroxysmal nocturnal dyspnea. There is no heartburn", "heartburn"),
    ("right", "discolored nasal discharge on the right and on the left. There is ", TARGET),
    ("left", ", hemoptysis", "hemoptysis"),
    ("right", "postnasal drip and throat clearing, and ", "postnasal drip"),
    ("left", ", chest tightness", "chest tightness"),
    ("right", "nasal stuffiness on the left." + ASSESSMENT, "nasal stuffiness"),
    ("left", ", chest pain", "chest pain"),
    ("left", ", wheeze", "wheeze"),
    ("left", "in the past week. There is no shortness of breath", "shortness of breath"),
]


def symptom(name: str, *aliases: str) -> Entity:
    return Entity(name, name, aliases, "symptom")


@pytest.fixture(scope="module")
def triple() -> Triple:
    target = symptom(TARGET, "discolored nasal", "nasal discharge")
    pool = [target, *(symptom(n) for n in CORRECT + INCORRECT)]
    return Triple(Entity("nasal polyp", "nasal polyp", ("nasal polyps",), "disease"), "has symptom", target,
                  tuple(symptom(n) for n in CORRECT), pool, "[X] has symptoms such as [Y].")


@pytest.fixture(scope="module")
def matcher(triple) -> EntityMatcher:
    return EntityMatcher([triple.subject, *triple.pool])


@pytest.fixture(scope="module")
def figure1(triple, matcher):
    return build_contexts(triple, FIGURE_1_TEXT, matcher.match(FIGURE_1_TEXT), seed=7)


@pytest.fixture(scope="module")
def figure2(triple, matcher):
    return build_contexts(triple, FIGURE_2_TEXT, matcher.match(FIGURE_2_TEXT), seed=7)


def unmark(printed: str) -> str:
    """The printed context without its [Sk] markers (inverse of the figure's marker spacing)."""
    text = re.sub(r"^\[S\d+\] ", "", printed)
    text = re.sub(r" \[S\d+\](?=[ ,])", "", text)
    return re.sub(r"\[S\d+\] ", "", text)


def test_figure_text_is_the_printed_context_without_markers():
    assert unmark(FIGURE_2_REAL) == FIGURE_2_TEXT
    assert unmark(FIGURE_2_NEGATIVE) == FIGURE_2_TEXT


def test_figure_entities_are_matched(triple, matcher):
    mentions = matcher.match(FIGURE_1_TEXT)
    assert [m.text for m in mentions] == [
        "shortness of breath", "wheeze", "chest pain", "chest tightness", "hemoptysis", "heartburn",
        "sick feeling", "discolored nasal discharge", "postnasal drip", "nasal stuffiness", "nasal polyp"]
    pool = resolve_pool_mentions(mentions, triple)
    assert "nasal polyp" not in [entity for _, entity in pool]  # the subject is plain text
    assert len(pool) == 10


# ---------------------------------------------------------------------------------------- figure 1
def test_figure1_segments(figure1, triple):
    real = figure1[("real", False)]
    assert [(s.side, s.text, s.entity_id) for s in real.segments] == REAL_SEGMENTS
    assert [s.number for s in real.segments] == list(range(1, 11))
    for segment in real.segments:  # each segment is the document text at its place
        assert FIGURE_1_TEXT[segment.start:segment.end] == segment.text
    # The segments tile the document.
    ordered = sorted(real.segments, key=lambda s: s.start)
    assert "".join(s.text for s in ordered) == FIGURE_1_TEXT
    assert real.render_markers() == FIGURE_2_REAL + ASSESSMENT


def test_figure1_segments_in_the_papers_words(figure1):
    s = figure1[("real", False)].segments
    # "S1 ... until the 'sick feeling' is encountered on the left ... and the 'postnasal drip' on the right"
    assert s[0].text.startswith(" in the chest") and s[0].text.endswith("There is ")
    # "S2 adds to the left text of 'sick feeling' ... until it encounters 'heartburn'"
    assert s[1].text.endswith("sick feeling") and "heartburn" not in s[1].text
    # "S3 adds to the right text of the 'postnasal drip' ... until it encounters the 'nasal stuffiness'"
    assert s[2].text.startswith("postnasal drip") and "nasal stuffiness" not in s[2].text
    # "if we can't find a new entity in one side, then we will always search the other side"
    assert [seg.side for seg in s[5:]] == ["left"] * 5


def test_figure1_inputs(figure1):
    real = figure1[("real", False)]
    inputs = real.inputs
    assert len(inputs) == 11
    assert inputs[0].text == PROMPT and inputs[0].context == "" and inputs[0].added_entity is None
    # Input1: S1 + Prompt; Input2: S2 S1 + Prompt; Input3: S2 S1 S3 + Prompt; Input4: S4 S2 S1 S3 + Prompt;
    # Input5: S4 S2 S1 S3 S5 + Prompt.
    assert [i.segments for i in inputs[1:6]] == [(1,), (2, 1), (2, 1, 3), (4, 2, 1, 3), (4, 2, 1, 3, 5)]
    assert inputs[10].segments == (10, 9, 8, 7, 6, 4, 2, 1, 3, 5)
    seg = {s.number: s for s in real.segments}
    for step in inputs[1:]:
        expected = "".join(seg[n].text for n in step.segments).strip()
        assert step.context == expected
        assert step.text == f"{expected} {PROMPT}"
        assert step.text.endswith(PROMPT) and step.text.count("[Y]") == 1
    assert inputs[1].text == (
        "in the chest or difficulty swallowing. There is no sense of smell or taste. There is discolored nasal "
        "discharge on the right and on the left. There is nasal polyp has symptoms such as [Y].")
    assert inputs[5].context == (
        ", orthopnea or paroxysmal nocturnal dyspnea. There is no heartburn, sour taste in the mouth or "
        "regurgitation, warm sick feeling in the chest or difficulty swallowing. There is no sense of smell or "
        "taste. There is discolored nasal discharge on the right and on the left. There is postnasal drip and "
        "throat clearing, and nasal stuffiness on the left." + ASSESSMENT)


def test_figure1_rank_change_table_entities(figure1, triple):
    """Figure 1's table for input5: the entities whose rank changes are compared."""
    inputs = figure1[("real", False)].inputs
    input4, input5 = inputs[4], inputs[5]
    assert input5.added_entity == "nasal stuffiness" and input5.added_is_correct and input5.added_is_new
    before = set(input4.entities)
    assert triple.target.id in before
    assert {e for e in before if triple.is_correct(e) and e != triple.target.id} == {"postnasal drip"}
    assert {e for e in before if not triple.is_correct(e)} == {"sick feeling", "heartburn"}
    assert [(i.added_entity, i.added_is_correct) for i in inputs[1:]] == [
        (TARGET, True), ("sick feeling", False), ("postnasal drip", True), ("heartburn", False),
        ("nasal stuffiness", True), ("hemoptysis", False), ("chest tightness", False), ("chest pain", False),
        ("wheeze", False), ("shortness of breath", True)]
    assert inputs[10].entities == tuple(e for _, _, e in REAL_SEGMENTS)


# ---------------------------------------------------------------------------------------- figure 2
def test_figure2_real_context_as_printed(figure2):
    assert figure2[("real", False)].render_markers() == FIGURE_2_REAL


def test_figure2_negative_target_real_context_as_printed(figure1, figure2):
    negative = figure2[("real", True)]
    assert negative.render_markers() == FIGURE_2_NEGATIVE
    assert negative.center_entity == "sick feeling" and negative.target_entity == TARGET
    assert negative.negative and negative.name == "negative-target real"
    fig1_negative = figure1[("real", True)]
    assert [(s.side, s.text, s.entity_id) for s in fig1_negative.segments] == NEGATIVE_SEGMENTS
    assert fig1_negative.render_markers() == FIGURE_2_NEGATIVE + ASSESSMENT
    # The original target is an ordinary correct object of the negative-target context.
    step = next(i for i in fig1_negative.inputs[1:] if i.added_entity == TARGET)
    assert step.index == 3 and step.added_is_correct
    assert fig1_negative.inputs[1].added_entity == "sick feeling" and not fig1_negative.inputs[1].added_is_correct


KNOWLEDGE_DOCUMENT_ORDER = ["shortness of breath", "wheeze", "chest pain", "chest tightness", "hemoptysis",
                            "heartburn", "sick feeling", TARGET, "postnasal drip", "nasal stuffiness"]


def test_figure2_knowledge_only(figure2):
    only = figure2[("knowledge-only", False)]
    real = figure2[("real", False)]
    assert [s.entity_id for s in only.segments] == [s.entity_id for s in real.segments]
    assert only.layout == real.layout == (10, 9, 8, 7, 6, 4, 2, 1, 3, 5)  # positions unchanged
    assert only.render_markers() == (
        "[S10] shortness of breath, [S9] wheeze, [S8] chest pain, [S7] chest tightness, [S6] hemoptysis, "
        "[S4] heartburn, [S2] sick feeling, [S1] discolored nasal discharge, [S3] postnasal drip, "
        "[S5] nasal stuffiness")
    assert [i.context for i in only.inputs] == [
        "",
        "discolored nasal discharge.",
        "sick feeling, discolored nasal discharge.",
        "sick feeling, discolored nasal discharge, postnasal drip.",
        "heartburn, sick feeling, discolored nasal discharge, postnasal drip.",
        "heartburn, sick feeling, discolored nasal discharge, postnasal drip, nasal stuffiness.",
        "hemoptysis, heartburn, sick feeling, discolored nasal discharge, postnasal drip, nasal stuffiness.",
        "chest tightness, hemoptysis, heartburn, sick feeling, discolored nasal discharge, postnasal drip, "
        "nasal stuffiness.",
        "chest pain, chest tightness, hemoptysis, heartburn, sick feeling, discolored nasal discharge, "
        "postnasal drip, nasal stuffiness.",
        "wheeze, chest pain, chest tightness, hemoptysis, heartburn, sick feeling, discolored nasal discharge, "
        "postnasal drip, nasal stuffiness.",
        ", ".join(KNOWLEDGE_DOCUMENT_ORDER) + ".",
    ]
    assert only.inputs[4].text == "heartburn, sick feeling, discolored nasal discharge, postnasal drip. " + PROMPT
    assert [i.added_entity for i in only.inputs] == [i.added_entity for i in real.inputs]


def test_figure2_knowledge_sorted(figure2):
    ordered = [TARGET, "sick feeling", "postnasal drip", "heartburn", "nasal stuffiness", "hemoptysis",
               "chest tightness", "chest pain", "wheeze", "shortness of breath"]
    sorted_ = figure2[("knowledge-sorted", False)]
    assert sorted_.layout == tuple(range(1, 11))
    for k, step in enumerate(sorted_.inputs):
        assert step.segments == tuple(range(1, k + 1))
        assert step.context == (", ".join(ordered[:k]) + "." if k else "")
        assert step.text == (f"{step.context} {PROMPT}" if k else PROMPT)
    assert sorted_.render_markers() == ", ".join(f"[S{k}] {e}" for k, e in enumerate(ordered, 1))


def test_figure2_negative_knowledge_contexts(figure2):
    only = figure2[("knowledge-only", True)]
    assert only.render_markers() == (
        "[S10] shortness of breath, [S9] wheeze, [S8] chest pain, [S6] chest tightness, [S4] hemoptysis, "
        "[S2] heartburn, [S1] sick feeling, [S3] discolored nasal discharge, [S5] postnasal drip, "
        "[S7] nasal stuffiness")
    sorted_ = figure2[("knowledge-sorted", True)]
    assert sorted_.inputs[-1].context == (
        "sick feeling, heartburn, discolored nasal discharge, hemoptysis, postnasal drip, chest tightness, "
        "nasal stuffiness, chest pain, wheeze, shortness of breath.")
    assert only.center_entity == sorted_.center_entity == "sick feeling"


def _check_centre_out(sequence):
    """S1 is the centre; S2, S3, ... alternate left/right outward in the layout, one side once the other ends."""
    layout = list(sequence.layout)
    centre = layout.index(1)
    expected = [1]
    left, right = centre - 1, centre + 1
    while left >= 0 or right < len(layout):
        if left >= 0:
            expected.append(layout[left])
            left -= 1
        if right < len(layout):
            expected.append(layout[right])
            right += 1
    assert expected == list(range(1, len(layout) + 1))


def test_figure2_knowledge_random_is_seeded(triple, figure2, matcher):
    random_ = figure2[("knowledge-random", False)]
    real = figure2[("real", False)]
    assert random_.segments[0].entity_id == TARGET  # "we keep S1 in the first"
    assert sorted(s.entity_id for s in random_.segments) == sorted(s.entity_id for s in real.segments)
    assert sorted(random_.layout) == list(range(1, 11))
    _check_centre_out(random_)  # "rename S1 to S10 with O_t as the center"
    final = random_.inputs[-1]
    for step in random_.inputs[1:]:  # each input: the first k segments, each at its place
        assert sorted(step.segments) == list(range(1, step.index + 1))
        assert [n for n in final.segments if n <= step.index] == list(step.segments)
        assert step.context == ", ".join(random_.segments[n - 1].knowledge_text for n in step.segments) + "."
    mentions = matcher.match(FIGURE_2_TEXT)
    again = build_contexts(triple, FIGURE_2_TEXT, mentions, seed=7)[("knowledge-random", False)]
    assert again.layout == random_.layout and again.inputs == random_.inputs
    layouts = {build_contexts(triple, FIGURE_2_TEXT, mentions, seed=s)[("knowledge-random", False)].layout
               for s in range(6)}
    assert len(layouts) > 1
    orders = {tuple(s.entity_id for s in build_contexts(triple, FIGURE_2_TEXT, mentions, seed=s)
                    [("knowledge-random", False)].segments) for s in range(6)}
    assert len(orders) > 1


def test_figure2_negative_knowledge_random(figure2, triple):
    random_ = figure2[("knowledge-random", False)]
    negative = figure2[("knowledge-random", True)]
    first_incorrect = next(s for s in random_.segments if not triple.is_correct(s.entity_id))
    assert negative.center_entity == first_incorrect.entity_id
    # The same shuffled layout, renumbered around the negative target.
    assert [negative.segments[k - 1].entity_id for k in negative.layout] == \
           [random_.segments[k - 1].entity_id for k in random_.layout]
    _check_centre_out(negative)


def test_knowledge_random_insert_mode(triple, matcher):
    contexts = build_contexts(triple, FIGURE_2_TEXT, matcher.match(FIGURE_2_TEXT), seed=3, random_mode="insert")
    random_ = contexts[("knowledge-random", False)]
    assert random_.segments[0].entity_id == TARGET
    final = random_.inputs[-1].segments
    for step in random_.inputs[1:]:  # inserted segments never move the ones already there
        assert [n for n in final if n <= step.index] == list(step.segments)
    negative = contexts[("knowledge-random", True)]
    assert not triple.is_correct(negative.center_entity)


def test_every_context_type_and_its_negative(figure1):
    assert set(figure1) == {(t, n) for t in CONTEXT_TYPES for n in (False, True)}
    for sequence in figure1.values():
        assert sequence.inputs[0].text == PROMPT
        assert [i.index for i in sequence.inputs] == list(range(len(sequence.segments) + 1))
        for step in sequence.inputs[1:]:
            assert step.added_segment == step.index
            assert step.added_entity == sequence.segments[step.index - 1].entity_id
            assert step.to_dict()["segments"] == list(step.segments)
        record = json.loads(json.dumps(sequence.to_dict()))
        assert record["inputs"][-1]["text"] == sequence.inputs[-1].text
        assert [s["entity_id"] for s in record["segments"]] == [s.entity_id for s in sequence.segments]


# ------------------------------------------------------------------------------------- edge cases
def test_no_incorrect_object_means_no_negative_context(triple, matcher):
    text = "There is discolored nasal discharge and postnasal drip in nasal polyp."
    contexts = build_contexts(triple, text, matcher.match(text))
    assert set(contexts) == {(t, False) for t in CONTEXT_TYPES}
    real = contexts[("real", False)]
    assert [s.text for s in real.segments] == ["There is discolored nasal discharge and ",
                                               "postnasal drip in nasal polyp."]


def test_target_missing_and_bad_prompt(triple, matcher):
    text = "Only wheeze and nasal polyp here."
    with pytest.raises(ValueError, match="does not mention the target"):
        build_contexts(triple, text, matcher.match(text))
    text = "nasal discharge, wheeze"
    with pytest.raises(MedlamaInputError, match="exactly one"):
        build_contexts(triple, text, matcher.match(text), prompt="no slot here")
    with pytest.raises(MedlamaInputError, match="unknown context type"):
        build_contexts(triple, text, matcher.match(text), context_types=["fancy"])


def test_repeated_entity_is_its_own_segment(triple, matcher):
    text = "Wheeze. Nasal discharge noted. wheeze again."
    real = build_contexts(triple, text, matcher.match(text))[("real", False)]
    assert [s.entity_id for s in real.segments] == [TARGET, "wheeze", "wheeze"]
    assert [i.added_is_new for i in real.inputs[1:]] == [True, True, False]
    assert real.inputs[-1].entities == (TARGET, "wheeze")
    assert real.segments[0].mention.text == "Nasal discharge"  # an alias, case-insensitive


def test_max_segments(triple, matcher):
    contexts = build_contexts(triple, FIGURE_1_TEXT, matcher.match(FIGURE_1_TEXT), max_segments=4)
    assert [s.entity_id for s in contexts[("real", False)].segments] == [e for _, _, e in REAL_SEGMENTS[:4]]
    assert len(contexts[("real", True)].segments) == 4
    assert len(contexts[("knowledge-random", False)].inputs) == 5


def test_ambiguous_mention_prefers_target_then_correct(triple):
    text = "xx nasal discharge yy"
    mention = Mention(3, 18, ("other", TARGET), "nasal discharge")
    assert resolve_pool_mentions([mention], triple) == [(mention, TARGET)]
    both = Mention(0, 2, ("heartburn", "postnasal drip"), "xx")
    assert resolve_pool_mentions([both], triple) == [(both, "postnasal drip")]
    assert build_contexts(triple, text, [mention])[("real", False)].segments[0].text == text


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3)), min_size=1, max_size=12), st.data())
def test_segments_tile_the_document_with_one_pool_entity_each(layout, data):
    """Property: for any pool mentions and centre, segments tile the text, hold one pool mention each,
    and are numbered outward, left first, one side continuing once the other is exhausted."""
    text, pool = "", []
    for gap, width in layout:
        text += "." * gap
        pool.append((Mention(len(text), len(text) + width, (f"e{len(pool)}",), "x" * width), f"e{len(pool)}"))
        text += "x" * width
    text += "." * data.draw(st.integers(0, 3))
    centre = data.draw(st.integers(0, len(pool) - 1))
    segmentation = segment_document(text, pool, centre)
    segments = segmentation.segments
    assert len(segments) == len(pool)
    ordered = sorted(segments, key=lambda s: s.start)
    assert "".join(s.text for s in ordered) == text
    assert ordered[0].start == 0 and ordered[-1].end == len(text)
    for segment in segments:
        inside = [m for m, _ in pool if segment.start <= m.start and m.end <= segment.end]
        assert inside == [segment.mention]
    assert segments[0].mention == pool[centre][0]
    sides = [s.side for s in segments[1:]]
    n_left, n_right = centre, len(pool) - centre - 1
    expected = []
    while n_left or n_right:
        if n_left:
            expected.append("left")
            n_left -= 1
        if n_right:
            expected.append("right")
            n_right -= 1
    assert sides == expected


# ------------------------------------------------------------------------------------- knowledge
def test_triple_correct_objects_pool_and_prompt(triple):
    assert triple.is_correct(TARGET) and triple.in_pool(TARGET)
    assert triple.incorrect_ids == frozenset(INCORRECT)
    assert triple.correct_ids == frozenset([TARGET, *CORRECT])
    assert triple.prompt() == PROMPT and triple.prompt(mask="[MASK]") == "nasal polyp has symptoms such as [MASK]."
    assert not triple.in_pool("nasal polyp")
    assert len(triple.candidates()) == 12


def test_subject_is_never_a_candidate_and_pools_are_shared():
    asthma, copd, cough = (Entity(i, i, (), "disease") for i in ("asthma", "copd", "bronchitis"))
    diseases = EntityPool([asthma, copd, cough], type="disease")
    first = Triple(asthma, "may have associated disease", copd, (asthma, copd), diseases)
    second = Triple(copd, "may have associated disease", cough, (), diseases)
    assert first.pool is second.pool is diseases  # not copied per triple
    assert not first.in_pool("asthma") and first.correct_ids == frozenset(["copd"])
    assert first.incorrect_ids == frozenset(["bronchitis"])
    extra = Triple(asthma, "r", Entity("wheeze", "wheeze"), (), diseases)
    assert extra.in_pool("wheeze") and [e.id for e in extra.candidates()] == ["copd", "bronchitis", "wheeze"]
    with pytest.raises(MedlamaInputError, match="itself as target"):
        Triple(asthma, "r", asthma, (), diseases)


def test_entities_and_templates_are_validated():
    with pytest.raises(MedlamaInputError, match="non-empty name"):
        Entity("C1", "  ")
    assert Entity("C1", "Cough", ("cough", " tussis ", "")).surface_forms == ("Cough", "tussis")
    assert Entity("C1", "cough", "tussis").aliases == ("tussis",)
    with pytest.raises(MedlamaInputError, match=r"exactly one \[Y\]"):
        fill_template("[X] has no slot", "asthma")
    assert fill_template("[X] may cause [Y].", "asthma", mask="<mask>") == "asthma may cause <mask>."


def test_knowledge_base_merges_entities_by_id():
    pool = [Entity("C2", "wheeze", ("wheezing",), "symptom")]
    a = Triple(Entity("C1", "asthma", (), "disease"), "r", pool[0], (), pool)
    b = Triple(Entity("C1", "Asthma", ("asthmatic",), "disease"), "r", Entity("C2", "wheeze", ("sibilant",)), (), pool)
    kb = KnowledgeBase([a, b])
    assert len(kb) == 2 and set(kb.entities) == {"C1", "C2"}
    assert kb.entities["C1"].surface_forms == ("asthma", "asthmatic")  # "Asthma" is the same form
    assert set(kb.entities["C2"].aliases) == {"wheezing", "sibilant"}
    with pytest.raises(MedlamaInputError, match="two types"):
        KnowledgeBase([a, Triple(Entity("C1", "asthma", (), "drug"), "r", pool[0], (), pool)])


def test_a_long_document_builds_its_contexts_step_by_step(triple, matcher):
    """One long document (figure 1's text 1,500 times over: 1,500 target mentions, ~16,000 pool mentions) builds
    every context; each input is made when asked for, from the context it belongs to, and is what the short
    document's own inputs are where the two overlap. Holding every step's text at once would take memory in
    the square of the mentions (gigabytes here); `benchmarks/bench_long_document.py` measures time and memory."""
    text = " ".join([FIGURE_1_TEXT] * 1500)
    mentions = matcher.match(text)
    contexts = build_contexts(triple, text, mentions, seed=7)
    real = contexts[("real", False)]
    assert len(real.inputs) == len(real.segments) + 1 > 15_000
    assert real.inputs[-1].context == text.strip() and real.inputs[-1].text == f"{text.strip()} {PROMPT}"
    short = build_contexts(triple, FIGURE_1_TEXT, matcher.match(FIGURE_1_TEXT), seed=7)[("real", False)]
    assert real.inputs[1].text == short.inputs[1].text and real.inputs[1].entities == short.inputs[1].entities
    knowledge = contexts[("knowledge-random", False)]
    assert sorted(knowledge.layout) == list(range(1, len(knowledge.segments) + 1))
    assert [step.added_entity for step in knowledge.inputs[1:]] == [s.entity_id for s in knowledge.segments]
    assert set(knowledge.inputs[-1].entities) == {s.entity_id for s in knowledge.segments}
