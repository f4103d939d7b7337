"""Models by name: the one place that turns a ``--model`` argument into something transformers loads.

* :func:`resolve_model`: ``None`` is the bundled encoder; a sentence-transformers folder becomes the folder
  of its ``Transformer`` module; an existing path stays as it is; anything else must be a Hub id, else a
  :class:`~medlama.core.errors.MedlamaInputError` says the path does not exist (rather than huggingface_hub's
  "Repo id must be in the form ...", which names no path).
* :func:`read_config` and :func:`load_tokenizer`: the model's config and tokenizer, with errors naming it.
* :func:`quiet_transformers`: silence transformers' load report while loading (callers raise their own
  error when weights are missing).
* :func:`loading_weights`: the one wording of a model that cannot be loaded (a damaged, truncated or empty
  ``model.safetensors`` is named, not shown as a safetensors traceback).
* :func:`check_device` (before any model loads) and :func:`pick_device`: the device asked for, else CUDA when
  there is one, else the CPU.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from medlama.core.errors import MedlamaInputError


def transformer_folder(folder: Path) -> Path:
    """The folder of a sentence-transformers model's ``Transformer`` module (``folder`` for other models)."""
    modules = folder / "modules.json"
    if not modules.is_file():
        return folder
    try:
        entries = json.loads(modules.read_text(encoding="utf-8"))
        sub = next(e.get("path", "") for e in entries if str(e.get("type", "")).endswith("Transformer"))
    except (ValueError, StopIteration, AttributeError, TypeError):
        return folder
    return folder / sub if sub else folder


def is_hub_id(text: str) -> bool:
    """Whether ``text`` is spelt as a Hugging Face Hub repository id (``name`` or ``namespace/name``)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(text)
    except HFValidationError:
        return False
    return True


def resolve_model(model: str | Path | None) -> str:
    """The path or Hub id that transformers should load for ``model`` (``None``: the bundled encoder)."""
    if model is None:
        from medlama.core.defaults import default_model_path

        return str(default_model_path())
    text = str(model)
    path = Path(text).expanduser()
    if path.exists():
        return str(transformer_folder(path)) if path.is_dir() else text
    if not is_hub_id(text):
        raise MedlamaInputError("model path does not exist (and it is not a Hub id either)", file=text)
    return text  # a Hub id: transformers resolves it (its cache, or the network when allowed)


def read_config(model: str | Path) -> Any:
    """The transformers config of ``model`` (a resolved path or Hub id)."""
    from transformers import AutoConfig

    path = str(model)
    if Path(path).exists() and not (Path(path) / "config.json").is_file():
        raise MedlamaInputError("not a model folder: no config.json (give a Hugging Face model folder, "
                                "e.g. the output of `medlama rewire`)", file=path)
    try:
        return AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as error:
        raise MedlamaInputError(f"cannot read the model config: {error}", file=path) from None


def load_tokenizer(model: str | Path) -> Any:
    """The tokenizer of ``model`` (a resolved path or Hub id)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(model))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise MedlamaInputError(f"cannot load the tokenizer: {error}", file=str(model)) from None


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' logging below errors (its load report) for the duration of the block."""
    from transformers.utils import logging

    level = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(level)


def pick_device(device: str | None = None) -> Any:
    """``torch.device(device)``, or CUDA when available, else the CPU (see :func:`check_device`)."""
    import torch

    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


#: The devices a model may be put on, as ``--device`` and ``device=`` spell them.
DEVICE_PATTERN = re.compile(r"^(cpu|mps|cuda(:\d+)?)$")
DEVICE_WORDS = "cpu, cuda, cuda:N or mps"


def device_spelling(device: Any, *, name: str = "device") -> str | None:
    """``device`` as a string (a ``torch.device`` is spelt as torch spells it), or an error naming ``name`` when
    it is not spelt cpu, cuda, cuda:N or mps. Imports nothing: the CLI checks it before torch loads."""
    if device is None:
        return None
    if not isinstance(device, str) and type(device).__name__ == "device" and hasattr(device, "type"):
        device = str(device)  # a torch.device
    if not isinstance(device, str) or not DEVICE_PATTERN.match(device):
        raise MedlamaInputError(f"{name} {device!r} is not a device; give {DEVICE_WORDS}")
    return device


def check_device(device: Any, *, name: str = "device") -> str | None:
    """Refuse, before any model loads, a device that is misspelt or that this machine does not have; returns
    it as a string. ``name``: how messages name the argument (``--device`` on the command line)."""
    device = device_spelling(device, name=name)
    if device is None or device == "cpu":
        return device
    import torch

    if device.startswith("cuda"):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(device.partition(":")[2] or 0)
        if index >= count:
            have = f"{count} CUDA device(s) (cuda:0 to cuda:{count - 1})" if count else "no CUDA device"
            raise MedlamaInputError(f"{name} {device}: this machine has {have}")
    elif device == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise MedlamaInputError(f"{name} mps: MPS is not available on this machine")
    return device


def damaged_weights(model: str | Path) -> Path | None:
    """The first ``*.safetensors`` file of the model folder ``model`` whose header cannot be read (empty,
    truncated, not safetensors), or ``None``. Reads headers only."""
    from safetensors import safe_open

    folder = Path(str(model))
    if not folder.is_dir():
        return None
    for path in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(str(path), framework="numpy"):
                pass
        except Exception:  # noqa: BLE001 - safetensors raises its own SafetensorError and OSError alike
            return path
    return None


@contextlib.contextmanager
def loading_weights(model: str | Path, what: str, *, name: str | None = None) -> Iterator[None]:
    """Turn what ``from_pretrained`` raises while loading ``what`` (``"the encoder"``, ...) from ``model`` into
    a :class:`MedlamaInputError` naming the file: a damaged weights file (safetensors' own error names none),
    else the model (as ``name``, default ``model``). A :class:`MedlamaInputError` raised inside passes through
    unchanged."""
    from safetensors import SafetensorError

    try:
        yield
    except MedlamaInputError:
        raise
    except (SafetensorError, OSError, ValueError, KeyError, EOFError) as error:
        damaged = damaged_weights(model)
        if damaged is not None:
            size = damaged.stat().st_size
            raise MedlamaInputError(f"cannot load {what}: the weights file is damaged, truncated or empty "
                                    f"({size:,} bytes; {error}); copy or save the model again",
                                    file=damaged) from None
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise MedlamaInputError(f"cannot load {what}: {reason}", file=name or str(model)) from None
