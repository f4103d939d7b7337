"""The context types of the paper built from a document's segments (:mod:`.segmentation`), with their
incremental inputs and negative-target counterparts.

Context types (Methods, "Real Context Prompt", "Synthetic Context Prompt"; figure 2)
-------------------------------------------------------------------------------------
Each context type is a :class:`ContextSequence`: the segments in the order they are added (S1, S2,
...), a layout (where each segment sits), and the inputs ``input0 .. inputN``. ``input0`` is the
prompt alone; ``input_k`` is the first ``k`` segments, each at its place in the layout, followed by
the prompt (context, one space, prompt; the prompt keeps its ``[Y]`` slot).

* ``real``: the segments' text at their document positions. Because segments are added outward
  from the centre, every real input is a contiguous span of the document.
* ``knowledge-only``: each segment reduced to its pool mention ("remove those non-knowledge texts in
  each segment"), positions unchanged (document order); mentions are joined with ``", "`` and the
  list ends with ``"."`` so that it does not run into the prompt (the paper leaves the joining open).
* ``knowledge-sorted``: the knowledge-only segments in ascending order S1 S2 S3 ... + prompt.
* ``knowledge-random``: following figure 2's caption, the knowledge-only segments are shuffled into a
  random layout (seeded) and renamed S1..Sn "with O_t as the center": S1 is ``O_t``'s segment, and the
  numbering alternates left/right from it in the shuffled layout exactly as :mod:`.segmentation` numbers
  a document's segments. S1 is added first, and both the order in which the other segments are added
  and their positions are random, as the Methods text asks. (The Methods wording "add it to any
  position" also admits inserting each next segment at a uniformly random position among the present
  ones: ``random_mode="insert"``.)

Negative-target contexts (Methods, "Negative-target Context")
--------------------------------------------------------------
For each context, the negative target is the first ``O_incor`` found when reading its segments in the
order S1, S2, S3, ...; the context is rebuilt with that mention as the centre (``O_t`` becomes an
ordinary correct object). For ``real``, ``knowledge-only`` and ``knowledge-sorted`` the S order is the
same, so all three come from one re-segmentation of the document around the negative target
(figure 2, "Negative-target Real context"); for ``knowledge-random`` the first ``O_incor`` of the
random S order is the new centre of the same shuffled layout. A context with no ``O_incor`` has no
negative-target counterpart.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from medlama.datasets.context_variance.knowledge import Triple
from medlama.datasets.context_variance.matching import Mention
from medlama.datasets.context_variance.segmentation import (Segment, outward, render_segments,
                                                             resolve_pool_mentions, segment_document)
from medlama.core.defaults import MASK_PLACEHOLDER
from medlama.core.errors import MedlamaInputError

REAL = "real"
KNOWLEDGE_ONLY = "knowledge-only"
KNOWLEDGE_SORTED = "knowledge-sorted"
KNOWLEDGE_RANDOM = "knowledge-random"
#: The context types of figure 2, in the paper's order.
CONTEXT_TYPES = (REAL, KNOWLEDGE_ONLY, KNOWLEDGE_SORTED, KNOWLEDGE_RANDOM)


class ContextInput:
    """``input_k`` of a context: the first ``k`` segments at their places, then the prompt.

    ``segments`` lists the S numbers of the context in the order they appear in the text. For
    ``k > 0`` the added segment is ``S_k``, its entity ``O_a`` is ``added_entity``; ``added_is_correct``
    says whether ``O_a`` is in ``O_cor`` and ``added_is_new`` whether it was absent from input_{k-1}.
    ``entities`` are the pool entities present so far, in the order they were added.

    The text, context, segments and entities of a step are made when asked for, from the context they
    belong to: held for every step at once they would take memory in the square of the document's
    mentions (gigabytes for one long document), where the rows need only what each step added.
    """

    __slots__ = ("index", "added_entity", "added_text", "added_is_correct", "added_is_new", "_steps")

    def __init__(self, index: int, steps: "_Steps", added_entity: str | None = None, added_text: str | None = None,
                 added_is_correct: bool | None = None, added_is_new: bool | None = None) -> None:
        self.index, self._steps = index, steps
        self.added_entity, self.added_text = added_entity, added_text
        self.added_is_correct, self.added_is_new = added_is_correct, added_is_new

    @property
    def prompt(self) -> str:
        return self._steps.style.prompt

    @property
    def added_segment(self) -> int | None:
        return self.index or None

    @property
    def segments(self) -> tuple[int, ...]:
        position = self._steps.position
        return tuple(sorted(range(1, self.index + 1), key=position.__getitem__))

    @property
    def context(self) -> str:
        if not self.index:
            return ""
        steps, shown = self._steps, self.segments
        if steps.context_type == REAL:
            return _join_real([steps.order[n - 1] for n in shown])
        return steps.style.separator.join(steps.order[n - 1].knowledge_text for n in shown) + steps.style.knowledge_end

    @property
    def text(self) -> str:
        context = self.context
        return f"{context} {self.prompt}" if context else self.prompt

    @property
    def entities(self) -> tuple[str, ...]:
        return tuple(self._steps.present[:self._steps.present_count[self.index]])

    def to_dict(self) -> dict:
        return {
            "index": self.index, "text": self.text, "context": self.context, "prompt": self.prompt,
            "segments": list(self.segments), "added_segment": self.added_segment,
            "added_entity": self.added_entity, "added_text": self.added_text,
            "added_is_correct": self.added_is_correct, "added_is_new": self.added_is_new,
            "entities": list(self.entities),
        }

    def __repr__(self) -> str:
        return f"ContextInput(index={self.index}, added_entity={self.added_entity!r}, text={self.text!r})"

    def __eq__(self, other: object) -> bool:  # equal when every field is, as the dataclass it stands for
        return isinstance(other, ContextInput) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((self.index, self.added_entity, self.text))


@dataclass(frozen=True)
class _Steps:
    """What every input of one context is made from: the segments in the order added, their places, and the
    pool entities present after each step (``present[:present_count[k]]``)."""

    context_type: str
    order: tuple[Segment, ...]
    position: dict[int, int]
    style: "_Style"
    present: list[str]
    present_count: list[int]


@dataclass(frozen=True)
class ContextSequence:
    """One context type (possibly negative-target) of one document, with its inputs.

    ``segments[k - 1]`` is ``S_k`` of this context: the real segment it comes from (``number`` is the
    number it had in that real segmentation, which differs for ``knowledge-random``). ``layout`` is the
    S numbers of the full context in text order.
    """

    context_type: str
    negative: bool
    target_entity: str
    center_entity: str
    prompt: str
    segments: tuple[Segment, ...]
    layout: tuple[int, ...]
    inputs: tuple[ContextInput, ...]
    separator: str = field(default=", ", repr=False)
    knowledge_end: str = field(default=".", repr=False)

    @property
    def name(self) -> str:
        return f"negative-target {self.context_type}" if self.negative else self.context_type

    def to_dict(self) -> dict:
        """Plain data (JSON-ready): the context, its segments in S order and its inputs."""
        return {
            "context_type": self.context_type, "negative": self.negative, "target_entity": self.target_entity,
            "center_entity": self.center_entity, "prompt": self.prompt, "layout": list(self.layout),
            "segments": [{"number": k, "real_number": s.number, "side": s.side, "start": s.start, "end": s.end,
                          "text": s.text, "entity_id": s.entity_id, "entity_text": s.mention.text}
                         for k, s in enumerate(self.segments, 1)],
            "inputs": [step.to_dict() for step in self.inputs],
        }

    def render_markers(self) -> str:
        """The full context with ``[Sk]`` markers (real contexts as the paper prints them)."""
        if self.context_type == REAL:
            return render_segments([(k, self.segments[k - 1].text) for k in self.layout])
        return self.separator.join(f"[S{k}] {self.segments[k - 1].knowledge_text}" for k in self.layout)


def build_contexts(triple: Triple, text: str, mentions: Sequence[Mention], *, prompt: str | None = None,
                   context_types: Collection[str] = CONTEXT_TYPES, negative: bool = True,
                   seed: int | str = 0, random_mode: str = "shuffle", separator: str = ", ",
                   knowledge_end: str = ".", max_segments: int | None = None, mask: str = MASK_PLACEHOLDER
                   ) -> dict[tuple[str, bool], ContextSequence]:
    """Every requested context type of one document, keyed ``(context_type, negative)``.

    ``mentions`` are the document's matched mentions (:class:`~.matching.EntityMatcher`, or an index's
    stored ones). ``prompt`` is the filled prompt with exactly one ``mask`` slot (default: the triple's
    template, filled). ``seed`` (an int or a string such as ``f"{seed}:{doc_id}"``) drives the
    knowledge-random layout; ``random_mode`` is ``"shuffle"`` (figure 2's caption, default) or
    ``"insert"``. Knowledge contexts join mentions with ``separator`` and end with ``knowledge_end``.
    ``max_segments`` keeps S1..S_max of each context. Negative-target contexts are included when
    ``negative`` and the context holds an ``O_incor``.

    Raises ``ValueError`` when the document has no mention of the target.
    """
    unknown = set(context_types) - set(CONTEXT_TYPES)
    if unknown:
        raise MedlamaInputError(f"unknown context type(s) {sorted(unknown)}; choose from {list(CONTEXT_TYPES)}",
                                field="context_types")
    if random_mode not in ("shuffle", "insert"):
        raise MedlamaInputError(f"random_mode must be 'shuffle' or 'insert', not {random_mode!r}",
                                field="random_mode")
    prompt = triple.prompt(mask=mask) if prompt is None else prompt
    if prompt.count(mask) != 1:
        raise MedlamaInputError(f"the prompt needs exactly one {mask}: {prompt!r}", field="prompt")
    style = _Style(triple, prompt, separator, knowledge_end)

    pool_mentions = resolve_pool_mentions(mentions, triple)
    centers = [i for i, (_, entity_id) in enumerate(pool_mentions) if entity_id == triple.target.id]
    if not centers:
        raise ValueError(f"the document does not mention the target {triple.target.id!r}")
    real = segment_document(text, pool_mentions, centers[0], mentions=mentions, max_segments=max_segments)

    negative_real = None
    if negative:
        first_incorrect = _first_incorrect(real.segments, triple)
        if first_incorrect is not None:
            index = next(i for i, (m, _) in enumerate(pool_mentions) if m == first_incorrect.mention)
            negative_real = segment_document(text, pool_mentions, index, mentions=mentions,
                                             max_segments=max_segments)

    out: dict[tuple[str, bool], ContextSequence] = {}
    for context_type in CONTEXT_TYPES:
        if context_type not in context_types:
            continue
        if context_type == KNOWLEDGE_RANDOM:
            rng = random.Random(seed)
            sequence = _random(real.segments, style, rng, random_mode, negative=False)
            out[(context_type, False)] = sequence
            if negative:
                counterpart = _random_negative(sequence, style, random_mode, seed)
                if counterpart is not None:
                    out[(context_type, True)] = counterpart
            continue
        for is_negative, segmentation in ((False, real), (True, negative_real)):
            if segmentation is None:
                continue
            segments = segmentation.segments
            if context_type == KNOWLEDGE_SORTED:
                layout = tuple(segment.number for segment in segments)
            else:  # real and knowledge-only: document order
                layout = tuple(segment.number for segment in sorted(segments, key=lambda s: s.start))
            out[(context_type, is_negative)] = _sequence(context_type, is_negative, segments, layout, style)
    return out


@dataclass(frozen=True)
class _Style:
    triple: Triple
    prompt: str
    separator: str
    knowledge_end: str


def _first_incorrect(segments: Sequence[Segment], triple: Triple) -> Segment | None:
    """The negative target: the first ``O_incor`` reading the segments as S1, S2, S3, ..."""
    return next((segment for segment in segments if not triple.is_correct(segment.entity_id)), None)


def _random(segments: Sequence[Segment], style: _Style, rng: random.Random, mode: str, *,
            negative: bool) -> ContextSequence:
    """Knowledge-random from S1..Sn of a real segmentation (``segments[0]`` is the centre's segment)."""
    if mode == "shuffle":
        arrangement = list(segments)
        rng.shuffle(arrangement)
        return _recentred(arrangement, arrangement.index(segments[0]), style, negative)
    # "insert": S1 first, then the other segments in random order, each at a random position.
    rest = list(segments[1:])
    rng.shuffle(rest)
    order = [segments[0], *rest]
    arrangement: list[Segment] = []
    for segment in order:
        arrangement.insert(rng.randint(0, len(arrangement)), segment)
    layout = _places(order, arrangement)
    return _sequence(KNOWLEDGE_RANDOM, negative, order, layout, style)


def _places(order: Sequence[Segment], arrangement: Sequence[Segment]) -> tuple[int, ...]:
    """The S number (1-based place in ``order``) of each segment of ``arrangement``, by identity: a search of
    ``order`` for each would be quadratic in a long document's segments."""
    number = {id(segment): k for k, segment in enumerate(order, 1)}
    return tuple(number[id(segment)] for segment in arrangement)


def _recentred(arrangement: Sequence[Segment], center: int, style: _Style, negative: bool) -> ContextSequence:
    """Number the segments of a layout outward from ``arrangement[center]`` (S1), left first."""
    order = [arrangement[center], *(arrangement[i] for _, i in outward(center, len(arrangement)))]
    layout = _places(order, arrangement)
    return _sequence(KNOWLEDGE_RANDOM, negative, order, layout, style)


def _random_negative(sequence: ContextSequence, style: _Style, mode: str, seed: int | str
                     ) -> ContextSequence | None:
    first_incorrect = _first_incorrect(sequence.segments, style.triple)
    if first_incorrect is None:
        return None
    if mode == "shuffle":  # the same shuffled layout, centred on the negative target
        arrangement = [sequence.segments[k - 1] for k in sequence.layout]
        return _recentred(arrangement, arrangement.index(first_incorrect), style, True)
    # "insert": the negative target first, then the same random procedure on the rest.
    rest = [segment for segment in sequence.segments if segment is not first_incorrect]
    return _random([first_incorrect, *rest], style, random.Random(f"{seed}:negative"), mode, negative=True)


def _sequence(context_type: str, negative: bool, order: Sequence[Segment], layout: Sequence[int],
              style: _Style) -> ContextSequence:
    """Inputs 0..n of a context whose k-th added segment is ``order[k-1]``, placed as ``layout`` says."""
    triple, prompt = style.triple, style.prompt
    steps = _Steps(context_type, tuple(order), {number: place for place, number in enumerate(layout)}, style, [], [0])
    inputs = [ContextInput(0, steps)]
    seen: set[str] = set()
    for k in range(1, len(order) + 1):
        added = order[k - 1]
        is_new = added.entity_id not in seen
        if is_new:
            seen.add(added.entity_id)
            steps.present.append(added.entity_id)
        steps.present_count.append(len(steps.present))
        inputs.append(ContextInput(k, steps, added.entity_id, added.mention.text,
                                   triple.is_correct(added.entity_id), is_new))
    return ContextSequence(context_type, negative, triple.target.id, order[0].entity_id, prompt, tuple(order),
                           tuple(layout), tuple(inputs), style.separator, style.knowledge_end)


def _join_real(segments: Sequence[Segment]) -> str:
    """Real segments in text order: contiguous ones joined as in the document, others by a space."""
    parts: list[str] = []
    for before, segment in zip([None, *segments], segments):
        if before is not None and before.end != segment.start:
            parts.append(" ")
        parts.append(segment.text)
    return "".join(parts).strip()
