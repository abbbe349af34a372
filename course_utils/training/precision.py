"""Number formats on the device: which precision to train in, autocast, TF32, loss scaling.

:func:`choose_precision` is a pure function of the device (type and CUDA compute
capability) and the precision the config asks for, so every case is testable on a CPU:

- ``"bf16"``: bfloat16 autocast, CUDA compute capability >= 8.0 (Ampere: A100, RTX 30xx;
  Hopper: H100). bfloat16 keeps float32's exponent range, so no loss scaling is needed.
- ``"fp16"``: float16 autocast with a :class:`torch.amp.GradScaler`, for GPUs without fast
  bfloat16 but with float16 tensor cores: compute capability 7.x (V100 7.0, T4 7.5, the GPU
  of free Colab). float16's range ends at 65504 and its smallest normal number is ~6e-5, so
  small gradients underflow to zero unless the loss is scaled up before ``backward()``
  (Micikevicius et al. 2018, "Mixed Precision Training", §3.2).
- ``"fp32"``: no autocast (CPU, Apple MPS, older GPUs, or when the config says float32).
"""

from __future__ import annotations

import contextlib

import torch

from course_utils.checks import as_device, check_choice, check_instance, check_int
from course_utils.config import TrainConfig
from course_utils.lab.language import N_, tr, translated
from course_utils.lab.rehearsal import acting_capability, acting_device_type, rehearsal_mode

PRECISIONS = ("bf16", "fp16", "fp32")
_AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# The config's names for what it asks: "bfloat16" (the gpu preset) means "mixed precision
# on a GPU": bf16 where supported, else fp16 with loss scaling. "float16" is an explicit
# choice (e.g. to test the T4 path on a newer GPU) and is honoured on every device.
_REQUESTS = ("float32", "bfloat16", "float16")


def choose_precision(
    device_type: str, capability: tuple[int, int] | None = None, requested: str = "bfloat16"
) -> str:
    """The precision a training run uses: ``"bf16"``, ``"fp16"`` or ``"fp32"``.

    Args:
        device_type: ``"cuda"``, ``"cpu"``, ``"mps"``... (``torch.device.type``).
        capability: the CUDA compute capability ``(major, minor)``, e.g. ``(7, 5)`` for a
            T4, ``(9, 0)`` for an H100; ignored off CUDA. ``None`` on CUDA is an error.
        requested: ``TrainConfig.autocast_dtype``: ``"float32"`` -> fp32 everywhere;
            ``"bfloat16"`` -> bf16 on CUDA >= 8.0, fp16 on CUDA 7.x, else fp32 (CPU, MPS
            and pre-Volta GPUs stay in float32: the course's mixed precision is for GPUs);
            ``"float16"`` -> fp16 on any device (forced; CPU autocast supports float16).

    Returns:
        One of :data:`PRECISIONS`.

    Raises:
        TypeError: ``capability`` is not a pair of ints (``8.0``: pass ``(8, 0)``).
        ValueError: ``requested`` is not one of ``"float32"``, ``"bfloat16"``,
            ``"float16"``; ``device_type`` is not a device type (``"gpu"``, or ``"cuda:0"``
            with an index: pass ``torch.device(...).type``); or it is ``"cuda"`` with no
            capability.
    """
    _check_device_type(device_type)
    capability = _check_capability(capability)
    _check_requested(requested)
    if requested == "float32":
        return "fp32"
    if requested == "float16":
        return "fp16"
    if device_type != "cuda":
        return "fp32"
    _check_capability_on_cuda(capability)
    if tuple(capability) >= (8, 0):
        return "bf16"
    if tuple(capability) >= (7, 0):
        return "fp16"
    return "fp32"


def _check_device_type(device_type: object) -> None:
    """ValueError unless ``device_type`` is a device type as ``torch.device.type`` names it."""
    if not isinstance(device_type, str) or _device_type(device_type) != device_type:
        raise ValueError(
            f"device_type must be a device type such as 'cpu', 'cuda' or 'mps' "
            f"(torch.device.type), got {device_type!r}; pass torch.device(device).type"
        )


def _check_capability(capability: object) -> tuple[int, int] | None:
    """``capability`` as a pair of ints (None stays None); TypeError for anything else."""
    if capability is None:
        return None
    if not isinstance(capability, tuple | list) or len(capability) != 2:
        raise TypeError(
            f"capability must be the pair (major, minor), got {capability!r}; e.g. (8, 0), "
            "or torch.cuda.get_device_capability(device)"
        )
    return (
        check_int(capability[0], "capability[0]"),
        check_int(capability[1], "capability[1]"),
    )


def _check_requested(requested: object) -> None:
    """ValueError unless ``requested`` is one of the config's precision names."""
    if requested not in _REQUESTS:
        raise ValueError(
            f"requested precision must be one of {_REQUESTS}, got {requested!r}; set "
            "TrainConfig.autocast_dtype to one of them"
        )


