"""The training loop: one step, and :func:`train` around it."""

from __future__ import annotations

import math
import time
import warnings
from pathlib import Path

import torch
import torch.distributed as dist

from course_utils.checks import check_bool, check_float, check_instance
from course_utils.config import TrainConfig
from course_utils.embedding import trusted_token_ids
from course_utils.lab.language import tr
from course_utils.layers import LayerNorm
from course_utils.model import TinyDecoder
from course_utils.modern_model import ModernDecoder
from course_utils.training.batches import DeviceBatches
from course_utils.training.checkpoint import load_checkpoint, save_checkpoint
from course_utils.training.distributed import (
    _gather_rng_states,
    distributed_rank_and_size,
    unwrap_model,
    wrap_for_ddp,
)
from course_utils.training.evaluation import estimate_loss
from course_utils.training.history import History
from course_utils.training.inputs import check_training_inputs
from course_utils.training.precision import (
    autocast_context,
    device_precision,
    enable_tf32,
    make_grad_scaler,
)
from course_utils.training.progress import progress_bar
from course_utils.training.schedule import learning_rate_at, make_optimizer


def set_explicit_layer_norm(model: torch.nn.Module, explicit: bool) -> torch.nn.Module:
    """Switch every :class:`course_utils.layers.LayerNorm` in ``model`` between the formula
    written out (``explicit=True``, the teaching path) and the fused ``F.layer_norm``.

    Returns ``model`` (changed in place).

    Raises:
        TypeError: ``model`` is not a ``torch.nn.Module``, ``explicit`` is not a bool.
    """
    check_instance(model, "model", torch.nn.Module)
    explicit = check_bool(explicit, "explicit")
    for module in model.modules():
        if isinstance(module, LayerNorm):
            module.explicit = explicit
    return model


def training_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
    learning_rate: float,
    config: TrainConfig,
    device: torch.device | str,
    need_weights: bool = False,
    scaler: torch.amp.GradScaler | None = None,
) -> torch.Tensor:
    """One optimizer step: forward, loss, backward, gradient clipping, AdamW update.

    Nothing is read back from the device: the loss is returned as a detached 0-D tensor
    on the device (call ``.item()`` when you need the number; that waits for the step).

    Args:
        model: the model to call, possibly compiled or wrapped by DDP.
        optimizer: its optimizer; every group gets ``learning_rate``.
        x, y: ``(B, T)`` int64 inputs and targets on the device.
        learning_rate: a number >= 0 (0 trains nothing; a negative rate would step uphill).
        config: ``grad_clip`` and ``autocast_dtype`` are used.
        need_weights: run the teaching path of attention (explicit weights, kept).
        scaler: the ``GradScaler`` of an fp16 run (``make_grad_scaler``); required when
            :func:`~course_utils.training.precision.device_precision` gives ``"fp16"``.

    Raises:
        TypeError: a ``model`` that is not a module, an ``optimizer`` that is not a
            ``torch.optim.Optimizer``, a ``learning_rate`` that is not a number (e.g. the
            string ``"1e-3"``), a ``need_weights`` that is not a bool, a ``scaler`` that is
            not a ``GradScaler``, a ``config`` that is not a TrainConfig.
        ValueError: a negative, NaN or infinite ``learning_rate``; an unknown ``device``;
            the step runs in fp16 and no ``scaler`` was given.
    """
    learning_rate = _check_step_args(model, optimizer, learning_rate, need_weights, scaler)
    precision = device_precision(device, config)
    _check_scaler_for(precision, scaler)
    for group in optimizer.param_groups:
        group["lr"] = learning_rate
    with autocast_context(torch.device(device), config, precision):
        _, loss = model(x, y, need_weights=True) if need_weights else model(x, y)
    optimizer.zero_grad(set_to_none=True)
    if scaler is None:
        loss.backward()
    else:
        scaler.scale(loss).backward()  # float16 gradients scaled up: no underflow
        scaler.unscale_(optimizer)  # the true gradients, for clipping
    if config.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
    if scaler is None:
        optimizer.step()
    else:
        scaler.step(optimizer)  # skipped when a gradient is inf or NaN
        scaler.update()  # smaller scale after an overflow, larger after a calm stretch
    return loss.detach()


