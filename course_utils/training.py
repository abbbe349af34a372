"""The training loop and what makes it fast.

- :func:`train`: AdamW, warm-up + cosine learning rate, periodic evaluation, checkpoints
  with exact resume, and, when the process belongs to a ``torchrun`` group, PyTorch DDP.
- The fast path: the token stream lives on the device and batches are sampled there
  (:class:`DeviceBatches`); the loop never waits for the device except at evaluation
  (per-step losses stay on the device until then); fused AdamW; TF32, bf16 autocast and
  optional ``torch.compile`` on CUDA.

Measuring its speed is :mod:`course_utils.benchmark`'s job.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from course_utils.config import ModelConfig, TrainConfig
from course_utils.data import windows_at
from course_utils.embedding import check_token_ids, trusted_token_ids
from course_utils.layers import LayerNorm
from course_utils.model import TinyDecoder


@dataclass
class History:
    """What a run recorded. Losses are mean cross-entropy in nats per token."""

    step: list[int] = field(default_factory=list)  # steps at which evaluation ran
    train_loss: list[float] = field(default_factory=list)  # evaluated on train batches
    val_loss: list[float] = field(default_factory=list)  # evaluated on validation batches
    batch_loss: list[float] = field(default_factory=list)  # every optimizer step
    seconds: float = 0.0  # wall time spent in train(), evaluations included
    tokens: int = 0  # training tokens processed (all ranks together)

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


def set_explicit_layer_norm(model: torch.nn.Module, explicit: bool) -> torch.nn.Module:
    """Switch every :class:`course_utils.layers.LayerNorm` in ``model`` between the formula
    written out (``explicit=True``, the teaching path) and the fused ``F.layer_norm``.

    Returns ``model`` (changed in place).
    """
    for module in model.modules():
        if isinstance(module, LayerNorm):
            module.explicit = explicit
    return model


def unwrap_model(model: torch.nn.Module) -> torch.nn.Module:
    """The model inside ``torch.compile`` and ``DistributedDataParallel`` wrappers."""
    while True:
        if hasattr(model, "_orig_mod"):  # torch.compile
            model = model._orig_mod
        elif isinstance(model, torch.nn.parallel.DistributedDataParallel):
            model = model.module
        else:
            return model


def distributed_rank_and_size() -> tuple[int, int]:
    """``(rank, world_size)`` of this process's default process group, ``(0, 1)`` without one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def init_distributed(device: torch.device | str = "cpu") -> tuple[int, int, torch.device]:
    """Join the process group that ``torchrun`` describes in the environment.

    ``torchrun --nproc_per_node=N`` starts N copies of the program and sets ``RANK``,
    ``LOCAL_RANK`` and ``WORLD_SIZE``. On CUDA each process takes GPU ``LOCAL_RANK`` and
    the NCCL backend; on the CPU it uses gloo. Without torchrun (or with one process)
    nothing happens.

    Returns:
        ``(rank, world_size, device)``; the device gets the local GPU index on CUDA.

    Raises:
        ValueError: several processes asked for a device other than CPU or CUDA.
    """
    device = torch.device(device)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return 0, 1, device
    if device.type not in ("cpu", "cuda"):
        raise ValueError(
            f"multi-process training supports CPU (gloo) and CUDA (NCCL), not {device.type!r}; "
            "pass --device cpu or run one process"
        )
    local_rank = int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", "0")))
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        if device.type == "cuda":
            dist.init_process_group("nccl", device_id=device)
        else:
            dist.init_process_group("gloo")
    return dist.get_rank(), dist.get_world_size(), device


