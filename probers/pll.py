"""Pseudo-log-likelihood (PLL) of whole statements under a masked LM: the model side of ``masked-likelihood``.

A statement's PLL (Salazar et al., 2020, "Masked Language Model Scoring") is the sum, over its tokens (the
tokenizer's special tokens excluded), of the log-probability the masked LM gives the token at its position
in a copy of the statement where that token is masked. The variants say what else is masked in that copy
(the four of BEAR's library, lm-pub-quiz, under the same names with ``-`` for ``_`` and ``+``):

* ``original``: the scored token only (one mask per copy), as Salazar et al.;
* ``within-word-l2r`` (Kauf & Ivanova, 2023, "A Better Way to Do Masked Language Model Scoring"): the scored
  token and the later tokens of the same word, so that a word split into pieces ("aspirin" -> "as ##pi
  ##rin") is not scored from its own visible later pieces, which inflates the score of long, rare words;
* ``sentence-l2r``: the scored token and every token after it, the closing special tokens too (as
  lm-pub-quiz's ``sentence_l2r``): the statement read left to right, as a causal LM reads it;
* ``answer-l2r-word-l2r`` (lm-pub-quiz's ``answer_l2r+word_l2r``): a token of the answer (the candidate
  filled into the slot: the tokens from the first to the last that hold a character of it) is scored with
  the later tokens of the answer masked, so a multi-word answer is not scored from its own later words; any
  other token as ``within-word-l2r``.

Word boundaries are the tokenizer's: ``word_ids()`` of a fast tokenizer (its pre-tokenizer's words:
WordPiece, byte-level BPE, SentencePiece alike); for a slow WordPiece tokenizer, a ``##`` piece continues
the word before it. A tokenizer with neither cannot say where words end: the word variants are refused for
it (``original`` and ``sentence-l2r`` need no words). ``answer-l2r-word-l2r`` finds the answer's tokens by the
characters they cover, which only a fast tokenizer tells.

:class:`PllScorer` batches the work: the statements are tokenised together, every (statement, scored token)
pair is one masked copy, the copies of all statements are sorted by length and run ``batch_size`` at a time
(each batch cut to its longest statement), and the MLM head is applied at the scored position only. The
copies are built on the model's device from the statements moved there once; a token's log-probability is
its logit minus the log-sum-exp of the row (in float32; no rows x vocabulary log-softmax is kept), and the
logits' finiteness is checked once per call, not once per pass (each check waits for a GPU). The sums are
float64.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from medlama.core.errors import MedlamaInputError
from medlama.core.finite import finite_tensor, nonfinite_output_error
from medlama.probers.causal.passes import target_log_probs  # one logit-minus-logsumexp for every scorer
from medlama.probers.mlm import MaskedLM, logprob_elements, padded

#: Passes between two checks that the logits are finite (besides the first pass's, checked at once, and the end's):
#: each check waits for the device, and a relation may take thousands of passes.
FINITE_CHECK_EVERY = 64

Variant = Literal["within-word-l2r", "original", "sentence-l2r", "answer-l2r-word-l2r"]
VARIANTS: tuple[str, ...] = ("within-word-l2r", "original", "sentence-l2r", "answer-l2r-word-l2r")
#: The variants that mask by words (they need the tokenizer's word boundaries).
WORD_VARIANTS = ("within-word-l2r", "answer-l2r-word-l2r")


def _word_starts_wordpiece(tokenizer, ids: Sequence[int]) -> list[bool] | None:
    """Per token, whether it starts a word by WordPiece's ``##`` rule; ``None`` for other tokenizers."""
    if getattr(tokenizer, "wordpiece_tokenizer", None) is None:
        return None
    return [not token.startswith("##") for token in tokenizer.convert_ids_to_tokens(list(ids))]