def _check_capability_on_cuda(capability: tuple[int, int] | None) -> None:
    """ValueError when the capability is missing on CUDA."""
    if capability is None:
        raise ValueError(
            "capability must be the CUDA compute capability (major, minor) on cuda, got "
            "None; pass torch.cuda.get_device_capability(device)"
        )


def _device_type(name: str) -> str | None:
    """The type of the device ``name`` names, or None when torch knows no such device."""
    try:
        return torch.device(name).type
    except (RuntimeError, TypeError, ValueError):
        return None


def _check_config(config: object) -> TrainConfig:
    return check_instance(
        config, "config", TrainConfig, "its autocast_dtype says which precision is requested"
    )


def device_precision(device: torch.device | str, config: TrainConfig) -> str:
    """:func:`choose_precision` for a real device (reads its compute capability).

    With the rehearsal switch on (``COURSE_REHEARSE=cuda-bf16`` or ``cuda-fp16``, see
    :mod:`course_utils.lab.rehearsal`) a CPU device is treated as CUDA with compute capability
    9.0 or 7.5: the ``gpu`` preset then gets ``"bf16"`` or ``"fp16"`` on the CPU.

    Raises:
        TypeError: ``config`` is not a TrainConfig.
        ValueError: ``device`` is not a device name; ``COURSE_REHEARSE`` holds an unknown
            value.
    """
    config = _check_config(config)
    device = as_device(device)
    # Rehearsal (COURSE_REHEARSE, course_utils.lab.rehearsal): a CPU acts as the GPU it stands in
    # for, so the choice below is the GPU's; autocast and the GradScaler then run on the CPU.
    return choose_precision(
        acting_device_type(device), acting_capability(device), config.autocast_dtype
    )


def describe_precision(precision: str, device: torch.device | str) -> str:
    """One line for the user: what runs in which format, and why.

    Raises:
        ValueError: ``precision`` is not one of :data:`PRECISIONS`, or ``device`` is not a
            device name.
    """
    check_choice(precision, "precision", PRECISIONS)
    device = as_device(device)
    why = translated(_WHY[precision])
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        where = tr("{gpu} (compute capability {major}.{minor})").format(
            gpu=torch.cuda.get_device_name(device), major=major, minor=minor
        )
    elif acting_device_type(device) == "cuda":
        major, minor = acting_capability(device)
        where = tr("cpu, rehearsing CUDA compute capability {major}.{minor} ({mode})").format(
            major=major, minor=minor, mode=rehearsal_mode()
        )
    else:
        where = device.type
    return tr("precision {precision} on {where}: {why}").format(
        precision=precision, where=where, why=why
    )


#: Why each precision, for :func:`describe_precision` (translated where it is shown).
_WHY = {
    "bf16": N_("bfloat16 autocast (float32 weights; no loss scaling needed)"),
    "fp16": N_(
        "float16 autocast with a GradScaler (float32 weights; loss scaled so small "
        "gradients do not underflow)"
    ),
    "fp32": N_("float32, no autocast"),
}


def autocast_context(device: torch.device, config: TrainConfig, precision: str | None = None):
    """The autocast context of a forward pass: bf16 or fp16 autocast, or a no-op for fp32.

    Args:
        device: where the model runs.
        config: ``autocast_dtype`` says what is requested (see :func:`choose_precision`).
        precision: the already chosen precision (skips reading the device again).

    Raises:
        TypeError: ``config`` is not a TrainConfig.
        ValueError: ``precision`` is not None nor one of :data:`PRECISIONS`.
    """
    config = _check_config(config)
    if precision is not None:
        check_choice(precision, "precision", PRECISIONS)
    device = as_device(device)
    precision = precision or device_precision(device, config)
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=_AUTOCAST_DTYPES[precision])


def make_grad_scaler(device: torch.device | str, precision: str) -> torch.amp.GradScaler | None:
    """A :class:`torch.amp.GradScaler` for fp16 training, ``None`` for bf16 and fp32.

    Raises:
        TypeError: ``precision`` is not a str.
        ValueError: ``precision`` is not one of :data:`PRECISIONS` (e.g. ``"float16"``, the
            config's name: pass ``device_precision(device, config)``); ``device`` is not a
            device name (``"gpu"``: use ``"cuda"``).
        RuntimeError: a CUDA or MPS device this machine does not have.
    """
    device = as_device(device)
    check_choice(precision, "precision", PRECISIONS)
    if precision != "fp16":
        return None
    return torch.amp.GradScaler(device.type)


def enable_tf32() -> None:
    """Let CUDA run float32 matrix products and convolutions on TF32 tensor cores.

    Inputs are rounded to a 10-bit mantissa inside the product (results stay float32):
    several times faster on Ampere and later GPUs. No effect on CPU results.
    """
    matmul, conv = torch.backends.cuda.matmul, getattr(torch.backends.cudnn, "conv", None)
    try:  # the API of PyTorch >= 2.9
        matmul.fp32_precision = "tf32"
        if conv is not None:
            conv.fp32_precision = "tf32"
    except (AttributeError, RuntimeError):
        matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
