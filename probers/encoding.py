"""Encoding texts with any Hugging Face encoder: length-sorted batches, dynamic padding, inference mode.

One pass yields the pooled representation of several hidden layers at once (figure 6 of the paper
needs every layer), and layers above the highest one asked for are dropped before encoding.

:class:`Encoder` takes a model folder or Hub id, or an already loaded model: a ``SentenceTransformer``
(its transformer and tokenizer are used; its own pooling is not) or a ``transformers.PreTrainedModel``
with its tokenizer. A loaded model is used as it is, on its own device unless one is given, never cut to
fewer layers nor cast to half precision (it may be a model in training: :mod:`medlama.trainers.evaluator`).

:class:`SentenceTransformerEncoder` (pooling ``sentence-transformers``) encodes instead exactly as
sentence-transformers does, through ``SentenceTransformer.encode`` itself: the model's own modules (its
pooling, normalisation and ``max_seq_length``), in the model's precision, so that retrieval with it equals
sentence-transformers' ``InformationRetrievalEvaluator`` (and MTEB's retrieval tasks).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from medlama.core.errors import MedlamaInputError
from medlama.core.finite import require_finite
from medlama.core.models import (active_options, finish_loading, load_tokenizer, loading_weights, note_loaded,
                                 pick_device, pretrained_kwargs, read_config, resolve_model)
from medlama.core.progress import bar as progress_bar
from medlama.core.progress import enabled as progress_enabled

POOLINGS = ("cls", "mean")
#: The pooling that is no pooling of ours: the model's own sentence-transformers modules.
SENTENCE_TRANSFORMERS = "sentence-transformers"


def own_max_length(tokenizer: Any, config: Any) -> int:
    """The longest input ``tokenizer`` and ``config`` allow, as sentence-transformers' ``Transformer`` module
    takes it when the model names no ``max_seq_length``: the smaller of the two limits."""
    limits = [limit for limit in (getattr(tokenizer, "model_max_length", None),
                                  getattr(config, "max_position_embeddings", None))
              if isinstance(limit, int) and 0 < limit < 10 ** 9]  # transformers' "no limit" is a huge number
    if not limits:
        raise MedlamaInputError("the model states no maximum input length; give the query and name lengths")
    return min(limits)


def load_encoder(model_path: str | Path):
    """Tokenizer and encoder (no task head) of ``model_path``, with clear errors for what is not one."""
    from transformers import AutoModel  # transformers only when a model loads or runs

    path = resolve_model(model_path)
    config = read_config(path)
    if getattr(config, "is_encoder_decoder", False) or getattr(config, "is_decoder", False):
        raise MedlamaInputError(f"{config.model_type!r} is not an encoder-only model; retrieval probing needs "
                                "an encoder such as BERT", file=path)
    tokenizer = load_tokenizer(path)
    with loading_weights(path, "the encoder"):
        model = AutoModel.from_pretrained(path, **pretrained_kwargs())
    return tokenizer, finish_loading(model)


def loaded_encoder(model: Any, tokenizer: Any = None) -> tuple[Any, Any, str] | None:
    """``(tokenizer, encoder, name)`` of an already loaded model, or ``None`` when ``model`` is a path or id.

    ``model``: a ``SentenceTransformer`` (its first module's transformer) or a ``PreTrainedModel`` (a model
    with an MLM or other head gives its base encoder); ``tokenizer``: needed for a ``PreTrainedModel`` unless
    its ``name_or_path`` loads one.
    """
    if model is None or isinstance(model, (str, Path)):
        return None
    first = model[0] if hasattr(model, "tokenizer") and hasattr(model, "__getitem__") else None
    auto_model = (getattr(first, "auto_model", None) or getattr(first, "model", None)) if first is not None else None
    if auto_model is not None:  # a SentenceTransformer
        tokenizer = tokenizer if tokenizer is not None else model.tokenizer
        encoder = auto_model
    elif hasattr(model, "config") and hasattr(model, "forward"):
        encoder = getattr(model, "base_model", model)
        if tokenizer is None:
            name = getattr(model, "name_or_path", None) or getattr(model.config, "_name_or_path", None)
            if not name:
                raise MedlamaInputError("a loaded model needs its tokenizer: pass tokenizer=")
            tokenizer = load_tokenizer(resolve_model(name))
    else:
        raise MedlamaInputError(f"cannot probe a {type(model).__name__}: give a model folder or Hub id, a "
                                "SentenceTransformer, or a transformers PreTrainedModel with its tokenizer")
    config = encoder.config
    if getattr(config, "is_encoder_decoder", False) or getattr(config, "is_decoder", False):
        raise MedlamaInputError(f"{config.model_type!r} is not an encoder-only model; retrieval probing needs "
                                "an encoder such as BERT")
    name = (getattr(model, "name_or_path", None) or getattr(config, "_name_or_path", None)
            or type(model).__name__)
    return tokenizer, encoder, str(name)


def _layer_stack(model):
    """The model's list of transformer layers, where the architecture exposes one (BERT-like models)."""
    import torch  # torch only when a model runs

    for owner in (getattr(model, "encoder", None), getattr(model, "transformer", None)):
        layers = getattr(owner, "layer", None)
        if isinstance(layers, torch.nn.ModuleList):
            return owner
    return None


