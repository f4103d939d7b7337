"""Cloze self-retrieval pairs for Contrastive-Probe rewiring (paper section 4).

The masking rule is the reference implementation's (``reference/method-notes.md``):

* ``words = line.split(" ")`` with only the line break removed, so a trailing space gives a final empty
  "word" and a double space an empty word in the middle (the released PubMed files have both);
* ``n = rng.randint(1, 1 + int(len(words) * mask_ratio))``;
* the ``n`` words that end just before the last word are replaced by ONE mask token. The query is the
  masked sentence, the positive ("answer") is the removed span joined by single spaces.

``rng`` is a ``random.Random(seed)`` that draws once per masked line, in corpus order, so the same corpus,
mask ratio and seed always give the same pairs.

Too short to mask: a line is *too short* when the longest span the rule can draw,
``1 + int(len(words) * mask_ratio)``, would reach the first word, i.e. when
``1 + int(len(words) * mask_ratio) >= len(words) - 1``. Such a line can give a query with no context left
("[MASK] ") or, for the shortest lines, no valid span at all. The test depends only on the line and the
mask ratio, never on the random draw, so the same lines are affected for every seed. At mask ratio 0.5 a
line needs at least 5 ``" "``-separated fields (4 words plus the trailing space). In the released corpora
this hits 83-109 lines (about 0.9%) of each PubMed file (headings such as ``"conclusion "``) and none of the
Wikipedia file. By default such a line is an error naming its file and line; ``skip_short_lines=True`` leaves
them out (they draw no random number) and counts them.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from medlama.core.errors import MedlamaInputError

if TYPE_CHECKING:  # pragma: no cover
    import datasets

#: Columns of a cloze dataset, in the order the trainer reads them (anchor, positive).
QUERY_COLUMN = "query"
ANSWER_COLUMN = "answer"

#: How many offending lines an error message or a report lists.
_SHOWN = 5


@dataclass(frozen=True)
class Sentence:
    """One corpus line, with the line break removed, and where it came from (1-based line or row)."""

    text: str
    source: str
    line: int
    unit: str = "line"


@dataclass(frozen=True)
class ClozePair:
    """A cloze query (the masked sentence) and its positive (the masked span)."""

    query: str
    answer: str


@dataclass(frozen=True)
class CorpusFile:
    """A corpus file as read: name, SHA-256 of its bytes, number of lines."""

    path: str
    sha256: str
    lines: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "name": Path(self.path).name, "sha256": self.sha256, "lines": self.lines}


@dataclass
class ClozeStats:
    """What building the pairs did: lines read and used, lines skipped as too short, degenerate answers."""

    sentences: int = 0
    pairs: int = 0
    skipped_short: int = 0
    skipped_examples: list[str] = field(default_factory=list)
    empty_answers: int = 0
    sampled_from: int | None = None
    #: queries whose mask token is cut off at the model's max length (:func:`count_masks_cut`; None: not counted)
    mask_truncated: int | None = None
    #: the max length (tokens) ``mask_truncated`` was counted at
    max_length: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"sentences": self.sentences, "pairs": self.pairs, "skipped_short": self.skipped_short,
                "skipped_examples": list(self.skipped_examples), "empty_answers": self.empty_answers,
                "sampled_from": self.sampled_from, "mask_truncated": self.mask_truncated,
                "max_length": self.max_length}


@dataclass
class ClozeBuild:
    """The dataset (columns ``query``, ``answer``), its statistics and a description of the corpus."""

    dataset: datasets.Dataset
    stats: ClozeStats
    corpus: list[dict[str, Any]]


def split_words(line: str) -> list[str]:
    """The rule's words: ``line.split(" ")``, after removing only a line break (``\\n`` or ``\\r\\n``)."""
    if line.endswith("\n"):
        line = line[:-1]
        if line.endswith("\r"):
            line = line[:-1]
    return line.split(" ")


def longest_span(num_words: int, mask_ratio: float) -> int:
    """The largest ``n`` the rule can draw for a line of ``num_words`` words."""
    return 1 + int(num_words * mask_ratio)


def is_too_short(line: str, mask_ratio: float = 0.5) -> bool:
    """True when the longest span the rule can draw would leave no word before the mask."""
    words = split_words(line)
    return longest_span(len(words), mask_ratio) >= len(words) - 1


def check_mask_ratio(mask_ratio: float) -> float:
    if not isinstance(mask_ratio, (int, float)) or not 0.0 <= float(mask_ratio) <= 1.0:
        raise MedlamaInputError(f"mask ratio must be a number between 0 and 1, got {mask_ratio!r}")
    return float(mask_ratio)


