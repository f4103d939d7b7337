"""Masked and sequence-to-sequence language models for the baseline probers, with clear errors.

``load_masked_lm`` refuses what mask predict and mask average cannot use: a folder that is not a model,
a seq2seq or decoder-only model, and above all an encoder whose weights have no MLM head. Transformers
only warns ("newly initialized") when it builds a missing head at random, so the head is checked
through the loading report's missing keys. ``load_seq2seq_lm`` does the same for generative probing.

``MaskedLM`` is the shared machinery of the two MLM probers: a query is split once at its ``[Y]`` slot
into token ids (``split``); ``template`` builds ``[CLS] prefix [MASK] x n suffix [SEP]`` from those ids
(cutting context far from the slot, never a mask, when the model's length limit is hit); ``log_probs``
runs rows in length-sorted batches and computes the MLM head only at the asked positions.

Learned prompts (OptiPrompt): a row may hold ids at or past the input embedding table's size
(:attr:`MaskedLM.rows`); id ``rows + j`` stands for the ``j``-th row of :attr:`MaskedLM.vectors`, whose
vector is spliced into the input embeddings in its place (the model itself is never resized). A row without
such ids runs exactly as before (``input_ids``), and one whose vectors are the embeddings of the tokens they
replace gives the same logits.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

from medlama.core.defaults import MASK_PLACEHOLDER
from medlama.core.errors import MedlamaInputError
from medlama.core.finite import require_finite
from medlama.core.loaded import LoadedModel
from medlama.core.models import (finish_loading, load_tokenizer, loading_weights, pick_device, pretrained_kwargs,
                                 quiet_transformers, read_config, resolve_model)

#: Log-probabilities (rows x positions x vocabulary) materialised at once on a CPU, at most (256 MB in float32);
#: on a GPU the device's free memory sets it (:func:`logprob_elements`).
MAX_LOGPROB_ELEMENTS = 1 << 26
#: The share of a GPU's free memory one pass's log-probabilities may take: the model's activations, the
#: softmax's temporaries and the caller's other tensors share the rest.
GPU_LOGPROB_SHARE = 0.25


#: ``{model in memory: (its tensors' names, storages and versions, their SHA-256)}``: :meth:`MaskedLM.weights_sha256`.
_WEIGHTS_SHA256: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def logprob_elements(device) -> int:
    """How many float32 log-probabilities one forward pass may materialise on ``device``.

    A fixed 256 MB starves an 80-141 GB GPU into thousands of thin passes, so on CUDA the device's free memory
    sets it (a quarter of it, never less than the CPU's figure); ``--batch-size`` still bounds the rows, and
    ``--batch-size auto`` still backs off on out-of-memory."""
    kind = getattr(device, "type", str(device))
    if kind == "cuda":
        import torch  # torch only when a model runs

        free, _ = torch.cuda.mem_get_info(device)
        return max(MAX_LOGPROB_ELEMENTS, int(free * GPU_LOGPROB_SHARE) // 4)
    return MAX_LOGPROB_ELEMENTS

def padded(rows: Sequence[Sequence[int]], value: int, *, left: bool = False):
    """``rows`` (lists of ints) as one (rows x longest) int64 numpy array padded with ``value`` on the right (on the
    left with ``left``: each row ends in the last column), and the boolean array of the filled cells; no Python
    loop per row beyond reading the lists. The one padding of token rows (the masked and causal methods)."""
    import numpy as np  # numpy only when rows are batched

    lengths = np.fromiter((len(row) for row in rows), dtype=np.int64, count=len(rows))
    width = int(lengths.max(initial=0))
    columns = np.arange(width)[None, :]
    # row-major, as the rows: each row's cells in order, whichever side its padding is on
    filled = columns >= (width - lengths)[:, None] if left else columns < lengths[:, None]
    out = np.full(filled.shape, value, dtype=np.int64)
    out[filled] = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
    return out, filled


#: What the masked-LM methods need, said when a model is not that.
MASKED_NEED = ("mask predict, mask average and masked likelihood need a masked language model (BERT style) with "
               "its MLM head")
#: What generative probing needs, said when a model is not that.
SEQ2SEQ_NEED = "generative probing needs a sequence-to-sequence model (BART or T5 style)"

CONTRASTIVE_HINT = ("encoders saved without it (the output of `medlama rewire`, the bundled sentence encoder, "
                    "PubMedBERT) can be probed with --method retrieval")


def causal_hint(config) -> str:
    """``" (a decoder-only causal LM: use --method causal-...)"`` when ``config`` is one, else ``""``."""
    # transformers loads when this runs, not when the CLI parses its flags
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, \
        MODEL_FOR_MASKED_LM_MAPPING_NAMES

    kind = config.model_type
    if getattr(config, "is_encoder_decoder", False) or kind not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES or \
            (kind in MODEL_FOR_MASKED_LM_MAPPING_NAMES and not getattr(config, "is_decoder", False)):
        return ""
    return (f" ({kind!r} is a decoder-only causal LM: use --method causal-likelihood, causal-constrained or "
            "causal-generate)")


def check_masked_config(config, path: str, method: str | None = None) -> None:
    """``MedlamaInputError`` unless ``config`` (read before any weights load) describes a model that loads as
    a masked LM: what :func:`load_masked_lm` refuses, told before any model of a probe is ranked."""
    # transformers loads when this runs, not when the CLI parses its flags
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    if getattr(config, "is_encoder_decoder", False):
        raise MedlamaInputError(f"{config.model_type!r} is a sequence-to-sequence model; {MASKED_NEED} "
                                "(use --method generative for BART/T5 models)", file=path)
    remote = "AutoModelForMaskedLM" in (getattr(config, "auto_map", None) or {})  # its own code may define one
    if config.model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES and not remote:
        raise MedlamaInputError(f"{config.model_type!r} has no masked-LM architecture; {MASKED_NEED}"
                                f"{causal_hint(config)}", file=path)


def check_seq2seq_config(config, path: str, method: str | None = None) -> None:
    """``MedlamaInputError`` unless ``config`` describes a sequence-to-sequence model (what
    :func:`load_seq2seq_lm` refuses, told before any weights load)."""
    if not getattr(config, "is_encoder_decoder", False):
        hint = causal_hint(config) or " (use --method mask-predict or mask-average for BERT-style masked LMs)"
        raise MedlamaInputError(f"{config.model_type!r} is not a sequence-to-sequence model; {SEQ2SEQ_NEED}{hint}",
                                file=path)


def load_masked_lm(model_path: str | Path | LoadedModel):
    """Tokenizer and masked LM (with its MLM head) of ``model_path`` (or the model in memory, as it is);
    ``MedlamaInputError`` otherwise."""
    from transformers import AutoModelForMaskedLM  # transformers only when a model loads or runs

    if isinstance(model_path, LoadedModel):
        return _loaded_masked_lm(model_path)
    path = resolve_model(model_path)
    config = read_config(path)
    need = MASKED_NEED
    check_masked_config(config, path)
    with loading_weights(path, "the masked LM"):
        try:
            with quiet_transformers():
                model, info = AutoModelForMaskedLM.from_pretrained(path, output_loading_info=True,
                                                                   **pretrained_kwargs())
        except ValueError as error:
            if "Unrecognized configuration class" in str(error):
                raise MedlamaInputError(f"{config.model_type!r} has no masked-LM architecture; {need}"
                                        f"{causal_hint(config)}", file=path) from None
            raise
    missing = sorted(info.get("missing_keys") or [])
    base = f"{model.base_model_prefix}."
    head = [key for key in missing if not key.startswith(base)]
    if head:
        raise MedlamaInputError(f"the weights have no MLM head (missing {', '.join(head[:4])}"
                                f"{', ...' if len(head) > 4 else ''}); {need}; {CONTRASTIVE_HINT}", file=path)
    if missing:
        raise MedlamaInputError(f"incomplete weights: {len(missing)} tensors missing ({', '.join(missing[:4])}"
                                f"{', ...' if len(missing) > 4 else ''})", file=path)
    tokenizer = load_tokenizer(path)
    if tokenizer.mask_token is None or tokenizer.mask_token_id is None:
        raise MedlamaInputError(f"the tokenizer has no mask token; {need}", file=path)
    return tokenizer, finish_loading(model).eval()


def _loaded_masked_lm(loaded: LoadedModel):
    """A masked LM in memory, checked as :func:`load_masked_lm` checks a folder's (not moved, nor put in eval mode)."""
    # transformers loads when this runs (the model in memory has loaded it already)
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    need = MASKED_NEED
    config, name = loaded.config, str(loaded)
    if config.model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES or getattr(config, "is_decoder", False) or \
            loaded.model.get_output_embeddings() is None:
        raise MedlamaInputError(f"{type(loaded.model).__name__} is not a masked LM with its MLM head; {need}"
                                f"{causal_hint(config)}", file=name)
    if loaded.tokenizer.mask_token is None or loaded.tokenizer.mask_token_id is None:
        raise MedlamaInputError(f"the tokenizer has no mask token; {need}", file=name)
    return loaded.tokenizer, loaded.model


def load_seq2seq_lm(model_path: str | Path | LoadedModel):
    """Tokenizer and sequence-to-sequence LM (BART, T5 style) of ``model_path`` (or the model in memory, as it
    is); ``MedlamaInputError`` otherwise."""
    from transformers import AutoModelForSeq2SeqLM  # transformers only when a model loads or runs

    if isinstance(model_path, LoadedModel):  # a model in memory, as it is
        if not getattr(model_path.config, "is_encoder_decoder", False):
            raise MedlamaInputError(f"{type(model_path.model).__name__} is not a sequence-to-sequence model; "
                                    "generative probing needs one (BART or T5 style)", file=str(model_path))
        return model_path.tokenizer, model_path.model
    path = resolve_model(model_path)
    config = read_config(path)
    need = SEQ2SEQ_NEED
    check_seq2seq_config(config, path)
    with loading_weights(path, "the sequence-to-sequence model"), quiet_transformers():
        model, info = AutoModelForSeq2SeqLM.from_pretrained(path, output_loading_info=True, **pretrained_kwargs())
    missing = sorted(info.get("missing_keys") or [])
    if missing:
        raise MedlamaInputError(f"incomplete weights: {len(missing)} tensors missing ({', '.join(missing[:4])}"
                                f"{', ...' if len(missing) > 4 else ''}); {need} with its LM head", file=path)
    return load_tokenizer(path), finish_loading(model).eval()


@dataclass(frozen=True)
class SplitQuery:
    """A query cut at its slot: token ids left and right of it, and whether a space precedes the slot."""

    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    space_before: bool


class MaskedLM:
    """A masked LM ready for cloze scoring: queries as token ids, batched log-probabilities at masks."""

    def __init__(self, model_path: str | Path, *, device: str | None = None, batch_size: int = 64) -> None:
        import torch  # torch only when a model runs

        if batch_size < 1:
            raise MedlamaInputError(f"batch size must be >= 1, got {batch_size}")
        self.model_path = str(model_path)
        self.tokenizer, model = load_masked_lm(model_path)
        self.device = model_path.device(device) if isinstance(model_path, LoadedModel) else pick_device(device)
        self.model = model.to(self.device)
        self.batch_size = batch_size
        tok = self.tokenizer
        self.mask_id = tok.mask_token_id
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
        wrapped = tok(tok.mask_token)["input_ids"]
        if wrapped.count(self.mask_id) != 1:
            raise MedlamaInputError(f"the tokenizer does not keep {tok.mask_token!r} as one token", file=model_path)
        at = wrapped.index(self.mask_id)
        self.lead, self.trail = tuple(wrapped[:at]), tuple(wrapped[at + 1:])
        limits = [getattr(model.config, "max_position_embeddings", None) or 512, tok.model_max_length]
        self.max_length = int(min(limit for limit in limits if limit and limit > 0))
        vocab = model.get_output_embeddings().weight.shape[0] if model.get_output_embeddings() is not None \
            else model.config.vocab_size
        self.vocab_size = int(vocab)
        #: Never predicted by mask predict: special tokens and model rows the tokenizer cannot produce.
        excluded = {i for i in tok.all_special_ids if i is not None and i < vocab} | set(range(len(tok), vocab))
        self.excluded = torch.tensor(sorted(excluded), dtype=torch.long, device=self.device)
        #: Input embedding rows; ids from here on are :attr:`vectors` (learned prompt vectors), if any.
        self.rows = int(model.get_input_embeddings().num_embeddings)
        self.vectors = None
        self.head = self._find_head(model)
        if self.head is not None and not self._head_matches(list(wrapped)):
            self.head = None
        self._splits: dict[str, SplitQuery] = {}
        self._candidate_ids: dict[tuple[tuple[str, ...], bool], list[list[int]]] = {}

    @staticmethod
    def _find_head(model):
        """The MLM head as one module applied to hidden states (BERT ``cls``, RoBERTa ``lm_head``), if any."""
        base = model.base_model
        heads = [child for child in model.children() if child is not base and any(True for _ in child.parameters())]
        return heads[0] if len(heads) == 1 else None

    def _head_matches(self, ids: list[int]) -> bool:
        """Whether the head applied to picked hidden states gives the full model's logits (else: full passes)."""
        import torch  # torch only when a model runs

        row = torch.tensor([ids], device=self.device)
        mask, where = torch.ones_like(row), torch.arange(len(ids), device=self.device).unsqueeze(0)
        with torch.inference_mode():
            full = self.model(input_ids=row, attention_mask=mask).logits
            try:
                picked = self.logits_at(row, mask, where)
            except (TypeError, ValueError, RuntimeError, IndexError):
                return False
        return picked.shape == full.shape and torch.allclose(picked.float(), full.float(), atol=1e-4, rtol=1e-4)

    # -- text to ids ---------------------------------------------------------------------------------

    def ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"] if text else []

    def split(self, text: str) -> SplitQuery:
        """``text`` (with one ``[Y]``) as token ids left and right of the slot (cached)."""
        found = self._splits.get(text)
        if found is None:
            left, right = text.split(MASK_PLACEHOLDER)
            found = SplitQuery(tuple(self.ids(left.rstrip())), tuple(self.ids(right)),
                               space_before=bool(left) and left[-1].isspace())
            if len(self._splits) >= 10_000:
                self._splits.clear()  # a cache per text would otherwise grow with every UCM input
            self._splits[text] = found
        return found

    def candidate_ids(self, names: Sequence[str], space_before: bool) -> list[list[int]]:
        """Token ids of each name (no special tokens) as it reads after a space, or glued to the text.

        WordPiece gives the same ids either way; byte-level BPE (RoBERTa) marks a leading space.
        """
        key = (tuple(names), space_before)
        cached = self._candidate_ids.get(key)
        if cached is None:
            texts = [(" " + name if space_before else name) for name in names]
            cached = [list(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]] \
                if texts else []
            self._candidate_ids = {k: v for k, v in self._candidate_ids.items() if k[0] == key[0]}
            self._candidate_ids[key] = cached
        return cached

    def template(self, query: SplitQuery, n: int) -> tuple[list[int], int]:
        """``lead + prefix + [MASK] * n + suffix + trail`` and the index of the first mask.

        Over the model's length limit, the suffix is cut from its end, then the prefix from its start.
        """
        room = self.max_length - len(self.lead) - len(self.trail) - n
        if room < 0:
            raise MedlamaInputError(f"{n} masks do not fit the model's {self.max_length} positions")
        prefix, suffix = list(query.prefix), list(query.suffix)
        if len(prefix) + len(suffix) > room:
            suffix = suffix[:max(0, room - len(prefix))]
            prefix = prefix[len(prefix) - min(len(prefix), room - len(suffix)):]
        ids = [*self.lead, *prefix, *([self.mask_id] * n), *suffix, *self.trail]
        return ids, len(self.lead) + len(prefix)

    # -- scoring -------------------------------------------------------------------------------------

    def inputs(self, input_ids) -> dict:
        """The model's inputs for ``input_ids``: the ids themselves, or (when a row holds prompt-vector ids,
        ``>= rows``) their input embeddings with :attr:`vectors` spliced in at those ids."""
        import torch  # torch only when a model runs

        learned = input_ids >= self.rows
        if self.vectors is None or not bool(learned.any()):
            return {"input_ids": input_ids}
        embedded = self.model.get_input_embeddings()(input_ids.masked_fill(learned, 0))
        spliced = self.vectors.to(embedded.dtype)[(input_ids - self.rows).clamp(min=0)]
        return {"inputs_embeds": torch.where(learned.unsqueeze(-1), spliced, embedded)}

    def logits_at(self, input_ids, attention_mask, positions):
        """Logits (rows x positions x vocabulary) at ``positions`` (rows x positions) of each row."""
        if self.head is not None:
            hidden = self.model.base_model(**self.inputs(input_ids), attention_mask=attention_mask)[0]
            picked = hidden.gather(1, positions.unsqueeze(-1).expand(-1, -1, hidden.size(-1)))
            return self.head(picked)
        logits = self.model(**self.inputs(input_ids), attention_mask=attention_mask).logits
        return logits.gather(1, positions.unsqueeze(-1).expand(-1, -1, logits.size(-1)))

    def log_probs(self, rows: Sequence[Sequence[int]], positions: Sequence[Sequence[int]],
                  reduce: Callable, *, exclude_special: bool = False):
        """``reduce(log_softmax logits at positions)`` over length-sorted batches, back in row order.

        ``positions[i]`` are indices into ``rows[i]``. Rows are batched by their number of positions, then
        length, and a batch's P is its rows' most positions, so the head and the log-softmax run at a row's
        own positions, not at the widest row's (mask predict's rows have 1..M masks left); within a batch,
        rows with fewer positions are padded by repeating their last one (ignore those slots).
        ``reduce(lp, index)`` maps the log-probabilities of a batch (float tensor, batch x P x vocabulary)
        and the batch's row numbers (long tensor, on the model's device) to a tensor or a tuple of tensors
        with the batch first; the results come back concatenated in row order, a result's second axis (the
        positions, where it has one) padded to the widest row's by repeating its last slot.
        With ``exclude_special``, special tokens get log-probability -inf (not renormalised).
        """
        import torch  # torch only when a model runs

        if not rows:
            raise ValueError("no rows to score")
        width = max(len(p) for p in positions)
        per_batch = max(1, min(self.batch_size, logprob_elements(self.device) // max(1, width * self.vocab_size)))
        order = sorted(range(len(rows)), key=lambda i: (len(positions[i]), len(rows[i])))
        pieces, done = [], []
        with torch.inference_mode():
            for start in range(0, len(order), per_batch):
                chunk = order[start:start + per_batch]
                ids, filled = padded([rows[i] for i in chunk], self.pad_id)
                # a row with fewer positions repeats its last one up to the batch's most
                count = max(len(positions[i]) for i in chunk)
                where, _ = padded([list(positions[i]) + [positions[i][-1]] * (count - len(positions[i]))
                                   for i in chunk], 0)
                ids, mask, where = torch.from_numpy(ids), torch.from_numpy(filled).long(), torch.from_numpy(where)
                logits = self.logits_at(ids.to(self.device), mask.to(self.device), where.to(self.device))
                require_finite(logits, model=self.model_path, what="logits")
                lp = logits.float().log_softmax(-1)
                if exclude_special and len(self.excluded):
                    lp[:, :, self.excluded] = float("-inf")
                out = reduce(lp, torch.tensor(chunk, dtype=torch.long, device=self.device))
                out = out if isinstance(out, tuple) else (out,)
                if count < width:  # the positions axis as wide as the widest row's, its last slot repeated
                    out = tuple(_widened(t, count, width) for t in out)
                pieces.append(out)
                done.extend(chunk)
        inverse = torch.empty(len(done), dtype=torch.long)
        inverse[torch.tensor(done, dtype=torch.long)] = torch.arange(len(done))
        joined = tuple(torch.cat([p[j] for p in pieces])[inverse.to(pieces[0][j].device)]
                       for j in range(len(pieces[0])))
        return joined if len(joined) > 1 else joined[0]

    def weights_sha256(self) -> str:
        """SHA-256 over the model's tensors (names, shapes, dtypes, bytes, in name order): what learned prompts
        are trained for. Computed once per model in memory (every ``MaskedLM`` over it shares it) while no tensor
        is changed in place, replaced or added (their version counters and storage say so)."""
        import torch  # torch only when a model runs

        state = self.model.state_dict()
        stamp = tuple((name, tensor.data_ptr(), tensor._version) for name, tensor in sorted(state.items()))
        known = _WEIGHTS_SHA256.get(self.model)
        if known is not None and known[0] == stamp:
            return known[1]
        digest = hashlib.sha256()
        for name, tensor in sorted(state.items()):
            tensor = tensor.detach().cpu().contiguous()
            digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}\0".encode())
            digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes())
        _WEIGHTS_SHA256[self.model] = (stamp, digest.hexdigest())
        return digest.hexdigest()

    def decode(self, ids: Sequence[int]) -> str:
        """Token ids as text: word pieces joined, special tokens dropped, outer spaces stripped."""
        return " ".join(self.tokenizer.decode(list(ids), skip_special_tokens=True).split())


def candidate_lookup(keys: Sequence[Sequence[int]], names: Sequence[str]) -> dict[tuple[int, ...], list[str]]:
    """Token-id key -> every candidate name with those ids, in candidate order (empty keys dropped)."""
    table: dict[tuple[int, ...], list[str]] = {}
    for key, name in zip(keys, names):
        if key:
            table.setdefault(tuple(key), []).append(name)
    return table


def rank_unique(scored: Sequence[tuple[str, float]], top_k: int) -> list[str]:
    """Distinct non-empty strings by their best score, best first, at most ``top_k``.

    Equal scores keep the order in which the strings first appeared.
    """
    best: dict[str, float] = {}
    first: dict[str, int] = {}
    for order, (text, score) in enumerate(scored):
        if not text:
            continue
        first.setdefault(text, order)
        if text not in best or score > best[text]:
            best[text] = score
    return sorted(best, key=lambda text: (-best[text], first[text]))[:top_k]


def _widened(result, count: int, width: int):
    """A batch's ``reduce`` result with its positions axis (the second, ``count`` wide) widened to ``width`` by
    repeating its last slot; a result of one axis has none and is kept. A second axis of another size is not one
    of positions, and widening it would mix up its entries: an error in the caller's ``reduce``, said so."""
    if result.dim() < 2:
        return result
    if result.shape[1] != count:
        raise RuntimeError(f"internal error: a reduce result of shape {tuple(result.shape)} in MaskedLM.log_probs: "
                           f"its second axis must be the batch's {count} positions (or a result must have one axis)")
    import torch  # torch only when a model runs

    return result[:, torch.arange(width, device=result.device).clamp(max=count - 1)]
