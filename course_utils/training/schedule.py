"""The optimizer and its learning-rate schedule (AdamW, linear warm-up, cosine decay)."""

from __future__ import annotations

import math

import torch

from course_utils.config import TrainConfig


def learning_rate_at(step: int, config: TrainConfig) -> float:
    """Linear warm-up to ``learning_rate``, then cosine decay to ``min_lr`` at ``max_iters``."""
    if step < config.warmup_iters:
        return config.learning_rate * (step + 1) / config.warmup_iters
    progress = (step - config.warmup_iters) / max(1, config.max_iters - config.warmup_iters)
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return config.min_lr + cosine * (config.learning_rate - config.min_lr)


def _fused_adamw_supported(params: list[torch.Tensor]) -> bool:
    """True when PyTorch has a fused AdamW kernel for every parameter's device and dtype."""
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

        devices = _get_fused_kernels_supported_devices()
    except (ImportError, AttributeError):  # private helper: be safe if it moves
        return False
    return bool(params) and all(
        p.device.type in devices and p.dtype in (torch.float16, torch.bfloat16, torch.float32)
        for p in params
    )


def make_optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (biases, norms and 1-D tensors are not decayed).

    The fused kernel (one launch updates every tensor) is used where PyTorch has it for the
    parameters' device (CUDA, CPU, MPS, ...); elsewhere PyTorch's default implementation.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    fused = True if _fused_adamw_supported(params) else None  # None: PyTorch chooses
    return torch.optim.AdamW(
        groups, lr=config.learning_rate, betas=(0.9, config.beta2), fused=fused
    )
