"""Contrastive-Probe rewiring (paper section 4): :func:`rewire`, a self-retrieval game on cloze pairs trained
with sentence-transformers' ``SentenceTransformerTrainer``.

* Settings: :class:`~medlama.trainers.config.RewireConfig` (presets ``paper`` and ``demo``).
* Model: :func:`~medlama.trainers.model.build_rewire_model` (the first ``layer`` layers, dropout as
  configured, ``[CLS]`` pooling); data: :mod:`medlama.trainers.cloze`; loss:
  :class:`~medlama.trainers.loss.ClozeInfoNCELoss`.
* Output folder ``OUT``: the final model (loads with ``SentenceTransformer(OUT)`` and
  ``transformers.AutoModel.from_pretrained(OUT)``), ``README.md`` (model card), ``rewire_config.json``, and
  ``checkpoints/checkpoint-<step>`` every ``save_steps`` steps and at the last step (all kept; each is a
  loadable model too, written atomically: :mod:`medlama.trainers.checkpoints`). Running again into the same
  ``OUT`` resumes from the last complete checkpoint. The final folder is replaced atomically, so an
  interrupted run leaves the previous final model as it was.
* Ownership: the run holds ``OUT``'s lock (:func:`medlama.core.atomic.lock_directory`) from its first check to
  its last write, so a second ``rewire`` into the same ``OUT`` is refused at once, and ``OUT`` records
  that ``rewire`` wrote it (:data:`medlama.core.atomic.OWNER_NAME`, written before the first checkpoint). Only
  a ``rewire`` output is resumed or replaced. A folder from a version before that record (no record, but
  the ``medlama-rewire/1`` run record in ``checkpoints/``) is taken over, with a note: its checkpoints
  are this command's own and hours of training; a folder with a hand-written or foreign record is refused.
* Devices (:mod:`medlama.trainers.devices`): CPU, or CUDA with bf16 where the card supports it, else fp16.
  Several processes through ``torchrun``/``accelerate launch``: ``batch_size`` stays the global batch (the
  batch sampler draws global batches and each process takes its slice, ``split_batches``), negatives are
  gathered across processes and gradients averaged, so each step's loss and update are those of one
  device (tests/trainers/test_multiprocess.py checks it with two CPU processes). Only the main process
  writes checkpoints (each process adds its own RNG state) and the final folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medlama.core.atomic import (OWNER_NAME, atomic_write_text, lock_directory, owner_kind, staged_directory,
                                 write_owner)
from medlama.core.errors import MedlamaInputError
from medlama.core.progress import enabled as progress_enabled
from medlama.core.settings import to_flags
from medlama.trainers.checkpoints import (
    CHECKPOINTS_DIR,
    CONFIG_NAME,
    check_resume_compatible,
    checkpoint_statuses,
    choose_resume_checkpoint,
    staged_checkpoint,
)
from medlama.trainers.cloze import ANSWER_COLUMN, QUERY_COLUMN, ClozeBuild, build_cloze_dataset, count_masks_cut
from medlama.trainers.config import DEFAULT_PRESET, PRESETS, RewireConfig
from medlama.core.distributed import is_main_process, world_size
from medlama.trainers.devices import resolve_precision
from medlama.trainers.guards import divergence_callback, final_loss, trained_steps
from medlama.trainers.loss import make_loss
from medlama.core.checkpoints import WEIGHT_FILES
from medlama.trainers.model import build_rewire_model
from medlama.trainers.model_card import write_rewire_card
from medlama.trainers.pace import cpu_pace_callback, plain_progress_callback
from medlama.core.provenance import package_versions
from medlama.trainers.evaluator import MedLAMAEvaluator

#: The command that writes (and alone may resume or replace) a rewiring output: its ownership record.
KIND = "rewire"
#: The run record's format, which also marks an output written before ownership records existed.
RECORD_FORMAT = "medlama-rewire/1"


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
    #: True when ``out`` already held the finished run: nothing was trained or written (``record`` is its record)
    already_trained: bool = False


#: Packages whose versions the rewiring record (and the model card's "Framework versions") lists.
RECORD_PACKAGES = ("medlama", "torch", "transformers", "sentence-transformers", "datasets", "accelerate")


def _versions() -> dict[str, str]:
    """Installed versions of :data:`RECORD_PACKAGES` (:func:`medlama.core.provenance.package_versions`), those not
    installed left out."""
    return {name: version for name, version in package_versions(RECORD_PACKAGES).items() if version is not None}


def closest_preset(config: RewireConfig) -> str:
    """The preset ``config`` differs from in the fewest settings (``paper`` on a tie)."""
    return min(PRESETS, key=lambda name: (len(to_flags(config, relative_to=PRESETS[name])),
                                          name != DEFAULT_PRESET))


def command_line(corpus: Any, out: Path, config: RewireConfig, *, preset: str | None = None) -> str | None:
    """The ``medlama rewire`` command that reproduces ``config`` (None for a Dataset corpus): ``--preset``
    (``preset``, default :func:`closest_preset`) and the flags of the settings that differ from it, spelt as
    the command parses them."""
    if not isinstance(corpus, (str, Path, list, tuple)):
        return None
    preset = preset or closest_preset(config)
    files = [corpus] if isinstance(corpus, (str, Path)) else list(corpus)
    words = ["medlama", "rewire", "--corpus", *map(str, files), "--out", str(out),
             *to_flags(config, relative_to=PRESETS[preset]), "--preset", preset]
    return " ".join(shlex.quote(word) for word in words)


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
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not (out / CONFIG_NAME).is_file() and not (out / CHECKPOINTS_DIR).is_dir():
        raise MedlamaInputError("the output folder exists and is not a medlama rewire output (no rewire_config.json "
                                "or checkpoints/); choose a new or empty folder, nothing was changed", file=out)
    owner = owner_kind(out)
    if owner == KIND:
        return
    if owner is not None:
        raise MedlamaInputError(f"the output folder was written by `medlama {owner}`, not by `medlama {KIND}`; "
                                "choose another folder (nothing was changed)", file=out)
    raise MedlamaInputError(
        f"the output folder has rewire_config.json or checkpoints/ but no readable {OWNER_NAME}, the record of the "
        f"command that wrote it: it was not written by `medlama {KIND}` (by hand, or by a pre-release medlama), so "
        f"`medlama {KIND}` will not resume or replace it; delete it, or choose a new folder (nothing was changed)",
        file=out)


def rewire(corpus: Any, out: str | Path, config: RewireConfig | None = None, *, resume: bool | str | Path = True,
           column: str = "text", callbacks: Sequence[Any] = (), report_to: str | list[str] = "none",
           disable_tqdm: bool | None = None, preset: str | None = None) -> RewireResult:
    """Rewire an encoder with Contrastive-Probe and write it to ``out``.

    ``corpus``: a sentence file, a list of them, or a ``datasets.Dataset``/``DatasetDict`` (sentences in
    ``column``). ``config``: a :class:`RewireConfig` (default: the ``paper`` preset). ``resume``: see
    :func:`~medlama.trainers.checkpoints.choose_resume_checkpoint`. ``callbacks``: extra
    ``transformers.TrainerCallback`` objects. ``preset``: the preset ``config`` was made from, for the
    recorded command line (default: the preset it differs least from). Returns a :class:`RewireResult`;
    ``out`` then loads with ``SentenceTransformer(out)``.

    A run into an ``out`` whose last checkpoint already holds ``config.steps`` steps trains nothing: a
    finished ``out`` is left as it is (``already_trained``), one killed before its final folder gets it
    from that checkpoint. Fewer steps than ``out`` holds is an error. A training whose weights or loss stop
    being finite raises :class:`~medlama.trainers.guards.TrainingDivergedError` (no final model written).
    """
    if preset is not None and preset not in PRESETS:
        raise MedlamaInputError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    config = config or RewireConfig.preset()
    out = Path(out).expanduser()
    _check_output_folder(out)  # before the lock: a user's folder is refused with nothing created
    # Only the main process writes OUT, so only it holds the lock (the others would find it taken).
    with lock_directory(out) if is_main_process() else contextlib.nullcontext():
        return _rewire(corpus, out, config, resume=resume, column=column, callbacks=callbacks,
                       report_to=report_to, disable_tqdm=disable_tqdm, preset=preset)


def _rewire(corpus: Any, out: Path, config: RewireConfig, *, resume, column, callbacks, report_to,
            disable_tqdm, preset) -> RewireResult:
    _check_output_folder(out)
    processes = world_size()
    if config.batch_size % processes:
        raise MedlamaInputError(f"batch size {config.batch_size} cannot be split evenly over {processes} devices")
    resume_from = choose_resume_checkpoint(out, resume)
    done = trained_steps(resume_from) if resume_from is not None else 0
    if done > config.steps:  # before any work: the trainer would take one more step, never fewer
        raise MedlamaInputError(
            f"{resume_from.name} has already been trained for {done} steps, more than the {config.steps} asked "
            f"for; a rewiring never goes back. Ask for --steps {done} (keeps it) or more (trains on), load an "
            "earlier checkpoints/checkpoint-<step> as it is, or write to a new output folder to train "
            f"{config.steps} steps; nothing was changed", file=out)
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
    # Kept as the reference trains them; counted so the record says how many pairs train without a mask.
    build.stats.mask_truncated = count_masks_cut(build.dataset[QUERY_COLUMN], model.tokenizer, config.max_length,
                                                 encoder.mask_token)
    build.stats.max_length = config.max_length
    if resume_from is not None:
        check_resume_compatible(out, config, build.corpus)

    record: dict[str, Any] = {
        "format": RECORD_FORMAT,
        "config": config.to_dict(),
        "base_model": {"name": encoder.name, "path": encoder.path, "layers_total": encoder.layers_total,
                       "layers_used": encoder.layers_used, "dropout_keys": encoder.dropout_keys},
        "mask_token": encoder.mask_token,
        "corpus": build.corpus,
        "cloze": build.stats.to_dict(),
        "command": command_line(corpus, out, config, preset=preset),
        "preset": preset or closest_preset(config),
        "versions": _versions(),
    }
    if resume_from is not None and done == config.steps:  # nothing left to train: HF would take one more step
        return _without_training(out, resume_from, record, precision, processes)
    trainer, timer = _make_trainer(model, build, out, config, precision, processes,
                                   [*callbacks, cpu_pace_callback(config, preset, model.device)], report_to,
                                   disable_tqdm)
    main_process = trainer.is_world_process_zero()
    if main_process:
        write_owner(out, KIND)  # before the first write into OUT: from now on OUT is a rewire output
        atomic_write_text(out / CHECKPOINTS_DIR / CONFIG_NAME, json.dumps(record, indent=2) + "\n")

    trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    global_step = trainer.state.global_step
    steps_run = timer.steps
    seconds = timer.seconds
    pairs_per_second = steps_run * config.batch_size / seconds if steps_run and seconds > 0 else None
    checkpoints = [c.path for c in checkpoint_statuses(out) if c.complete]
    record["training"] = {
        "global_step": global_step, "resumed_from": resume_from.name if resume_from else None,
        "steps_this_run": steps_run, "seconds_this_run": round(seconds, 3),
        "pairs_per_second": round(pairs_per_second, 2) if pairs_per_second else None,
        "precision": precision, "world_size": processes, "device": str(model.device),
        "checkpoints": [p.name for p in checkpoints],
        "final_loss": final_loss(trainer.state.log_history),
    }
    if main_process:
        _write_final(trainer.model, out, record)
    trainer.accelerator.wait_for_everyone()  # no process returns before the final folder is in place
    return RewireResult(path=out, global_step=global_step, steps_this_run=steps_run,
                        resumed_from=resume_from.name if resume_from else None,
                        checkpoints=[out / CHECKPOINTS_DIR / p.name for p in checkpoints], train_seconds=seconds,
                        pairs_per_second=pairs_per_second, record=record)


def _without_training(out: Path, checkpoint: Path, record: dict[str, Any], precision: str,
                      processes: int) -> RewireResult:
    """A run whose steps are all in ``checkpoint`` already: left as it is when ``out`` holds its final model,
    else finished from the checkpoint (a run killed between its last checkpoint and its final folder)."""
    steps = record["config"]["steps"]
    checkpoints = [c.path for c in checkpoint_statuses(out) if c.complete]
    saved = _final_record(out)
    training = (saved or {}).get("training") or {}
    if training.get("global_step") == steps and (training.get("checkpoints") or [None])[-1] == checkpoint.name:
        if is_main_process():
            print(f"medlama: {out} already holds this run's final model, trained for {steps} steps "
                  f"({checkpoint.name}); nothing to train, the folder is left as it is (ask for more --steps to "
                  "train on)", file=sys.stderr)
        return RewireResult(path=out, global_step=steps, steps_this_run=0,
                            resumed_from=training.get("resumed_from"), checkpoints=checkpoints,
                            train_seconds=0.0, pairs_per_second=None, record=saved, already_trained=True)
    # sentence_transformers loads when this runs, not when medlama.trainers.trainer is imported
    from sentence_transformers import SentenceTransformer

    state = json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))
    record["training"] = {
        "global_step": steps, "resumed_from": checkpoint.name, "steps_this_run": 0, "seconds_this_run": 0.0,
        "pairs_per_second": None, "precision": precision, "world_size": processes, "device": "cpu",
        "checkpoints": [p.name for p in checkpoints], "final_loss": final_loss(state.get("log_history") or []),
    }
    if is_main_process():
        print(f"medlama: {checkpoint.name} holds all {steps} steps; writing the final model from it without "
              "training", file=sys.stderr)
        write_owner(out, KIND)
        _write_final(SentenceTransformer(str(checkpoint), device="cpu"), out, record)
    return RewireResult(path=out, global_step=steps, steps_this_run=0, resumed_from=checkpoint.name,
                        checkpoints=[out / CHECKPOINTS_DIR / p.name for p in checkpoints], train_seconds=0.0,
                        pairs_per_second=None, record=record)


def _final_record(out: Path) -> dict[str, Any] | None:
    """The run record of the final model in ``out`` (None without a final model or a readable record)."""
    if not any((out / name).is_file() for name in WEIGHT_FILES):
        return None
    try:
        record = json.loads((out / CONFIG_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _write_final(model: Any, out: Path, record: dict[str, Any]) -> None:
    base = record["base_model"]["name"]
    model.model_card_data.model_name = f"{base} rewired with Contrastive-Probe"
    with staged_directory(out, marker=f"{CHECKPOINTS_DIR}/{CONFIG_NAME}", kind=KIND) as staging:  # under rewire's claim
        model.save(str(staging))
        write_rewire_card(staging, record)
        atomic_write_text(staging / CONFIG_NAME, json.dumps(record, indent=2) + "\n")
        if (out / CHECKPOINTS_DIR).is_dir():  # carried over as hard links: a kill here loses nothing
            _link_tree(out / CHECKPOINTS_DIR, staging / CHECKPOINTS_DIR)


def make_evaluator(config: RewireConfig):
    """The :class:`~medlama.trainers.evaluator.MedLAMAEvaluator` that ``config.eval_*`` describe (``None``
    without ``eval_steps``); its queries are loaded once, before training."""
    if not config.eval_steps:
        return None

    return MedLAMAEvaluator(data=config.eval_data, config=config.eval_config, relations=config.eval_relations,
                            limit=config.eval_limit)


def _make_trainer(model, build: ClozeBuild, out: Path, config: RewireConfig, precision: str, processes: int,
                  callbacks: Sequence[Any], report_to, disable_tqdm):
    # torch, sentence_transformers and transformers load when this runs, not when medlama.trainers.trainer is imported
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

    class _RewireTrainer(SentenceTransformerTrainer):
        """Saves each checkpoint into a hidden staging folder and renames it into place; only the main
        process writes the model."""

        _staging: Path | None = None

        def _save(self, output_dir=None, state_dict=None):
            # sentence-transformers 6.2 overrides Trainer._save without the `should_save` guard that
            # transformers 5 moved into it, so under torchrun every process wrote the model into the same
            # folder at once (found by tests/trainers/test_multiprocess.py).
            if self.args.should_save:
                super()._save(output_dir, state_dict=state_dict)

        def _get_output_dir(self, trial):
            return str(self._staging) if self._staging is not None else super()._get_output_dir(trial)

        def _save_checkpoint(self, model, trial):
            run_dir = Path(super()._get_output_dir(trial))
            with staged_checkpoint(run_dir, self.state.global_step, main=self.is_world_process_zero(),
                                   barrier=self.accelerator.wait_for_everyone) as staging:
                self._staging = staging
                try:
                    super()._save_checkpoint(model, trial)
                finally:
                    self._staging = None

    cuda = torch.cuda.is_available()
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out / CHECKPOINTS_DIR),
        # Without CUDA, say so: otherwise accelerate does not set up CPU processes (gloo) under torchrun,
        # and each process silently trained alone on its own batches (tests/trainers/test_multiprocess.py).
        use_cpu=not cuda,
        max_steps=config.steps,
        # The sampler draws global batches; each process takes its slice (split_batches), so the batches
        # (and the no-duplicates rule) are those of one device whatever the number of processes.
        per_device_train_batch_size=config.batch_size,
        accelerator_config={"split_batches": True},
        learning_rate=config.learning_rate,
        weight_decay=config.weight_decay,
        warmup_steps=config.warmup_steps,
        lr_scheduler_type="linear",
        seed=config.seed,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=None,
        logging_steps=config.logging_steps,
        # A NaN or infinite loss is logged as it is (the default logs the running mean instead), so that the
        # divergence check sees it.
        logging_nan_inf_filter=False,
        bf16=precision == "bf16",
        fp16=precision == "fp16",
        batch_sampler="no_duplicates" if config.batch_sampler == "no_duplicates" else "batch_sampler",
        dataloader_pin_memory=cuda,
        dataloader_drop_last=False,
        report_to=report_to,
        disable_tqdm=disable_tqdm if disable_tqdm is not None else not progress_enabled(),
        **({"eval_strategy": "steps", "eval_steps": config.eval_steps} if config.eval_steps else {}),
    )
    dataset = build.dataset.select_columns([QUERY_COLUMN, ANSWER_COLUMN])
    loss = make_loss(model, config.temperature, gather_across_devices=processes > 1)
    timer = _Timer()
    trainer = _RewireTrainer(model=model, args=args, train_dataset=dataset, loss=loss,
                             callbacks=[*callbacks, divergence_callback(config.learning_rate), _SaveLastStep(),
                                        timer], evaluator=make_evaluator(config))
    if args.disable_tqdm:  # no bar: no log dicts printed on stdout either, a plain progress line on stderr instead
        from transformers import PrinterCallback  # transformers is loaded by now (the trainer above)

        trainer.remove_callback(PrinterCallback)
        trainer.add_callback(plain_progress_callback())
    return trainer, timer
