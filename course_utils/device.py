"""Device choice and seeding.

The course runs everywhere on the CPU and uses an accelerator when one is present:
CUDA first, then Apple's MPS.
"""

from __future__ import annotations

import random

import numpy as np
import torch

_KNOWN_DEVICES = ("auto", "cpu", "cuda", "mps")


def get_device(name: str = "auto") -> torch.device:
    """Return the device to compute on.

    Args:
        name: ``"auto"`` (CUDA if available, then MPS, then CPU), or one of
            ``"cpu"``, ``"cuda"``, ``"mps"``.

    Returns:
        A ``torch.device``.

    Raises:
        ValueError: ``name`` is not one of the names above.
        RuntimeError: the requested accelerator is not available on this machine.
    """
    if name not in _KNOWN_DEVICES:
        raise ValueError(f"unknown device {name!r}; expected one of {_KNOWN_DEVICES}")
    cuda = torch.cuda.is_available()
    mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if name == "auto":
        return torch.device("cuda" if cuda else "mps" if mps else "cpu")
    if (name == "cuda" and not cuda) or (name == "mps" and not mps):
        raise RuntimeError(
            f"device {name!r} was requested but is not available here; "
            "use name='auto' or 'cpu' to run on what this machine has"
        )
    return torch.device(name)


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python's, NumPy's and PyTorch's random generators (all devices).

    Args:
        seed: a non-negative integer.

    Returns:
        A CPU ``torch.Generator`` seeded with ``seed``, for code that wants its own stream.

    Raises:
        ValueError: ``seed`` is negative or not an integer.
    """
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    return torch.Generator().manual_seed(seed)


def describe_device(device: torch.device) -> str:
    """A one-line human description of ``device`` (name and memory for CUDA)."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return f"cuda: {props.name}, {props.total_memory / 2**30:.0f} GiB"
    if device.type == "mps":
        return "mps: Apple GPU"
    return f"cpu: {torch.get_num_threads()} threads"
