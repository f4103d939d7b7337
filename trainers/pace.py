"""How long a rewiring on the CPU will take, said before it runs long.

The default preset (``paper``: 200 steps of 192 pairs) is the published, GPU-sized run: on a CPU it takes
hours, where ``demo`` (50 steps of 32 pairs, a 24th of the pairs) takes minutes. :func:`cpu_pace_callback`
says so on stderr when training starts on the CPU, and after the run's first step gives the time the steps
left will take at the rate just measured, so nobody waits on a run they would not have started.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from medlama.core.progress import bar
from medlama.trainers.config import PRESETS, QUICK_PRESET, RewireConfig


def duration(seconds: float) -> str:
    """``2 h 05 min``, ``7 min``, ``40 s``: a duration as a person reads it."""
    if seconds >= 3600:
        return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


def pace_note(config: RewireConfig, preset: str | None, step_seconds: float, steps_left: int) -> str:
    """The estimate said after the first step: the steps left at ``step_seconds`` each, and the CPU-sized
    preset when this is another."""
    demo = PRESETS[QUICK_PRESET]
    note = (f"medlama: note: training on the CPU at {step_seconds:.1f} s a step ({config.batch_size} pairs): the "
            f"{steps_left} step{'s' if steps_left != 1 else ''} left take{'s' if steps_left == 1 else ''} about {duration(step_seconds * steps_left)}")
    if preset != QUICK_PRESET and config.batch_size * config.steps > demo.batch_size * demo.steps:
        note += (f"; --preset {QUICK_PRESET} is the CPU-sized run ({demo.steps} steps of {demo.batch_size} pairs, "
                 f"about {duration(step_seconds * demo.batch_size / config.batch_size * demo.steps)} here)")
    return note


def cpu_pace_callback(config: RewireConfig, preset: str | None, device: Any):
    """A ``transformers.TrainerCallback`` that, on the CPU and in the main process, says at the start what the
    run is sized for and after the first step how long the rest will take (:func:`pace_note`)."""
    # transformers loads when this runs, not when medlama.trainers.pace is imported
    from transformers import TrainerCallback

    class _CpuPace(TrainerCallback):
        def __init__(self) -> None:
            self._start: tuple[float, int] | None = None
            self._said = False

        def on_train_begin(self, args, state, control, **kwargs):
            if str(device) != "cpu" or not state.is_world_process_zero:
                self._said = True  # nothing to say on an accelerator, nor from the other processes
                return
            print(f"medlama: note: rewiring on the CPU: {config.steps} steps of {config.batch_size} pairs"
                  + (f" (preset {preset})" if preset else "") + "; the time it takes follows the first step",
                  file=sys.stderr)

        def on_step_begin(self, args, state, control, **kwargs):
            if self._start is None:
                self._start = (time.perf_counter(), state.global_step)

        def on_step_end(self, args, state, control, **kwargs):
            if self._said or self._start is None:
                return
            self._said = True
            began, step = self._start
            done = max(state.global_step - step, 1)
            print(pace_note(config, preset, (time.perf_counter() - began) / done, state.max_steps - state.global_step),
                  file=sys.stderr)

    return _CpuPace()


def plain_progress_callback():
    """A ``transformers.TrainerCallback`` for a run whose trainer bar is off (``disable_tqdm``: off a terminal, or
    asked): medlama's plain progress line on stderr every few seconds (:func:`medlama.core.progress.bar`:
    ``medlama: rewiring: 120/620 steps (2.1/s)``, nothing when silence was asked for), in the main process, where
    transformers would print every log as a Python dict on stdout among the tables (its ``PrinterCallback``,
    which :func:`medlama.trainers.trainer` takes out; the losses stay in the trainer state and the record)."""
    # transformers loads when this runs, not when medlama.trainers.pace is imported
    from transformers import TrainerCallback

    class _PlainProgress(TrainerCallback):
        def __init__(self) -> None:
            self._bar = None

        def on_train_begin(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                self._bar = bar(total=state.max_steps, desc="rewiring", unit="step")
                self._bar.update(state.global_step)  # a resumed run starts where it stopped

        def on_step_end(self, args, state, control, **kwargs):
            if self._bar is not None:
                self._bar.update(1)

        def on_train_end(self, args, state, control, **kwargs):
            if self._bar is not None:
                self._bar.close()

    return _PlainProgress()
