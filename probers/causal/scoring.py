"""Scoring with decoder-only causal LMs (GPT-2, BioGPT, Llama family): loading, query splitting, scoring.

The model side of the causal probers (:mod:`medlama.probers.causal.prober`) and of the UCM causal ranker.

``load_causal_lm`` refuses what the causal methods cannot use, naming the model and the method to use
instead: a sequence-to-sequence model (``--method generative``), a bidirectional encoder or masked LM
(``--method mask-predict`` / ``mask-average`` / ``retrieval``), incomplete weights. A tokenizer
without a pad token (GPT-2 style) gets its EOS token as padding; ``dtype`` and ``device_map="auto"``
(sharding by ``accelerate``) are passed to ``from_pretrained``.

``CausalLM`` is the shared machinery of the causal probers. A query is cut once at its ``[Y]`` slot
(``split``): the prefix is the text before the slot (trailing space removed) after the tokenizer's own
leading special tokens (Llama's BOS; none for GPT-2); candidate names and the suffix are tokenised *as
they read in context*, after an anchor word (``context_ids``), so that GPT-2's byte-level BPE gets
its leading-space tokens and SentencePiece its word-start marker, and ``prefix + name + suffix`` is
the tokenisation of the whole sentence for whitespace-splitting tokenizers (tested).

``continuation_log_probs`` scores continuations (name + suffix) of one prefix. With ``kv_cache`` the
prefix runs once, and its KV cache (a ``DynamicCache``) is broadcast over each batch of continuations
(:func:`~medlama.probers.causal.passes.broadcast_cache`: no copy of the prefix's own), so a prefix of ``p`` tokens
costs one pass instead of one per candidate; without it every full sequence runs from scratch (the reference the
cache is tested against). Continuations are right-padded with no attention mask: a causal model never looks ahead, so
padding changes no real token's score. A token's log-probability is its logit minus the logsumexp over the
vocabulary, in float32 (``target_log_probs``): no log-softmax is written out for the whole vocabulary. With a plain
cache the names' distinct first tokens run once (one pass), and each name's later tokens after its first token's
cache, rows of near lengths together (:func:`~medlama.probers.causal.passes.shared_first_scores`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from medlama.core.defaults import MASK_PLACEHOLDER
from medlama.core.batching import BatchSize, batch_size_setting
from medlama.core.errors import MedlamaInputError
from medlama.core.finite import require_log_probs
from medlama.core.loaded import LoadedModel
from medlama.core.models import (DTYPES, finish_loading, load_tokenizer, loading_weights, pick_device,
                                 pretrained_kwargs, quiet_transformers, read_config, resolve_model, torch_dtype)
# BLANK and CHAT_INSTRUCTION are also read from here, where they were defined first
from medlama.probers.causal.chat import BLANK, CHAT_INSTRUCTION, turns, user_message  # noqa: F401
from medlama.probers.causal.passes import (broadcast_cache, padded_tensors, plain_layers, row_totals, rows_per_pass,
                                           returned_cache, shared_first_scores, sum_dtype, target_log_probs,
                                           with_cache)
from medlama.probers.mlm import logprob_elements
from medlama.probers.prober import check_settings
from medlama.core.settings import setting

#: A word every tokenizer splits off on its own: names and suffixes are tokenised after it, as in context.
ANCHOR = "a"

SEQ2SEQ_HINT = "use --method generative for sequence-to-sequence (BART/T5) models"
ENCODER_HINT = ("use --method mask-predict or mask-average for masked LMs (BERT/RoBERTa style), "
                "--method retrieval for encoders")


@dataclass(frozen=True)
class CausalModelSettings:
    """How a causal LM is loaded and fed; shared by every causal method (and the UCM causal ranker)."""

    batch_size: BatchSize = batch_size_setting(32, help="rows per forward pass: candidate continuations (likelihood) "
                                                    "or queries (beam search, generation)")
    dtype: Literal["fp32", "bf16", "fp16"] = setting("fp32", help="weights' dtype (bf16/fp16 halve memory on "
                                                                   "a GPU; scores are summed in float32)")
    device_map: Literal["auto"] | None = setting(None, help="'auto': shard a model larger than one GPU over "
                                                            "the devices with accelerate (needs no --device)")
    chat_template: bool = setting(False, help="wrap each query in the tokenizer's chat template (for "
                                              "instruction-tuned models; off: the papers probe base models)")
    system_prompt: str | None = setting(None, metavar="TEXT", help="the system message of the chat template "
                                                                   "(needs --chat-template)")
    few_shot: int = setting(0, metavar="N", min=0, help="read each query after N filled prompts of other facts of "
                                                        "its relation (never its own subject's), drawn per query; "
                                                        "their ids are recorded per query")
    few_shot_seed: int = setting(0, metavar="S", help="the seed of the few-shot draw")
    few_shot_as_multiturn: bool = setting(False, help="with --chat-template: each few-shot example a user turn (its "
                                                      "query) and an assistant turn (its sentence filled in), as "
                                                      "lm-eval's --fewshot_as_multiturn")

    def __post_init__(self) -> None:
        check_settings(self)
        if self.system_prompt is not None and not self.chat_template:
            raise MedlamaInputError("system_prompt is the system message of a chat template: give chat_template "
                                    "too (--chat-template); a base model has no system turn")
        if self.few_shot_as_multiturn and not (self.chat_template and self.few_shot):
            raise MedlamaInputError("few_shot_as_multiturn makes few-shot examples chat turns: give chat_template "
                                    "(--chat-template) and few_shot N >= 1 (--few-shot N) too")
        if self.few_shot and self.chat_template and not self.few_shot_as_multiturn:
            raise MedlamaInputError("few_shot with chat_template is not supported as one user turn: the examples "
                                    "would sit inside its blank-filling instruction; give few_shot_as_multiturn "
                                    "(--few-shot-as-multiturn: each example its own turns) or leave one off")


def _log_softmax(logits):
    """Log-softmax in at least float32 (bf16/fp16 logits are widened; a float64 model stays float64)."""
    import torch  # torch only when a model runs

    return logits.to(torch.promote_types(logits.dtype, torch.float32)).log_softmax(-1)


def check_causal_config(config, path: str, method: str) -> None:
    """``MedlamaInputError`` unless ``config`` describes a decoder-only causal LM."""
    # transformers loads when this runs, not when the CLI parses its flags
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, \
        MODEL_FOR_MASKED_LM_MAPPING_NAMES

    need = f"--method {method} needs a decoder-only causal language model (GPT-2, BioGPT, Llama style)"
    kind = config.model_type
    if getattr(config, "is_encoder_decoder", False):
        raise MedlamaInputError(f"{kind!r} is a sequence-to-sequence model; {need}; {SEQ2SEQ_HINT}", file=path)
    if kind in MODEL_FOR_MASKED_LM_MAPPING_NAMES and not getattr(config, "is_decoder", False):
        # BERT-family configs also have an LM-head class, but as saved they are bidirectional encoders.
        raise MedlamaInputError(f"{kind!r} is an encoder-only (bidirectional) model; {need}; {ENCODER_HINT}",
                                file=path)
    if kind not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise MedlamaInputError(f"{kind!r} has no causal-LM architecture in transformers; {need}", file=path)


def is_causal_lm(model_path: str | Path) -> bool:
    """Whether ``model_path``'s config describes a decoder-only causal LM (no readable config: False)."""
    try:
        path = resolve_model(model_path)
        check_causal_config(read_config(path), path, "causal-likelihood")
    except MedlamaInputError:
        return False
    return True


