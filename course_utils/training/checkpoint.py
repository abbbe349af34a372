"""Checkpoints: atomic writes, safe reads (``weights_only``), a checksum, exact resume.

Every checkpoint :func:`save_checkpoint` writes holds a SHA-256 checksum of its payload (every
tensor's dtype, shape and bytes, and every config value) under the key ``"checksum"``.
:func:`load_checkpoint` recomputes it and refuses a file whose checksum differs (a disk or
copy error, a partial download), naming the file. A checkpoint written before checksums
existed has no ``"checksum"`` key: it is loaded unchecked, as before, since nothing recorded
what it should hold; :func:`add_checksum` adds one to such a file without changing a weight.

A checkpoint holds a :class:`~course_utils.model.TinyDecoder` or a
:class:`~course_utils.modern_model.ModernDecoder`: its ``"model_kind"`` (``"tiny"`` or
``"modern"``, :mod:`course_utils.training.model_kinds`) says which, ``"model_config"`` holds
that config's fields. One kind's checkpoint is never loaded into the other kind's model.
"""

from __future__ import annotations

import os
import pickle
import re
import tempfile
from dataclasses import asdict, fields
from pathlib import Path

import torch

from course_utils.checks import as_device, check_instance, check_int
from course_utils.config import TrainConfig, with_defaults
from course_utils.model import TinyDecoder
from course_utils.modern_model import ModernDecoder
from course_utils.training.checksum import _verify_checksum, _with_checksum, payload_sha256
from course_utils.training.distributed import unwrap_model
from course_utils.training.history import History
from course_utils.training.model_kinds import (
    DECODER_CLASSES,
    DEFAULT_KIND,
    MODEL_KINDS,
    build_decoder,
    config_class,
    describe_kind,
    model_kind,
)

__all__ = [  # payload_sha256 lives in .checksum; importable from here too
    "add_checksum",
    "load_checkpoint",
    "model_from_checkpoint",
    "payload_sha256",
    "save_checkpoint",
]


