"""One variant of the training benchmark measured: a fresh model, timed steps, peak memory.

:func:`measure_variant` is what :func:`course_utils.measure.benchmark.benchmark_training` runs for
each ``(path, dtype, compiled)``: a model built from the same seed (the course's
:class:`~course_utils.model.TinyDecoder` on its teaching or fast path, or the
:class:`~course_utils.measure.benchmark_peer.PeerDecoder`), ``warmup_steps`` untimed training steps,
then ``timed_steps`` timed ones. Memory is the CUDA allocator's peak on a GPU, else the
process's peak resident set size (RSS), reset before the variant where Linux allows it.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import sys
import time

import torch

from course_utils.config import ModelConfig, TrainConfig
from course_utils.measure.benchmark_peer import PeerDecoder
from course_utils.model import TinyDecoder
from course_utils.training import (
    DeviceBatches,
    learning_rate_at,
    make_optimizer,
    set_explicit_layer_norm,
    training_step,
)
from course_utils.training.precision import device_precision, make_grad_scaler


def measure_variant(
    variant: tuple[str, str, bool],
    model_config: ModelConfig,
    train_config: TrainConfig,
    data: torch.Tensor,
    device: torch.device,
    warmup_steps: int,
    timed_steps: int,
) -> tuple[float, float, int | None, int | None]:
    """Train a fresh model for ``warmup_steps`` untimed and ``timed_steps`` timed steps.

    Returns:
        ``(seconds of the timed steps, last loss, peak memory in bytes, RSS growth in
        bytes or None)``.
    """
    path, dtype, compiled = variant
    rss_before = _reset_memory_peak(device)
    model, step_model = _fresh_model(path, compiled, model_config, device)
    run_config = dataclasses.replace(train_config, autocast_dtype=dtype)
    optimizer = make_optimizer(model, run_config)
    scaler = make_grad_scaler(device, device_precision(device, run_config))  # fp16 (T4) only
    batches = DeviceBatches(data, model_config.block_size, run_config.batch_size, device, seed=0)
    model.train()
    started = time.perf_counter()
    for step in range(warmup_steps + timed_steps):
        if step == warmup_steps:
            _synchronize(device)
            started = time.perf_counter()
        x, y = batches.sample()
        loss = training_step(
            step_model,
            optimizer,
            x,
            y,
            learning_rate_at(step, run_config),
            run_config,
            device,
            need_weights=path == "teaching",
            scaler=scaler,
        )
    _synchronize(device)
    seconds = time.perf_counter() - started
    return (seconds, loss.item(), *_memory_peak(device, rss_before))


def _fresh_model(
    path: str, compiled: bool, model_config: ModelConfig, device: torch.device
) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The variant's model, from the same seed as every other variant's, and what each
    step calls (the model itself, or its ``torch.compile`` wrapper)."""
    torch.manual_seed(0)
    if path == "peer":
        model = PeerDecoder(model_config).to(device)
    else:
        model = TinyDecoder(model_config).to(device)
        set_explicit_layer_norm(model, path == "teaching")
    if compiled:
        torch.compiler.reset()  # a fresh compile per variant, never a cache-limit fallback
    return model, (torch.compile(model) if compiled else model)


def _synchronize(device: torch.device) -> None:
    """Wait for the GPU's queued work (CUDA only), so the clock measures it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _reset_memory_peak(device: torch.device) -> int | None:
    """Start a variant's memory measurement; return the RSS now (None on CUDA)."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        return None
    if device.type == "cpu":
        reset_peak_rss()
    return _current_rss()


def _memory_peak(device: torch.device, rss_before: int | None) -> tuple[int | None, int | None]:
    """``(peak memory in bytes, RSS growth since rss_before or None)`` of the variant."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device), None
    peak_rss = _peak_rss()
    growth = None if peak_rss is None or rss_before is None else peak_rss - rss_before
    return peak_rss, growth


def reset_peak_rss() -> bool:
    """Reset the process's peak resident set size to its current size (Linux only)."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def _current_rss() -> int | None:
    """Resident set size of this process now, bytes (Linux's ``/proc/self/statm``)."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _peak_rss() -> int | None:
    """Peak resident set size of this process, bytes (``resource.getrusage``)."""
    try:
        import resource  # Unix only
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # macOS: bytes; Linux: KiB
