"""The model a rewiring trains: the first ``layer`` transformer layers of an encoder, dropout as configured,
``[CLS]`` pooling, as a ``SentenceTransformer`` (:func:`build_rewire_model`).

The encoder is a Hugging Face folder or hub name, a sentence-transformers folder (its transformer weights are
used; its own pooling is replaced by ``[CLS]``), or ``None`` for the bundled all-MiniLM-L6-v2. Only the first
``layer`` layers are loaded (``num_hidden_layers=layer``: the paper "chopped the last layers"). Paths, configs,
quiet loading and the device go through the shared :mod:`medlama.core.models`.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from medlama.core.checkpoints import WEIGHT_FILES
from medlama.core.errors import MedlamaInputError
from medlama.core.models import loading_weights, pick_device, quiet_transformers, read_config, resolve_model
from medlama.core.defaults import default_model_path

if TYPE_CHECKING:  # imported when a model is built: listing checkpoints needs no torch
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger(__name__)

#: Name of the bundled default model in configs and cards.
BUNDLED_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"

#: Config attributes that hold dropout probabilities, by model family (BERT/RoBERTa/ELECTRA/DeBERTa,
#: DistilBERT, ModernBERT, ...). The ones a model's config has are all set to ``dropout``.
_DROPOUT_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout", "attention_dropout",
                 "hidden_dropout", "mlp_dropout", "embedding_dropout")


@dataclass
class EncoderInfo:
    """What :func:`build_rewire_model` loaded."""

    name: str
    path: str
    layers_total: int
    layers_used: int
    mask_token: str
    dropout_keys: list[str] = field(default_factory=list)


def _resolve_encoder_path(model: str | Path | None) -> tuple[str, str]:
    """(display name, path or Hub id of the Hugging Face encoder inside), through :func:`medlama.core.models.resolve_model`
    (a sentence-transformers folder gives its ``Transformer`` module's folder; a path that does not exist and is
    no Hub id either is a clear error)."""
    if model is None:
        return BUNDLED_MODEL_NAME, resolve_model(None)
    text = str(model)
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise MedlamaInputError("a model is a folder (or a hub name), not a file", file=path)
    resolved = resolve_model(text)
    if path.exists():
        with contextlib.suppress(Exception):
            if Path(resolved).resolve() == default_model_path().resolve():
                return BUNDLED_MODEL_NAME, resolved
    return text, resolved


def _check_encoder_config(name: str, path: str) -> Any:
    # transformers loads when this runs, not when medlama.trainers.model is imported
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    local = Path(path).is_dir()
    if local and not (Path(path) / "config.json").is_file():
        raise MedlamaInputError("not a Hugging Face model folder: it has no config.json", file=name)
    try:
        config = read_config(path)
    except (MedlamaInputError, OSError, ValueError, KeyError, TypeError) as error:
        # read_config names the resolved folder; the user knows the model by the name they gave.
        reason = str(error).strip().removeprefix(f"{path}: ").removeprefix("cannot read the model config: ")
        reason = reason.strip().splitlines()[0] if reason.strip() else type(error).__name__
        raise MedlamaInputError(f"cannot read the model configuration: {reason}", file=name) from None
    model_type = getattr(config, "model_type", None)
    architectures = list(getattr(config, "architectures", None) or [])
    if getattr(config, "is_encoder_decoder", False):
        raise MedlamaInputError(f"not an encoder: {model_type!r} is an encoder-decoder model; Contrastive-Probe "
                                f"rewires encoders such as BERT or RoBERTa", file=name)
    decoder_only = (model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
                    and model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES)
    if decoder_only or getattr(config, "is_decoder", False) or any(
            a.endswith(("ForCausalLM", "LMHeadModel")) for a in architectures):
        raise MedlamaInputError(f"not an encoder: {model_type!r} ({', '.join(architectures) or 'no architecture'}) "
                                f"is a decoder; Contrastive-Probe rewires encoders such as BERT or RoBERTa",
                                file=name)
    if local and not any((Path(path) / weights).is_file() for weights in WEIGHT_FILES):
        raise MedlamaInputError(f"no model weights: expected one of {', '.join(WEIGHT_FILES)}", file=name)
    return config


def build_rewire_model(model: str | Path | None = None, *, layer: int | None = None, dropout: float | None = 0.1,
                       max_length: int = 48, mask_token: str | None = None,
                       device: str | None = None) -> tuple[SentenceTransformer, EncoderInfo]:
    """A ``SentenceTransformer`` (``Transformer`` + ``[CLS]`` ``Pooling``) over the first ``layer`` layers
    of an encoder: a Hugging Face folder or hub name, a sentence-transformers folder, or ``None`` for the
    bundled all-MiniLM-L6-v2. Bad input (missing folder, no config or weights, a decoder, a layer out of
    range, no mask token) is a ``MedlamaInputError``.
    """
    # sentence_transformers loads when this runs, not when medlama.trainers.model is imported
    from sentence_transformers import SentenceTransformer, SentenceTransformerModelCardData
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    name, path = _resolve_encoder_path(model)
    config = _check_encoder_config(name, path)
    total = getattr(config, "num_hidden_layers", None)
    if not isinstance(total, int):
        raise MedlamaInputError(f"cannot choose a layer: the {config.model_type!r} configuration has no "
                                f"num_hidden_layers", file=name)
    if layer is not None and (isinstance(layer, bool) or not isinstance(layer, int) or not 1 <= layer <= total):
        raise MedlamaInputError(f"layer {layer} is out of range: this model has {total} transformer layers, so "
                                f"the layer must be between 1 and {total}", file=name)
    config_kwargs: dict[str, Any] = {}
    if layer is not None and layer != total:
        config_kwargs["num_hidden_layers"] = layer
    dropout_keys = []
    if dropout is not None:
        present = config.to_dict()
        dropout_keys = [key for key in _DROPOUT_KEYS if isinstance(present.get(key), (int, float))]
        if not dropout_keys:
            logger.warning("%s: no known dropout setting in its configuration; dropout left as the model has it",
                           name)
        config_kwargs.update({key: float(dropout) for key in dropout_keys})
    # the chopped layers' weights would be listed as unexpected: quiet
    with loading_weights(path, "the encoder", name=name), quiet_transformers():
        transformer = Transformer(path, config_kwargs=config_kwargs, max_seq_length=max_length)
    tokenizer = transformer.tokenizer
    if tokenizer is None:
        raise MedlamaInputError("the model has no text tokenizer", file=name)
    token = mask_token or getattr(tokenizer, "mask_token", None)
    if not token:
        raise MedlamaInputError("the tokenizer has no mask token, which the cloze queries need; pass one "
                                "explicitly (--mask-token / mask_token=) if the model should learn a new marker",
                                file=name)
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="cls")
    card_data = SentenceTransformerModelCardData(local_files_only=True, generate_widget_examples=False)
    st_model = SentenceTransformer(modules=[transformer, pooling], device=str(pick_device(device)),
                                   model_card_data=card_data)
    if not Path(path).exists() or name == BUNDLED_MODEL_NAME:
        card_data.base_model = name  # a hub id: set directly, the card data would query the hub to verify it
    card_data.add_tags(["medlama", "contrastive-probe", "knowledge-probing"])
    info = EncoderInfo(name=name, path=path, layers_total=total, layers_used=layer or total, mask_token=token,
                       dropout_keys=dropout_keys)
    return st_model, info