def save_checkpoint(
    path: str | Path,
    model: TinyDecoder | ModernDecoder,
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
        TypeError: ``path`` is not a str or Path; ``model`` is neither a TinyDecoder nor a
            ModernDecoder; ``step`` is
            not an int; ``optimizer``, ``train_config``, ``history`` or ``batch_generator``
            is neither None nor of its type (e.g. the ModelConfig as ``train_config``).
        ValueError: ``step < 0``.
        IsADirectoryError: ``path`` is an existing directory (pass ``path / "model.pt"``).
        NotADirectoryError: a parent of ``path`` is a file (it is named).
    """
    path = _check_path(path)
    model = _check_model_to_save(unwrap_model(model))
    step = check_int(step, "step", minimum=0, why="optimizer steps done")
    for name, value, expected, fix in (
        ("optimizer", optimizer, torch.optim.Optimizer, "e.g. make_optimizer(model, config)"),
        ("train_config", train_config, TrainConfig, "the run's TrainConfig, not the model's"),
        ("history", history, History, "the History that train() returns"),
        ("batch_generator", batch_generator, torch.Generator, "e.g. DeviceBatches.generator"),
    ):
        if value is not None:
            check_instance(value, name, expected, f"{fix}, or None")
    _check_not_directory(path)
    _make_parent(path)
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "model_kind": model_kind(model),
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
    _write_atomically(_with_checksum(state), path)
    return path


def _check_model_to_save(model: object) -> TinyDecoder | ModernDecoder:
    """TypeError unless the (unwrapped) ``model`` is a TinyDecoder or a ModernDecoder."""
    if model_kind(model) is None:
        raise TypeError(
            f"model must be the TinyDecoder or ModernDecoder to save, got "
            f"{type(model).__name__}; call save_checkpoint(path, model, optimizer, step)"
        )
    return model


def _check_not_directory(path: Path) -> None:
    """IsADirectoryError when ``path`` is an existing directory."""
    if path.is_dir():
        raise IsADirectoryError(
            f"path {str(path)!r} is an existing directory, not a checkpoint file; pass a file "
            f"name inside it, e.g. save_checkpoint({str(path / 'model.pt')!r}, model, "
            "optimizer, step)"
        )


def _make_parent(path: Path) -> None:
    """Make ``path``'s folder; NotADirectoryError, naming the file, when a parent is a file."""
    file = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if file is not None:
        raise NotADirectoryError(
            f"path {str(path)!r} goes through {str(file)!r}, which is a file, not a folder, so "
            "the checkpoint cannot be written under it; choose a path in a folder, e.g. "
            f"save_checkpoint({str(file.parent / 'checkpoints' / path.name)!r}, model, ...)"
        )
    path.parent.mkdir(parents=True, exist_ok=True)


def _write_atomically(state: dict, path: Path) -> None:
    """torch.save to a temporary file in the same folder, fsync, then rename over ``path``."""
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


def load_checkpoint(
    path: str | Path,
    model: TinyDecoder | ModernDecoder | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    map_location: torch.device | str = "cpu",
) -> dict:
    """Read a checkpoint written by :func:`save_checkpoint`.

    It is loaded with ``weights_only=True``: tensors and plain data, never pickled code.

    Args:
        path: the checkpoint file.
        model: if given, its weights are loaded; it must be of the checkpoint's kind
            (TinyDecoder or ModernDecoder) and its config must match the checkpoint's.
        optimizer: if given, its state is loaded.
        map_location: where tensors are loaded.

    Returns:
        The checkpoint dict (``model``, ``optimizer``, ``model_kind``, ``model_config``,
        ``train_config``, ``step``, ``history``, ``rng``; ``checksum`` when the file has one).
        A file written before kinds were recorded has no ``model_kind``: it holds a
        TinyDecoder.

    Raises:
        FileNotFoundError: no file at ``path`` (a folder included).
        TypeError: ``path`` is not a str or Path, ``model`` is neither a TinyDecoder nor a
            ModernDecoder, or ``optimizer`` is not a torch optimizer.
        ValueError: the file is not a readable checkpoint; its stored checksum differs from
            its content (the file was damaged after it was written); it holds another kind
            of model than ``model`` (a TinyDecoder's into a ModernDecoder or the reverse:
            the message names both kinds); an unknown ``model_kind``; its ``model_config`` has
            a field this version of the course does not know (written by another version);
            it was written for a model with a different config (the message lists the
            fields that differ); ``optimizer`` is not the optimizer of a model like the
            checkpoint's (other parameter count or shapes); or ``map_location`` is not a
            device name. Nothing is loaded into ``model`` or ``optimizer`` when it raises.
        RuntimeError: ``map_location`` is a CUDA or MPS device this machine does not have.
    """
    if model is not None:
        model = check_instance(
            unwrap_model(model), "model", tuple(DECODER_CLASSES.values()), "the model to load into"
        )
    if optimizer is not None:
        check_instance(optimizer, "optimizer", torch.optim.Optimizer, "or None")
    state = _read(path, map_location)
    _check_is_checkpoint(state, path)
    _verify_checksum(state, path)
    kind = state.get("model_kind", DEFAULT_KIND)  # none: written before kinds were recorded
    _check_known_fields(kind, state["model_config"], path)
    if model is not None:  # first: another kind, then a different config, named as such
        _check_same_kind(kind, model, path)
        _check_config_matches(state["model_config"], model, path)
    if optimizer is not None and state.get("optimizer") is not None:
        _check_optimizer_matches(state["optimizer"], optimizer, path)
    if model is not None:
        model.load_state_dict(state["model"])
    if optimizer is not None and state.get("optimizer") is not None:
        optimizer.load_state_dict(state["optimizer"])
    return state


def _check_is_checkpoint(state: object, path: object) -> None:
    """ValueError unless ``state`` is a dict with the keys ``model`` and ``model_config``."""
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


def _check_same_kind(saved_kind: str, model: TinyDecoder | ModernDecoder, path: object) -> None:
    """ValueError when the checkpoint holds another kind of model than ``model``."""
    kind = model_kind(model)
    if kind != saved_kind:
        raise ValueError(
            f"checkpoint {path} holds {describe_kind(saved_kind)}, but the model passed is "
            f"{describe_kind(kind)}; its weights do not fit. Rebuild the checkpoint's own model "
            "with model_from_checkpoint(path), or build "
            f"{DECODER_CLASSES[saved_kind].__name__}({config_class(saved_kind).__name__}"
            "(**checkpoint['model_config'])) and load into that"
        )


def _check_config_matches(saved: dict, model: TinyDecoder | ModernDecoder, path: object) -> None:
    """ValueError when ``model``'s config differs from the checkpoint's ``model_config``."""
    expected = asdict(model.config)
    saved = with_defaults(saved, type(model.config))  # fields added since it was written
    differing = {k: (saved.get(k), v) for k, v in expected.items() if saved.get(k) != v}
    if differing:
        details = ", ".join(
            f"{k}: checkpoint {a!r} vs model {b!r}" for k, (a, b) in differing.items()
        )
        raise ValueError(
            f"checkpoint {path} was written for a different model config ({details}); "
            f"build the model with {type(model.config).__name__}(**checkpoint['model_config'])"
        )


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
) -> TinyDecoder | ModernDecoder:
    """Rebuild the checkpoint's model from its stored kind and config, and load its weights:
    a :class:`TinyDecoder` (``model_kind="tiny"``, and every file written before kinds were
    recorded) or a :class:`~course_utils.modern_model.ModernDecoder` (``"modern"``).

    Raises:
        FileNotFoundError, TypeError, ValueError: as :func:`load_checkpoint` (a damaged
            file, an unknown kind, a config field this version does not know).
    """
    state = load_checkpoint(path, map_location=map_location)
    kind = state.get("model_kind", DEFAULT_KIND)
    model = build_decoder(config_class(kind)(**state["model_config"]))
    model.load_state_dict(state["model"])
    return model.to(map_location)


