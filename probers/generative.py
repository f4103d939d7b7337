"""Generative probing (BART / T5 style): the cloze query with one mask, decoded by beam search into answers.

The query's slot ``[Y]`` becomes the model's single mask, and beam search with
``num_beams = num_return_sequences = top_k`` generates ``top_k`` outputs, best first:

* T5 style (``<extra_id_0>`` in the vocabulary: T5, SciFive): the input has the ``<extra_id_0>``
  sentinel; the model generates ``<extra_id_0> answer <extra_id_1> ...``, and the answer is the text
  between the first ``<extra_id_0>`` and the next sentinel (or the end); ``t5_answer``.
* BART style (a mask token): the input has ``<mask>``; the model regenerates the whole sentence, and
  the answer is the text generated in place of the mask, found by aligning the output with the query's
  text before and after the slot (whitespace-insensitive, whole words; ``aligned_answer``). The
  reference code only deleted the text before the slot and kept the rest of the sentence.

The answers of a query are deduplicated (first, i.e. best-beam, occurrence kept) and empty ones dropped,
so a query can get fewer than ``top_k`` answers. With ``to_candidates`` (default) an answer whose token
ids equal a candidate name's is reported as that name (all such names, in candidate order). Decoding
follows the model's own generation config apart from the beam settings and the length limit:
``max_answer_tokens`` new tokens for T5 style (plus the two sentinels), the query's length plus
``max_answer_tokens`` for BART style.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

from medlama.core.defaults import MASK_PLACEHOLDER
from medlama.core.batching import BatchSize, batch_size_setting
from medlama.core.errors import MedlamaInputError
from medlama.core.finite import FiniteScores
from medlama.core.loaded import LoadedModel
from medlama.core.models import pick_device
from medlama.probers.prober import Prober, check_all_scores, check_settings
from medlama.probers.mlm import candidate_lookup, load_seq2seq_lm
from medlama.probers.query_set import QuerySet
from medlama.probers.ranking import Ranking
from medlama.core.settings import setting

STYLES = ("auto", "t5", "bart")
T5_SENTINEL = "<extra_id_0>"
SENTINEL = re.compile(r"<extra_id_\d+>")


@dataclass(frozen=True)
class GenerativeSettings:
    """How the mask is written and answers are generated and reported."""

    style: str = setting(
        "auto", help="how the mask is written and the answer read (auto: T5 if the <extra_id_0> sentinel "
                     "exists, else BART)", choices=STYLES, noun="generative style")
    max_answer_tokens: int = setting(32, help="most tokens generated for the answer", min=1, metavar="N")
    to_candidates: bool = setting(True, help="report an answer whose token ids equal a candidate name's as that "
                                             "name (--raw-predictions: as decoded)", cli=False)
    batch_size: BatchSize = batch_size_setting(16, help="queries per generate call (each expanded to top-k beams)")

    def __post_init__(self) -> None:
        check_settings(self)


def t5_answer(generated: str) -> str:
    """The span generated for ``<extra_id_0>``: after that sentinel up to the next one (or the end).

    Without an ``<extra_id_0>``, the text before the first sentinel. Whitespace is collapsed.
    """
    at = generated.find(T5_SENTINEL)
    rest = generated[at + len(T5_SENTINEL):] if at >= 0 else generated
    return " ".join(SENTINEL.split(rest, maxsplit=1)[0].split())


def _consumed(text: str, pattern: str) -> int:
    """How many leading characters of ``text`` match ``pattern`` (whitespace ignored on both sides).

    A match that does not cover ``pattern``, or ends inside a word of ``text``, is cut back to the end
    of the last whole word matched.
    """
    i = j = 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        while j < len(pattern) and pattern[j].isspace():
            j += 1
        if i == len(text) or j == len(pattern) or text[i] != pattern[j]:
            break
        i += 1
        j += 1
    inside_word = 0 < i < len(text) and text[i - 1].isalnum() and text[i].isalnum()
    if j == len(pattern) and not inside_word:
        return i
    while i > 0 and not text[i - 1].isspace():
        i -= 1
    return i


def aligned_answer(generated: str, prefix: str, suffix: str) -> str:
    """The text of ``generated`` in place of the slot of ``prefix [slot] suffix``.

    The longest match of ``prefix`` at the start and of ``suffix`` at the end (on what is left) are
    removed; whitespace differences are ignored, and partial matches stop at word boundaries.
    """
    start = _consumed(generated, prefix)
    rest = generated[start:]
    end = len(rest) - _consumed(rest[::-1], suffix[::-1])
    return " ".join(rest[:end].split())


def detect_style(tokenizer, style: str = "auto", *, file: str | None = None) -> str:
    has_sentinel = T5_SENTINEL in tokenizer.get_vocab()
    has_mask = tokenizer.mask_token is not None
    if style == "auto":
        if not (has_sentinel or has_mask):
            raise MedlamaInputError(f"the tokenizer has neither a {T5_SENTINEL} sentinel (T5 style) nor a mask "
                                    "token (BART style); generative probing needs one of them", file=file)
        return "t5" if has_sentinel else "bart"
    if style == "t5" and not has_sentinel:
        raise MedlamaInputError(f"style 't5' needs the {T5_SENTINEL} sentinel, which the tokenizer lacks", file=file)
    if style == "bart" and not has_mask:
        raise MedlamaInputError("style 'bart' needs a mask token, which the tokenizer lacks", file=file)
    return style


class GenerativeProber(Prober):
    """Answers generated by a BART / T5 style model by beam search, ranked by beam order."""

    method = "generative"

    def __init__(self, model_path: str | Path | LoadedModel, settings: GenerativeSettings = GenerativeSettings(),
                 *, device: str | None = None) -> None:
        self.settings_ = settings
        self.model_path = str(model_path)
        self.tokenizer, model = load_seq2seq_lm(model_path)
        self.style = detect_style(self.tokenizer, settings.style, file=self.model_path)
        self.device = model_path.device(device) if isinstance(model_path, LoadedModel) else pick_device(device)
        self.model = model.to(self.device)
        self._lookup: tuple[tuple[str, ...], dict] | None = None

    def settings(self) -> dict:
        return {"method": self.method, "model": self.model_path, **asdict(self.settings_), "style": self.style}

    @property
    def slot_token(self) -> str:
        return T5_SENTINEL if self.style == "t5" else self.tokenizer.mask_token

    def _key(self, text: str) -> tuple[int, ...]:
        return tuple(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _candidates(self, names: list[str]) -> dict:
        if self._lookup is None or self._lookup[0] != tuple(names):
            keys = self.tokenizer(list(names), add_special_tokens=False)["input_ids"] if names else []
            self._lookup = (tuple(names), candidate_lookup(keys, names))
        return self._lookup[1]

    def answer(self, generated_ids, query: str) -> str:
        """The answer in one generated sequence (token ids) for ``query`` (with ``[Y]``)."""
        tok = self.tokenizer
        if self.style == "t5":
            text = tok.decode(list(generated_ids), skip_special_tokens=False)
            for special in {tok.pad_token, tok.eos_token, tok.bos_token} - {None}:
                text = text.replace(special, " ")
            return t5_answer(text)
        prefix, suffix = query.split(MASK_PLACEHOLDER)
        return aligned_answer(tok.decode(list(generated_ids), skip_special_tokens=True), prefix, suffix)

    def generate(self, queries: QuerySet, top_k: int = 10) -> list[list[str]]:
        """The ``top_k`` parsed answers of every query in beam order, before deduplication."""
        import torch  # torch only when a model runs
        from transformers import LogitsProcessorList  # transformers only when a model loads or runs

        if top_k < 1:
            raise MedlamaInputError(f"top_k must be >= 1, got {top_k}")
        texts = queries.with_mask(self.slot_token)
        lengths = [len(ids) for ids in self.tokenizer(texts)["input_ids"]]
        order = sorted(range(len(texts)), key=lambda i: lengths[i])
        out: list[list[str]] = [[] for _ in texts]
        step = self.settings_.batch_size
        with torch.inference_mode():
            for start in range(0, len(order), step):
                chunk = order[start:start + step]
                batch = self.tokenizer([texts[i] for i in chunk], padding=True, return_tensors="pt").to(self.device)
                extra = self.settings_.max_answer_tokens
                new_tokens = extra + 2 if self.style == "t5" else max(lengths[i] for i in chunk) + extra
                generated = self.model.generate(**batch, num_beams=top_k, num_return_sequences=top_k,
                                                do_sample=False, max_new_tokens=new_tokens,
                                                logits_processor=LogitsProcessorList([FiniteScores(self.model_path)]))
                generated = generated.view(len(chunk), top_k, -1).cpu().tolist()
                for i, sequences in zip(chunk, generated):
                    out[i] = [self.answer(ids, queries.texts[i]) for ids in sequences]
        return out

    def rank_scored(self, queries: QuerySet, top_k: int = 10, *, all_scores: bool = False) -> Ranking:
        """The generated answers in beam order, without scores; the gold is ranked among them only.
        ``inputs``: the query with the model's slot token (T5's sentinel, BART's mask)."""
        check_all_scores(self, all_scores)
        return Ranking.from_names(queries.gold, self._rank(queries, top_k), inputs=queries.with_mask(self.slot_token))

    def _rank(self, queries: QuerySet, top_k: int = 10) -> list[list[str]]:
        lookup = self._candidates(queries.candidates) if self.settings_.to_candidates else {}
        ranked = []
        for answers in self.generate(queries, top_k):
            names: list[str] = []
            for answer in answers:
                if answer:
                    names.extend(lookup.get(self._key(answer)) or [answer])
            ranked.append(list(dict.fromkeys(names))[:top_k])
        return ranked