def load_causal_lm(model_path: str | Path | LoadedModel, method: str, *, dtype: str = "fp32",
                   device: str | None = None,
                   device_map: str | None = None):
    """``(tokenizer, model)`` of a causal LM at ``model_path``, in eval mode on ``device`` (or sharded); of a
    :class:`~medlama.core.loaded.LoadedModel`, the model as it is.

    ``method`` names the probing method in errors. A tokenizer without a pad token gets EOS as padding.
    """
    from transformers import AutoModelForCausalLM  # transformers only when a model loads or runs

    if dtype not in DTYPES:
        raise MedlamaInputError(f"unknown dtype {dtype!r}; choose from {list(DTYPES)}")
    if isinstance(model_path, LoadedModel):
        return _loaded_causal_lm(model_path, method, dtype=dtype, device=device, device_map=device_map)
    path = resolve_model(model_path)
    config = read_config(path)
    check_causal_config(config, path, method)
    kwargs = {"dtype": torch_dtype(dtype), "output_loading_info": True, **pretrained_kwargs()}
    if device_map is not None:
        if device_map != "auto":
            raise MedlamaInputError(f"unknown device map {device_map!r}; the only choice is 'auto'")
        kwargs["device_map"] = "auto"
    with loading_weights(path, "the causal LM"), quiet_transformers():
        model, info = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    missing = sorted(info.get("missing_keys") or [])
    if missing:
        raise MedlamaInputError(f"incomplete weights: {len(missing)} tensors missing ({', '.join(missing[:4])}"
                                f"{', ...' if len(missing) > 4 else ''}); --method {method} needs the model with "
                                "its LM head", file=path)
    tokenizer = load_tokenizer(path)
    if tokenizer.pad_token_id is None and tokenizer.eos_token_id is not None:
        tokenizer.pad_token = tokenizer.eos_token  # GPT-2 style: no pad token; padding is never attended
    model = finish_loading(model)
    if device_map is None:
        model = model.to(pick_device(device))
    return tokenizer, model.eval()


