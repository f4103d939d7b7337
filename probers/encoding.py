"""Encoding texts with any Hugging Face encoder: length-sorted batches, dynamic padding, inference mode.

One pass yields the pooled representation of several hidden layers at once (figure 6 of the paper
needs every layer), and layers above the highest one asked for are dropped before encoding.

:class:`Encoder` takes a model folder or Hub id, or an already loaded model: a ``SentenceTransformer``
(its transformer and tokenizer are used; its own pooling is not) or a ``transformers.PreTrainedModel``
with its tokenizer. A loaded model is used as it is, on its own device unless one is given, never cut to
fewer layers nor cast to half precision (it may be a model in training: :mod:`medlama.trainers.evaluator`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medlama.errors import MedlamaInputError
from medlama.finite import require_finite
from medlama.models import load_tokenizer, pick_device, read_config, resolve_model

POOLINGS = ("cls", "mean")


def load_encoder(model_path: str | Path):
    """Tokenizer and encoder (no task head) of ``model_path``, with clear errors for what is not one."""
    from transformers import AutoModel

    path = resolve_model(model_path)
    config = read_config(path)
    if getattr(config, "is_encoder_decoder", False) or getattr(config, "is_decoder", False):
        raise MedlamaInputError(f"{config.model_type!r} is not an encoder-only model; retrieval probing needs "
                                "an encoder such as BERT", file=path)
    tokenizer = load_tokenizer(path)
    try:
        model = AutoModel.from_pretrained(path)
    except (OSError, ValueError, KeyError) as error:
        raise MedlamaInputError(f"cannot load the encoder: {error}", file=path) from None
    return tokenizer, model


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
    import torch

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
        import torch

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

    def encode(self, texts: Sequence[str], max_length: int, *, progress: str | None = None) -> dict[int, np.ndarray]:
        """``{layer: float32 array (len(texts), hidden)}`` for every configured layer."""
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
        import torch
        from tqdm.auto import tqdm

        from medlama.progress import enabled as progress_enabled

        with torch.inference_mode():
            for start in tqdm(starts, desc=progress, disable=progress is None or not progress_enabled(),
                              unit="batch", leave=False):
                rows = order[start:start + self.batch_size]
                batch = self.tokenizer.pad({key: [encoded[key][i] for i in rows] for key in encoded.keys()},
                                           return_tensors="pt").to(self.device)
                states = self.model(**batch, output_hidden_states=True, return_dict=True).hidden_states
                mask = batch["attention_mask"].unsqueeze(-1).to(states[0].dtype)
                for layer in self.layers:
                    state = states[layer]
                    pooled = state[:, 0] if self.pooling == "cls" else (state * mask).sum(1) / mask.sum(1)
                    require_finite(pooled, model=self.model_path, what="embeddings")
                    out[layer][rows] = pooled.float().cpu().numpy()
        return out
