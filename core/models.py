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
* :class:`LoadOptions` (``--revision``, ``--peft``, ``--trust-remote-code``): how a model is loaded. A prober
  is built inside :func:`loading_with`; every ``from_pretrained`` of the loaders here and in the probers
  takes :func:`pretrained_kwargs`, the loaded model goes through :func:`finish_loading` (the adapter applied,
  the commit loaded noted), and the block yields the :meth:`LoadOptions.record` results record.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import unicodedata
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medlama.core.errors import MedlamaInputError
from medlama.core.extras import check_available
from medlama.core.provenance import folder_hash
from medlama.core.public_paths import is_local_path, public_model_name
from medlama.core.settings import Checked, setting
from medlama.core.defaults import default_model_path


@dataclass(frozen=True)
class LoadOptions(Checked):
    """How the probed model is loaded (``medlama probe``'s ``--revision``, ``--peft``, ``--trust-remote-code``)."""

    revision: str | None = setting(None, help="the revision (branch, tag or commit) of a Hub model to load, "
                                              "tokenizer included; results.json records the commit loaded (not "
                                              "for a local folder)", metavar="REV")
    peft: str | None = setting(None, help="a LoRA adapter (a PEFT folder or Hub id) applied to --model, its base "
                                          "model; needs the peft extra: pip install 'medlama[peft]'",
                               metavar="ADAPTER")
    trust_remote_code: bool = setting(False, help="run the code a model repository ships (transformers' "
                                                  "trust_remote_code); off unless given")

    def check(self, model: Any) -> None:
        """Refuse, before anything loads, options that cannot apply to ``model``: a revision of a local folder,
        an adapter without peft installed or that does not exist."""
        if self.revision is not None and isinstance(model, (str, Path)) and Path(str(model)).expanduser().exists():
            raise MedlamaInputError("--revision applies to a Hub model id; a local folder has no revisions (give "
                                    "the Hub id, or leave --revision out)", file=str(model))
        if self.peft is not None:
            check_available("peft", "peft", what="--peft")
            if not isinstance(model, (str, Path)):
                raise MedlamaInputError("--peft applies an adapter to a model folder or Hub id, not a loaded "
                                        "model object")
            resolve_model(self.peft)
            adapter = Path(self.peft).expanduser()
            if adapter.is_dir():
                config = adapter / "adapter_config.json"
                if not config.is_file():
                    raise MedlamaInputError("not a PEFT adapter folder: no adapter_config.json", file=self.peft)
                try:
                    base = json.loads(config.read_text(encoding="utf-8")).get("base_model_name_or_path")
                except (OSError, ValueError, AttributeError) as error:
                    raise MedlamaInputError(f"cannot read the adapter's config: {error}", file=config) from None
                adapter_base_match(base, str(model), self.peft)  # a foreign base refused before anything loads


def adapter_base_match(base: str | None, model: str, adapter: str) -> str:
    """How the base model an adapter was trained on (``base``, its ``base_model_name_or_path``) is known to be
    ``model``, the model it is applied to: ``same folder``, ``same content`` (two local folders whose files
    hash alike), ``same Hub id``, ``same name`` (a local folder named as the Hub model, or a Hub cache snapshot
    of it), or ``unrecorded`` (the adapter names no base). An adapter trained on another model (of the same
    shapes, it would load without a word) is refused, naming both; where the two cannot be compared (a Hub id
    and a local folder of another name), ``unverified``, said on stderr."""
    if not base:
        return "unrecorded"
    base_path, model_path = Path(base).expanduser(), Path(model).expanduser()
    foreign = MedlamaInputError(f"the adapter was trained on {base!r}, not on the model it is applied to "
                                f"({model!r}); give that base model as --model, or an adapter trained on this "
                                "one", file=adapter)
    if base_path.is_dir() and model_path.is_dir():
        if base_path.resolve() == model_path.resolve():
            return "same folder"
        if folder_hash(base_path) == folder_hash(model_path):
            return "same content"
        raise foreign
    if not base_path.exists() and not model_path.exists():
        if base == model:
            return "same Hub id"
        if base.rstrip("/").split("/")[-1] == model.rstrip("/").split("/")[-1]:
            return "same name"  # a Hub id renamed (bert-base-uncased, google-bert/bert-base-uncased), a copy's folder
        if not is_local_path(base):
            raise foreign  # two Hub ids of different models
        local, other = None, model  # trained on a folder elsewhere: nothing here to compare it with
    else:
        local, other = (model_path, base) if model_path.exists() else (base_path, model)
    names = {public_model_name(str(local), str(local.resolve())), local.resolve().name} if local else set()
    if other in names or other.rstrip("/").split("/")[-1] in names:
        return "same name"
    print(f"medlama: warning: the adapter {adapter} was trained on {base!r}; --model is {model!r}, which cannot be "
          "checked against it: results.json records it as unverified", file=sys.stderr)
    return "unverified"