def cloze_pair(line: str, rng: random.Random, *, mask_token: str = "[MASK]",
               mask_ratio: float = 0.5) -> ClozePair:
    """Mask the tail span of one line (the reference rule; see the module docstring).

    Raises ``MedlamaInputError`` for a line that is too short to mask (without drawing from ``rng``).
    """
    if not mask_token:
        raise MedlamaInputError("the mask token is empty")
    words = split_words(line)
    total = len(words)
    if longest_span(total, mask_ratio) >= total - 1:
        raise MedlamaInputError(
            f"line too short to mask: {total} space-separated field(s), and at mask ratio {mask_ratio} the span "
            f"may be up to {longest_span(total, mask_ratio)} words, which leaves nothing before the mask")
    n = rng.randint(1, longest_span(total, mask_ratio))
    start, end = total - 1 - n, total - 1
    query = " ".join([*words[:start], mask_token, *words[end:]])
    return ClozePair(query=query, answer=" ".join(words[start:end]))


def check_corpus_files(paths: Iterable[str | Path]) -> None:
    """Refuse a corpus path that is a folder or no file, as reading it would: commands call this before any
    model loads."""
    for path in map(Path, paths):
        if path.is_dir():
            raise MedlamaInputError("is a folder; pass the sentence files themselves (e.g. DIR/*)", file=path)
        if not path.exists():
            raise MedlamaInputError("corpus file not found", file=path)


def _read_file(path: Path) -> tuple[list[Sentence], CorpusFile]:
    check_corpus_files([path])
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise MedlamaInputError("corpus file not found", file=path) from None
    except OSError as error:
        raise MedlamaInputError(f"cannot read corpus file: {error.strerror or error}", file=path) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise MedlamaInputError(f"line {line}: not valid UTF-8 ({error.reason})", file=path) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if lines and lines[-1] == "":  # the break after the last line ends it; it does not start another
        lines.pop()
    sentences = [Sentence(line[:-1] if line.endswith("\r") else line, str(path), number)
                 for number, line in enumerate(lines, 1)]
    return sentences, CorpusFile(str(path), hashlib.sha256(data).hexdigest(), len(lines))


def read_sentences(source: Any, *, column: str = "text") -> tuple[list[Sentence], list[dict[str, Any]]]:
    """Read the sentences of a corpus and describe it.

    ``source`` is a sentence file (one sentence per line, UTF-8), a list of them (read in the given order),
    a ``datasets.Dataset`` (``column`` holds the sentences), or a ``DatasetDict`` with a ``train`` split (what
    ``load_dataset("text", data_files=...)`` returns). Returns the sentences and a JSON-able description of
    the corpus (file names, SHA-256 and line counts; or the dataset's fingerprint and size).
    """
    try:
        # datasets loads when this runs, not when medlama.trainers.cloze is imported
        import datasets
    except ImportError:  # pragma: no cover - a dependency of the project
        datasets = None
    if datasets is not None and isinstance(source, datasets.DatasetDict):
        if "train" not in source:
            raise MedlamaInputError(f"a DatasetDict corpus needs a 'train' split; it has {sorted(source)}")
        source = source["train"]
    if datasets is not None and isinstance(source, datasets.Dataset):
        if column not in source.column_names:
            raise MedlamaInputError(f"the dataset has no column {column!r} (columns: {source.column_names})")
        name = source.info.dataset_name or "dataset"
        values = source[column]
        sentences = []
        for row, value in enumerate(values, 1):
            if not isinstance(value, str):
                raise MedlamaInputError(f"expected a string, got {type(value).__name__}", file=name, row=row,
                                        field=column)
            text = value[:-1] if value.endswith("\n") else value
            sentences.append(Sentence(text[:-1] if text.endswith("\r") else text, name, row, "row"))
        return sentences, [{"dataset": name, "column": column, "rows": len(values),
                            "fingerprint": getattr(source, "_fingerprint", None)}]
    if isinstance(source, (str, Path)):
        source = [source]
    if not isinstance(source, Iterable):
        raise MedlamaInputError(
            f"a corpus is a file, a list of files or a datasets.Dataset, not {type(source).__name__}")
    sentences, described = [], []
    for path in source:
        file_sentences, corpus_file = _read_file(Path(path))
        sentences.extend(file_sentences)
        described.append(corpus_file.to_dict())
    if not described:
        raise MedlamaInputError("no corpus given: pass at least one sentence file")
    return sentences, described


def _where(sentence: Sentence) -> str:
    return f"{sentence.source}, {sentence.unit} {sentence.line}"


def _summarise(sentences: Sequence[Sentence]) -> str:
    """``"3 in a.txt (lines 4, 9, 12); 1 in b.txt (line 7)"``, listing at most a few numbers per source."""
    by_source: dict[str, list[Sentence]] = {}
    for sentence in sentences:
        by_source.setdefault(sentence.source, []).append(sentence)
    parts = []
    for source, items in by_source.items():
        numbers = ", ".join(str(s.line) for s in items[:_SHOWN]) + (", ..." if len(items) > _SHOWN else "")
        unit = items[0].unit + ("s" if len(items) > 1 else "")
        parts.append(f"{len(items)} in {Path(source).name} ({unit} {numbers})")
    return "; ".join(parts)