def _loaded_causal_lm(loaded: LoadedModel, method: str, *, dtype: str, device: str | None,
                      device_map: str | None):
    """A causal LM in memory, checked as :func:`load_causal_lm` checks a folder's: as it is (its device, its
    precision, which ``dtype`` must name; its mode), with a copy of its tokenizer given EOS as padding."""
    check_causal_config(loaded.config, str(loaded), method)
    if loaded.model.get_output_embeddings() is None:
        raise MedlamaInputError(f"{type(loaded.model).__name__} has no LM head; --method {method} needs the model "
                                "with its LM head", file=str(loaded))
    if device_map is not None:
        raise MedlamaInputError("device_map applies to a model loaded from a folder or Hub id, not one in memory")
    loaded.check_dtype(dtype)
    loaded.device(device)
    tokenizer = loaded.tokenizer
    if tokenizer.pad_token_id is None and tokenizer.eos_token_id is not None:
        tokenizer = copy.deepcopy(tokenizer)  # the caller's tokenizer is left as it is
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer, loaded.model


@dataclass(frozen=True)
class CausalQuery:
    """A query cut at its slot: the prefix ids the model reads first, the suffix's ids, and how the slot reads.

    ``slot``: ``start`` (the slot opens the text), ``space`` (after a space) or ``glued`` (to the text before).
    """

    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    slot: str