def add_checksum(path: str | Path) -> str:
    """Store the checksum in a checkpoint written before checksums existed; return it.

    The file is read safely, the checksum of its payload added under ``"checksum"`` and the
    file rewritten atomically; every tensor and value stays exactly as it was (a file that
    already has a checksum must match it, and is left as it is).

    Raises:
        FileNotFoundError, TypeError, ValueError: as :func:`load_checkpoint`.
    """
    state = load_checkpoint(path)
    if "checksum" not in state:
        _write_atomically(_with_checksum(state), _check_path(path))
        state = _with_checksum(state)
    return state["checksum"]["sha256"]


def _check_known_fields(kind: object, saved: object, path: object) -> None:
    """ValueError for an unknown ``model_kind``, or a ``model_config`` field this version's
    config class of that kind does not have."""
    if kind not in MODEL_KINDS:
        raise ValueError(
            f"checkpoint {path} has model_kind={kind!r}, which this version of the course does "
            f"not know (it knows {list(MODEL_KINDS)}); the checkpoint was written by another "
            "version of course_utils, or edited"
        )
    config_name = config_class(kind).__name__
    known = [field.name for field in fields(config_class(kind))]
    unknown = [key for key in saved if key not in known] if isinstance(saved, dict) else []
    if unknown:
        raise ValueError(
            f"checkpoint {path} ({kind} model) has model_config field(s) {unknown} that this "
            f"version of the course's {config_name} does not know (it knows {known}); the "
            "checkpoint was "
            "written by another version of course_utils. Update the course (git pull, then "
            "make setup) to load it, or load it with the version that wrote it"
        )


def _check_optimizer_matches(saved: dict, optimizer: torch.optim.Optimizer, path: object) -> None:
    """ValueError unless ``optimizer`` holds parameters like those the saved state is for."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    saved_groups = [len(group["params"]) for group in saved.get("param_groups", [])]
    groups = [len(group["params"]) for group in optimizer.param_groups]
    saved_ids = [i for group in saved.get("param_groups", []) for i in group["params"]]
    problem = None
    if saved_groups != groups:
        problem = (
            f"the checkpoint's optimizer has parameter groups of sizes {saved_groups}, the "
            f"optimizer passed has {groups}"
        )
    else:
        states = saved.get("state", {})
        for index, (param, saved_id) in enumerate(zip(params, saved_ids)):
            moments = states.get(saved_id, {})
            shapes = {
                tuple(v.shape) for v in moments.values() if isinstance(v, torch.Tensor) and v.ndim
            }
            if shapes and shapes != {tuple(param.shape)}:
                problem = (
                    f"parameter {index} of the optimizer passed has shape "
                    f"{tuple(param.shape)}, the checkpoint's optimizer state for it has "
                    f"{sorted(shapes)}"
                )
                break
    if problem:
        raise ValueError(
            f"checkpoint {path}: optimizer is not the optimizer of a model like the one this "
            f"checkpoint holds ({problem}); build the model from the checkpoint first, then "
            "its optimizer: model = model_from_checkpoint(path); "
            "optimizer = make_optimizer(model, train_config); load_checkpoint(path, model, "
            "optimizer). Nothing was loaded"
        )