@dataclass
class _Loading:
    options: LoadOptions
    record: dict = field(default_factory=dict)


_ACTIVE: ContextVar[_Loading | None] = ContextVar("medlama_loading", default=None)


@contextlib.contextmanager
def loading_with(options: LoadOptions | None) -> Iterator[dict]:
    """Load models inside this block with ``options``; yields the record of what was loaded, filled in by
    :func:`finish_loading`: ``revision`` (the commit loaded, ``None`` for a local folder), ``peft`` (the
    adapter and its base model, or ``None``) and ``trust_remote_code``."""
    options = options or LoadOptions()
    state = _Loading(options, {"revision": None, "peft": None, "trust_remote_code": options.trust_remote_code})
    token = _ACTIVE.set(state)
    try:
        yield state.record
    finally:
        _ACTIVE.reset(token)


def active_options() -> LoadOptions:
    """The loading options of the :func:`loading_with` block running (the defaults outside one)."""
    state = _ACTIVE.get()
    return state.options if state is not None else LoadOptions()


def pretrained_kwargs() -> dict[str, Any]:
    """The keyword arguments every ``from_pretrained`` of the probed model takes: ``revision`` when one was
    asked, and ``trust_remote_code`` (False unless asked)."""
    options = active_options()
    return {**({"revision": options.revision} if options.revision else {}),
            "trust_remote_code": options.trust_remote_code}


def loaded_commit(name: str | None, revision: str | None) -> str | None:
    """The commit of Hub model ``name`` that ``from_pretrained`` just loaded for ``revision`` (None: main): the
    cache snapshot its ``config.json`` came from, resolved as transformers resolves it (``refs/<branch>`` or the
    commit itself). ``None`` for a local folder, or when the cache cannot say."""
    if not name or Path(name).expanduser().exists():
        return None
    # huggingface_hub loads when this runs, not when the CLI parses its flags
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(name, "config.json", revision=revision)
    except (ValueError, OSError):
        return None
    if not isinstance(found, str):
        return None
    commit = Path(found).parent.name
    return commit if re.fullmatch(r"[0-9a-f]{40}", commit) else None


def note_loaded(name: str | None) -> None:
    """Record the commit of ``name`` loaded in the running :func:`loading_with` block (:func:`loaded_commit`)."""
    state = _ACTIVE.get()
    if state is not None:
        state.record["revision"] = loaded_commit(name, state.options.revision)


def finish_loading(model: Any) -> Any:
    """``model`` as probed: its LoRA adapter applied and merged (``--peft``), the commit loaded noted."""
    state = _ACTIVE.get()
    if state is None:
        return model
    note_loaded(getattr(model.config, "_name_or_path", None))
    adapter = state.options.peft
    if adapter is not None:
        # optional extra (peft): loads only for --peft
        from peft import PeftConfig, PeftModel

        try:
            config = PeftConfig.from_pretrained(adapter)
        except (OSError, ValueError, KeyError) as error:
            raise MedlamaInputError(f"cannot apply the adapter: {error}", file=adapter) from None
        base = config.base_model_name_or_path
        match = adapter_base_match(base, str(getattr(model.config, "_name_or_path", "") or ""), adapter)
        try:
            model = PeftModel.from_pretrained(model, adapter).merge_and_unload()
        except (OSError, ValueError, KeyError, RuntimeError) as error:
            raise MedlamaInputError(f"cannot apply the adapter: {error}", file=adapter) from None
        if base and Path(base).expanduser().exists():  # a local path means nothing elsewhere: its folder's name
            base = Path(base).expanduser().resolve().name
        record = {"base_model": base, "base_match": match, "peft_type": str(config.peft_type.value)}
        path = Path(adapter).expanduser()
        if path.is_dir():
            record.update(name=path.resolve().name, sha256=folder_hash(path))
        else:
            record["id"] = adapter
        state.record["peft"] = record
    return model


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
    # huggingface_hub loads when this runs, not when the CLI parses its flags
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(text)
    except HFValidationError:
        return False
    return True