def _check_step_args(model, optimizer, learning_rate, need_weights, scaler) -> float:
    """The checks of :func:`training_step` (config and device: ``device_precision``);
    return ``learning_rate`` as a float."""
    check_instance(model, "model", torch.nn.Module)
    check_instance(
        optimizer, "optimizer", torch.optim.Optimizer, "use make_optimizer(model, config)"
    )
    why = "a negative rate steps uphill"
    rate = check_float(learning_rate, "learning_rate", 0, math.inf, high_open=True, why=why)
    check_bool(need_weights, "need_weights")
    if scaler is not None:
        check_instance(
            scaler, "scaler", torch.amp.GradScaler, "use make_grad_scaler(device, 'fp16')"
        )
    return rate


def _check_scaler_for(precision: str, scaler: torch.amp.GradScaler | None) -> None:
    """ValueError for an fp16 step without a GradScaler."""
    if precision == "fp16" and scaler is None:
        raise ValueError(
            "this step runs in float16 autocast and needs a GradScaler, got scaler=None; "
            "pass scaler=make_grad_scaler(device, 'fp16') (from course_utils.training.precision)"
        )


def _flush_losses(pending: list[torch.Tensor], history: History, world_size: int) -> None:
    """Move the per-step losses kept on the device to ``history`` (one read-back).

    With several ranks each loss becomes the mean over ranks: the loss of the global batch.
    Every rank must call this at the same steps (it is a collective then).
    """
    if not pending:
        return
    values = torch.stack(pending).float()
    if world_size > 1:
        dist.all_reduce(values)
        values /= world_size
    history.batch_loss.extend(values.tolist())
    pending.clear()