def word_ids(tokenizer, encoding, index: int, ids: Sequence[int], special: Sequence[int]) -> list[int] | None:
    """Per token of statement ``index`` of ``encoding`` (a batch), the number of its word (-1 for special
    tokens); ``None`` when the tokenizer cannot say (a slow tokenizer that is not WordPiece)."""
    if getattr(encoding, "is_fast", False):
        return [-1 if word is None or flag else int(word) for word, flag in zip(encoding.word_ids(index), special)]
    starts = _word_starts_wordpiece(tokenizer, ids)
    if starts is None:
        return None
    out, word = [], -1
    for start, flag in zip(starts, special):
        if flag:
            out.append(-1)
            continue
        word += 1 if start or word < 0 else 0
        out.append(word)
    return out


@dataclass(frozen=True)
class Statements:
    """Tokenised statements (rows padded with the pad id): ``ids`` and ``words`` (word number per token, -1
    for special tokens and padding) as (statements x width) long tensors, ``lengths``, ``scored`` (the
    tokens a PLL sums: every real token that is not special) and ``answer`` (the answer's tokens, for
    ``answer-l2r-word-l2r``; else no token)."""

    ids: object
    words: object
    lengths: object
    scored: object
    answer: object = None


class PllScorer:
    """PLL of statements (texts) under the masked LM ``lm`` (:class:`~medlama.probers.mlm.MaskedLM`)."""

    def __init__(self, lm: MaskedLM, variant: str = "within-word-l2r", *, batch_size: int = 128) -> None:
        if variant not in VARIANTS:
            raise MedlamaInputError(f"unknown pll variant {variant!r}; choose from {list(VARIANTS)}")
        self.lm, self.variant, self.batch_size = lm, variant, batch_size

    def statements(self, texts: Sequence[str], answers: Sequence[tuple[int, int]] | None = None) -> Statements:
        """``texts`` tokenised as the model reads them (special tokens added), with their words; ``answers``:
        each text's answer as a character span ``(start, end)`` (needed by ``answer-l2r-word-l2r`` only)."""
        import torch  # torch only when a model runs

        tok = self.lm.tokenizer
        encoding = tok(list(texts), add_special_tokens=True, return_special_tokens_mask=True)
        rows, words, roles = encoding["input_ids"], [], []
        if self.variant == "answer-l2r-word-l2r":
            if answers is None or len(answers) != len(texts):
                raise MedlamaInputError("pll 'answer-l2r-word-l2r' needs each statement's answer span")
            if not getattr(encoding, "is_fast", False):
                raise MedlamaInputError(f"the tokenizer ({type(tok).__name__}) is not a fast tokenizer: it cannot "
                                        "say which tokens hold the answer's characters, which pll "
                                        "'answer-l2r-word-l2r' needs; use pll 'within-word-l2r'",
                                        file=self.lm.model_path)
        for i, (ids, special) in enumerate(zip(rows, encoding["special_tokens_mask"])):
            if len(ids) > self.lm.max_length:
                raise MedlamaInputError(f"the statement {texts[i]!r} has {len(ids)} tokens; the model takes "
                                        f"{self.lm.max_length}", file=self.lm.model_path)
            found = word_ids(tok, encoding, i, ids, special) if self.variant in WORD_VARIANTS else \
                [-1 if flag else position for position, flag in enumerate(special)]
            if found is None:
                raise MedlamaInputError(f"the tokenizer ({type(tok).__name__}) gives no word boundaries (no fast "
                                        "tokenizer's word_ids, no WordPiece '##' pieces), which pll "
                                        f"{self.variant!r} needs; use pll 'original'", file=self.lm.model_path)
            words.append(found)
            if answers is not None and self.variant == "answer-l2r-word-l2r":
                roles.append(answer_tokens(encoding, i, answers[i], len(ids)))
        ids, filled = padded(rows, self.lm.pad_id)
        word, _ = padded(words, -1)
        ids, word, lengths = torch.from_numpy(ids), torch.from_numpy(word), torch.from_numpy(filled.sum(1))
        answer = torch.from_numpy(padded(roles, 0)[0]).bool() if roles else torch.zeros_like(word, dtype=torch.bool)
        return Statements(ids, word, lengths, word >= 0, answer)

    def masked_copies(self, ids, words, positions, answer=None):
        """The masked copies (rows x width long tensor, on ``ids``' device) of statement rows ``ids`` (their words
        ``words``, their answer's tokens ``answer``) that score token ``positions[r]`` of row ``r``: that token
        masked (``original``), and the later tokens of its word (``within-word-l2r``), every later token
        (``sentence-l2r``), the later tokens of the answer for an answer token and of its word for any other
        (``answer-l2r-word-l2r``)."""
        import torch  # torch only when a model runs

        columns = torch.arange(ids.shape[1], device=ids.device)[None, :]
        after = columns >= positions[:, None]
        if self.variant == "original":
            mask = columns == positions[:, None]
        elif self.variant == "sentence-l2r":
            mask = after  # the padding too: it is not attended to, so masking it changes nothing
        else:
            mask = after & (words == words.gather(1, positions[:, None]))
            if self.variant == "answer-l2r-word-l2r":
                in_answer = answer.gather(1, positions[:, None])
                mask = torch.where(in_answer, after & answer, mask)
        return ids.masked_fill(mask, self.lm.mask_id)

    def token_counts(self, statements: Statements):
        """Tokens each statement's PLL sums (long tensor)."""
        return statements.scored.sum(1)

    def pll(self, texts: Sequence[str], answers: Sequence[tuple[int, int]] | None = None):
        """``(sums, counts)``: each text's PLL (float64 CPU tensor; 0 for a text with no token) and the number
        of tokens it sums. ``answers``: each text's answer as a character span (``answer-l2r-word-l2r``)."""
        import torch  # torch only when a model runs

        statements = self.statements(texts, answers)
        device = self.lm.device
        ids, words, lengths, answer = (t.to(device) for t in (statements.ids, statements.words, statements.lengths,
                                                              statements.answer))
        which, positions = statements.scored.to(device).nonzero(as_tuple=True)
        order = torch.argsort(lengths[which], stable=True)
        which, positions = which[order], positions[order]
        # each pass's width is its longest copy's: the copies are sorted by length, so the last one's
        widths = lengths[which].tolist() if len(which) else []
        sums = torch.zeros(len(texts), dtype=torch.float64, device=device)
        finite = torch.ones((), dtype=torch.bool, device=device)
        step = max(1, min(self.batch_size, logprob_elements(device) // max(1, self.lm.vocab_size)))
        columns = torch.arange(ids.shape[1], device=device)
        with torch.inference_mode():
            for start in range(0, len(which), step):
                rows, at = which[start:start + step], positions[start:start + step]
                width = widths[min(start + step, len(which)) - 1]
                copies = self.masked_copies(ids[rows, :width], words[rows, :width], at, answer[rows, :width])
                attention = (columns[None, :width] < lengths[rows][:, None]).long()
                logits = self.lm.logits_at(copies, attention, at[:, None])[:, 0]
                finite &= finite_tensor(logits)
                # a check per pass would wait for the GPU every pass: the first pass is checked at once (a broken
                # model is refused before the rest is scored), then every FINITE_CHECK_EVERY passes and at the end
                if (start // step) % FINITE_CHECK_EVERY == 0 and not bool(finite):
                    raise nonfinite_output_error(self.lm.model_path, "logits")
                # the target's log-probability, logit minus log-sum-exp: no rows x vocabulary log-softmax
                sums.index_add_(0, rows, target_log_probs(logits, ids[rows, at]).double())
        if not bool(finite):
            raise nonfinite_output_error(self.lm.model_path, "logits")
        return sums.cpu(), self.token_counts(statements)


def answer_tokens(encoding, index: int, span: tuple[int, int], width: int) -> list[int]:
    """Per token of statement ``index`` of a fast tokenizer's ``encoding``, 1 if it holds the answer: every
    token from the first to the last that holds a character of ``span`` (lm-pub-quiz's answer role)."""
    start, end = span
    touched = [t for i in range(start, end) if (t := encoding.char_to_token(index, i)) is not None]
    out = [0] * width
    if touched:
        for t in range(min(touched), max(touched) + 1):
            out[t] = 1
    return out