def close_distributed() -> None:
    """Leave the process group, if this process joined one."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


class DeviceBatches:
    """Random ``(input, target)`` windows sampled where the token stream lives.

    The stream is copied to ``device`` once; every :meth:`sample` draws the window starts
    with a seeded ``torch.Generator`` on that device and gathers the windows there, so no
    batch crosses the host-device link and nothing waits for the device.

    With several processes (DDP), every rank draws the same ``world_size * batch_size``
    starts and keeps its own slice of ``batch_size``: together the ranks see exactly the
    batch one process with ``world_size * batch_size`` windows would see, and one
    generator state describes every rank (so a checkpoint resumes exactly).

    On the CPU the windows are those of :func:`course_utils.data.get_batch` with a
    generator seeded the same way, so CPU runs reproduce exactly.

    Args:
        data: 1-D integer token stream ``(N,)``, on any device.
        block_size: window length T.
        batch_size: windows per rank, B.
        device: where the stream is kept and the batches are made.
        seed: seeds :attr:`generator`.
        rank, world_size: this process's slice of the global batch.

    Raises:
        ValueError: ``data`` is not 1-D, is too short for one window, or the rank is
            outside ``[0, world_size)``.
        TypeError: ``data`` is not an integer tensor.
    """

    def __init__(
        self,
        data: torch.Tensor,
        block_size: int,
        batch_size: int,
        device: torch.device | str = "cpu",
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ):
        if data.ndim != 1:
            raise ValueError(f"data must be 1-D (N,), got shape {tuple(data.shape)}")
        if data.dtype.is_floating_point or data.dtype.is_complex or data.dtype == torch.bool:
            raise TypeError(f"data must hold integer token ids, got dtype {data.dtype}")
        if len(data) <= block_size:
            raise ValueError(
                f"data has {len(data)} tokens, need more than block_size={block_size} "
                "for one window"
            )
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, world_size={world_size}), got {rank}")
        self.device = torch.device(device)
        self.data = data.to(self.device)  # once
        self.block_size, self.batch_size = block_size, batch_size
        self.rank, self.world_size = rank, world_size
        try:
            self.generator = torch.Generator(device=self.device).manual_seed(seed)
        except RuntimeError:  # a device without its own generator: draw starts on the CPU
            self.generator = torch.Generator().manual_seed(seed)

    def sample(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(x, y)``, both int64 ``(batch_size, block_size)`` on the device, with
        ``y[:, t]`` the token after ``x[:, t]``."""
        high = len(self.data) - self.block_size
        count = self.world_size * self.batch_size
        starts = torch.randint(
            high, (count,), generator=self.generator, device=self.generator.device
        )
        if self.world_size > 1:
            starts = starts[self.rank * self.batch_size : (self.rank + 1) * self.batch_size]
        starts = starts.to(self.device, non_blocking=True)
        return windows_at(self.data, starts, self.block_size)

    def restore(self, state: torch.Tensor | None, fallback_seed: int) -> None:
        """Load a saved :attr:`generator` state; if it cannot be used here (written on
        another kind of device), warn and reseed with ``fallback_seed``."""
        if state is None:
            return
        try:
            self.generator.set_state(state)
        except (RuntimeError, TypeError, ValueError):
            warnings.warn(
                f"the checkpoint's batch-sampler state does not fit a {self.generator.device} "
                f"generator (written on another device?); batches continue from seed "
                f"{fallback_seed} instead, so the resumed run is not step-for-step exact",
                stacklevel=3,
            )
            self.generator.manual_seed(fallback_seed)


def _all_reduce_sum(value: float, device: torch.device) -> float:
    """The sum of ``value`` over every rank (a collective: every rank must call it)."""
    where = device if device.type == "cuda" else torch.device("cpu")
    total = torch.tensor([value], dtype=torch.float64, device=where)
    dist.all_reduce(total)
    return total.item()


