"""Resuming under DDP from a checkpoint without a random state per rank: each rank's dropout
stream restarts from a seed that depends on the step, so a resumed run does not replay the
dropout masks it used at its start (simulated: two ranks, by patching the rank lookup)."""

from __future__ import annotations

import pytest
import torch

import course_utils.training.loop as loop
from course_utils.config import ModelConfig, TrainConfig
from course_utils.model import TinyDecoder
from course_utils.training import make_optimizer, train


def _checkpoint(tmp_path, steps: int):
    torch.manual_seed(0)
    model = TinyDecoder(ModelConfig(vocab_size=8, block_size=4, d_model=8, n_heads=2, n_layers=1))
    stream = torch.randint(8, (200,), generator=torch.Generator().manual_seed(0))
    config = TrainConfig(
        batch_size=1, max_iters=20, warmup_iters=1, eval_interval=100, eval_iters=1
    )
    path = tmp_path / f"step{steps}.pt"
    train(
        model,
        stream[:150],
        stream[150:],
        config,
        checkpoint_path=path,
        max_steps=steps,
        progress=False,
    )
    return model, config, path


def _stream_after_restore(monkeypatch, model, config, path, rank: int) -> torch.Tensor:
    monkeypatch.setattr(loop, "distributed_rank_and_size", lambda: (rank, 2))
    optimizer = make_optimizer(model, config)
    batches = loop.DeviceBatches(torch.arange(100) % 8, 4, 1, "cpu", seed=0)
    with pytest.warns(UserWarning, match="no RNG state for each of 2 ranks"):
        loop._restore(path, model, optimizer, batches, config, torch.device("cpu"))
    return torch.rand(4)


def test_resumed_ranks_get_streams_that_depend_on_rank_and_step(tmp_path, monkeypatch):
    model5, config, path5 = _checkpoint(tmp_path, 5)
    model10, _, path10 = _checkpoint(tmp_path, 10)
    draws = {
        (step, rank): _stream_after_restore(monkeypatch, model, config, path, rank)
        for step, model, path in ((5, model5, path5), (10, model10, path10))
        for rank in (0, 1)
    }
    keys = list(draws)
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            assert not torch.equal(draws[a], draws[b]), (a, b)


def test_history_seconds_adds_up_the_elapsed_time(tmp_path, monkeypatch):
    """history.seconds is the sum of (end - start) of each stretch of training, measured
    here on a fake clock far from 0 that advances 1 ms per reading: well under a second."""
    readings = iter(range(10**6))

    def fake_clock() -> float:
        return 1_000_000.0 + next(readings) / 1000

    monkeypatch.setattr(loop.time, "perf_counter", fake_clock)
    torch.manual_seed(0)
    model = TinyDecoder(ModelConfig(vocab_size=8, block_size=4, d_model=8, n_heads=2, n_layers=1))
    stream = torch.randint(8, (200,), generator=torch.Generator().manual_seed(0))
    config = TrainConfig(batch_size=1, max_iters=6, warmup_iters=1, eval_interval=2, eval_iters=1)
    history = train(
        model, stream[:150], stream[150:], config, checkpoint_path=tmp_path / "c.pt", progress=False
    )
    monkeypatch.undo()
    assert 0 < history.seconds < 0.5, history.seconds
