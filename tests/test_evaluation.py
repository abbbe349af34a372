"""estimate_loss: which batches it scores, that it equals the loss written out by hand, and
that train(max_steps=...) keeps the steps after the last evaluation."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from course_utils.config import ModelConfig, TrainConfig
from course_utils.data import train_val_split
from course_utils.model import TinyDecoder
from course_utils.training import DeviceBatches, estimate_loss, load_checkpoint, train
from course_utils.training.evaluation import EVAL_SEED_OFFSET, eval_seed


def tiny_model(seed: int = 0) -> TinyDecoder:
    torch.manual_seed(seed)
    config = ModelConfig(vocab_size=20, block_size=8, d_model=24, n_heads=3, n_layers=2)
    return TinyDecoder(config)


@pytest.fixture
def splits() -> dict[str, torch.Tensor]:
    stream = torch.randint(20, (3_000,), generator=torch.Generator().manual_seed(0))
    train_data, val_data = train_val_split(stream, 0.1)
    return {"train": train_data, "val": val_data}


class Recorder(torch.nn.Module):
    """Wraps a model and keeps every input batch it is called with."""

    def __init__(self, model: TinyDecoder):
        super().__init__()
        self.model, self.config, self.inputs = model, model.config, []

    def forward(self, x, y):
        self.inputs.append(x.clone())
        return self.model(x, y)


def windows(data, config, seed, count):
    batches = DeviceBatches(data, 8, config.batch_size, "cpu", seed)
    return [batches.sample()[0] for _ in range(count)]


def test_train_split_is_not_scored_on_the_first_training_batches(splits):
    """The 'train' estimate uses its own stream: none of its batches is one of the first
    training batches (which the model saw first), and it is exactly the eval_seed stream."""
    config = TrainConfig(batch_size=4, max_iters=10, eval_iters=6, seed=5)
    recorder = Recorder(tiny_model())
    estimate_loss(recorder, {"train": splits["train"]}, config)
    assert len(recorder.inputs) == config.eval_iters
    training_batches = windows(splits["train"], config, config.seed, config.eval_iters)
    for seen, trained_on in zip(recorder.inputs, training_batches):
        assert not torch.equal(seen, trained_on)
    expected = windows(splits["train"], config, config.seed + EVAL_SEED_OFFSET, config.eval_iters)
    assert eval_seed(config) == config.seed + EVAL_SEED_OFFSET
    for seen, wanted in zip(recorder.inputs, expected):
        assert torch.equal(seen, wanted)


def test_the_same_batches_at_every_evaluation(splits):
    config = TrainConfig(batch_size=4, max_iters=10, eval_iters=3)
    model = tiny_model()
    assert estimate_loss(model, splits, config) == estimate_loss(model, splits, config)


def test_estimate_equals_cross_entropy_by_hand(splits):
    """Reference: F.cross_entropy over the same windows, averaged per batch."""
    config = TrainConfig(batch_size=4, max_iters=10, eval_iters=5, seed=2)
    model = tiny_model()
    result = estimate_loss(model, splits, config)
    for name, data in splits.items():
        batches = DeviceBatches(data, 8, config.batch_size, "cpu", eval_seed(config))
        losses = []
        with torch.no_grad():
            for _ in range(config.eval_iters):
                x, y = batches.sample()
                logits, _ = model(x)
                losses.append(F.cross_entropy(logits.reshape(-1, 20), y.reshape(-1)).item())
        assert result[name] == pytest.approx(sum(losses) / len(losses), rel=1e-6)


def test_eval_mode_and_no_gradients(splits):
    """Dropout is off during the estimate (two calls agree), the mode is restored, and no
    gradient is accumulated."""
    torch.manual_seed(0)
    model = TinyDecoder(
        ModelConfig(vocab_size=20, block_size=8, d_model=24, n_heads=3, n_layers=2, dropout=0.5)
    )
    config = TrainConfig(batch_size=4, max_iters=10, eval_iters=2)
    model.train()
    first = estimate_loss(model, splits, config)
    assert model.training
    assert estimate_loss(model, splits, config) == first
    assert all(p.grad is None for p in model.parameters())
    model.eval()
    estimate_loss(model, splits, config)
    assert not model.training


def test_max_steps_saves_at_the_stop(tmp_path, splits):
    """A run stopped between evaluations keeps every step: the checkpoint is of the stop,
    and resuming from it reproduces the straight run exactly."""
    config = TrainConfig(batch_size=4, max_iters=12, warmup_iters=2, eval_interval=5, eval_iters=2)
    path = tmp_path / "partial.pt"
    partial = train(
        tiny_model(), splits["train"], splits["val"], config,
        checkpoint_path=path, max_steps=7, progress=False,
    )  # fmt: skip
    assert partial.step == [5] and len(partial.batch_loss) == 7
    state = load_checkpoint(path)
    assert state["step"] == 7
    assert state["history"]["batch_loss"] == partial.batch_loss
    straight = train(tiny_model(), splits["train"], splits["val"], config, progress=False)
    resumed = train(
        tiny_model(seed=1), splits["train"], splits["val"], config,
        checkpoint_path=path, resume=True, progress=False,
    )  # fmt: skip
    assert resumed.batch_loss == straight.batch_loss
    assert resumed.step == straight.step == [5, 10, 12]