@torch.no_grad()
def estimate_loss(
    model: torch.nn.Module,
    splits: dict[str, torch.Tensor],
    config: TrainConfig,
    device: torch.device | str = "cpu",
    rank: int = 0,
    world_size: int = 1,
) -> dict[str, float]:
    """Mean loss over ``config.eval_iters`` batches of each split, in eval mode.

    The batches are drawn from a generator seeded with ``config.seed``, so every
    evaluation sees the same windows and the curve is not noisier than the model. The
    losses are read back from the device once per split.

    Args:
        model: a :class:`TinyDecoder`, possibly wrapped by ``torch.compile`` or DDP.
        splits: name -> 1-D token stream (already on ``device`` avoids a copy).
        config: ``batch_size``, ``eval_iters``, ``seed`` and ``autocast_dtype`` are used.
        device: where batches are made.
        rank, world_size: with several processes each batch is the global batch of
            ``world_size * batch_size`` windows, each rank computing its own slice (as in
            training, see :class:`DeviceBatches`), and the sums are all-reduced: the result
            is that of one process with ``world_size * batch_size`` windows. Every rank
            must call this.

    Returns:
        ``{split name: mean loss in nats per token}``.
    """
    device = torch.device(device)
    block_size = unwrap_model(model).config.block_size
    was_training = model.training
    model.eval()
    result = {}
    for name, data in splits.items():
        batches = DeviceBatches(
            data, block_size, config.batch_size, device, config.seed, rank, world_size
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


def training_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
    learning_rate: float,
    config: TrainConfig,
    device: torch.device | str,
    need_weights: bool = False,
) -> torch.Tensor:
    """One optimizer step: forward, loss, backward, gradient clipping, AdamW update.

    Nothing is read back from the device: the loss is returned as a detached 0-D tensor
    on the device (call ``.item()`` when you need the number; that waits for the step).

    Args:
        model: the model to call, possibly compiled or wrapped by DDP.
        optimizer: its optimizer; every group gets ``learning_rate``.
        x, y: ``(B, T)`` int64 inputs and targets on the device.
        config: ``grad_clip`` and ``autocast_dtype`` are used.
        need_weights: run the teaching path of attention (explicit weights, kept).
    """
    for group in optimizer.param_groups:
        group["lr"] = learning_rate
    with autocast_context(torch.device(device), config):
        _, loss = model(x, y, need_weights=True) if need_weights else model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if config.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
    optimizer.step()
    return loss.detach()


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


