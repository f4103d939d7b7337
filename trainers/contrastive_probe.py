"""Contrastive-Probe rewiring (paper section 4): a self-retrieval game on cloze pairs, trained with
sentence-transformers' ``SentenceTransformerTrainer``.

* Model: any Hugging Face encoder (a folder or a hub name) or the bundled default; only its first ``layer``
  transformer layers are kept (``num_hidden_layers=layer`` when loading: the paper "chopped the last layers"),
  dropout as configured (0.1 by default), ``[CLS]`` pooling. A sentence-transformers folder (such as the
  bundled all-MiniLM-L6-v2) contributes its transformer weights; its own pooling is replaced by ``[CLS]``.
* Loss: :class:`ClozeInfoNCELoss`, InfoNCE over all 2N texts of a batch (every query and every answer is an
  anchor, its partner is the positive, the other 2N-2 texts are negatives; cosine similarity, scale 1/tau),
  computed by the library's ``MultipleNegativesRankingLoss``.
* Output folder ``OUT``: the final model (loads with ``SentenceTransformer(OUT)`` and
  ``transformers.AutoModel.from_pretrained(OUT)``), ``README.md`` (model card), ``rewire_config.json``, and
  ``checkpoints/checkpoint-<step>`` every ``save_steps`` steps and at the last step (all kept; each is a
  loadable model too). Running again into the same ``OUT`` resumes from the last checkpoint. The final
  folder is replaced atomically, so an interrupted run leaves the previous final model as it was.
* Devices: CPU, or CUDA with bf16 where the card supports it, else fp16. Several GPUs through
  ``torchrun``/``accelerate launch``: ``batch_size`` stays the global batch and negatives are gathered
  across devices, so the loss is the same as on one device.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shlex
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
from sentence_transformers.util import cos_sim
from torch import Tensor

from medlama.atomic import atomic_directory, atomic_write_text
from medlama.errors import MedlamaInputError
from medlama.trainers.cloze import ANSWER_COLUMN, QUERY_COLUMN, ClozeBuild, build_cloze_dataset, check_mask_ratio
from medlama.trainers.model_card import CITATION, write_rewire_card

logger = logging.getLogger(__name__)

CONFIG_NAME = "rewire_config.json"
CHECKPOINTS_DIR = "checkpoints"
CHECKPOINT_PREFIX = "checkpoint-"
#: Name of the bundled default model in configs and cards.
BUNDLED_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"

#: Config attributes that hold dropout probabilities, by model family (BERT/RoBERTa/ELECTRA/DeBERTa,
#: DistilBERT, ModernBERT, ...). The ones a model's config has are all set to ``dropout``.
_DROPOUT_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout", "attention_dropout",
                 "hidden_dropout", "mlp_dropout", "embedding_dropout")
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")
_STATE_FILES = ("trainer_state.json", "optimizer.pt", "scheduler.pt")


# --------------------------------------------------------------------------------------------- config

@dataclass
class RewireConfig:
    """Everything that defines a rewiring run. See :data:`PRESETS` and :meth:`preset`.

    ``batch_size`` is the global batch (pairs per optimiser step, summed over devices); ``layer`` keeps the
    first ``layer`` transformer layers (``None``: all); ``dropout`` sets every dropout probability of the
    encoder (``None``: keep the model's); ``max_sentences`` samples that many corpus lines (``None``: all);
    ``batch_sampler`` is ``"no_duplicates"`` (no text twice in a batch, so a repeated answer such as
    ``"patients"`` is never its own negative) or ``"random"`` (plain shuffled batches, as the reference code);
    ``precision`` is ``"auto"`` (bf16 on a CUDA card that supports it, else fp16 on CUDA, else fp32),
    ``"fp32"``, ``"fp16"`` or ``"bf16"``.
    """

    model: str | None = None
    steps: int = 200
    batch_size: int = 192
    learning_rate: float = 2e-5
    weight_decay: float = 0.01
    warmup_steps: int = 0
    max_length: int = 48
    temperature: float = 0.04
    mask_ratio: float = 0.5
    layer: int | None = None
    dropout: float | None = 0.1
    save_steps: int = 50
    seed: int = 33
    max_sentences: int | None = None
    skip_short_lines: bool = False
    batch_sampler: Literal["no_duplicates", "random"] = "no_duplicates"
    precision: Literal["auto", "fp32", "fp16", "bf16"] = "auto"
    mask_token: str | None = None
    logging_steps: int = 10

    @classmethod
    def preset(cls, name: str = "paper", **overrides: Any) -> RewireConfig:
        """A preset (``"paper"`` or ``"demo"``) with some fields replaced; ``None`` overrides are ignored."""
        if name not in PRESETS:
            raise MedlamaInputError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
        unknown = set(overrides) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise MedlamaInputError(f"unknown rewire setting(s): {', '.join(sorted(unknown))}")
        values = {**PRESETS[name], **{k: v for k, v in overrides.items() if v is not None}}
        return cls(**values)

    def validate(self) -> RewireConfig:
        def positive_int(name: str, value: Any) -> None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise MedlamaInputError(f"{name} must be a positive integer, got {value!r}")

        for name in ("steps", "batch_size", "max_length", "save_steps", "seed", "logging_steps"):
            if name == "seed":
                if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
                    raise MedlamaInputError(f"seed must be a non-negative integer, got {self.seed!r}")
                continue
            positive_int(name, getattr(self, name))
        if self.batch_size < 2:
            raise MedlamaInputError("batch size must be at least 2: the loss needs in-batch negatives")
        if self.max_sentences is not None:
            positive_int("max_sentences", self.max_sentences)
        if self.layer is not None:
            positive_int("layer", self.layer)
        if isinstance(self.warmup_steps, bool) or not isinstance(self.warmup_steps, int) or self.warmup_steps < 0:
            raise MedlamaInputError(f"warmup_steps must be a non-negative integer, got {self.warmup_steps!r}")
        for name in ("learning_rate", "temperature"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value > 0:
                raise MedlamaInputError(f"{name.replace('_', ' ')} must be a positive number, got {value!r}")
        if not isinstance(self.weight_decay, (int, float)) or self.weight_decay < 0:
            raise MedlamaInputError(f"weight decay must be a non-negative number, got {self.weight_decay!r}")
        check_mask_ratio(self.mask_ratio)
        if self.dropout is not None and (not isinstance(self.dropout, (int, float)) or not 0 <= self.dropout < 1):
            raise MedlamaInputError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if self.batch_sampler not in ("no_duplicates", "random"):
            raise MedlamaInputError(f"batch sampler must be 'no_duplicates' or 'random', got {self.batch_sampler!r}")
        if self.precision not in ("auto", "fp32", "fp16", "bf16"):
            raise MedlamaInputError(f"precision must be auto, fp32, fp16 or bf16, got {self.precision!r}")
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: ``paper``: the published run (upstream README, paper section 5 and table 8; table 8 stars tau 0.03 where
#: the upstream README uses 0.04). ``demo``: a CPU-sized run for the bundled model, about 1.5 s a step on two
#: idle CPU cores (benchmarks/bench_rewire.py): a sixth of the batch and a quarter of the steps, so the learning
#: rate is the top of table 8's grid (5e-5); max length stays 48 (at 32, 17% of the PubMed queries lose their
#: mask token to truncation; at 48, 3.7%, as in the reference).
PRESETS: dict[str, dict[str, Any]] = {
    "paper": dict(steps=200, batch_size=192, learning_rate=2e-5, weight_decay=0.01, max_length=48,
                  temperature=0.04, mask_ratio=0.5, seed=33, save_steps=50, max_sentences=10_000, dropout=0.1),
    "demo": dict(steps=50, batch_size=32, learning_rate=5e-5, weight_decay=0.01, max_length=48,
                 temperature=0.04, mask_ratio=0.5, seed=33, save_steps=25, max_sentences=10_000, dropout=0.1,
                 logging_steps=5),
}

#: Settings that a resumed run must share with the run that wrote the checkpoints.
_MUST_MATCH_ON_RESUME = ("model", "batch_size", "learning_rate", "weight_decay", "warmup_steps", "max_length",
                         "temperature", "mask_ratio", "layer", "dropout", "seed", "max_sentences",
                         "skip_short_lines", "batch_sampler", "mask_token")


# ---------------------------------------------------------------------------------------------- model

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
    """(display name, path or hub id of the Hugging Face encoder inside)."""
    if model is None:
        from medlama.defaults import default_model_path

        return BUNDLED_MODEL_NAME, str(default_model_path())
    text = str(model)
    path = Path(text).expanduser()
    if path.exists():
        if not path.is_dir():
            raise MedlamaInputError("a model is a folder (or a hub name), not a file", file=path)
        modules = path / "modules.json"
        if modules.is_file():  # a sentence-transformers folder: use its Transformer module's folder
            try:
                entries = json.loads(modules.read_text(encoding="utf-8"))
                sub = next(e.get("path", "") for e in entries if str(e.get("type", "")).endswith("Transformer"))
            except (ValueError, StopIteration, AttributeError, TypeError):
                sub = ""
            path = path / sub if sub else path
        from medlama.defaults import default_model_path

        with contextlib.suppress(Exception):
            if path.resolve() == default_model_path().resolve():
                return BUNDLED_MODEL_NAME, str(path)
        return text, str(path)
    if text.startswith((".", "/", "~")) or text.count("/") > 1 or os.sep in text.replace("/", ""):
        raise MedlamaInputError("model folder not found", file=text)
    return text, text  # a hub name: transformers resolves it (cache, or network when allowed)


def _check_encoder_config(name: str, path: str) -> Any:
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    local = Path(path).is_dir()
    if local and not (Path(path) / "config.json").is_file():
        raise MedlamaInputError("not a Hugging Face model folder: it has no config.json", file=name)
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError, KeyError, TypeError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
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
    if local and not any((Path(path) / weights).is_file() for weights in _WEIGHT_FILES):
        raise MedlamaInputError(f"no model weights: expected one of {', '.join(_WEIGHT_FILES)}", file=name)
    return config


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence the load report that lists the chopped layers' weights as unexpected."""
    from transformers.utils import logging as hf_logging

    before = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(before)


def build_rewire_model(model: str | Path | None = None, *, layer: int | None = None, dropout: float | None = 0.1,
                       max_length: int = 48, mask_token: str | None = None,
                       device: str | None = None) -> tuple[SentenceTransformer, EncoderInfo]:
    """A ``SentenceTransformer`` (``Transformer`` + ``[CLS]`` ``Pooling``) over the first ``layer`` layers
    of an encoder: a Hugging Face folder or hub name, a sentence-transformers folder, or ``None`` for the
    bundled all-MiniLM-L6-v2. Bad input (missing folder, no config or weights, a decoder, a layer out of
    range, no mask token) is a ``MedlamaInputError``.
    """
    from sentence_transformers import SentenceTransformerModelCardData
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
    try:
        with _quiet_transformers():
            transformer = Transformer(path, config_kwargs=config_kwargs, max_seq_length=max_length)
    except (OSError, ValueError, KeyError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise MedlamaInputError(f"cannot load the encoder: {reason}", file=name) from None
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
    st_model = SentenceTransformer(modules=[transformer, pooling], device=device, model_card_data=card_data)
    if not Path(path).exists() or name == BUNDLED_MODEL_NAME:
        card_data.base_model = name  # a hub id: set directly, the card data would query the hub to verify it
    card_data.add_tags(["medlama", "contrastive-probe", "knowledge-probing"])
    info = EncoderInfo(name=name, path=path, layers_total=total, layers_used=layer or total, mask_token=token,
                       dropout_keys=dropout_keys)
    return st_model, info


# ----------------------------------------------------------------------------------------------- loss

class ClozeInfoNCELoss(MultipleNegativesRankingLoss):
    """InfoNCE over the 2N texts of a batch of (query, answer) pairs (paper equation 1).

    Every query and every answer is an anchor; its partner is the positive and the other 2N-2 texts of the
    batch are the negatives; similarity is cosine, scaled by 1/temperature; the loss is the mean over the 2N
    anchors (the reference code's NT-Xent).

    Why a subclass: sentence-transformers 6.2 has no single configuration of ``MultipleNegativesRankingLoss``
    that does this. ``directions=("query_to_doc", "query_to_query")`` with ``partition_mode="joint"`` gives
    exactly the N query-anchored terms (all answers plus the other queries in the denominator, the query
    itself excluded); adding ``"doc_to_query"`` and ``"doc_to_doc"`` puts both anchors of a pair into ONE
    softmax with one numerator (the GTE loss), and ``partition_mode="per_direction"`` (the symmetric loss)
    drops the same-type negatives. So this class runs the library's own computation twice, the second time
    with the columns swapped so that the answers are the anchors, and averages the two. Gathering negatives
    across devices is the library's own (``gather_across_devices``).
    """

    def __init__(self, model: SentenceTransformer, temperature: float = 0.04,
                 gather_across_devices: bool = False) -> None:
        super().__init__(model, scale=1.0 / temperature, similarity_fct=cos_sim,
                         gather_across_devices=gather_across_devices,
                         directions=("query_to_doc", "query_to_query"), partition_mode="joint")

    def compute_loss_from_embeddings(self, embeddings: list[Tensor], labels: Tensor | None) -> Tensor:
        if len(embeddings) != 2:
            raise ValueError(f"ClozeInfoNCELoss takes (query, answer) pairs, got {len(embeddings)} columns")
        queries, answers = embeddings
        query_anchored = super().compute_loss_from_embeddings([queries, answers], labels)
        answer_anchored = super().compute_loss_from_embeddings([answers, queries], labels)
        return (query_anchored + answer_anchored) / 2

    def get_config_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "scale": self.scale, "similarity_fct": "cos_sim",
                "anchors": "all 2N texts (every query and every answer)",
                "gather_across_devices": self.gather_across_devices}

    @property
    def citation(self) -> str:
        return CITATION


def make_loss(model: SentenceTransformer, temperature: float = 0.04, gather_across_devices: bool | None = None):
    """The rewiring loss for ``model``; gathering across devices is on by default when distributed."""
    if gather_across_devices is None:
        gather_across_devices = world_size() > 1
    return ClozeInfoNCELoss(model, temperature=temperature, gather_across_devices=gather_across_devices)


# ------------------------------------------------------------------------------------------- devices

def world_size() -> int:
    """Number of training processes (``WORLD_SIZE`` from torchrun / accelerate launch; 1 otherwise)."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def resolve_precision(precision: str = "auto") -> str:
    """``"bf16"``, ``"fp16"`` or ``"fp32"`` for this machine (``auto``: bf16 where the CUDA card supports it,
    else fp16 on CUDA, else fp32)."""
    import torch

    cuda = torch.cuda.is_available()
    if precision == "auto":
        if not cuda:
            return "fp32"
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if precision == "fp16" and not cuda:
        raise MedlamaInputError("fp16 mixed precision needs a CUDA GPU; use --precision fp32 or bf16 on CPU")
    if precision == "bf16" and cuda and not torch.cuda.is_bf16_supported():
        raise MedlamaInputError("this GPU does not support bf16; use --precision fp16")
    return precision


# --------------------------------------------------------------------------------------- checkpoints

@dataclass
class CheckpointStatus:
    """A ``checkpoint-<step>`` folder and what keeps it from being resumed (nothing: it is complete)."""

    path: Path
    step: int
    problems: list[str]

    @property
    def complete(self) -> bool:
        return not self.problems


def inspect_checkpoint(path: str | Path) -> CheckpointStatus:
    """Check that a checkpoint folder holds everything a resume needs (model, optimizer, scheduler, state)."""
    path = Path(path)
    suffix = path.name[len(CHECKPOINT_PREFIX):] if path.name.startswith(CHECKPOINT_PREFIX) else ""
    step = int(suffix) if suffix.isdigit() else -1
    if not path.is_dir():
        return CheckpointStatus(path, step, ["the folder does not exist"])
    missing = [name for name in (*_STATE_FILES, "modules.json", "config.json") if not (path / name).is_file()]
    if not any((path / weights).is_file() for weights in _WEIGHT_FILES):
        missing.append("model weights (model.safetensors)")
    problems = [f"missing {', '.join(missing)}"] if missing else []
    state = path / "trainer_state.json"
    if state.is_file():
        try:
            global_step = json.loads(state.read_text(encoding="utf-8"))["global_step"]
            if step >= 0 and global_step != step:
                problems.append(f"its trainer_state.json is for step {global_step}")
        except (ValueError, KeyError, TypeError):
            problems.append("its trainer_state.json is truncated or corrupt")
    return CheckpointStatus(path, step, problems)


def list_checkpoints(out: str | Path) -> list[CheckpointStatus]:
    """The ``checkpoint-<step>`` folders of a rewiring output, by step."""
    folder = Path(out) / CHECKPOINTS_DIR
    if not folder.is_dir():
        return []
    found = [inspect_checkpoint(p) for p in folder.iterdir()
             if p.is_dir() and p.name.startswith(CHECKPOINT_PREFIX) and p.name[len(CHECKPOINT_PREFIX):].isdigit()]
    return sorted(found, key=lambda c: c.step)


def _describe_incomplete(status: CheckpointStatus) -> str:
    return f"{status.path} is incomplete ({'; '.join(status.problems)})"


def choose_resume_checkpoint(out: str | Path, resume: bool | str | Path = True) -> Path | None:
    """The checkpoint a run into ``out`` continues from, or None for a fresh start.

    ``resume=True``: the newest checkpoint, which must be complete (a half-written one is an error that names
    it; nothing is deleted). ``False``: start over, which is an error if ``out`` already holds checkpoints.
    A path: that checkpoint (it must be complete).
    """
    checkpoints = list_checkpoints(out)
    if resume is False:
        if checkpoints:
            raise MedlamaInputError(
                f"{Path(out) / CHECKPOINTS_DIR} holds {len(checkpoints)} checkpoint(s) of an earlier run; to start "
                f"over, write to another output folder or remove them yourself (nothing is deleted for you)")
        return None
    if resume is not True:
        status = inspect_checkpoint(Path(resume))
        if not status.complete:
            raise MedlamaInputError(f"cannot resume: {_describe_incomplete(status)}")
        return status.path
    if not checkpoints:
        return None
    newest = checkpoints[-1]
    if not newest.complete:
        complete = [c for c in checkpoints if c.complete]
        advice = (f"move that folder away (or delete it) to resume from {complete[-1].path.name}, the last complete "
                  f"one, or pass --resume-from {complete[-1].path}" if complete else
                  "no complete checkpoint precedes it; move the checkpoints folder away to start over")
        raise MedlamaInputError(
            f"cannot resume: {_describe_incomplete(newest)}; the run was probably interrupted while saving it. "
            f"Nothing was deleted: {advice}")
    for status in checkpoints[:-1]:
        if not status.complete:
            logger.warning("ignoring an older incomplete checkpoint: %s", _describe_incomplete(status))
    return newest.path


def _check_resume_compatible(out: Path, config: RewireConfig, corpus: list[dict[str, Any]]) -> None:
    saved_path = out / CHECKPOINTS_DIR / CONFIG_NAME
    if not saved_path.is_file():
        return
    try:
        saved = json.loads(saved_path.read_text(encoding="utf-8"))
    except ValueError:
        raise MedlamaInputError("unreadable run record; cannot check that the resumed run matches it",
                                file=saved_path) from None
    differences = [f"{key}: {saved['config'].get(key)!r} then, {getattr(config, key)!r} now"
                   for key in _MUST_MATCH_ON_RESUME if saved.get("config", {}).get(key) != getattr(config, key)]
    strip = [{k: v for k, v in item.items() if k != "path"} for item in corpus]
    saved_strip = [{k: v for k, v in item.items() if k != "path"} for item in saved.get("corpus", [])]
    if strip != saved_strip:
        differences.append("the corpus (file names, contents or sizes differ)")
    if differences:
        raise MedlamaInputError(
            f"{out} holds checkpoints of a different run ({'; '.join(differences)}); resume with the same settings "
            f"(only --steps, --save-steps and --precision may change), or write to another output folder")


# ---------------------------------------------------------------------------------------------- run

@dataclass
class RewireResult:
    """What :func:`rewire` wrote."""

    path: Path
    global_step: int
    steps_this_run: int
    resumed_from: str | None
    checkpoints: list[Path]
    train_seconds: float
    pairs_per_second: float | None
    record: dict[str, Any]


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    versions = {}
    for package in ("medlama", "torch", "transformers", "sentence-transformers", "datasets", "accelerate"):
        with contextlib.suppress(md.PackageNotFoundError):
            versions[package] = md.version(package)
    return versions


def _command_line(corpus: Any, out: Path, config: RewireConfig) -> str | None:
    """A ``medlama rewire`` command with every setting spelled out (None for a Dataset corpus)."""
    if not isinstance(corpus, (str, Path, list, tuple)):
        return None
    files = [corpus] if isinstance(corpus, (str, Path)) else list(corpus)
    parts = ["medlama", "rewire", "--corpus", *(shlex.quote(str(f)) for f in files), "--out", shlex.quote(str(out))]
    if config.model is not None:
        parts += ["--model", shlex.quote(str(config.model))]
    flags = {"steps": "--steps", "batch_size": "--batch-size", "learning_rate": "--lr",
             "weight_decay": "--weight-decay", "warmup_steps": "--warmup-steps", "max_length": "--max-length",
             "temperature": "--tau", "mask_ratio": "--mask-ratio", "save_steps": "--save-steps", "seed": "--seed",
             "batch_sampler": "--batch-sampler", "layer": "--layer", "mask_token": "--mask-token"}
    for key, flag in flags.items():
        if getattr(config, key) is not None:
            parts += [flag, shlex.quote(str(getattr(config, key)))]
    parts += ["--max-sentences", str(config.max_sentences or 0)]
    parts += ["--keep-model-dropout"] if config.dropout is None else ["--dropout", str(config.dropout)]
    if config.skip_short_lines:
        parts.append("--skip-short-lines")
    return " ".join(parts)


def _link_tree(source: Path, target: Path) -> None:
    """Recreate ``source`` under ``target`` with hard links (a copy where links are not possible)."""
    for root, _dirs, files in os.walk(source):
        destination = target / Path(root).relative_to(source)
        destination.mkdir(parents=True, exist_ok=True)
        for name in files:
            try:
                os.link(Path(root) / name, destination / name)
            except OSError:
                shutil.copy2(Path(root) / name, destination / name)


def _check_output_folder(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise MedlamaInputError("the output path exists and is not a folder", file=out)
    if out.is_dir() and any(out.iterdir()) and not (out / CONFIG_NAME).is_file() \
            and not (out / CHECKPOINTS_DIR).is_dir():
        raise MedlamaInputError("the output folder exists and is not a medlama rewire output (no rewire_config.json "
                                "or checkpoints/); choose a new or empty folder, nothing was changed", file=out)


def rewire(corpus: Any, out: str | Path, config: RewireConfig | None = None, *, resume: bool | str | Path = True,
           column: str = "text", callbacks: Sequence[Any] = (), report_to: str | list[str] = "none",
           disable_tqdm: bool | None = None) -> RewireResult:
    """Rewire an encoder with Contrastive-Probe and write it to ``out``.

    ``corpus``: a sentence file, a list of them, or a ``datasets.Dataset``/``DatasetDict`` (sentences in
    ``column``). ``config``: a :class:`RewireConfig` (default: the ``paper`` preset). ``resume``: see
    :func:`choose_resume_checkpoint`. ``callbacks``: extra ``transformers.TrainerCallback`` objects.
    Returns a :class:`RewireResult`; ``out`` then loads with ``SentenceTransformer(out)``.
    """
    config = (config or RewireConfig.preset("paper")).validate()
    out = Path(out).expanduser()
    _check_output_folder(out)
    processes = world_size()
    if config.batch_size % processes:
        raise MedlamaInputError(f"batch size {config.batch_size} cannot be split evenly over {processes} devices")
    precision = resolve_precision(config.precision)
    # The tokenizer's thread pool competes with torch's for the cores: on a small CPU it triples the step time.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    model, encoder = build_rewire_model(config.model, layer=config.layer, dropout=config.dropout,
                                        max_length=config.max_length, mask_token=config.mask_token)
    build: ClozeBuild = build_cloze_dataset(corpus, mask_token=encoder.mask_token, mask_ratio=config.mask_ratio,
                                            seed=config.seed, column=column, max_sentences=config.max_sentences,
                                            skip_short_lines=config.skip_short_lines)
    if len(build.dataset) < 2:
        raise MedlamaInputError("the corpus gives fewer than 2 cloze pairs; the loss needs in-batch negatives")
    resume_from = choose_resume_checkpoint(out, resume)
    if resume_from is not None:
        _check_resume_compatible(out, config, build.corpus)

    record: dict[str, Any] = {
        "format": "medlama-rewire/1",
        "config": config.to_dict(),
        "base_model": {"name": encoder.name, "path": encoder.path, "layers_total": encoder.layers_total,
                       "layers_used": encoder.layers_used, "dropout_keys": encoder.dropout_keys},
        "mask_token": encoder.mask_token,
        "corpus": build.corpus,
        "cloze": build.stats.to_dict(),
        "command": _command_line(corpus, out, config),
        "versions": _versions(),
    }
    trainer, timer = _make_trainer(model, build, out, config, precision, processes, callbacks, report_to,
                                   disable_tqdm)
    main_process = trainer.is_world_process_zero()
    if main_process:
        atomic_write_text(out / CHECKPOINTS_DIR / CONFIG_NAME, json.dumps(record, indent=2) + "\n")

    trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    global_step = trainer.state.global_step
    steps_run = timer.steps
    seconds = timer.seconds
    pairs_per_second = steps_run * config.batch_size / seconds if steps_run and seconds > 0 else None
    checkpoints = [c.path for c in list_checkpoints(out) if c.complete]
    record["training"] = {
        "global_step": global_step, "resumed_from": resume_from.name if resume_from else None,
        "steps_this_run": steps_run, "seconds_this_run": round(seconds, 3),
        "pairs_per_second": round(pairs_per_second, 2) if pairs_per_second else None,
        "precision": precision, "world_size": processes, "device": str(model.device),
        "checkpoints": [p.name for p in checkpoints],
        "final_loss": next((h["loss"] for h in reversed(trainer.state.log_history) if "loss" in h), None),
    }
    if main_process:
        _write_final(trainer, out, record)
    return RewireResult(path=out, global_step=global_step, steps_this_run=steps_run,
                        resumed_from=resume_from.name if resume_from else None,
                        checkpoints=[out / CHECKPOINTS_DIR / p.name for p in checkpoints], train_seconds=seconds,
                        pairs_per_second=pairs_per_second, record=record)


def _write_final(trainer: Any, out: Path, record: dict[str, Any]) -> None:
    model = trainer.model
    base = record["base_model"]["name"]
    model.model_card_data.model_name = f"{base} rewired with Contrastive-Probe"
    with atomic_directory(out, marker=f"{CHECKPOINTS_DIR}/{CONFIG_NAME}") as staging:
        model.save(str(staging))
        write_rewire_card(staging, record)
        atomic_write_text(staging / CONFIG_NAME, json.dumps(record, indent=2) + "\n")
        if (out / CHECKPOINTS_DIR).is_dir():  # carried over as hard links: a kill here loses nothing
            _link_tree(out / CHECKPOINTS_DIR, staging / CHECKPOINTS_DIR)


def _make_trainer(model, build: ClozeBuild, out: Path, config: RewireConfig, precision: str, processes: int,
                  callbacks: Sequence[Any], report_to, disable_tqdm):
    import torch
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from transformers import TrainerCallback

    class _SaveLastStep(TrainerCallback):
        """Checkpoint the last step too, so the final model always has a matching checkpoint."""

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step >= state.max_steps:
                control.should_save = True

    class _Timer(TrainerCallback):
        def __init__(self) -> None:
            self.start_step, self.steps, self.seconds, self._t0 = 0, 0, 0.0, None

        def on_train_begin(self, args, state, control, **kwargs):
            self._t0 = None

        def on_step_begin(self, args, state, control, **kwargs):
            if self._t0 is None:
                self._t0, self.start_step = time.perf_counter(), state.global_step

        def on_step_end(self, args, state, control, **kwargs):
            if self._t0 is not None:
                self.steps = state.global_step - self.start_step
                self.seconds = time.perf_counter() - self._t0

    cuda = torch.cuda.is_available()
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out / CHECKPOINTS_DIR),
        max_steps=config.steps,
        per_device_train_batch_size=config.batch_size // processes,
        learning_rate=config.learning_rate,
        weight_decay=config.weight_decay,
        warmup_steps=config.warmup_steps,
        lr_scheduler_type="linear",
        seed=config.seed,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=None,
        logging_steps=config.logging_steps,
        bf16=precision == "bf16",
        fp16=precision == "fp16",
        batch_sampler="no_duplicates" if config.batch_sampler == "no_duplicates" else "batch_sampler",
        dataloader_pin_memory=cuda,
        dataloader_drop_last=False,
        report_to=report_to,
        disable_tqdm=disable_tqdm if disable_tqdm is not None else False,
    )
    dataset = build.dataset.select_columns([QUERY_COLUMN, ANSWER_COLUMN])
    loss = make_loss(model, config.temperature, gather_across_devices=processes > 1)
    timer = _Timer()
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset, loss=loss,
                                         callbacks=[*callbacks, _SaveLastStep(), timer])
    return trainer, timer
