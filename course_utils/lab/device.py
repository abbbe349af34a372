"""Device choice and seeding.

The course runs everywhere on the CPU and uses an accelerator when one is present:
CUDA first, then Apple's MPS.
"""

from __future__ import annotations

import random

import numpy as np
import torch

from course_utils.checks import as_device, check_int
from course_utils.lab.language import tr

_KNOWN_DEVICES = ("auto", "cpu", "cuda", "mps")


def get_device(name: str = "auto") -> torch.device:
    """Return the device to compute on.

    Args:
        name: ``"auto"`` (CUDA if available, then MPS, then CPU), or one of
            ``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"mps"`` (or a ``torch.device``).

    Returns:
        A ``torch.device``.

    Raises:
        TypeError: ``name`` is neither a str nor a ``torch.device`` (``0``: pass ``"cuda:0"``).
        ValueError: ``name`` is not one of the names above.
        RuntimeError: the requested accelerator is not available on this machine.
    """
    return resolve_device(name, "name")


def resolve_device(value: object, argument: str) -> torch.device:
    """:func:`get_device` for a function whose own argument ``argument`` (e.g. ``"device"``)
    holds the device: its messages name that argument and the value passed.

    Raises:
        TypeError, ValueError, RuntimeError: as :func:`get_device`.
    """
    name = value
    if isinstance(name, torch.device):
        name = name.type if name.index is None else str(name)
    if not isinstance(name, str):
        index = isinstance(name, int) and not isinstance(name, bool) and name >= 0
        fix = f"for GPU {name} pass 'cuda:{name}'" if index else f"e.g. {argument}='auto'"
        raise TypeError(
            f"{argument} must be a device name (a str such as 'auto', 'cpu', 'cuda' or "
            f"'cuda:N') or a torch.device, got {name!r} ({type(name).__name__}); {fix}"
        )
    base = name.split(":")[0]
    if base not in _KNOWN_DEVICES or not _valid_index(name):
        hint = " (for an NVIDIA GPU the name is 'cuda')" if name in ("gpu", "nvidia") else ""
        raise ValueError(
            f"unknown device {name!r}; expected one of {_KNOWN_DEVICES}, or 'cuda:N' for "
            f"the N-th GPU{hint}"
        )
    if base != name:  # "cuda:1": check that this GPU exists
        index = int(name.split(":")[1])
        if base != "cuda" or not torch.cuda.is_available() or index >= torch.cuda.device_count():
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            raise RuntimeError(
                f"device {name!r} was requested but this machine has {count} CUDA device(s); "
                f"use {argument}='auto' or 'cpu'"
            )
        return torch.device(name)
    cuda = torch.cuda.is_available()
    mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if name == "auto":
        return torch.device("cuda" if cuda else "mps" if mps else "cpu")
    if (name == "cuda" and not cuda) or (name == "mps" and not mps):
        raise RuntimeError(
            f"device {name!r} was requested but is not available here; "
            f"use {argument}='auto' or 'cpu' to run on what this machine has"
        )
    return torch.device(name)


def _valid_index(name: str) -> bool:
    """True for 'cuda' or 'cuda:N' style names (no index, or a non-negative integer one)."""
    parts = name.split(":")
    return len(parts) == 1 or (len(parts) == 2 and parts[1].isdigit())


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python's, NumPy's and PyTorch's random generators (all devices).

    Args:
        seed: a non-negative integer.

    Returns:
        A CPU ``torch.Generator`` seeded with ``seed``, for code that wants its own stream.

    Raises:
        TypeError: ``seed`` is not an integer (a float, a string or a bool; numpy ints are
            fine).
        ValueError: ``seed`` is negative, or above ``2**32 - 1`` (NumPy's limit).
    """
    seed = check_int(seed, "seed")
    if seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    if seed > 2**32 - 1:
        raise ValueError(
            f"seed must be at most 2**32 - 1 = {2**32 - 1} (NumPy's limit), got {seed}"
        )
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    return torch.Generator().manual_seed(seed)


def describe_device(device: torch.device | str) -> str:
    """A one-line human description of ``device`` (name and memory for CUDA).

    Raises:
        ValueError: ``device`` is not a ``torch.device`` nor a device name (``"gpu"``).
        RuntimeError: a CUDA or MPS device this machine does not have.
    """
    device = as_device(device)
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return tr("cuda: {name}, {memory:.0f} GiB").format(
            name=props.name, memory=props.total_memory / 2**30
        )
    if device.type == "mps":
        return tr("mps: Apple GPU")
    threads = torch.get_num_threads()
    if threads == 1:
        return tr("cpu: {threads} thread").format(threads=threads)
    return tr("cpu: {threads} threads").format(threads=threads)


def device_config(
    device: torch.device | str,
    vocab_size: int,
    *,
    cpu: dict | None = None,
    gpu: dict | None = None,
    **overrides,
):
    """The size of run a notebook trains on ``device``: the ``gpu`` preset on CUDA, the ``cpu``
    preset elsewhere (:data:`course_utils.config.PRESETS`).

    The course's tests take the GPU branch on a CPU with the rehearsal switch
    (``COURSE_REHEARSE``, :mod:`course_utils.lab.rehearsal`): then the ``gpu`` preset, shrunk to
    a run of seconds.

    Args:
        device: where the run trains.
        vocab_size: the tokenizer's vocabulary size V.
        cpu: fields to change when the ``cpu`` preset is chosen (a dict, as ``overrides``),
            ``gpu`` likewise: a notebook's recipe at each size.
        **overrides: fields of either config, as :func:`course_utils.config.get_config` takes.

    Returns:
        ``(preset name, ModelConfig, TrainConfig)``.

    Raises:
        ValueError: an unknown ``COURSE_REHEARSE`` value, or an override ``get_config`` refuses.
        TypeError: ``cpu`` or ``gpu`` is not a dict.
    """
    from course_utils.config import get_config
    from course_utils.lab.rehearsal import acting_device_type, rehearsal_overrides

    for name, value in (("cpu", cpu), ("gpu", gpu)):
        if value is not None and not isinstance(value, dict):
            raise TypeError(
                f"device_config({name}=...) takes a dict of config fields, such as "
                f"{name}=dict(max_iters=2000); got {type(value).__name__} {value!r}"
            )
    preset = "gpu" if acting_device_type(device) == "cuda" else "cpu"
    chosen = (gpu if preset == "gpu" else cpu) or {}
    # The rehearsal's shrink wins over every recipe: a rehearsed run takes seconds.
    model_config, train_config = get_config(
        preset, vocab_size, **{**overrides, **chosen, **rehearsal_overrides()}
    )
    return preset, model_config, train_config