def train(
    model: TinyDecoder | ModernDecoder,
    train_data: torch.Tensor,
    val_data: torch.Tensor,
    config: TrainConfig,
    device: torch.device | str = "cpu",
    checkpoint_path: str | Path | None = None,
    resume: bool = False,
    max_steps: int | None = None,
    progress: bool = True,
    compile: bool = False,
    on_evaluation=None,
) -> History:
    """Train ``model`` on random windows of ``train_data``; evaluate on ``val_data``.

    The fast path: both streams are copied to ``device`` once and batches are sampled
    there; per-step losses stay on the device until the next evaluation, so the loop never
    waits for the GPU between evaluations; AdamW is fused where available; on CUDA, TF32
    matrix products and (if ``config.autocast_dtype == "bfloat16"``) bf16 autocast.

    Several processes: if this process belongs to a ``torch.distributed`` group (see
    :func:`init_distributed`; ``torchrun`` sets it up), the model is wrapped in
    ``DistributedDataParallel`` (gradients are all-reduced in the backward pass), each rank
    trains on its own ``config.batch_size`` windows of a common global batch (see
    :class:`DeviceBatches`; evaluation likewise), each rank's dropout has its own random
    stream, and only rank 0 shows progress and writes the checkpoint. The run then equals
    one process with ``world_size * batch_size`` windows per step. Every rank must call
    ``train`` with the same arguments; every rank returns the same history.

    Args:
        model: the :class:`TinyDecoder` or
            :class:`~course_utils.modern_model.ModernDecoder` (its checkpoint records which),
            already on ``device`` (one already wrapped by
            ``torch.compile`` works too; pass ``compile=True`` instead).
        train_data, val_data: 1-D int64 token streams (on any device).
        config: the run's settings; ``batch_size`` is per process.
        device: where batches go.
        checkpoint_path: if given, a checkpoint is written there after every evaluation
            and when the run stops (so ``max_steps`` loses no step).
        resume: continue from ``checkpoint_path`` (weights, optimizer, step, history, RNG).
        max_steps: stop after this step (for a partial run that is resumed later);
            the schedule still follows ``config.max_iters``.
        progress: show a progress bar (tqdm in a terminal; in Jupyter one throttled text
            line that ends in its final state, see :mod:`course_utils.training.progress`).
        compile: run the model through ``torch.compile`` (the first steps are slow while
            it compiles; pays off on a GPU for long runs).
        on_evaluation: optional function called after each evaluation with a dict
            ``{"step", "train", "val", "eval_seconds"}`` (losses in nats per token; the
            seconds the evaluation itself took), e.g. to time a recorded run.

    Returns:
        The :class:`History` of the whole run (including the part before a resume).

    Raises:
        FileNotFoundError: ``resume`` without an existing checkpoint.
        ValueError: the checkpoint holds another kind of model (a TinyDecoder's for a
            ModernDecoder, or the reverse) or was written for another model config, ``resume``
            without ``checkpoint_path``, or bad data (checked before the first step by
            :func:`~course_utils.training.inputs.check_training_inputs`: a split shorter
            than ``block_size + 1``, ids outside ``[0, vocab_size)``, the model on another
            device).
        TypeError: float data, a config that is not a TrainConfig; a ``resume``,
            ``progress`` or ``compile`` that is not a bool (a string such as ``"no"`` would
            count as True); an ``on_evaluation`` that is neither None nor callable; a
            ``checkpoint_path`` for a model that is neither a TinyDecoder nor a ModernDecoder.
            All of these are checked before the first step.
        IsADirectoryError, NotADirectoryError: ``checkpoint_path`` is a folder or lies under a
            file (checked before the first step).
    """
    _check_train_options(checkpoint_path, resume, progress, compile, on_evaluation)
    step_model: torch.nn.Module = model  # what is called each step (maybe compiled, DDP)
    model = unwrap_model(model)  # the decoder itself: optimizer, checkpoints, config
    train_data, val_data, device = check_training_inputs(  # bad data fail before any step
        model, train_data, val_data, config, device, checkpoint_path, max_steps
    )
    run = _Run(model, train_data, val_data, config, device, checkpoint_path)
    if resume:
        start, history = _restore(
            checkpoint_path, model, run.optimizer, run.batches, config, device
        )
    else:
        start, history = 0, History()
        if run.world_size > 1:
            torch.manual_seed(config.seed + run.rank)  # dropout: a different stream on each rank
    run.step_model = wrap_for_ddp(step_model, device)
    if compile:
        run.step_model = torch.compile(run.step_model)
    stop = config.max_iters if max_steps is None else min(max_steps, config.max_iters)
    model.train()
    run.started = time.perf_counter()
    bar = progress_bar(range(start, stop), enabled=progress and run.rank == 0)
    with trusted_token_ids():  # ids checked once above: no read-back per step
        for step in bar:
            x, y = run.batches.sample()
            lr = learning_rate_at(step, config)
            loss = training_step(
                run.step_model, run.optimizer, x, y, lr, config, device, scaler=run.scaler
            )
            run.pending.append(loss)
            history.tokens += run.tokens_per_step
            done = step + 1
            if done % config.eval_interval == 0 or done == config.max_iters:
                losses = run.evaluate(history, done)
                bar.set_postfix(train=f"{losses['train']:.3f}", val=f"{losses['val']:.3f}")
                if on_evaluation is not None:
                    on_evaluation({"step": done, **losses, "eval_seconds": run.eval_seconds})
    _flush_losses(run.pending, history, run.world_size)
    if checkpoint_path is not None and stop > start and run.saved_step != stop:
        run.save(history, stop)  # a partial run (max_steps) keeps every step it trained
    bar.close()
    history.seconds += time.perf_counter() - run.started
    return history


def _check_train_options(checkpoint_path, resume, progress, compile, on_evaluation) -> None:
    """The flags and the callback of :func:`train`, checked before anything runs."""
    if check_bool(resume, "resume") and checkpoint_path is None:
        raise ValueError(
            "resume=True needs a checkpoint_path: the checkpoint to continue from, the one "
            "an earlier train(..., checkpoint_path=...) wrote"
        )
    check_bool(progress, "progress")
    check_bool(compile, "compile")
    if on_evaluation is not None and not callable(on_evaluation):
        raise TypeError(
            f"on_evaluation must be a function (or None), got {on_evaluation!r} "
            f"({type(on_evaluation).__name__}); it is called after each evaluation with a "
            'dict {"step", "train", "val", "eval_seconds"}, e.g. on_evaluation=print'
        )


