"""Estimating the loss without gradients, on fixed batches of each split."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from course_utils.checks import as_device, check_instance
from course_utils.config import TrainConfig
from course_utils.training.batches import DeviceBatches
from course_utils.training.distributed import _all_reduce_sum, unwrap_model
from course_utils.training.precision import autocast_context

# The evaluation batches come from their own random stream, seeded with
# ``config.seed + EVAL_SEED_OFFSET``: the training batches are drawn from ``config.seed``, so
# evaluating with that seed would score the "train" split on exactly the first training
# batches, windows the model was trained on first, not a sample of the split.
EVAL_SEED_OFFSET = 1_000_003


def eval_seed(config: TrainConfig) -> int:
    """The seed of the evaluation batches: ``config.seed + EVAL_SEED_OFFSET``.

    Raises:
        TypeError: ``config`` is not a TrainConfig (a model, a ModelConfig).
    """
    fix = "the run's TrainConfig, e.g. TrainConfig(batch_size=..., max_iters=...)"
    check_instance(config, "config", TrainConfig, fix)
    return config.seed + EVAL_SEED_OFFSET


@torch.no_grad()
def estimate_loss(
    model: torch.nn.Module,
    splits: dict[str, torch.Tensor],
    config: TrainConfig,
    device: torch.device | str = "cpu",
    rank: int = 0,
    world_size: int = 1,
) -> dict[str, float]:
    """Mean loss over ``config.eval_iters`` batches of each split, in eval mode, no gradients.

    Which batches: for each split, ``config.eval_iters`` batches of ``config.batch_size``
    random windows, drawn by a generator seeded with :func:`eval_seed` (``config.seed +
    EVAL_SEED_OFFSET``), a stream separate from the training batches (seeded with
    ``config.seed``). Every evaluation sees the same windows, so the curve is not noisier
    than the model, and the "train" figure is a fixed random sample of the training split,
    not the first batches the model trained on. The losses are read back from the device
    once per split.

    Args:
        model: a :class:`TinyDecoder` or ModernDecoder, possibly wrapped by ``torch.compile``
            or DDP.
        splits: name -> 1-D int64 token stream ``(N,)`` (already on ``device`` avoids a copy).
        config: ``batch_size``, ``eval_iters``, ``seed`` and ``autocast_dtype`` are used.
        device: where batches are made.
        rank, world_size: with several processes each batch is the global batch of
            ``world_size * batch_size`` windows, each rank computing its own slice (as in
            training, see :class:`DeviceBatches`), and the sums are all-reduced: the result
            is that of one process with ``world_size * batch_size`` windows. Every rank
            must call this.

    Returns:
        ``{split name: mean cross-entropy in nats per token}`` (Python floats).

    Raises:
        TypeError: ``model`` is not a module with ``config.block_size`` (an optimizer passed
            first, say), ``splits`` is not a dict of streams, ``config`` is not a TrainConfig; a
            stream that is not integer ids (the message names the split).
        ValueError: ``splits`` is empty; a stream that is not 1-D or is not longer than
            ``block_size``; an unknown device name.
        RuntimeError: a CUDA or MPS device this machine does not have.
    """
    block_size = _check_model(model)
    _check_splits(splits)
    config = check_instance(
        config, "config", TrainConfig, "batch_size, eval_iters and seed come from the TrainConfig"
    )
    device = as_device(device)
    was_training = model.training
    model.eval()
    result = {}
    for name, data in splits.items():
        batches = DeviceBatches(
            data,
            block_size,
            config.batch_size,
            device,
            eval_seed(config),
            rank,
            world_size,
            name=str(name),
        )
        losses = []
        for _ in range(config.eval_iters):
            x, y = batches.sample()
            with autocast_context(device, config):
                _, loss = model(x, y)
            losses.append(loss.detach().float())
        total = sum(torch.stack(losses).tolist())  # one read-back per split
        if world_size > 1:
            total = _all_reduce_sum(total, device) / world_size  # mean over equal slices
        result[name] = total / config.eval_iters
    model.train(was_training)
    return result


def _check_model(model: object) -> int:
    """The ``block_size`` of ``model``'s config; TypeError for a model without one."""
    check_instance(
        model,
        "model",
        torch.nn.Module,
        "pass the model (a TinyDecoder) first: estimate_loss(model, splits, config)"
        + (", not the optimizer" if isinstance(model, torch.optim.Optimizer) else ""),
    )
    inner = unwrap_model(model)
    if not isinstance(getattr(getattr(inner, "config", None), "block_size", None), int):
        raise TypeError(
            f"model must carry a config with a block_size (as TinyDecoder does), got a "
            f"{type(inner).__name__} without model.config.block_size; pass a TinyDecoder"
        )
    return inner.config.block_size


def _check_splits(splits: object) -> None:
    """TypeError unless ``splits`` is a mapping, ValueError when it is empty."""
    if not isinstance(splits, Mapping):
        raise TypeError(
            f"splits must be a dict of name -> 1-D token stream, got {type(splits).__name__}; "
            'e.g. estimate_loss(model, {"train": train_data, "val": val_data}, config)'
        )
    if not splits:
        raise ValueError(
            f'splits is empty ({dict(splits)}): give at least one stream, e.g. {{"val": val_data}}'
        )