def resolve_model(model: str | Path | None) -> str:
    """The path or Hub id that transformers should load for ``model`` (``None``: the bundled encoder)."""
    if model is None:
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
    # transformers loads when this runs, not when the CLI parses its flags
    from transformers import AutoConfig

    path = str(model)
    if Path(path).exists() and not (Path(path) / "config.json").is_file():
        raise MedlamaInputError("not a model folder: no config.json (give a Hugging Face model folder, "
                                "e.g. the output of `medlama rewire`)", file=path)
    try:
        return AutoConfig.from_pretrained(path, **pretrained_kwargs())
    except (OSError, ValueError) as error:
        raise MedlamaInputError(f"cannot read the model config: {error}", file=path) from None


def load_tokenizer(model: str | Path) -> Any:
    """The tokenizer of ``model`` (a resolved path or Hub id)."""
    # transformers loads when this runs, not when the CLI parses its flags
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(model), **pretrained_kwargs())
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise MedlamaInputError(f"cannot load the tokenizer: {error}", file=str(model)) from None


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' logging below errors (its load report) for the duration of the block."""
    # transformers loads when this runs, not when the CLI parses its flags
    from transformers.utils import logging

    level = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(level)


def pick_device(device: str | None = None) -> Any:
    """``torch.device(device)``, or CUDA when available, else the CPU (see :func:`check_device`)."""
    # torch loads when this runs, not when the CLI parses its flags
    import torch

    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


#: The devices a model may be put on, as ``--device`` and ``device=`` spell them.
#: The precisions a model's weights are loaded in (the probers' ``dtype`` setting).
DTYPES = ("fp32", "bf16", "fp16")


def torch_dtype(name: str) -> Any:
    """The torch dtype of a :data:`DTYPES` name."""
    # torch loads when this runs, not when the CLI parses its flags
    import torch

    if name not in DTYPES:
        raise MedlamaInputError(f"unknown dtype {name!r}; choose from {list(DTYPES)}")
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


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
    # torch loads when this runs, not when the CLI parses its flags
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
    # safetensors loads when this runs, not when the CLI parses its flags
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
    # safetensors loads when this runs, not when the CLI parses its flags
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


def check_label(label: str, *, what: str = "--label", file: str | Path | None = None) -> str:
    """``label`` if it can name a row (of a table, a plot, ``results.json``, a report or a sheet's scores): not
    blank, and on one line, with no control character (a newline or CR would split the row, a tab or escape
    garble it). ``what`` and ``file`` name where it came from in the error."""
    bad = next((char for char in label if unicodedata.category(char) in ("Cc", "Zl", "Zp")), None)
    if not label.strip() or bad is not None:
        why = "is blank" if not label.strip() else f"holds the control character {bad!r}"
        raise MedlamaInputError(f"{what} {label!r} {why}: a row's name must be visible text on one line", file=file)
    return label


def unique_labels(models: Sequence[Any], labels: Sequence[str] | None = None, *, bundled: bool = False
                  ) -> list[str]:
    """The one model-label rule (``medlama probe``, ``medlama.probe``; for ``ucm`` too): a distinct row name
    per model: ``labels`` when given (each checked by :func:`check_label`; duplicates are refused, since two rows
    of one name cannot be told apart in tables, plots or ``results.json``); else ``bundled`` for the bundled
    encoder and each folder's name, same-named folders told apart by as many parent folders as it takes."""
    if labels is not None:
        labels = [check_label(str(label)) for label in labels]
        if len(labels) != len(models):
            raise MedlamaInputError(f"{len(labels)} --label values for {len(models)} --model values")
        repeated = sorted({label for label in labels if labels.count(label) > 1})
        if repeated:
            raise MedlamaInputError(f"--label {', '.join(map(repr, repeated))} given more than once: every model "
                                    "needs its own label, or its rows cannot be told apart")
        return labels
    if bundled:
        return ["bundled"]
    parts = [Path(str(model)).parts or (str(model),) for model in models]
    depth = [1] * len(models)
    while True:
        names = ["/".join(p[-d:]) for p, d in zip(parts, depth)]
        clashes = {name for name in names if names.count(name) > 1}
        if not clashes:
            return names
        grown = False
        for index, name in enumerate(names):
            if name in clashes and depth[index] < len(parts[index]):
                depth[index] += 1
                grown = True
        if not grown:  # the same model given twice: number the repeats
            seen: dict[str, int] = {}
            out = []
            for name in names:
                seen[name] = seen.get(name, 0) + 1
                out.append(name if seen[name] == 1 else f"{name} #{seen[name]}")
            return out
