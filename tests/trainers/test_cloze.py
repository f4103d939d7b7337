"""Cloze self-retrieval pairs: the reference masking rule, reproducibility, short lines, corpus sources."""

from __future__ import annotations

import random

import pytest

from medlama.core.errors import MedlamaInputError
from medlama.trainers.cloze import (
    ClozePair,
    build_cloze_dataset,
    build_cloze_pairs,
    cloze_pair,
    is_too_short,
    read_sentences,
    split_words,
)


class FixedDraw:
    """A stand-in for random.Random that returns a chosen n and records the range it was asked for."""

    def __init__(self, n: int) -> None:
        self.n, self.ranges = n, []

    def randint(self, a: int, b: int) -> int:
        self.ranges.append((a, b))
        assert a <= self.n <= b, f"n={self.n} outside the rule's range {a}..{b}"
        return self.n


@pytest.mark.parametrize(("line", "n", "query", "answer"), [
    # the paper's example, with the corpus' trailing space: the span ends before the final empty "word"
    ("social distancing largely reduces coronavirus infections ", 3, "social distancing largely [MASK] ",
     "reduces coronavirus infections"),
    ("a b c d e f g h ", 1, "a b c d e f g [MASK] ", "h"),
    ("a b c d e f g h ", 5, "a b c [MASK] ", "d e f g h"),
    # without a trailing space the last real word stays after the mask
    ("a b c d e f g h", 1, "a b c d e f [MASK] h", "g"),
    ("a b c d e f g h", 2, "a b c d e [MASK] h", "f g"),
    ("a b c d e f g h", 5, "a b [MASK] h", "c d e f g"),
    # a double space is an empty word, counted and kept as the rule's split(" ") does
    ("a b  c d e ", 4, "a b [MASK] ", " c d e"),
    # only the line break is removed
    ("a b c d e f\n", 2, "a b c [MASK] f", "d e"),
    ("a b c d e f \r\n", 2, "a b c d [MASK] ", "e f"),
])
def test_rule_on_hand_made_lines(line, n, query, answer):
    draw = FixedDraw(n)
    pair = cloze_pair(line, draw, mask_token="[MASK]", mask_ratio=0.5)
    assert pair == ClozePair(query=query, answer=answer)
    words = split_words(line)
    assert draw.ranges == [(1, 1 + int(len(words) * 0.5))]


def test_rule_uses_the_models_mask_token_and_the_ratio():
    draw = FixedDraw(1)
    assert cloze_pair("one two three four five six ", draw, mask_token="<mask>", mask_ratio=0.2).query == \
        "one two three four five <mask> "
    assert draw.ranges == [(1, 1 + int(7 * 0.2))]


@pytest.mark.parametrize(("line", "ratio", "short"), [
    ("", 0.5, True),
    ("conclusion ", 0.5, True),
    ("a b c ", 0.5, True),       # 4 fields: the span may take a, b and c
    ("a b c d ", 0.5, False),    # 5 fields: at most 3 words masked, "a" stays
    ("a b c d", 0.5, True),
    ("a b c d e", 0.5, False),
    ("a b c ", 0.1, False),      # at ratio 0.1 the span is always one word
    ("a b ", 0.1, False),
    ("a ", 0.1, True),
])
def test_too_short_depends_only_on_the_line_and_ratio(line, ratio, short):
    assert is_too_short(line, ratio) is short
    if short:
        with pytest.raises(MedlamaInputError, match="too short to mask"):
            cloze_pair(line, random.Random(0), mask_ratio=ratio)
    else:
        for seed in range(20):  # every draw leaves at least one field before the mask
            pair = cloze_pair(line, random.Random(seed), mask_ratio=ratio)
            assert not pair.query.startswith("[MASK]")


def _write(path, lines):
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


LINES = [f"sentence {i} about gene {i} and its protein product in cells " for i in range(50)]


def test_same_seed_same_pairs_other_seed_other_pairs(tmp_path):
    corpus = _write(tmp_path / "c.txt", LINES)
    first = build_cloze_dataset(corpus, seed=33).dataset
    again = build_cloze_dataset(corpus, seed=33).dataset
    other = build_cloze_dataset(corpus, seed=34).dataset
    assert first.column_names == ["query", "answer"]
    assert first.to_dict() == again.to_dict()
    assert first["query"] != other["query"]
    # one draw per line, in corpus order, from random.Random(seed)
    rng = random.Random(33)
    expected = [cloze_pair(line, rng) for line in LINES]
    assert first["query"] == [p.query for p in expected] and first["answer"] == [p.answer for p in expected]


def test_short_line_is_an_error_naming_file_and_line(tmp_path):
    corpus = _write(tmp_path / "c.txt", [LINES[0], "conclusion ", LINES[1], "ii ", LINES[2]])
    with pytest.raises(MedlamaInputError) as caught:
        build_cloze_dataset(corpus)
    message = str(caught.value)
    assert message.startswith(f"{corpus}: line 2 is too short to mask ('conclusion ')")
    assert "2 lines of the corpus are too short (2 in c.txt (lines 2, 4))" in message
    assert "--skip-short-lines" in message


