"""Several processes (``torchrun``, PyTorch DDP): joining the group, wrapping the model,
and the collectives the loop needs."""

from __future__ import annotations

import inspect
import os

import torch
import torch.distributed as dist

from course_utils.checks import as_device


def unwrap_model(model: torch.nn.Module) -> torch.nn.Module:
    """The model inside ``torch.compile`` and ``DistributedDataParallel`` wrappers."""
    while True:
        if hasattr(model, "_orig_mod"):  # torch.compile
            model = model._orig_mod
        elif isinstance(model, torch.nn.parallel.DistributedDataParallel):
            model = model.module
        else:
            return model


def distributed_rank_and_size() -> tuple[int, int]:
    """``(rank, world_size)`` of this process's default process group, ``(0, 1)`` without one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def init_distributed(device: torch.device | str = "cpu") -> tuple[int, int, torch.device]:
    """Join the process group that ``torchrun`` describes in the environment.

    ``torchrun --nproc_per_node=N`` starts N copies of the program and sets ``RANK``,
    ``LOCAL_RANK`` and ``WORLD_SIZE``. On CUDA each process takes GPU ``LOCAL_RANK`` and
    the NCCL backend; on the CPU it uses gloo. Without torchrun (or with one process)
    nothing happens.

    Returns:
        ``(rank, world_size, device)``; the device gets the local GPU index on CUDA.

    Raises:
        ValueError: ``device`` is not a device name, or several processes asked for a device
            other than CPU or CUDA.
        RuntimeError: a CUDA or MPS device this machine does not have.
    """
    device = as_device(device)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return 0, 1, device
    _check_multiprocess_device(device)
    local_rank = int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", "0")))
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        if device.type == "cuda":
            dist.init_process_group("nccl", device_id=device)
        else:
            dist.init_process_group("gloo")
    return dist.get_rank(), dist.get_world_size(), device


def _check_multiprocess_device(device: torch.device) -> None:
    """ValueError for a device type that several processes cannot share (neither CPU nor CUDA)."""
    if device.type not in ("cpu", "cuda"):
        raise ValueError(
            f"multi-process training supports CPU (gloo) and CUDA (NCCL), not {device.type!r}; "
            "pass --device cpu or run one process"
        )


def close_distributed() -> None:
    """Leave the process group, if this process joined one."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _all_reduce_sum(value: float, device: torch.device) -> float:
    """The sum of ``value`` over every rank (a collective: every rank must call it)."""
    where = device if device.type == "cuda" else torch.device("cpu")
    total = torch.tensor([value], dtype=torch.float64, device=where)
    dist.all_reduce(total)
    return total.item()


def _rng_state_of_this_rank(device: torch.device) -> dict:
    state = {"torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _gather_rng_states(device: torch.device, world_size: int) -> list[dict] | None:
    """Every rank's RNG state (dropout), gathered on every rank; None with one process."""
    if world_size == 1:
        return None
    states: list = [None] * world_size
    dist.all_gather_object(states, _rng_state_of_this_rank(device))
    return states


def wrap_for_ddp(step_model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """Wrap in ``DistributedDataParallel`` when this process belongs to a group of several
    (gradients are then all-reduced in the backward pass); otherwise return it unchanged."""
    _, world_size = distributed_rank_and_size()
    wrapped = step_model
    while hasattr(wrapped, "_orig_mod"):
        wrapped = wrapped._orig_mod
    if world_size == 1 or isinstance(wrapped, torch.nn.parallel.DistributedDataParallel):
        return step_model
    device_ids = None
    if device.type == "cuda":
        device_ids = [device.index if device.index is not None else torch.cuda.current_device()]
    # The model's buffers (position tables) never change: no need to re-send them.
    ddp_parameters = inspect.signature(torch.nn.parallel.DistributedDataParallel).parameters
    no_buffer_sync = (
        {"forward_sync_buffers": False}  # PyTorch >= 2.12
        if "forward_sync_buffers" in ddp_parameters
        else {"broadcast_buffers": False}
    )
    return torch.nn.parallel.DistributedDataParallel(
        step_model, device_ids=device_ids, **no_buffer_sync
    )
