"""The processes of a multi-process run (``torchrun --nproc_per_node K`` or ``accelerate launch``): how many
there are, which one this is, its device, and the one barrier they meet at.

Both launchers set ``WORLD_SIZE``, ``RANK`` and ``LOCAL_RANK``; without them a run is one process of rank 0.
:func:`start` joins the process group (gloo on CPU, nccl on CUDA) once, :func:`barrier` waits for every
process (a no-op alone), :func:`agree` hands every process the first error any of them met, so that all stop
together rather than some waiting at a barrier for one that has failed.
"""

from __future__ import annotations

import os
from typing import Any
import datetime

__all__ = ["agree", "barrier", "device_for", "is_main_process", "local_rank", "rank", "start", "world_size"]

#: How long a process waits at a barrier for the others (a share of a long probe can take hours).
BARRIER_HOURS = 72


def _int_env(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, str(default)))
    except ValueError:
        return default


def world_size() -> int:
    """Number of processes (``WORLD_SIZE`` from torchrun / accelerate launch; 1 otherwise)."""
    return max(1, _int_env("WORLD_SIZE", 1))


def rank() -> int:
    """This process's rank (0 alone)."""
    return max(0, _int_env("RANK", 0)) if world_size() > 1 else 0


def local_rank() -> int:
    """This process's rank on its machine, which picks its device (0 alone)."""
    return max(0, _int_env("LOCAL_RANK", rank())) if world_size() > 1 else 0


def is_main_process() -> bool:
    """Whether this is the process that writes shared files (``RANK`` 0 under torchrun; always, alone)."""
    try:
        return int(os.environ.get("RANK", "0")) == 0
    except ValueError:
        return True


def device_for(device: str | None) -> str | None:
    """This process's device: under several processes, ``cuda:LOCAL_RANK`` when CUDA is asked for (or nothing is
    and there is CUDA), else what was asked; alone, what was asked."""
    if world_size() == 1 or device not in (None, "cuda"):
        return device
    # torch loads when this runs, not when the CLI parses its flags
    import torch

    if torch.cuda.is_available():
        return f"cuda:{local_rank()}"
    return device if device is not None else "cpu"


def start(device: str | None = None) -> bool:
    """Join the process group once (gloo, or nccl when this process runs on CUDA). Whether this call joined it:
    False when alone, or when the group was joined already (by a trainer the probe runs inside), which only the
    caller that joined it leaves (:func:`stop`)."""
    if world_size() == 1:
        return False

    # torch loads when this runs, not when the CLI parses its flags
    import torch.distributed as dist

    if dist.is_initialized():
        return False
    cuda = str(device_for(device) or "").startswith("cuda")
    if cuda:
        # torch loads when this runs, not when the CLI parses its flags
        import torch

        torch.cuda.set_device(local_rank())
    dist.init_process_group("nccl" if cuda else "gloo", timeout=datetime.timedelta(hours=BARRIER_HOURS))
    return True


def barrier() -> None:
    """Wait until every process gets here (nothing to wait for alone)."""
    # torch loads when this runs, not when the CLI parses its flags
    import torch.distributed as dist

    if world_size() > 1 and dist.is_available() and dist.is_initialized():
        dist.barrier()


def agree(error: BaseException | None) -> str | None:
    """Every process's first error message (in rank order), the same on all; ``None`` when none met one.
    Each process passes what it met (or ``None``)."""
    # torch loads when this runs, not when the CLI parses its flags
    import torch.distributed as dist

    message = None if error is None else str(error)
    if world_size() == 1 or not (dist.is_available() and dist.is_initialized()):
        return message
    gathered: list[Any] = [None] * world_size()
    dist.all_gather_object(gathered, message)
    return next((m for m in gathered if m is not None), None)


def stop() -> None:
    """Leave the process group (at the end of a run)."""
    # torch loads when this runs, not when the CLI parses its flags
    import torch.distributed as dist

    if world_size() > 1 and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