def build_cloze_pairs(sentences: Sequence[Sentence], *, mask_token: str = "[MASK]", mask_ratio: float = 0.5,
                      seed: int = 33, skip_short_lines: bool = False) -> tuple[list[ClozePair], ClozeStats]:
    """Mask every sentence with one ``random.Random(seed)``, in order.

    A line too short to mask is an error naming its file and line (all such lines are counted first, so the
    message says how many there are); with ``skip_short_lines`` they are left out and counted instead.
    """
    mask_ratio = check_mask_ratio(mask_ratio)
    stats = ClozeStats(sentences=len(sentences))
    if not sentences:
        raise MedlamaInputError("the corpus is empty: it has no lines")
    short = [sentence for sentence in sentences if is_too_short(sentence.text, mask_ratio)]
    if short and not skip_short_lines:
        first = short[0]
        more = f"; {len(short)} lines of the corpus are too short ({_summarise(short)})" if len(short) > 1 else ""
        raise MedlamaInputError(
            f"{first.unit} {first.line} is too short to mask ({first.text!r}): at mask ratio {mask_ratio} the "
            f"masked span could take every word before the last{more}. Leave such lines out with "
            f"--skip-short-lines (Python: skip_short_lines=True), or fix the corpus", file=first.source)
    stats.skipped_short = len(short)
    stats.skipped_examples = [_where(s) for s in short[:_SHOWN]]
    rng = random.Random(seed)
    pairs = []
    for sentence in sentences:
        if is_too_short(sentence.text, mask_ratio):
            continue
        pair = cloze_pair(sentence.text, rng, mask_token=mask_token, mask_ratio=mask_ratio)
        stats.empty_answers += not pair.answer.strip()
        pairs.append(pair)
    stats.pairs = len(pairs)
    if not pairs:
        raise MedlamaInputError(f"no line of the corpus can be masked: all {len(sentences)} are too short")
    return pairs, stats


def build_cloze_dataset(source: Any, *, mask_token: str = "[MASK]", mask_ratio: float = 0.5, seed: int = 33,
                        column: str = "text", max_sentences: int | None = None,
                        skip_short_lines: bool = False) -> ClozeBuild:
    """A ``datasets.Dataset`` of cloze pairs (columns ``query``, ``answer``) from a corpus.

    ``source``: see :func:`read_sentences`. ``max_sentences`` keeps a random sample of that many lines
    (``random.Random(seed)``, corpus order kept) before masking, like the paper's 1k/10k/20k/100k settings.
    """
    # datasets loads when this runs, not when medlama.trainers.cloze is imported
    import datasets

    sentences, corpus = read_sentences(source, column=column)
    if not sentences:  # said here, where the files are known
        raise MedlamaInputError("the corpus is empty: it has no lines",
                                file=", ".join(str(item.get("path") or item.get("dataset")) for item in corpus))
    stats_sampled_from = None
    if max_sentences is not None:
        if not isinstance(max_sentences, int) or max_sentences < 1:
            raise MedlamaInputError(f"max_sentences must be a positive integer, got {max_sentences!r}")
        if max_sentences < len(sentences):
            stats_sampled_from = len(sentences)
            keep = sorted(random.Random(seed).sample(range(len(sentences)), max_sentences))
            sentences = [sentences[i] for i in keep]
    pairs, stats = build_cloze_pairs(sentences, mask_token=mask_token, mask_ratio=mask_ratio, seed=seed,
                                     skip_short_lines=skip_short_lines)
    stats.sampled_from = stats_sampled_from
    dataset = datasets.Dataset.from_dict({QUERY_COLUMN: [p.query for p in pairs],
                                          ANSWER_COLUMN: [p.answer for p in pairs]})
    return ClozeBuild(dataset=dataset, stats=stats, corpus=corpus)


def _contains(ids: Sequence[int], part: Sequence[int]) -> bool:
    width = len(part)
    return any(list(ids[i:i + width]) == list(part) for i in range(len(ids) - width + 1))


def count_masks_cut(queries: Sequence[str], tokenizer: Any, max_length: int, mask_token: str) -> int:
    """How many ``queries`` lose their mask token when cut to ``max_length`` tokens, as the model reads them
    (``truncation=True``, special tokens included, as sentence-transformers tokenizes).

    The span is masked at the end of the sentence, so a long sentence's mask can fall beyond the max length:
    such a pair trains as a query without a mask against its answer. The reference implementation trains
    them the same way; the rewiring keeps them and counts them (about 3.7% of a released PubMed corpus at
    48 tokens).
    """
    mask_ids = tokenizer(mask_token, add_special_tokens=False)["input_ids"]
    if not mask_ids:
        return 0
    texts = list(queries)
    cut = tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
    missing = [i for i, ids in enumerate(cut) if not _contains(ids, mask_ids)]
    if not missing:
        return 0
    # A mask the tokenizer itself splits is no cut. Read whole, some exceed the model's length: transformers' warning
    # about it (verbose) says what the count above already reports.
    whole = tokenizer([texts[i] for i in missing], verbose=False)["input_ids"]
    return sum(_contains(ids, mask_ids) for ids in whole)