class Encoder:
    """Pooled hidden states of an encoder for lists of texts.

    ``layers``: hidden-state indices as in ``output_hidden_states`` (0 = embeddings, L = output of
    layer L, negative counts from the top; default the last layer). ``pooling``: ``cls`` (the first
    token) or ``mean`` (over non-padding tokens).
    """

    def __init__(self, model_path: Any, *, layers: Sequence[int] | None = None, pooling: str = "cls",
                 batch_size: int = 128, device: str | None = None, half_on_gpu: bool = True,
                 tokenizer: Any = None) -> None:
        import torch  # torch only when a model runs

        if pooling not in POOLINGS:
            raise MedlamaInputError(f"unknown pooling {pooling!r}; choose from {list(POOLINGS)}")
        loaded = loaded_encoder(model_path, tokenizer)
        if loaded is None:
            self.tokenizer, model = load_encoder(model_path)
            self.model_path = str(model_path)
        else:
            self.tokenizer, model, self.model_path = loaded
        #: the caller's own model object (used as it is: see the module docstring)
        self.borrowed = loaded is not None
        depth = model.config.num_hidden_layers
        requested = list(layers) if layers else [depth]
        resolved = []
        for layer in requested:
            index = layer + depth + 1 if layer < 0 else layer
            if not 0 <= index <= depth:
                raise MedlamaInputError(f"layer {layer} out of range: {self.model_path} has {depth} layers "
                                        f"(use 0..{depth}, or -1 for the last)")
            resolved.append(index)
        self.layers = resolved
        self.depth = depth
        keep = max(resolved)
        stack = _layer_stack(model)
        if stack is not None and keep < depth and not self.borrowed:  # the layers above are never needed
            stack.layer = stack.layer[:keep]
        self.pooling = pooling
        self.batch_size = batch_size
        self.device = pick_device(device) if not (self.borrowed and device is None) else model.device
        if self.borrowed:
            pass  # the caller's model: its precision and mode are its own (a model in training stays trainable)
        elif self.device.type == "cuda" and half_on_gpu:
            model = model.half()  # as the reference implementation encodes
        elif self.device.type == "cpu":
            torch.set_num_threads(max(1, len(os.sched_getaffinity(0))))
        self.model = model.to(self.device) if self.borrowed else model.to(self.device).eval()

    @property
    def mask_token(self) -> str:
        if self.tokenizer.mask_token is None:
            raise MedlamaInputError(f"the tokenizer of {self.model_path} has no mask token")
        return self.tokenizer.mask_token

    @property
    def max_length(self) -> int:
        """The longest input the model takes (what a length of ``None`` cuts to)."""
        return own_max_length(self.tokenizer, self.model.config)

    def encode(self, texts: Sequence[str], max_length: int | None, *, progress: str | None = None,
               role: str | None = None) -> dict[int, np.ndarray]:
        """``{layer: float32 array (len(texts), hidden)}`` for every configured layer; each text cut to
        ``max_length`` tokens (``None``: :attr:`max_length`). ``role`` (``query``/``document``) changes
        nothing here: hidden states encode queries and names alike."""
        max_length = self.max_length if max_length is None else max_length
        encoded = self.tokenizer(list(texts), truncation=True, max_length=max_length, add_special_tokens=True)
        input_ids = encoded["input_ids"]
        order = np.argsort([len(ids) for ids in input_ids], kind="stable")
        hidden = self.model.config.hidden_size
        out = {layer: np.empty((len(texts), hidden), dtype=np.float32) for layer in self.layers}
        starts = range(0, len(texts), self.batch_size)
        training = self.model.training  # a borrowed model in training: no dropout while encoding, then back
        self.model.eval()
        try:
            return self._encode(encoded, order, out, starts, progress)
        finally:
            self.model.train(training)

    def _encode(self, encoded, order, out, starts, progress):
        import torch  # torch only when a model runs
        with torch.inference_mode():
            for start in progress_bar(starts, desc=progress, unit="batch", leave=False):
                rows = order[start:start + self.batch_size]
                batch = {key: torch.from_numpy(array).to(self.device)
                         for key, array in self._padded(encoded, rows).items()}
                states = self.model(**batch, output_hidden_states=True, return_dict=True).hidden_states
                mask = batch["attention_mask"].unsqueeze(-1).to(states[0].dtype)
                for layer in self.layers:
                    state = states[layer]
                    pooled = state[:, 0] if self.pooling == "cls" else (state * mask).sum(1) / mask.sum(1)
                    require_finite(pooled, model=self.model_path, what="embeddings")
                    out[layer][rows] = pooled.float().cpu().numpy()
        return out


    def _padded(self, encoded: Any, rows: np.ndarray) -> dict[str, np.ndarray]:
        """The tokenized ``rows`` padded to the longest of them, as ``tokenizer.pad`` pads (its side, pad id
        and pad token type), straight into int64 arrays: no per-row conversion through the tokenizer's
        Python padding; a tokenizer without a pad token goes through ``tokenizer.pad`` and its own error."""
        tokenizer = self.tokenizer
        if tokenizer.pad_token_id is None or not set(encoded.keys()) <= {"input_ids", "token_type_ids",
                                                                            "attention_mask"}:
            padded = tokenizer.pad({key: [encoded[key][i] for i in rows] for key in encoded.keys()},
                                   return_tensors="np")
            return {key: np.asarray(value, dtype=np.int64) for key, value in padded.items()}
        lengths = np.fromiter((len(encoded["input_ids"][i]) for i in rows), dtype=np.int64, count=len(rows))
        width = int(lengths.max())
        positions = np.arange(width)[None, :]
        filled = positions >= (width - lengths)[:, None] if tokenizer.padding_side == "left" else \
            positions < lengths[:, None]  # row by row, in order: where each row's tokens go
        fill = {"input_ids": tokenizer.pad_token_id, "token_type_ids": tokenizer.pad_token_type_id,
                "attention_mask": 0}
        out = {}
        for key in encoded.keys():
            out[key] = np.full((len(rows), width), fill[key], dtype=np.int64)
            out[key][filled] = np.fromiter(chain.from_iterable(encoded[key][i] for i in rows), dtype=np.int64,
                                           count=int(lengths.sum()))
        if "attention_mask" not in out and "attention_mask" in tokenizer.model_input_names:
            out["attention_mask"] = filled.astype(np.int64)
        return out


