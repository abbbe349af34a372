"""Checkpoints: atomic writes, safe reads (``weights_only``), exact resume."""

from __future__ import annotations

import os
import pickle
import re
import tempfile
from dataclasses import asdict
from pathlib import Path

import torch

from course_utils.checks import as_device, check_instance, check_int
from course_utils.config import ModelConfig, TrainConfig
from course_utils.model import TinyDecoder
from course_utils.training.distributed import unwrap_model
from course_utils.training.history import History


def save_checkpoint(
    path: str | Path,
    model: TinyDecoder,
    optimizer: torch.optim.Optimizer | None,
    step: int,
    train_config: TrainConfig | None = None,
    history: History | None = None,
    batch_generator: torch.Generator | None = None,
    rank_rng_states: list[dict] | None = None,
) -> Path:
    """Write weights, optimizer state, configs, history and RNG state to ``path``.

    The file is written to a temporary name in the same folder and then renamed, so a
    crash mid-write never replaces the last good checkpoint with a broken one.

    ``rank_rng_states`` (one dict per DDP rank, from the training loop) lets every rank's
    dropout stream resume exactly; it is stored under ``rng["per_rank"]``.

    Raises:
        TypeError: ``path`` is not a str or Path; ``model`` is not a TinyDecoder; ``step`` is
            not an int; ``optimizer``, ``train_config``, ``history`` or ``batch_generator``
            is neither None nor of its type (e.g. the ModelConfig as ``train_config``).
        ValueError: ``step < 0``.
        IsADirectoryError: ``path`` is an existing directory (pass ``path / "model.pt"``).
    """
    path = _check_path(path)
    model = unwrap_model(model)
    if not isinstance(model, TinyDecoder):
        raise TypeError(
            f"model must be the TinyDecoder to save, got {type(model).__name__}; call "
            "save_checkpoint(path, model, optimizer, step)"
        )
    step = check_int(step, "step", minimum=0, why="optimizer steps done")
    for name, value, expected, fix in (
        ("optimizer", optimizer, torch.optim.Optimizer, "e.g. make_optimizer(model, config)"),
        ("train_config", train_config, TrainConfig, "the run's TrainConfig, not the model's"),
        ("history", history, History, "the History that train() returns"),
        ("batch_generator", batch_generator, torch.Generator, "e.g. DeviceBatches.generator"),
    ):
        if value is not None:
            check_instance(value, name, expected, f"{fix}, or None")
    if path.is_dir():
        raise IsADirectoryError(
            f"path {str(path)!r} is an existing directory, not a checkpoint file; pass a file "
            f"name inside it, e.g. save_checkpoint({str(path / 'model.pt')!r}, model, "
            "optimizer, step)"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "model_config": asdict(model.config),
        "train_config": asdict(train_config) if train_config is not None else None,
        "step": step,
        "history": asdict(history) if history is not None else None,
        "rng": {
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "batch_generator": batch_generator.get_state() if batch_generator is not None else None,
            "per_rank": rank_rng_states,
        },
    }
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(handle)
    try:
        torch.save(state, temporary)
        with open(temporary, "rb+") as written:
            os.fsync(written.fileno())  # on disk before the rename, even if the power fails
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp makes it owner-only; use the usual mode
        os.replace(temporary, path)  # atomic on POSIX and Windows
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    return path


