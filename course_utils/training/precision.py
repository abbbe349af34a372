"""Number formats on the device: autocast and TF32 (what makes a GPU step fast)."""

from __future__ import annotations

import contextlib

import torch

from course_utils.config import TrainConfig


def autocast_context(device: torch.device, config: TrainConfig):
    """bf16 autocast on CUDA when the config asks for it; a no-op elsewhere."""
    if device.type == "cuda" and config.autocast_dtype == "bfloat16":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


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
