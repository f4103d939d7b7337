"""What keeps a rewiring from writing a model it should not: divergence, and steps already trained.

* :func:`divergence_callback`: a training whose weights (checked after every optimiser step, before that
  step's checkpoint is saved) or logged loss stop being finite numbers is stopped with
  :class:`TrainingDivergedError`. Nothing of that step is saved and no final model is written; the
  checkpoints of earlier steps stay. The weights are checked, not the gradients: under fp16 an infinite
  gradient is the loss scaler's normal signal (the step is skipped and the weights stay as they were).
  All processes of a multi-device run hold the same weights, so they all stop at the same step.
* :func:`nonfinite_weights`: the weights of a saved model that are not finite (``push-model`` refuses such a
  model, e.g. one a diverged run of an earlier version wrote).
* :func:`trained_steps`: the optimiser steps a checkpoint holds (its ``trainer_state.json``), which decides
  whether a run into an existing output has anything left to train.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from medlama.core.errors import MedlamaInputError


class TrainingDivergedError(MedlamaInputError):
    """The rewiring's weights or loss stopped being finite numbers (the run is stopped, nothing final saved)."""


def divergence_callback(learning_rate: float):
    """A ``transformers.TrainerCallback`` raising :class:`TrainingDivergedError` at the first non-finite weight
    (after an optimiser step) or logged loss."""
    # torch and transformers load when this runs, not when medlama.trainers.guards is imported
    import torch
    from transformers import TrainerCallback

    def stop(step: int, what: str) -> TrainingDivergedError:
        return TrainingDivergedError(
            f"training diverged at step {step}: {what} (learning rate {learning_rate:g}). The run was stopped: "
            "nothing of this step was saved and no final model was written (checkpoints of earlier steps are "
            "kept). Rewire again with a lower --lr, into a new output folder")

    class _StopOnDivergence(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            if model is None:
                return
            flags = [torch.isfinite(p.detach()).all() for p in model.parameters()]
            if flags and not bool(torch.stack(flags).all()):  # one synchronisation per step
                bad = next(name for name, p in model.named_parameters() if not bool(torch.isfinite(p).all()))
                raise stop(state.global_step, f"the model's weights are no longer finite numbers (NaN or "
                                              f"infinity; first: {bad})")

        def on_log(self, args, state, control, logs=None, **kwargs):
            loss = (logs or {}).get("loss")
            if isinstance(loss, (int, float)) and not math.isfinite(loss):
                raise stop(state.global_step, f"the training loss is {loss}")

    return _StopOnDivergence()


def trained_steps(checkpoint: Path) -> int:
    """The global step recorded in a complete checkpoint's ``trainer_state.json``."""
    try:
        return int(json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))["global_step"])
    except (OSError, ValueError, KeyError, TypeError):
        raise MedlamaInputError("cannot read the checkpoint's trainer_state.json", file=checkpoint) from None


def final_loss(log_history: list[dict[str, Any]]) -> float | None:
    """The last logged training loss of a trainer's log history."""
    return next((entry["loss"] for entry in reversed(log_history) if "loss" in entry), None)


def nonfinite_weights(folder: Path) -> list[str]:
    """Names of the tensors of the model saved in ``folder`` (its ``*.safetensors`` or ``pytorch_model*.bin``
    files, not its checkpoints) that hold NaN or infinity; read one tensor at a time. A file that does not
    read as weights is skipped here (what it holds is the business of the checks that read files whole)."""
    # torch loads when this runs, not when medlama.trainers.guards is imported
    import torch

    bad: list[str] = []
    for file in sorted(folder.glob("*.safetensors")):
        # safetensors loads when this runs, not when medlama.trainers.guards is imported
        from safetensors import safe_open

        try:
            with safe_open(str(file), framework="pt") as weights:
                for name in weights.keys():
                    tensor = weights.get_tensor(name)
                    if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                        bad.append(name)
        except Exception:  # noqa: BLE001 - safetensors raises its own error type for a damaged file
            continue
    if not bad:
        for file in sorted(folder.glob("pytorch_model*.bin")):
            try:
                state = torch.load(file, map_location="cpu", weights_only=True)
            except Exception:  # noqa: BLE001 - likewise for a damaged pickle
                continue
            bad += [name for name, tensor in state.items()
                    if hasattr(tensor, "is_floating_point") and tensor.is_floating_point()
                    and not bool(torch.isfinite(tensor).all())]
    return bad