def test_short_lines_skipped_and_counted_on_request(tmp_path):
    corpus = _write(tmp_path / "c.txt", [LINES[0], "conclusion ", LINES[1], "ii ", LINES[2]])
    build = build_cloze_dataset(corpus, skip_short_lines=True, seed=5)
    assert build.stats.skipped_short == 2 and build.stats.pairs == 3 and build.stats.sentences == 5
    assert build.stats.skipped_examples == [f"{corpus}, line 2", f"{corpus}, line 4"]
    # skipped lines draw nothing: the pairs are those of the corpus without them
    clean = build_cloze_dataset(_write(tmp_path / "d.txt", LINES[:3]), seed=5)
    assert build.dataset.to_dict() == clean.dataset.to_dict()


def test_empty_corpus_and_nothing_maskable_are_errors(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(MedlamaInputError, match="the corpus is empty: it has no lines"):
        build_cloze_dataset(empty)
    short = _write(tmp_path / "short.txt", ["a ", "b c "])
    with pytest.raises(MedlamaInputError, match="no line of the corpus can be masked: all 2 are too short"):
        build_cloze_dataset(short, skip_short_lines=True)
    with pytest.raises(MedlamaInputError, match="no corpus given"):
        build_cloze_dataset([])


def test_unreadable_corpus_errors(tmp_path):
    with pytest.raises(MedlamaInputError, match="missing.txt: corpus file not found"):
        build_cloze_dataset(tmp_path / "missing.txt")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(LINES[0].encode() + b"\n" + b"caf\xe9 au lait and more words here \n")
    with pytest.raises(MedlamaInputError, match=r"bad.txt: line 2: not valid UTF-8"):
        build_cloze_dataset(bad)
    with pytest.raises(MedlamaInputError, match="is a folder; pass the sentence files themselves"):
        build_cloze_dataset(tmp_path)
    with pytest.raises(MedlamaInputError, match="mask ratio must be a number between 0 and 1"):
        build_cloze_dataset(_write(tmp_path / "c.txt", LINES), mask_ratio=1.5)


def test_files_are_read_exactly_and_described(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(b"first line with a trailing space \r\nsecond line without a final break")
    sentences, described = read_sentences([corpus])
    assert [s.text for s in sentences] == ["first line with a trailing space ", "second line without a final break"]
    assert [s.line for s in sentences] == [1, 2]
    assert described[0]["name"] == "c.txt" and described[0]["lines"] == 2 and len(described[0]["sha256"]) == 64


def test_dataset_column_and_text_files_sources(tmp_path):
    import datasets

    corpus = _write(tmp_path / "c.txt", LINES[:10])
    from_file = build_cloze_dataset(corpus, seed=1).dataset
    table = datasets.Dataset.from_dict({"sentence": LINES[:10], "id": list(range(10))})
    from_column = build_cloze_dataset(table, column="sentence", seed=1)
    assert from_column.dataset.to_dict() == from_file.to_dict()
    assert from_column.corpus[0]["rows"] == 10 and from_column.corpus[0]["column"] == "sentence"
    text_files = datasets.load_dataset("text", data_files=str(corpus))  # DatasetDict with a train split
    assert build_cloze_dataset(text_files, seed=1).dataset.to_dict() == from_file.to_dict()
    with pytest.raises(MedlamaInputError, match=r"the dataset has no column 'text' \(columns: \['sentence', 'id'\]\)"):
        build_cloze_dataset(table)
    bad = datasets.Dataset.from_dict({"text": [LINES[0], "ok "]})
    with pytest.raises(MedlamaInputError, match=r"row 2 is too short to mask"):
        build_cloze_dataset(bad)


def test_max_sentences_samples_reproducibly(tmp_path):
    corpus = _write(tmp_path / "c.txt", LINES)
    a = build_cloze_dataset(corpus, max_sentences=10, seed=7)
    b = build_cloze_dataset(corpus, max_sentences=10, seed=7)
    assert a.stats.sentences == 10 and a.stats.sampled_from == 50
    assert a.dataset.to_dict() == b.dataset.to_dict()
    assert build_cloze_dataset(corpus, max_sentences=100).stats.sampled_from is None


def test_released_corpora(elicit_corpora):
    """The released files: every PubMed file has headings too short to mask, the Wikipedia file none."""
    pubmed = elicit_corpora / "pubmed_sents_no_punkt_10k_0"
    with pytest.raises(MedlamaInputError) as caught:
        build_cloze_dataset(pubmed)
    assert str(caught.value).startswith(f"{pubmed}: line 26 is too short to mask ('conclusion ')")
    assert "89 lines of the corpus are too short" in str(caught.value)
    build = build_cloze_dataset(pubmed, skip_short_lines=True)
    assert (build.stats.sentences, build.stats.skipped_short, build.stats.pairs) == (10_000, 89, 9_911)
    assert build.corpus[0]["sha256"] == "70c36afb532a5d993de1f5303b278024281afdc26e804470daa178a220d5a96e"
    assert build.dataset[2] == {"query": "in this report  we have identified a cell surface glycoprotein that is a "
                                         "likely candidate for the hk [MASK] ", "answer": "binding site on huvecs"}
    wiki = build_cloze_dataset(elicit_corpora / "wiki_sents_no_punkt_10k.txt")
    assert (wiki.stats.skipped_short, wiki.stats.pairs) == (0, 10_000)
    assert build_cloze_pairs  # the list-level API is public too
