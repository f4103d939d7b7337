"""``ProbeCallback``: probe the model a ``transformers.Trainer`` is training, at each evaluation or every N steps.

sentence-transformers' ``SentenceTransformerTrainer`` is a ``transformers.Trainer`` subclass, so the one callback
serves both (retrieval probing of the encoder being trained; any method of a masked, causal or
sequence-to-sequence LM). Each probe goes through :func:`medlama.runs.workflow.run_probe`, the one entry point
of ``medlama probe``, with the model in memory (:class:`medlama.core.loaded.LoadedModel`): the same queries,
candidate pools, prober, scoring and output folder, so its numbers are those of ``medlama probe`` on the
checkpoint saved at that step (tested on CPU, where the model is probed in the precision it trains in).

Around each probe the model is put in eval mode (dropout off), then every module is given back its own mode;
the random states of Python, NumPy, torch and every initialised CUDA device are saved and restored, and so is a
generation config a prober replaces: a run with the callback trains exactly as one without it (tested: the
same losses). ``medlama/acc@k`` (micro: over queries) and ``medlama/macro_acc@k`` (over relations) go to the
trainer's log (``trainer.log``: its ``log_history``, and wandb, TensorBoard or whatever reports it) when the
callback is given the ``trainer``; without it, to ``state.log_history`` only. Each probe's results are written
as ``medlama probe --out`` writes them, into ``<output_dir>/medlama-probe/step-N`` (or ``out/step-N``).

What a probe needs is checked at ``on_train_begin``, before the first optimizer step (:meth:`ProbeCallback.check`):
the tokenizer, the method against the model's kind and the output folder. A probe that met them only at its
first step (``every=1000``: a thousand steps in) would end the training there, its steps lost.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import TrainerCallback

from medlama.core import distributed
from medlama.core.atomic import check_finished
from medlama.core.batching import is_auto, starting_size
from medlama.core.defaults import TRAINING_PROBE_LIMIT
from medlama.core.errors import MedlamaInputError
from medlama.core.loaded import LoadedModel
from medlama.runs.arguments import ProbeArguments
from medlama.runs.benchmarks import benchmark
from medlama.probers.pools import check_rule
from medlama.runs.queries import QuerySource, load_queries
from medlama.probers.registry import METHODS, method_name, settings_for
from medlama.runs.result import ProbeResult
from medlama.runs.outputs import OUTPUT_KIND, RESULTS_FILE
from medlama.runs.workflow import ModelRun, ProbeModels, ProbeOutput, ProbeScoring, run_probe

#: The folder of ``args.output_dir`` the probes are written under (one ``step-N`` folder each) unless told.
FOLDER = "medlama-probe"

__all__ = ["FOLDER", "ProbeCallback", "untouched"]


@contextlib.contextmanager
def untouched(model: Any) -> Iterator[None]:
    """Run the block with ``model`` in eval mode, then give every module its own mode back; the random states
    (Python, NumPy, torch, every initialised CUDA device) and the model's generation config are restored too,
    so the training goes on as if the block had not run."""
    modes = [(module, module.training) for module in model.modules()]
    generation = getattr(model, "generation_config", None)
    python, numpy = random.getstate(), np.random.get_state()
    cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=cuda):  # torch's CPU and CUDA generators, restored on the way out
        model.eval()
        try:
            yield
        finally:
            for module, mode in modes:
                module.training = mode
            if generation is not None:
                model.generation_config = generation
            random.setstate(python)
            np.random.set_state(numpy)


def _sentence_transformer(model: Any) -> bool:
    """Whether ``model`` is a ``SentenceTransformer`` (which tokenizes with its own modules)."""
    return hasattr(model, "encode") and hasattr(model, "tokenizer") and hasattr(model, "__getitem__")


class ProbeCallback(TrainerCallback):
    """Probe the model being trained with medlama, as ``medlama probe`` would probe the checkpoint of that step.

    The queries: ``data`` (a built folder, a Hub dataset id, a loaded ``Dataset`` or a ``QuerySet``; ``None``:
    the cached build), ``dataset``, ``config``, ``relations``, ``candidates`` and ``limit`` (the first ``limit``
    queries of each relation; ``None``: all), read and checked once, here, before training starts. The probe:
    ``method`` (any of ``medlama probe --method``), its ``preset`` and ``settings`` (fields or the dataclass),
    ``ks``, ``match``, ``top_k``; a causal LM is probed in its own precision. When: at each evaluation of the
    trainer, or (``every``) every ``every`` optimizer steps instead; ``at_start``: also before the first step.
    Where: ``trainer`` (to log through it; see the module docstring), ``out`` (default
    ``<output_dir>/medlama-probe``; ``write=False``: log only, nothing written), ``tokenizer`` (default: the
    trainer's ``processing_class``), ``prefix`` of the logged names. :attr:`results` holds every probe's
    :class:`~medlama.runs.result.ProbeResult` by step.
    """

    def __init__(self, data: Any = None, *, config: str | None = None, method: str = "retrieval",
                 preset: str | None = None, settings: Mapping[str, Any] | Any = None,
                 relations: Sequence[str] | str | None = None, limit: int | None = TRAINING_PROBE_LIMIT,
                 every: int | None = None, at_start: bool = False, dataset: str = "medlama",
                 candidates: str = "evaluated", ks: Sequence[int] | None = None, match: str | None = None,
                 top_k: int = 10, out: str | Path | None = None, write: bool = True, trainer: Any = None,
                 tokenizer: Any = None, prefix: str = "medlama") -> None:
        self.method = method_name(method)
        if settings is None or isinstance(settings, Mapping):
            settings = settings_for(self.method, settings, preset=preset)
        elif not isinstance(settings, METHODS[self.method].settings):
            raise MedlamaInputError(f"{self.method} takes {METHODS[self.method].settings.__name__} settings, not "
                                    f"{type(settings).__name__}")
        self.settings = settings
        arguments = ProbeArguments(ks=tuple(ks) if ks is not None else None, top_k=top_k, match=match, limit=limit)
        self.ks, _, scored_match = benchmark(dataset).scoring_plan(arguments.ks, match)
        self.match, self.top_k, self.dataset = match, top_k, dataset
        check_rule(candidates)
        if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
            raise MedlamaInputError(f"every must be a number of steps >= 1 (or None: at each evaluation), got "
                                    f"{every!r}")
        if not write and distributed.world_size() > 1:
            raise MedlamaInputError("under several processes each probe is shared out through its output folder "
                                    "(the shards kept beside it): leave write=True")
        if not isinstance(prefix, str) or not prefix:
            raise MedlamaInputError(f"prefix must be a non-empty name, got {prefix!r}")
        if trainer is not None and not callable(getattr(trainer, "log", None)):
            raise MedlamaInputError(f"trainer must be the transformers Trainer the callback is added to, not a "
                                    f"{type(trainer).__name__}")
        self.queries = load_queries(QuerySource.of(data, dataset=dataset, config=config, relations=relations,
                                                   candidates=candidates, limit=limit))
        self.queries.check_gold(scored_match)
        #: What each probe reads: the queries read once, here (their limit applied), probed as they are.
        self.source = QuerySource.of(self.queries, dataset=dataset)  # a QuerySet carries its own pool
        self.every, self.at_start, self.prefix = every, bool(at_start), prefix
        self.out, self.write = (Path(out) if out is not None else None), bool(write)
        self.trainer, self.tokenizer = trainer, tokenizer
        #: Every probe's result, by training step.
        self.results: dict[int, ProbeResult] = {}
        self._probed: set[int] = set()

    # -- the trainer's events -------------------------------------------------------------------------------

    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        strategy = getattr(args, "eval_strategy", "no")
        if self.every is None and getattr(strategy, "value", strategy) == "no":
            # Without evaluations (the trainers' default) a callback that probes at each one would never probe
            raise MedlamaInputError("ProbeCallback probes at each evaluation, and this training runs none "
                                    "(eval_strategy 'no'): set eval_strategy (with an eval_dataset) or give "
                                    "every=N steps")
        self.check(args, model, processing_class)  # before step 1, not at the first probe, N steps in
        if self.at_start:
            self._probe(args, state, model, processing_class)

    def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        if self.every is not None and state.global_step % self.every == 0:
            self._probe(args, state, model, processing_class)

    def on_evaluate(self, args, state, control, model=None, processing_class=None, **kwargs):
        if self.every is None:
            self._probe(args, state, model, processing_class)

    # -- one probe ------------------------------------------------------------------------------------------

    def folder(self, args: Any, step: int) -> Path:
        """Where the probe of ``step`` is written."""
        root = self.out if self.out is not None else Path(args.output_dir) / FOLDER
        return root / f"step-{step}"

    def _probe(self, args: Any, state: Any, model: Any, processing_class: Any) -> None:
        step = state.global_step
        if model is None or step in self._probed:  # one probe per step (each eval dataset has its on_evaluate)
            return
        self._probed.add(step)  # by every process alike, so that all of them take part in the same probes
        result = self.probe(model, processing_class, step=step, out=self.folder(args, step) if self.write else None)
        if result is None:  # another process's share of a multi-process run: the main process logs
            return
        metrics = self.metrics(result)
        if self.trainer is not None:
            self.trainer.log(dict(metrics))  # its log_history and every reporter (this callback has no on_log)
        else:
            state.log_history.append({**metrics, "epoch": state.epoch, "step": step})

    def check(self, args: Any, model: Any, processing_class: Any = None) -> None:
        """Refuse, before the first optimizer step, what the first probe would refuse only ``every`` steps (or
        one evaluation) later, killing the training there: a missing tokenizer, a method that does not fit the
        model's kind (its prober made on the model, as each probe makes it, then let go) and an output folder
        that cannot take the probes (a file, a folder of other files, one that cannot be written)."""
        if model is None:
            return
        tokenizer = self._tokenizer(model, processing_class)
        with untouched(model):
            settings = self._settings(model, tokenizer)
            if is_auto(settings):
                settings = replace(settings, batch_size=starting_size(settings))
            ModelRun("check", self.method, model, settings, tokenizer).prober()
        if self.write:
            self._check_folder(self.out if self.out is not None else Path(args.output_dir) / FOLDER)

    @staticmethod
    def _check_folder(root: Path) -> None:
        """``root`` can hold the ``step-N`` folders: absent (its nearest existing parent writable) or a folder,
        each ``step-N`` already in it a probe's output (replaced as each probe replaces it)."""
        if root.exists() and not root.is_dir():
            raise MedlamaInputError("the probes' output folder is a file; give ProbeCallback(out=...) a folder",
                                    file=root)
        existing = next(folder for folder in (root, *root.absolute().parents) if folder.exists())
        if not os.access(existing, os.W_OK | os.X_OK):
            raise MedlamaInputError("the probes' output folder cannot be written (permission denied); give "
                                    "ProbeCallback(out=...) a writable folder", file=existing)
        for step in sorted(root.glob("step-*")) if root.is_dir() else ():
            check_finished(step, marker=RESULTS_FILE, kind=OUTPUT_KIND, overwrite=True,
                           hint="give ProbeCallback(out=...) another folder")

    def _tokenizer(self, model: Any, processing_class: Any) -> Any:
        """The tokenizer each probe gives its prober: ``tokenizer=``, else the trainer's ``processing_class``
        (none for a SentenceTransformer, which tokenizes with its own modules)."""
        tokenizer = self.tokenizer if self.tokenizer is not None else processing_class
        if self.method == "retrieval" and _sentence_transformer(model):
            return None
        if tokenizer is None and self.method != "retrieval":
            raise MedlamaInputError(f"probing the model being trained with {self.method} needs its tokenizer: give "
                                    "the Trainer processing_class=TOKENIZER, or ProbeCallback(tokenizer=...)")
        return tokenizer

    def _settings(self, model: Any, tokenizer: Any) -> Any:
        """The method's settings, a causal LM's ``dtype`` the precision the model trains in."""
        settings = self.settings
        if self.method != "retrieval" and "dtype" in {field.name for field in fields(settings)}:
            settings = replace(settings, dtype=LoadedModel(model, tokenizer).dtype_name())
        return settings

    def probe(self, model: Any, tokenizer: Any = None, *, step: int = 0, out: str | Path | None = None
              ) -> ProbeResult | None:
        """Probe ``model`` now (label ``step-N``), written to ``out`` when given, leaving the training as it was
        (:func:`untouched`); the result is kept in :attr:`results`."""
        tokenizer = self._tokenizer(model, tokenizer)
        with untouched(model):
            settings = self._settings(model, tokenizer)
            outcome = run_probe(
                self.source,
                ProbeModels(methods=[self.method], settings={self.method: settings}, models=[model],
                            labels=[f"step-{step}"], tokenizer=tokenizer),
                ProbeScoring(ks=self.ks, match=self.match, top_k=self.top_k),
                ProbeOutput(out=None if out is None else Path(out), overwrite=True))
        if outcome is None:
            return None
        self.results[step] = outcome.results[0]
        return outcome.results[0]

    def metrics(self, result: ProbeResult) -> dict[str, float]:
        """What is logged of ``result``: ``<prefix>/acc@k`` (micro) and ``<prefix>/macro_acc@k`` for each k."""
        out = {f"{self.prefix}/acc@{k}": result.acc(k) for k in self.ks}
        out.update({f"{self.prefix}/macro_acc@{k}": result.acc(k, "macro") for k in self.ks})
        return out