def load_checkpoint(
    path: str | Path,
    model: TinyDecoder | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    map_location: torch.device | str = "cpu",
) -> dict:
    """Read a checkpoint written by :func:`save_checkpoint`.

    It is loaded with ``weights_only=True``: tensors and plain data, never pickled code.

    Args:
        path: the checkpoint file.
        model: if given, its weights are loaded; its config must match the checkpoint's.
        optimizer: if given, its state is loaded.
        map_location: where tensors are loaded.

    Returns:
        The checkpoint dict (``model``, ``optimizer``, ``model_config``, ``train_config``,
        ``step``, ``history``, ``rng``).

    Raises:
        FileNotFoundError: no file at ``path`` (a folder included).
        TypeError: ``path`` is not a str or Path, ``model`` is not a TinyDecoder, or
            ``optimizer`` is not a torch optimizer.
        ValueError: the file is not a readable checkpoint, or it was written for a model
            with a different config (the message lists the fields that differ), or
            ``map_location`` is not a device name.
        RuntimeError: ``map_location`` is a CUDA or MPS device this machine does not have.
    """
    if model is not None:
        model = check_instance(
            unwrap_model(model), "model", TinyDecoder, "the model to load the weights into"
        )
    if optimizer is not None:
        check_instance(optimizer, "optimizer", torch.optim.Optimizer, "or None")
    state = _read(path, map_location)
    if not isinstance(state, dict) or "model" not in state or "model_config" not in state:
        found = sorted(state)[:8] if isinstance(state, dict) else type(state).__name__
        hint = ""
        if isinstance(state, dict) and any(str(k).endswith(".weight") for k in state):
            hint = (
                "; it looks like a bare state_dict (torch.save(model.state_dict())): load it "
                "with model.load_state_dict(torch.load(path, weights_only=True)), then write "
                "a full checkpoint with save_checkpoint(path, model, optimizer, step)"
            )
        raise ValueError(
            f"{path} is not a checkpoint written by save_checkpoint: expected the keys "
            f"'model' and 'model_config', found {found}{hint}"
        )
    if model is not None:
        expected = asdict(model.config)
        saved = state["model_config"]
        differing = {k: (saved.get(k), v) for k, v in expected.items() if saved.get(k) != v}
        if differing:
            details = ", ".join(
                f"{k}: checkpoint {a!r} vs model {b!r}" for k, (a, b) in differing.items()
            )
            raise ValueError(
                f"checkpoint {path} was written for a different model config ({details}); "
                f"build the model with ModelConfig(**checkpoint['model_config'])"
            )
        model.load_state_dict(state["model"])
    if optimizer is not None and state.get("optimizer") is not None:
        optimizer.load_state_dict(state["optimizer"])
    return state


def _check_path(path: object) -> Path:
    if not isinstance(path, str | os.PathLike):
        raise TypeError(
            f"path must be a str or pathlib.Path, got {type(path).__name__}; e.g. "
            '"checkpoints/model.pt"'
        )
    return Path(path)


def _read(path: object, map_location: object) -> object:
    """torch.load with weights_only=True; torch's errors re-raised in the course's words."""
    path = _check_path(path)
    if isinstance(map_location, str | torch.device):
        map_location = as_device(map_location, "map_location")
    if path.is_dir():
        raise FileNotFoundError(
            f"{path} is a directory, not a checkpoint file; pass the file inside it, e.g. "
            f"{path / 'model.pt'}"
        )
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}; train first, or check the path")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        found = re.search(r"GLOBAL ([\w.]+)", str(error))
        if found is None:  # not Python objects refused by weights_only: a damaged file
            raise ValueError(
                f"{path} is not a readable checkpoint ({type(error).__name__}: {error}); it "
                "may be truncated (an interrupted write) or not a PyTorch file"
            ) from error
        what = f"a pickled {found.group(1)} object"
        raise ValueError(
            f"{path} holds {what}, e.g. a whole model saved with torch.save(model); "
            "load_checkpoint reads only files written by save_checkpoint (tensors and plain "
            "data, loaded safely). Write one with save_checkpoint(path, model, optimizer, "
            "step); only for a file you trust, torch.load(path, weights_only=False) reads "
            "the old one"
        ) from None
    except Exception as error:  # torch raises several types for a damaged file
        raise ValueError(
            f"{path} is not a readable checkpoint ({type(error).__name__}: {error}); it may "
            "be truncated (an interrupted write) or not a PyTorch file"
        ) from error


def model_from_checkpoint(
    path: str | Path, map_location: torch.device | str = "cpu"
) -> TinyDecoder:
    """Rebuild a :class:`TinyDecoder` from a checkpoint's stored config and load its weights.

    Raises:
        FileNotFoundError, TypeError, ValueError: as :func:`load_checkpoint`.
    """
    state = load_checkpoint(path, map_location=map_location)
    model = TinyDecoder(ModelConfig(**state["model_config"]))
    model.load_state_dict(state["model"])
    return model.to(map_location)