class CausalLM:
    """A causal LM ready for cloze scoring: queries as token ids, batched continuation log-probabilities."""

    def __init__(self, model_path: str | Path | LoadedModel, method: str,
                 settings: CausalModelSettings = CausalModelSettings(),
                 *, device: str | None = None) -> None:
        self.model_path = str(model_path)
        self.method = method
        self.settings = settings
        self.tokenizer, self.model = load_causal_lm(model_path, method, dtype=settings.dtype, device=device,
                                                    device_map=settings.device_map)
        tok = self.tokenizer
        #: Where inputs go: the first parameter's device (the embeddings, also when sharded).
        self.device = next(self.model.parameters()).device
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
        self.eos_id = tok.eos_token_id
        plain, wrapped = self.ids(ANCHOR), tok(ANCHOR)["input_ids"]
        at = next((i for i in range(len(wrapped)) if wrapped[i:i + len(plain)] == plain), 0)
        #: The special tokens the tokenizer puts before a text (Llama's BOS), kept before every prefix.
        self.lead = tuple(wrapped[:at])
        self._anchor = tuple(plain)
        config = self.model.config.get_text_config(decoder=True)
        limits = [getattr(config, name, None) for name in ("max_position_embeddings", "n_positions", "n_ctx")]
        limits.append(tok.model_max_length)
        self.max_length = int(min((n for n in limits if isinstance(n, int) and 0 < n < 10 ** 8), default=10 ** 8))
        self.vocab_size = int(self.model.get_output_embeddings().weight.shape[0])
        if settings.chat_template and not getattr(tok, "chat_template", None):
            also = " and few_shot_as_multiturn" if settings.few_shot_as_multiturn else ""
            raise MedlamaInputError("chat_template is on but the tokenizer has no chat template (base models "
                                    f"have none; leave it off{also})", file=self.model_path)
        self._splits: dict[str, CausalQuery] = {}
        self._names: dict[tuple[tuple[str, ...], str], list[tuple[int, ...]]] = {}

    # -- text to ids ---------------------------------------------------------------------------------

    def ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def context_ids(self, text: str) -> list[int]:
        """Token ids of ``text`` as it reads after a word: tokenised after ``ANCHOR`` and the anchor removed.

        When the text glues onto the anchor (no leading space, merged tokens), it is tokenised alone.
        """
        joined = self.ids(ANCHOR + text)
        n = len(self._anchor)
        return joined[n:] if tuple(joined[:n]) == self._anchor else self.ids(text)

    def need_eos(self, why: str) -> int:
        """The EOS id, or a clear error saying why it is needed."""
        if self.eos_id is None:
            raise MedlamaInputError(f"the tokenizer has no EOS token, which --method {self.method} needs {why}",
                                    file=self.model_path)
        return self.eos_id

    def split(self, text: str) -> CausalQuery:
        """``text`` (with one ``[Y]``) as prefix ids (special lead included) and suffix ids (cached)."""
        found = self._splits.get(text)
        if found is not None:
            return found
        if not isinstance(text, str) or text.count(MASK_PLACEHOLDER) != 1:
            count = text.count(MASK_PLACEHOLDER) if isinstance(text, str) else 0
            raise MedlamaInputError(f"query has {count} {MASK_PLACEHOLDER} slots, needs exactly one: {text!r}")
        # few-shot examples as chat turns travel in the text (few_shot_as_multiturn); any other text is read whole
        examples, query = turns(text) if self.settings.few_shot_as_multiturn else ([], text)
        left, right = query.split(MASK_PLACEHOLDER)
        body = left.rstrip()
        if self.settings.chat_template:
            start = self._chat_start([*examples, {"role": "user", "content": user_message(query)}])
            prefix = start + self.ids(body)
        else:
            prefix = [*self.lead, *self.ids(body)]
        if not prefix:
            # The slot opens the text and the tokenizer adds nothing: condition the first token on BOS (or EOS).
            start_id = self.tokenizer.bos_token_id if self.tokenizer.bos_token_id is not None else self.eos_id
            if start_id is None:
                raise MedlamaInputError(f"query {text!r} starts with {MASK_PLACEHOLDER} and the tokenizer has "
                                        "neither a BOS nor an EOS token to start from", file=self.model_path)
            prefix = [start_id]
        slot = "start" if not left.strip() and not self.settings.chat_template else \
            "space" if left[-1:].isspace() else "glued"
        found = CausalQuery(tuple(prefix), tuple(self.context_ids(right)), slot)
        if len(self._splits) > 50_000:
            self._splits.clear()  # a cache per text would otherwise grow with every UCM input
        self._splits[text] = found
        return found

    def _chat_start(self, messages: list[dict[str, str]]) -> list[int]:
        """The chat template's ids up to the assistant's reply to ``messages`` (after the system message)."""
        if self.settings.system_prompt is not None:
            messages.insert(0, {"role": "system", "content": self.settings.system_prompt})
        try:
            return list(self.tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True,
                                                           return_dict=False))
        except Exception as error:  # jinja2's TemplateError: a template that raises on a system turn
            if self.settings.system_prompt is None:
                raise
            raise MedlamaInputError(f"the tokenizer's chat template refuses a system message ({error}); leave "
                                    "--system-prompt out", file=self.model_path) from error

    def slot_ids(self, text: str, slot: str) -> tuple[int, ...]:
        """Token ids of ``text`` as it reads in a slot of kind ``slot`` (see ``CausalQuery``)."""
        if slot == "start":
            return tuple(self.ids(text))
        return tuple(self.context_ids((" " if slot == "space" else "") + text))

    def candidate_ids(self, names: Sequence[str], slot: str) -> list[tuple[int, ...]]:
        """Token ids of each name as it reads in the slot (cached for the last name list)."""
        key = (tuple(names), slot)
        cached = self._names.get(key)
        if cached is None:
            cached = [self.slot_ids(name, slot) for name in names]
            self._names = {k: v for k, v in self._names.items() if k[0] == key[0]}
            self._names[key] = cached
        return cached

    def fit_prefix(self, prefix: Sequence[int], longest: int) -> list[int]:
        """``prefix`` cut from its start (after the lead) so that ``longest`` more tokens fit the model.

        The last token of a continuation is predicted, never fed, so it needs no position.
        """
        room = self.max_length - longest + 1
        if len(prefix) <= room:
            return list(prefix)
        if room < 1:
            raise MedlamaInputError(f"a continuation of {longest} tokens does not fit the model's "
                                    f"{self.max_length} positions", file=self.model_path)
        keep = [*self.lead][:max(0, room - 1)]
        return keep + list(prefix[len(prefix) - (room - len(keep)):])

    # -- scoring -------------------------------------------------------------------------------------

    def continuation_log_probs(self, prefix: Sequence[int], rows: Sequence[Sequence[int]], *,
                               reduction: str = "sum", kv_cache: bool = True, head=None):
        """Per row, the summed (or mean) log-probability of ``row`` as the continuation of ``prefix``.

        A float64 CPU tensor in row order; an empty row scores ``-inf``. The prefix is cut from its start
        when prefix + the longest row exceeds the model's positions. ``head``: what ``_prefix_pass`` gave for
        that prefix (as cut), when the caller has run it already (it is not run again).

        Rows run sorted by length (little padding), as many per pass as ``batch_size`` and the device's
        log-probability budget allow; with the KV cache (a plain one), names sharing a first token share that
        position (:func:`~medlama.probers.causal.passes.shared_first_scores`). Each row's sum stays on the device
        (float64 where the device has it) until the last pass, so a query costs one transfer and one check of its
        scores, not one per pass.
        """
        import torch  # torch only when a model runs

        if reduction not in ("sum", "mean"):
            raise MedlamaInputError(f"unknown reduction {reduction!r}; choose 'sum' or 'mean'")
        out = torch.full((len(rows),), float("-inf"), dtype=torch.float64)
        real = [i for i, row in enumerate(rows) if row]
        if not real:
            return out
        longest = max(len(rows[i]) for i in real)
        prefix = self.fit_prefix(prefix, longest)
        budget = logprob_elements(self.device)  # once per call: on a GPU it asks the driver for free memory
        per_batch = rows_per_pass(longest + (0 if kv_cache else len(prefix)), batch_size=self.settings.batch_size,
                                  budget=budget, vocab=self.vocab_size)
        order = sorted(real, key=lambda i: len(rows[i]))
        wide = sum_dtype(self.device)
        sums = []
        with torch.inference_mode():
            head = (head or self._prefix_pass(prefix)) if kv_cache else None
            layers = plain_layers(head[0]) if kv_cache else None
            if layers is not None:  # names sharing a first token share its position (causal_passes)
                sums = [shared_first_scores(self.model, head[0], head[1], [rows[i] for i in order],
                                            batch_size=self.settings.batch_size, budget=budget,
                                            vocab=self.vocab_size, pad_id=self.pad_id)]
                if reduction == "mean":
                    sums[0] = sums[0] / torch.tensor([len(rows[i]) for i in order], device=sums[0].device)
            for start in range(0, len(order), per_batch) if layers is None else ():
                chunk = order[start:start + per_batch]
                ids, filled = padded_tensors([rows[i] for i in chunk], self.pad_id, self.device)
                lp = self._cached(head, ids) if kv_cache else self._uncached(prefix, ids)
                sums.append(row_totals(lp, filled, wide, reduction=reduction))
            scores = torch.cat(sums).to("cpu", torch.float64)
        # NaN or +inf anywhere in a row's log-probabilities reaches its sum (a NaN logit spoils its whole position)
        require_log_probs(scores, model=self.model_path)
        out[torch.tensor(order)] = scores
        return out

    def _prefix_pass(self, prefix: Sequence[int]):
        """The prefix's KV cache and the log-probabilities of the token after it (float32, vocabulary)."""
        import torch  # torch only when a model runs
        from transformers import DynamicCache  # transformers only when a model loads or runs

        ids = torch.tensor([list(prefix)], dtype=torch.long, device=self.device)
        cache = DynamicCache(config=self.model.config)
        result = self.model(input_ids=ids, **with_cache(self.model, cache), use_cache=True, logits_to_keep=1)
        return returned_cache(result), _log_softmax(result.logits[0, -1])

    def _cached(self, head, ids):
        """Per-token log-probabilities (batch x width) of ``ids`` after the cached prefix."""
        import torch  # torch only when a model runs

        cache, first = head
        lp = first.to(ids.device)[ids[:, :1]]
        if ids.shape[1] == 1:
            return lp
        logits = self.model(input_ids=ids[:, :-1], **with_cache(self.model, broadcast_cache(cache, ids.shape[0])),
                            use_cache=True).logits
        return torch.cat([lp, target_log_probs(logits, ids[:, 1:]).to(lp.device, lp.dtype)], dim=1)

    def _uncached(self, prefix: Sequence[int], ids):
        """The same log-probabilities from one plain pass over each full sequence (the naive reference)."""
        import torch  # torch only when a model runs

        head = torch.tensor(list(prefix), dtype=torch.long, device=ids.device).expand(ids.shape[0], -1)
        full = torch.cat([head, ids[:, :-1]], dim=1)
        logits = self.model(input_ids=full, use_cache=False, logits_to_keep=ids.shape[1]).logits
        return target_log_probs(logits, ids)

    def decode(self, ids: Sequence[int]) -> str:
        return " ".join(self.tokenizer.decode(list(ids), skip_special_tokens=True).split())
