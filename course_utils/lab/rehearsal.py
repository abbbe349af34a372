"""Rehearse a GPU's branches on the CPU: the switch ``COURSE_REHEARSE``.

A GPU is rarely at hand where the course is developed and tested, yet notebook 12 trains the
``gpu`` preset there (dropout 0.2, bf16 autocast; float16 with a gradient scaler on compute
capability 7.x such as Colab's T4). So that this path cannot rot, one environment variable
makes the course take, on a CPU, every branch it would take on such a GPU:

- unset or empty: the machine it runs on (nothing changes);
- ``cuda-bf16``: CUDA with compute capability 9.0 (an H100): bfloat16 autocast, no loss
  scaling;
- ``cuda-fp16``: CUDA with compute capability 7.5 (a T4): float16 autocast with a
  ``torch.amp.GradScaler("cpu")``.

What changes under the switch (on a CPU device only; a real GPU is always itself):

* :func:`acting_device_type` says ``"cuda"``, so the notebooks choose the ``gpu`` preset and
  print the prose that holds on a GPU;
* :func:`acting_capability` gives the capability above, so
  :func:`course_utils.training.precision.device_precision` picks ``"bf16"`` or ``"fp16"``
  (with the CPU's autocast, and a CPU ``GradScaler`` for fp16) exactly as on that GPU;
* :data:`REHEARSAL_OVERRIDES` shrinks the run (model, batch, steps, evaluation) so that a
  notebook executes top to bottom in seconds; the preset's dropout and precision policy are
  kept. :func:`rehearsal_overrides` returns them when the switch is on, ``{}`` otherwise.

The tensors never leave the CPU: the rehearsal exercises the course's *choices*, not CUDA
kernels. ``make rehearsal`` executes notebooks 12 and 13 in both modes; ``make test`` does too.
"""

from __future__ import annotations

import os

import torch

from course_utils.lab.language import N_, tr, translated

#: The environment variable that switches the rehearsal on.
REHEARSAL_ENV = "COURSE_REHEARSE"
#: Its accepted values (besides unset or empty: no rehearsal).
REHEARSAL_MODES = ("cuda-bf16", "cuda-fp16")
#: The CUDA compute capability each mode acts as if it had: an H100 (bf16 tensor cores) and
#: a T4 (float16 tensor cores only, the GPU of free Colab).
REHEARSAL_CAPABILITIES = {"cuda-bf16": (9, 0), "cuda-fp16": (7, 5)}
#: The GPU each mode stands in for, for messages.
REHEARSAL_GPUS = {"cuda-bf16": N_("H100-like GPU"), "cuda-fp16": N_("T4-like GPU")}
#: ``get_config`` overrides that shrink a rehearsed run to seconds on a CPU. Dropout and the
#: precision policy (``autocast_dtype``) are the preset's own, untouched; ``d_k = 48 / 6 = 8``
#: keeps RoPE's channel pairs; ``warmup_iters`` follows ``max_iters`` (2 steps).
REHEARSAL_OVERRIDES = dict(
    block_size=32,
    d_model=48,
    n_heads=6,
    n_layers=2,
    batch_size=4,
    max_iters=20,
    eval_interval=10,
    eval_iters=2,
)


def rehearsal_mode() -> str | None:
    """The rehearsal mode that ``COURSE_REHEARSE`` asks for, or ``None`` (unset or empty).

    Returns:
        One of :data:`REHEARSAL_MODES` (surrounding spaces ignored), or ``None``.

    Raises:
        ValueError: the variable holds anything else; the message names the variable, the
            value and the accepted values.
    """
    value = os.environ.get(REHEARSAL_ENV, "").strip()
    if not value:
        return None
    if value not in REHEARSAL_MODES:
        raise ValueError(
            f"{REHEARSAL_ENV}={value!r} is not a rehearsal mode; expected one of "
            f"{', '.join(REHEARSAL_MODES)}, or unset it (or set it empty) to run as this "
            "machine is"
        )
    return value


def _rehearsing_on(device: torch.device | str) -> str | None:
    """The mode, when rehearsing and ``device`` is a CPU; else ``None``."""
    mode = rehearsal_mode()
    if mode is None or torch.device(device).type != "cpu":
        return None
    return mode


def acting_device_type(device: torch.device | str) -> str:
    """The device type the course acts as if it ran on: ``"cuda"`` when rehearsing on a
    CPU, else ``torch.device(device).type``.

    Raises:
        RuntimeError: ``device`` is not a device name (torch's own message);
        ValueError: ``COURSE_REHEARSE`` holds an unknown value.
    """
    return "cuda" if _rehearsing_on(device) else torch.device(device).type


def acting_capability(device: torch.device | str) -> tuple[int, int] | None:
    """The CUDA compute capability the course acts as if ``device`` had.

    Returns:
        The mode's capability (:data:`REHEARSAL_CAPABILITIES`) when rehearsing on a CPU;
        the real one on a CUDA device; ``None`` otherwise (CPU, MPS).

    Raises:
        ValueError: ``COURSE_REHEARSE`` holds an unknown value.
        RuntimeError: a CUDA ``device`` on a machine without CUDA, or without that GPU.
    """
    mode = _rehearsing_on(device)
    if mode is not None:
        return REHEARSAL_CAPABILITIES[mode]
    device = torch.device(device)
    if device.type != "cuda":
        return None
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0 or (device.index is not None and device.index >= count):
        have = f"{count} CUDA device(s)" if count else "no CUDA (torch " + torch.__version__ + ")"
        raise RuntimeError(
            f"device={str(device)!r} asks for a CUDA GPU, but this machine has {have}; pass "
            f"the device the run uses (get_device('auto'), or 'cpu'), or to rehearse a GPU's "
            f"branches on this CPU set {REHEARSAL_ENV} to one of {', '.join(REHEARSAL_MODES)} "
            "and pass device='cpu'"
        )
    return torch.cuda.get_device_capability(device)


def rehearsal_overrides() -> dict:
    """:data:`REHEARSAL_OVERRIDES` (a copy) when the switch is on, ``{}`` when it is off.

    Raises:
        ValueError: ``COURSE_REHEARSE`` holds an unknown value.
    """
    return dict(REHEARSAL_OVERRIDES) if rehearsal_mode() else {}


def describe_rehearsal() -> str:
    """One line saying what is rehearsed, or ``""`` when the switch is off.

    Raises:
        ValueError: ``COURSE_REHEARSE`` holds an unknown value.
    """
    mode = rehearsal_mode()
    if mode is None:
        return ""
    major, minor = REHEARSAL_CAPABILITIES[mode]
    return tr(
        "rehearsal {variable}={mode}: the CPU acts as a {gpu} "
        "(CUDA compute capability {major}.{minor}), run shrunk to seconds"
    ).format(
        variable=REHEARSAL_ENV,
        mode=mode,
        gpu=translated(REHEARSAL_GPUS[mode]),
        major=major,
        minor=minor,
    )