def _rng_state_of_this_rank(device: torch.device) -> dict:
    state = {"torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _gather_rng_states(device: torch.device, world_size: int) -> list[dict] | None:
    """Every rank's RNG state (dropout), gathered on every rank; None with one process."""
    if world_size == 1:
        return None
    states: list = [None] * world_size
    dist.all_gather_object(states, _rng_state_of_this_rank(device))
    return states


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
    compile: bool = False,
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
        model: the :class:`TinyDecoder`, already on ``device`` (one already wrapped by
            ``torch.compile`` works too; pass ``compile=True`` instead).
        train_data, val_data: 1-D int64 token streams (on any device).
        config: the run's settings; ``batch_size`` is per process.
        device: where batches go.
        checkpoint_path: if given, a checkpoint is written there after every evaluation.
        resume: continue from ``checkpoint_path`` (weights, optimizer, step, history, RNG).
        max_steps: stop after this step (for a partial run that is resumed later);
            the schedule still follows ``config.max_iters``.
        progress: show a tqdm progress bar.
        compile: run the model through ``torch.compile`` (the first steps are slow while
            it compiles; pays off on a GPU for long runs).

    Returns:
        The :class:`History` of the whole run (including the part before a resume).

    Raises:
        FileNotFoundError: ``resume`` without an existing checkpoint.
        ValueError: the checkpoint was written for another model config, ``resume``
            without ``checkpoint_path``, or token ids outside ``[0, vocab_size)``.
    """
    device = torch.device(device)
    step_model: torch.nn.Module = model  # what is called each step (maybe compiled, DDP)
    model = unwrap_model(model)  # the TinyDecoder: optimizer, checkpoints, config
    rank, world_size = distributed_rank_and_size()
    if device.type == "cuda":
        enable_tf32()
    vocab_size, block_size = model.config.vocab_size, model.config.block_size
    for data in (train_data, val_data):
        check_token_ids(data, vocab_size)  # once here, so bad data fails before training
    optimizer = make_optimizer(model, config)
    batches = DeviceBatches(
        train_data, block_size, config.batch_size, device, config.seed, rank, world_size
    )
    history, start = History(), 0
    if resume:
        if checkpoint_path is None:
            raise ValueError("resume=True needs a checkpoint_path")
        state = load_checkpoint(checkpoint_path, model, optimizer)
        start = state["step"]
        history = History(**state["history"])
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
                    f"the checkpoint has no RNG state for each of {world_size} ranks; dropout "
                    "streams restart from new seeds, so the resumed run is not exact",
                    stacklevel=2,
                )
                torch.manual_seed(config.seed + 1000 * start + rank)
    elif world_size > 1:
        torch.manual_seed(config.seed + rank)  # dropout: a different stream on each rank
    wrapped = step_model
    while hasattr(wrapped, "_orig_mod"):
        wrapped = wrapped._orig_mod
    if world_size > 1 and not isinstance(wrapped, torch.nn.parallel.DistributedDataParallel):
        device_ids = None
        if device.type == "cuda":
            device_ids = [device.index if device.index is not None else torch.cuda.current_device()]
        # The model's buffers (position tables) never change: no need to re-send them.
        ddp_parameters = inspect.signature(torch.nn.parallel.DistributedDataParallel).parameters
        no_buffer_sync = (
            {"forward_sync_buffers": False}  # PyTorch >= 2.12
            if "forward_sync_buffers" in ddp_parameters
            else {"broadcast_buffers": False}
        )
        step_model = torch.nn.parallel.DistributedDataParallel(
            step_model, device_ids=device_ids, **no_buffer_sync
        )
    if compile:
        step_model = torch.compile(step_model)
    stop = config.max_iters if max_steps is None else min(max_steps, config.max_iters)
    splits = {"train": batches.data, "val": val_data.to(device)}  # on the device, once
    tokens_per_step = config.batch_size * block_size * world_size
    pending: list[torch.Tensor] = []  # per-step losses, still on the device
    model.train()
    started = time.perf_counter()
    bar = tqdm(range(start, stop), desc="training", unit="step", disable=not progress or rank != 0)
    with trusted_token_ids():  # ids checked once above: no read-back per step
        for step in bar:
            x, y = batches.sample()
            loss = training_step(
                step_model, optimizer, x, y, learning_rate_at(step, config), config, device
            )
            pending.append(loss)
            history.tokens += tokens_per_step
            done = step + 1
            if done % config.eval_interval == 0 or done == config.max_iters:
                _flush_losses(pending, history, world_size)
                losses = estimate_loss(step_model, splits, config, device, rank, world_size)
                history.step.append(done)
                history.train_loss.append(losses["train"])
                history.val_loss.append(losses["val"])
                bar.set_postfix(train=f"{losses['train']:.3f}", val=f"{losses['val']:.3f}")
                if checkpoint_path is not None:
                    rank_rng_states = _gather_rng_states(device, world_size)
                    history.seconds += time.perf_counter() - started
                    started = time.perf_counter()
                    if rank == 0:
                        save_checkpoint(
                            checkpoint_path,
                            model,
                            optimizer,
                            done,
                            config,
                            history,
                            batches.generator,
                            rank_rng_states=rank_rng_states,
                        )
                    if world_size > 1:
                        dist.barrier()  # the checkpoint is complete before any rank goes on
    _flush_losses(pending, history, world_size)
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
    rank_rng_states: list[dict] | None = None,
) -> Path:
    """Write weights, optimizer state, configs, history and RNG state to ``path``.

    The file is written to a temporary name in the same folder and then renamed, so a
    crash mid-write never replaces the last good checkpoint with a broken one.

    ``rank_rng_states`` (one dict per DDP rank, from the training loop) lets every rank's
    dropout stream resume exactly; it is stored under ``rng["per_rank"]``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    model = unwrap_model(model)
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
        found = sorted(state) if isinstance(state, dict) else type(state).__name__
        raise ValueError(
            f"{path} is not a checkpoint written by save_checkpoint: expected the keys "
            f"'model' and 'model_config', found {found}"
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


def model_from_checkpoint(
    path: str | Path, map_location: torch.device | str = "cpu"
) -> TinyDecoder:
    """Rebuild a :class:`TinyDecoder` from a checkpoint's stored config and load its weights."""
    state = load_checkpoint(path, map_location=map_location)
    model = TinyDecoder(ModelConfig(**state["model_config"]))
    model.load_state_dict(state["model"])
    return model.to(map_location)


# --- Measured performance ---------------------------------------------------------------

# Dense bf16 tensor-core peaks, TFLOP/s, from the vendors' data sheets (no sparsity).
