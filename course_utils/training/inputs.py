"""Everything :func:`course_utils.training.train` is given, checked before the first step.

A mistake in the data or the settings should stop a run at once, with the fix, not after
the training steps have run (a validation split shorter than one window used to surface only
at the first evaluation) and never as a NaN loss.
"""

from __future__ import annotations

from pathlib import Path

import torch

from course_utils.checks import as_device, check_int
from course_utils.config import ModelConfig, TrainConfig
from course_utils.data import as_token_stream
from course_utils.embedding import check_token_ids
from course_utils.training.model_kinds import model_kind


def check_training_inputs(
    model: torch.nn.Module,
    train_data: object,
    val_data: object,
    config: TrainConfig,
    device: object,
    checkpoint_path: object = None,
    max_steps: object = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.device]:
    """Check the arguments of :func:`~course_utils.training.train`.

    Args:
        model: the unwrapped :class:`~course_utils.model.TinyDecoder` or
            :class:`~course_utils.modern_model.ModernDecoder`.
        train_data, val_data: 1-D token streams (any integer dtype; numpy and lists too).
        config, device, checkpoint_path, max_steps: as in ``train``.

    Returns:
        ``(train_data, val_data, device)``: both streams as int64 tensors, and the device.

    Raises:
        TypeError: ``model`` is not a module with a ModelConfig, ``config`` is not a
            TrainConfig, data that are not integer ids (text, floats), a ``max_steps`` that
            is not an int, a ``checkpoint_path`` that is not a str or Path, or one given for
            a model that is neither a TinyDecoder nor a ModernDecoder.
        IsADirectoryError, NotADirectoryError: ``checkpoint_path`` is a folder, or lies under
            a file.
        ValueError: a stream not 1-D, too short for one window of ``block_size + 1`` tokens,
            or with ids outside ``[0, vocab_size)``; the model on another device than
            ``device``; ``max_steps < 1``; an unknown device name.
        RuntimeError: ``device`` is a CUDA or MPS device this machine does not have.
    """
    if not isinstance(model, torch.nn.Module) or not isinstance(
        getattr(model, "config", None), ModelConfig
    ):
        raise TypeError(
            f"model must be a TinyDecoder (a module whose .config is a ModelConfig), got "
            f"{type(model).__name__}; build it with TinyDecoder(ModelConfig(...))"
        )
    if not isinstance(config, TrainConfig):
        hint = " (that is the model's config)" if isinstance(config, ModelConfig) else ""
        raise TypeError(
            f"config must be a TrainConfig, got {type(config).__name__}{hint}; build it with "
            "TrainConfig(batch_size=..., max_iters=...) or get_config(name, vocab_size)[1]"
        )
    device = as_device(device)
    if max_steps is not None:
        check_int(max_steps, "max_steps", minimum=1, why="None trains to config.max_iters")
    if checkpoint_path is not None:
        _check_checkpoint_target(model, checkpoint_path)
    _check_model_device(model, device)
    block_size, vocab_size = model.config.block_size, model.config.vocab_size
    streams = []
    for name, data in (("train_data", train_data), ("val_data", val_data)):
        data = as_token_stream(data, name)
        if len(data) < block_size + 1:
            raise ValueError(
                f"{name} has {len(data)} tokens, but one window needs block_size + 1 = "
                f"{block_size + 1} (the inputs and their next-token targets); use more text, "
                "another val_fraction in train_val_split, or a smaller block_size"
            )
        check_token_ids(data, vocab_size, name)  # once here: bad ids fail before training
        streams.append(data)
    return streams[0], streams[1], device


def _check_checkpoint_target(model: torch.nn.Module, checkpoint_path: object) -> None:
    """The checkpoint can be written at the first evaluation: a str or Path that is not a
    folder nor under a file, and a model that checkpoints hold (TinyDecoder, ModernDecoder)."""
    if not isinstance(checkpoint_path, str | Path):
        raise TypeError(
            f"checkpoint_path must be a str or pathlib.Path, got {type(checkpoint_path).__name__}"
        )
    if model_kind(model) is None:
        raise TypeError(
            f"checkpoints hold a TinyDecoder or a ModernDecoder, got {type(model).__name__}; "
            "train it without checkpoint_path (or save its state_dict yourself)"
        )
    path = Path(checkpoint_path)
    if path.is_dir():
        raise IsADirectoryError(
            f"checkpoint_path {str(path)!r} is a folder; name a file in it, e.g. "
            f"{str(path / 'model.pt')!r}"
        )
    blocked = next((parent for parent in path.parents if parent.is_file()), None)
    if blocked is not None:
        raise NotADirectoryError(
            f"checkpoint_path {str(path)!r} lies under {str(blocked)!r}, which is a file, so "
            "no folder can be made there; choose another path"
        )


def _check_model_device(model: torch.nn.Module, device: torch.device) -> None:
    """ValueError when the model's weights are not on ``device``."""
    parameter = next(model.parameters(), None)
    if parameter is None:
        return
    where = parameter.device
    same = where.type == device.type and (
        device.index is None or where.index is None or where.index == device.index
    )
    if not same:
        raise ValueError(
            f"the model's weights are on {where} but device={str(device)!r}; move the model "
            f"first: model.to({str(device)!r})"
        )