def _sentence_transformer(model: Any, device: str | None) -> tuple[Any, str, bool]:
    """``(SentenceTransformer, name, borrowed)`` for a folder, a Hub id or a loaded ``SentenceTransformer``."""
    from sentence_transformers import SentenceTransformer  # sentence-transformers only when its model loads

    if isinstance(model, SentenceTransformer):
        first = model[0] if len(model) else None
        config = getattr(getattr(first, "auto_model", None) or getattr(first, "model", None), "config", None)
        name = getattr(model, "name_or_path", None) or getattr(config, "_name_or_path", None)
        return model, str(name or type(model).__name__), True
    if not isinstance(model, (str, Path)):
        raise MedlamaInputError(f"pooling {SENTENCE_TRANSFORMERS!r} encodes with a SentenceTransformer: give a "
                                f"model folder, a Hub id or a loaded SentenceTransformer, not a {type(model).__name__}")
    text = str(model)
    if not Path(text).expanduser().exists():
        resolve_model(text)  # a path that does not exist and is no Hub id either: its clear error
    try:
        if active_options().peft is not None:  # its modules load themselves: no adapter could be applied
            raise MedlamaInputError(f"--peft does not apply to pooling {SENTENCE_TRANSFORMERS!r}; probe the adapter "
                                    "with another pooling, or merge it into the model first", file=text)
        kwargs = pretrained_kwargs()
        loaded = SentenceTransformer(text, device=str(pick_device(device)), revision=kwargs.get("revision"),
                                     trust_remote_code=kwargs["trust_remote_code"])
        note_loaded(text)
    except (OSError, ValueError, KeyError) as error:
        raise MedlamaInputError(f"cannot load the model with sentence-transformers: {error}", file=text) from None
    return loaded, text, False


