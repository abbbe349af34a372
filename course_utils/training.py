"""The training loop: AdamW, warm-up + cosine learning rate, periodic evaluation, checkpoints."""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from course_utils.config import ModelConfig, TrainConfig
from course_utils.data import get_batch
from course_utils.model import TinyDecoder


@dataclass
class History:
    """What a run recorded. Losses are mean cross-entropy in nats per token."""

    step: list[int] = field(default_factory=list)  # steps at which evaluation ran
    train_loss: list[float] = field(default_factory=list)  # evaluated on train batches
    val_loss: list[float] = field(default_factory=list)  # evaluated on validation batches
    batch_loss: list[float] = field(default_factory=list)  # every optimizer step
    seconds: float = 0.0  # wall time spent in train(), evaluations included
    tokens: int = 0  # training tokens processed

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


def learning_rate_at(step: int, config: TrainConfig) -> float:
    """Linear warm-up to ``learning_rate``, then cosine decay to ``min_lr`` at ``max_iters``."""
    if step < config.warmup_iters:
        return config.learning_rate * (step + 1) / config.warmup_iters
    progress = (step - config.warmup_iters) / max(1, config.max_iters - config.warmup_iters)
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return config.min_lr + cosine * (config.learning_rate - config.min_lr)


def make_optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (biases, norms and 1-D tensors are not decayed)."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=config.learning_rate, betas=(0.9, config.beta2), fused=True)


def autocast_context(device: torch.device, config: TrainConfig):
    """bf16 autocast on CUDA when the config asks for it; a no-op elsewhere."""
    if device.type == "cuda" and config.autocast_dtype == "bfloat16":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


@torch.no_grad()
def estimate_loss(
    model: TinyDecoder,
    splits: dict[str, torch.Tensor],
    config: TrainConfig,
    device: torch.device | str = "cpu",
) -> dict[str, float]:
    """Mean loss over ``config.eval_iters`` batches of each split, in eval mode.

    The batches are drawn from a generator seeded with ``config.seed``, so every
    evaluation sees the same windows and the curve is not noisier than the model.
    """
    device = torch.device(device)
    was_training = model.training
    model.eval()
    result = {}
    for name, data in splits.items():
        generator = torch.Generator().manual_seed(config.seed)
        losses = []
        for _ in range(config.eval_iters):
            x, y = get_batch(data, model.config.block_size, config.batch_size, generator, device)
            with autocast_context(device, config):
                _, loss = model(x, y)
            losses.append(loss.item())
        result[name] = sum(losses) / len(losses)
    model.train(was_training)
    return result


def train(
    model: TinyDecoder,
    train_data: torch.Tensor,
    val_data: torch.Tensor,
    config: TrainConfig,
    device: torch.device | str = "cpu",
    checkpoint_path: str | Path | None = None,
    resume: bool = False,
    max_steps: int | None = None,
    progress: bool = True,
) -> History:
    """Train ``model`` on random windows of ``train_data``; evaluate on ``val_data``.

    Args:
        model: the model, already on ``device``.
        train_data, val_data: 1-D int64 token streams.
        config: the run's settings.
        device: where batches go.
        checkpoint_path: if given, a checkpoint is written there after every evaluation.
        resume: continue from ``checkpoint_path`` (weights, optimizer, step, history, RNG).
        max_steps: stop after this step (for a partial run that is resumed later);
            the schedule still follows ``config.max_iters``.
        progress: show a tqdm progress bar.

    Returns:
        The :class:`History` of the whole run (including the part before a resume).

    Raises:
        FileNotFoundError: ``resume`` without an existing checkpoint.
        ValueError: the checkpoint was written for another model config.
    """
    device = torch.device(device)
    optimizer = make_optimizer(model, config)
    batch_generator = torch.Generator().manual_seed(config.seed)
    history, start = History(), 0
    if resume:
        if checkpoint_path is None:
            raise ValueError("resume=True needs a checkpoint_path")
        state = load_checkpoint(checkpoint_path, model, optimizer)
        start = state["step"]
        history = History(**state["history"])
        batch_generator.set_state(state["rng"]["batch_generator"])
        torch.set_rng_state(state["rng"]["torch"])
        if state["rng"].get("cuda") and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])  # dropout on the GPU
    stop = config.max_iters if max_steps is None else min(max_steps, config.max_iters)
    splits = {"train": train_data, "val": val_data}
    tokens_per_step = config.batch_size * model.config.block_size
    model.train()
    started = time.perf_counter()
    bar = tqdm(range(start, stop), desc="training", unit="step", disable=not progress)
    for step in bar:
        for group in optimizer.param_groups:
            group["lr"] = learning_rate_at(step, config)
        x, y = get_batch(
            train_data, model.config.block_size, config.batch_size, batch_generator, device
        )
        with autocast_context(device, config):
            _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        history.batch_loss.append(loss.item())
        history.tokens += tokens_per_step
        done = step + 1
        if done % config.eval_interval == 0 or done == config.max_iters:
            losses = estimate_loss(model, splits, config, device)
            history.step.append(done)
            history.train_loss.append(losses["train"])
            history.val_loss.append(losses["val"])
            bar.set_postfix(train=f"{losses['train']:.3f}", val=f"{losses['val']:.3f}")
            if checkpoint_path is not None:
                history.seconds += time.perf_counter() - started
                started = time.perf_counter()
                save_checkpoint(
                    checkpoint_path, model, optimizer, done, config, history, batch_generator
                )
    bar.close()
    history.seconds += time.perf_counter() - started
    return history


def save_checkpoint(
    path: str | Path,
    model: TinyDecoder,
    optimizer: torch.optim.Optimizer | None,
    step: int,
    train_config: TrainConfig | None = None,
    history: History | None = None,
    batch_generator: torch.Generator | None = None,
) -> Path:
    """Write weights, optimizer state, configs, history and RNG state to ``path``.

    The file is written to a temporary name in the same folder and then renamed, so a
    crash mid-write never replaces the last good checkpoint with a broken one.
    """
    path = Path(path)
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
        },
    }
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(handle)
    try:
        torch.save(state, temporary)
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
        FileNotFoundError: no file at ``path``.
        ValueError: the file is not a readable checkpoint, or it was written for a model
            with a different config (the message lists the fields that differ).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}; train first, or check the path")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # torch raises several types for a damaged file
        raise ValueError(
            f"{path} is not a readable checkpoint ({type(error).__name__}: {error})"
        ) from error
    if not isinstance(state, dict) or "model" not in state or "model_config" not in state:
        raise ValueError(f"{path} is not a checkpoint written by save_checkpoint (keys missing)")
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


def model_from_checkpoint(
    path: str | Path, map_location: torch.device | str = "cpu"
) -> TinyDecoder:
    """Rebuild a :class:`TinyDecoder` from a checkpoint's stored config and load its weights."""
    state = load_checkpoint(path, map_location=map_location)
    model = TinyDecoder(ModelConfig(**state["model_config"]))
    model.load_state_dict(state["model"])
    return model.to(map_location)
