"""The optimizer and its learning-rate schedule (AdamW, linear warm-up, cosine decay)."""

from __future__ import annotations

import math

import torch

from course_utils.checks import check_instance, check_int
from course_utils.config import ModelConfig, TrainConfig


def _check_train_config(config: object) -> TrainConfig:
    hint = "that is the model's config; " if isinstance(config, ModelConfig) else ""
    return check_instance(
        config,
        "config",
        TrainConfig,
        f"{hint}build it with TrainConfig(batch_size=..., max_iters=...) or "
        "get_config(name, vocab_size)[1]",
    )


def learning_rate_at(step: int, config: TrainConfig) -> float:
    """Linear warm-up to ``learning_rate``, then cosine decay to ``min_lr`` at ``max_iters``.

    Args:
        step: the optimizer step, an int from 0 (steps past ``max_iters`` get ``min_lr``).
        config: the run's :class:`~course_utils.config.TrainConfig`.

    Raises:
        TypeError: ``step`` is not an int (``2.5``, ``"3"``), or ``config`` is not a
            TrainConfig (e.g. the ModelConfig).
        ValueError: ``step < 0``.
    """
    config = _check_train_config(config)
    step = check_int(step, "step", minimum=0, why="optimizer steps count from 0")
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

    Raises:
        TypeError: ``model`` is not an ``nn.Module``, or ``config`` is not a TrainConfig.
    """
    check_instance(model, "model", torch.nn.Module, "pass the model itself, e.g. TinyDecoder(...)")
    config = _check_train_config(config)
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
