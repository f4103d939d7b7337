"""Segments around the centre object: the paper's segmentation rule (the context types built from the segments
are :mod:`.contexts`).

Segmentation (Methods, "Context Segmentation and Retrieval", step 3; figure 1)
-------------------------------------------------------------------------------
The pool mentions of a document (mentions of ``O_pool`` entities, ``O_t`` included) are the
delimiters. With the centre mention ``c`` (a mention of ``O_t``) and the pool mentions ``L1, L2, ...``
to its left (nearest first) and ``R1, R2, ...`` to its right:

* ``S1`` runs from the end of ``L1`` to the start of ``R1`` (document start / end when there is none);
  it holds the centre mention and no other pool mention;
* the segment of a left mention ``Li`` runs from the end of ``L(i+1)`` (or the document start) to the
  end of ``Li``: it is ``Li`` plus the text to its left, up to the next pool mention;
* the segment of a right mention ``Ri`` runs from the start of ``Ri`` to the start of ``R(i+1)`` (or
  the document end): ``Ri`` plus the text to its right, up to the next pool mention;
* numbering alternates, left first: ``S2 = L1, S3 = R1, S4 = L2, S5 = R2, ...``; once one side is
  exhausted the other side continues alone.

So the segments tile the document, every segment holds exactly one pool mention, and the text
between two pool mentions belongs to the segment of the mention nearer to the centre. This is the
reading that puts the ``[Sk]`` markers exactly where figures 1 and 2 print them: a marker is printed at
the *start* of its segment, hence right after a left entity ("warm sick feeling [S1] in the chest")
and right before a right entity ("There is [S3] postnasal drip"). :meth:`Segmentation.render_markers`
reproduces the printed strings exactly (tests/datasets/context_variance/test_cv_segmentation.py).

Every mention is a delimiter, including a repeated mention of an entity that already has a segment
(the paper is silent; :attr:`.contexts.ContextInput.added_is_new` tells the scorer). Mentions that are not in
the pool (the subject, entities of other types) are plain text. The centre of the real context is
the first mention of ``O_t`` in the document.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from medlama.datasets.context_variance.knowledge import Triple
from medlama.datasets.context_variance.matching import Mention

CENTER, LEFT, RIGHT = "center", "left", "right"
_NO_SPACE_BEFORE = set(",.;:!?)]}%")


@dataclass(frozen=True)
class Segment:
    """``S_k`` of a real segmentation: ``text == document[start:end]`` holding one pool mention."""

    number: int
    side: str
    start: int
    end: int
    text: str
    mention: Mention
    entity_id: str
    mentions: tuple[Mention, ...] = ()

    @property
    def knowledge_text(self) -> str:
        """The segment reduced to its knowledge: the pool mention's text as the document writes it."""
        return self.mention.text


@dataclass(frozen=True)
class Segmentation:
    """A document cut into S1..Sn around one centre mention (:func:`segment_document`)."""

    text: str
    center: Mention
    segments: tuple[Segment, ...]

    def render_markers(self) -> str:
        """The document with ``[Sk]`` at the start of every segment, spaced as the paper prints it."""
        ordered = sorted(self.segments, key=lambda s: s.start)
        return render_segments([(s.number, s.text) for s in ordered])


def render_segments(pieces: Sequence[tuple[int, str]]) -> str:
    """``pieces`` (S number, text) as the paper prints them, ``[Sk]`` before each piece: a space before it
    unless at the start or after a space, a space after it unless the piece starts with a space or with
    closing punctuation (``"breath [S9], wheeze"``)."""
    out: list[str] = []
    last = ""  # the last character written so far
    for number, body in pieces:
        marker = f"[S{number}]"
        if last and not last.isspace():
            marker = " " + marker
        if body and not body[0].isspace() and body[0] not in _NO_SPACE_BEFORE:
            marker += " "
        out.append(marker + body)
        last = body[-1] if body else marker[-1]
    return "".join(out)


def resolve_pool_mentions(mentions: Iterable[Mention], triple: Triple) -> list[tuple[Mention, str]]:
    """The mentions of pool entities, each with the entity it stands for, in text order.

    A mention whose surface form belongs to several entities stands for the target when the target is
    one of them, else for a correct object, else for the first pool entity (ids sorted).
    """
    resolved = []
    for mention in mentions:
        ids = [entity_id for entity_id in mention.entity_ids if triple.in_pool(entity_id)]
        if not ids:
            continue
        if triple.target.id in ids:
            entity_id = triple.target.id
        else:
            correct = sorted(entity_id for entity_id in ids if triple.is_correct(entity_id))
            entity_id = correct[0] if correct else sorted(ids)[0]
        resolved.append((mention, entity_id))
    resolved.sort(key=lambda pair: (pair[0].start, pair[0].end))
    return resolved


def segment_document(text: str, pool_mentions: Sequence[tuple[Mention, str]], center: int, *,
                     mentions: Sequence[Mention] = (), max_segments: int | None = None) -> Segmentation:
    """Cut ``text`` into S1..Sn around ``pool_mentions[center]`` (see the module docstring).

    ``pool_mentions`` are the pool mentions in text order with their entity ids
    (:func:`resolve_pool_mentions`); ``mentions`` (optional, every matched mention) are attached to the
    segments that contain them. ``max_segments`` keeps S1..S_max only.
    """
    count = len(pool_mentions)
    if not 0 <= center < count:
        raise ValueError(f"centre index {center} out of range for {count} pool mentions")
    for (before, _), (after, _) in zip(pool_mentions, pool_mentions[1:]):
        if after.start < before.end:
            raise ValueError(f"pool mentions overlap or are out of order: {before} and {after}")
    length = len(text)
    # The mentions inside a segment, found by bisection on their starts (a scan of every mention for every
    # segment is quadratic: hours for a document of a hundred thousand mentions), in the order given.
    by_start = sorted(range(len(mentions)), key=lambda i: mentions[i].start)
    starts = [mentions[i].start for i in by_start]

    def piece(number: int, side: str, start: int, end: int, index: int) -> Segment:
        mention, entity_id = pool_mentions[index]
        found = by_start[bisect.bisect_left(starts, start):bisect.bisect_left(starts, end)]
        inside = tuple(mentions[i] for i in sorted(found) if mentions[i].end <= end)
        return Segment(number, side, start, end, text[start:end], mention, entity_id, inside)

    left_end = pool_mentions[center - 1][0].end if center > 0 else 0
    right_start = pool_mentions[center + 1][0].start if center + 1 < count else length
    segments = [piece(1, CENTER, left_end, right_start, center)]
    for side, index in outward(center, count):
        number = len(segments) + 1
        if max_segments is not None and number > max_segments:
            break
        mention = pool_mentions[index][0]
        if side == LEFT:
            start = pool_mentions[index - 1][0].end if index > 0 else 0
            segments.append(piece(number, LEFT, start, mention.end, index))
        else:
            end = pool_mentions[index + 1][0].start if index + 1 < count else length
            segments.append(piece(number, RIGHT, mention.start, end, index))
    return Segmentation(text, pool_mentions[center][0], tuple(segments))


def outward(center: int, count: int) -> list[tuple[str, int]]:
    """Pool mention positions around ``center`` in segment order: left, right, left, ...; one side when the
    other ends."""
    order = []
    left, right = center - 1, center + 1
    while left >= 0 or right < count:
        if left >= 0:
            order.append((LEFT, left))
            left -= 1
        if right < count:
            order.append((RIGHT, right))
            right += 1
    return order