class SentenceTransformerEncoder:
    """Texts encoded by ``SentenceTransformer.encode``: the model's own modules, pooling and normalisation.

    The interface of :class:`Encoder`, with one "layer", ``-1``: the model's output. Queries go through
    ``encode_query`` and names through ``encode_document`` where sentence-transformers has them (5.0 on), as
    its ``InformationRetrievalEvaluator`` encodes: the same as ``encode`` for a model without query or
    document prompts. A loaded model keeps its device unless one is given, and its training mode.
    """

    layers = [-1]

    def __init__(self, model_path: Any, *, batch_size: int = 128, device: str | None = None) -> None:
        self.model, self.model_path, self.borrowed = _sentence_transformer(model_path, device)
        if self.borrowed and device is not None:
            self.model.to(pick_device(device))
        self.tokenizer = self.model.tokenizer
        self.pooling = SENTENCE_TRANSFORMERS
        self.batch_size = batch_size
        self.device = self.model.device

    @property
    def mask_token(self) -> str:
        if getattr(self.tokenizer, "mask_token", None) is None:
            raise MedlamaInputError(f"the tokenizer of {self.model_path} has no mask token")
        return self.tokenizer.mask_token

    @property
    def max_length(self) -> int | None:
        """The model's ``max_seq_length`` (what a length of ``None`` leaves texts cut to; ``None`` when its
        first module has none)."""
        return self.model.max_seq_length

    def encode(self, texts: Sequence[str], max_length: int | None, *, progress: str | None = None,
               role: str | None = None) -> dict[int, np.ndarray]:
        """``{-1: float32 array (len(texts), dimension)}``; ``max_length`` replaces the model's
        ``max_seq_length`` for this call (``None``: the model's own); ``role``: ``query`` or ``document``."""
        encode = getattr(self.model, f"encode_{role}", None) if role else None
        encode = encode or self.model.encode
        own, training = self.model.max_seq_length, self.model.training
        try:
            if max_length is not None:
                self.model.max_seq_length = max_length
            vectors = encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                             show_progress_bar=progress is not None and progress_enabled())
        finally:  # the caller's model as it was: its own length, and training mode for a model in training
            self.model.max_seq_length = own
            self.model.train(training)
        return {-1: np.asarray(vectors, dtype=np.float32)}
