"""Pseudo-log-likelihood (PLL) of whole statements under a masked LM: the model side of ``masked-likelihood``.

A statement's PLL (Salazar et al., 2020, "Masked Language Model Scoring") is the sum, over its tokens (the
tokenizer's special tokens excluded), of the log-probability the masked LM gives the token at its position
in a copy of the statement where that token is masked. Two variants say what else is masked in that copy:

* ``original``: the scored token only (one mask per copy), as Salazar et al.;
* ``within-word-l2r`` (Kauf & Ivanova, 2023, "A Better Way to Do Masked Language Model Scoring"): the scored
  token and the later tokens of the same word, so that a word split into pieces ("aspirin" -> "as ##pi
  ##rin") is not scored from its own visible later pieces, which inflates the score of long, rare words.

Word boundaries are the tokenizer's: ``word_ids()`` of a fast tokenizer (its pre-tokenizer's words:
WordPiece, byte-level BPE, SentencePiece alike); for a slow WordPiece tokenizer, a ``##`` piece continues
the word before it. A tokenizer with neither cannot say where words end: ``within-word-l2r`` is refused
for it (``original`` needs no words).

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

Variant = Literal["within-word-l2r", "original"]
VARIANTS: tuple[str, ...] = ("within-word-l2r", "original")


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
    for special tokens and padding) as (statements x width) long tensors, ``lengths``, and ``scored`` (the
    tokens a PLL sums: every real token that is not special)."""

    ids: object
    words: object
    lengths: object
    scored: object


class PllScorer:
    """PLL of statements (texts) under the masked LM ``lm`` (:class:`~medlama.probers.mlm.MaskedLM`)."""

    def __init__(self, lm: MaskedLM, variant: str = "within-word-l2r", *, batch_size: int = 128) -> None:
        if variant not in VARIANTS:
            raise MedlamaInputError(f"unknown pll variant {variant!r}; choose from {list(VARIANTS)}")
        self.lm, self.variant, self.batch_size = lm, variant, batch_size

    def statements(self, texts: Sequence[str]) -> Statements:
        """``texts`` tokenised as the model reads them (special tokens added), with their words."""
        import torch  # torch only when a model runs

        tok = self.lm.tokenizer
        encoding = tok(list(texts), add_special_tokens=True, return_special_tokens_mask=True)
        rows, words = encoding["input_ids"], []
        for i, (ids, special) in enumerate(zip(rows, encoding["special_tokens_mask"])):
            if len(ids) > self.lm.max_length:
                raise MedlamaInputError(f"the statement {texts[i]!r} has {len(ids)} tokens; the model takes "
                                        f"{self.lm.max_length}", file=self.lm.model_path)
            found = word_ids(tok, encoding, i, ids, special) if self.variant == "within-word-l2r" else \
                [-1 if flag else position for position, flag in enumerate(special)]
            if found is None:
                raise MedlamaInputError(f"the tokenizer ({type(tok).__name__}) gives no word boundaries (no fast "
                                        "tokenizer's word_ids, no WordPiece '##' pieces), which pll "
                                        "'within-word-l2r' needs; use pll 'original'", file=self.lm.model_path)
            words.append(found)
        ids, filled = padded(rows, self.lm.pad_id)
        word, _ = padded(words, -1)
        ids, word, lengths = torch.from_numpy(ids), torch.from_numpy(word), torch.from_numpy(filled.sum(1))
        return Statements(ids, word, lengths, word >= 0)

    def masked_copies(self, ids, words, positions):
        """The masked copies (rows x width long tensor, on ``ids``' device) of statement rows ``ids`` (their words
        ``words``) that score token ``positions[r]`` of row ``r``: that token masked (``original``), and the later
        tokens of its word (``within-word-l2r``)."""
        import torch  # torch only when a model runs

        columns = torch.arange(ids.shape[1], device=ids.device)[None, :]
        if self.variant == "original":
            mask = columns == positions[:, None]
        else:
            own = words.gather(1, positions[:, None])
            mask = (columns >= positions[:, None]) & (words == own)
        return ids.masked_fill(mask, self.lm.mask_id)

    def token_counts(self, statements: Statements):
        """Tokens each statement's PLL sums (long tensor)."""
        return statements.scored.sum(1)

    def pll(self, texts: Sequence[str]):
        """``(sums, counts)``: each text's PLL (float64 CPU tensor; 0 for a text with no token) and the number
        of tokens it sums."""
        import torch  # torch only when a model runs

        statements = self.statements(texts)
        device = self.lm.device
        ids, words, lengths = (t.to(device) for t in (statements.ids, statements.words, statements.lengths))
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
                copies = self.masked_copies(ids[rows, :width], words[rows, :width], at)
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