def _restore(
    checkpoint_path: str | Path | None,
    model: TinyDecoder | ModernDecoder,
    optimizer: torch.optim.Optimizer,
    batches: DeviceBatches,
    config: TrainConfig,
    device: torch.device,
) -> tuple[int, History]:
    """Load weights, optimizer, history and every random state; return ``(step, history)``."""
    rank, world_size = distributed_rank_and_size()
    state = load_checkpoint(checkpoint_path, model, optimizer)
    start = state["step"]
    batches.restore(state["rng"]["batch_generator"], fallback_seed=config.seed + start)
    per_rank = state["rng"].get("per_rank") or []
    if world_size > 1 and len(per_rank) == world_size:
        torch.set_rng_state(per_rank[rank]["torch"])
        if device.type == "cuda" and per_rank[rank].get("cuda") is not None:
            torch.cuda.set_rng_state(per_rank[rank]["cuda"], device)
    else:
        torch.set_rng_state(state["rng"]["torch"])
        if state["rng"].get("cuda") and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])  # dropout on the GPU
        if world_size > 1:
            warnings.warn(
                tr(
                    "the checkpoint has no RNG state for each of {ranks} ranks; dropout "
                    "streams restart from new seeds, so the resumed run is not exact"
                ).format(ranks=world_size),
                stacklevel=3,
            )
            torch.manual_seed(config.seed + 1000 * start + rank)
    return start, History(**state["history"])


class _Run:
    """What one call of :func:`train` sets up (optimizer, grad scaler, batches, both splits
    on the device) and does at an evaluation (record the losses, write the checkpoint)."""

    def __init__(self, model, train_data, val_data, config, device, checkpoint_path):
        self.rank, self.world_size = distributed_rank_and_size()
        if device.type == "cuda":
            enable_tf32()
        self.model, self.config, self.device = model, config, device
        self.step_model: torch.nn.Module = model  # train() wraps it (DDP, torch.compile)
        self.checkpoint_path = checkpoint_path
        self.optimizer = make_optimizer(model, config)
        self.scaler = make_grad_scaler(device, device_precision(device, config))  # None unless fp16
        block_size, rank, world_size = model.config.block_size, self.rank, self.world_size
        self.batches = DeviceBatches(
            train_data, block_size, config.batch_size, device, config.seed, rank, world_size
        )
        # Both splits on the device, once: evaluation samples there too.
        self.splits = {"train": self.batches.data, "val": val_data.to(device)}
        self.tokens_per_step = config.batch_size * block_size * self.world_size
        self.pending: list[torch.Tensor] = []  # per-step losses, still on the device
        self.started = 0.0
        self.saved_step: int | None = None
        self.eval_seconds = 0.0  # duration of the last evaluation

    def evaluate(self, history: History, done: int) -> dict[str, float]:
        """Record the step losses and an evaluation at step ``done``; save a checkpoint."""
        _flush_losses(self.pending, history, self.world_size)
        evaluation_started = time.perf_counter()
        losses = estimate_loss(
            self.step_model, self.splits, self.config, self.device, self.rank, self.world_size
        )
        self.eval_seconds = time.perf_counter() - evaluation_started  # read-back: synced
        history.step.append(done)
        history.train_loss.append(losses["train"])
        history.val_loss.append(losses["val"])
        if self.checkpoint_path is not None:
            self.save(history, done)
        return losses

    def save(self, history: History, done: int) -> None:
        """Write the checkpoint of step ``done`` (rank 0 writes; every rank must call this)."""
        rank_rng_states = _gather_rng_states(self.device, self.world_size)
        history.seconds += time.perf_counter() - self.started
        self.started = time.perf_counter()
        if self.rank == 0:
            save_checkpoint(
                self.checkpoint_path,
                self.model,
                self.optimizer,
                done,
                self.config,
                history,
                self.batches.generator,
                rank_rng_states=rank_rng_states,
            )
        if self.world_size > 1:
            dist.barrier()  # the checkpoint is complete before any rank goes on
        self.saved_step = done
