"""A loop written by hand and train() draw the same dropout masks only when the hand loop
gives back the global random state it consumed (notebook 12 wraps it in fork_rng)."""

from __future__ import annotations

import copy

import pytest
import torch

from course_utils.config import ModelConfig, TrainConfig
from course_utils.model import TinyDecoder
from course_utils.training import (
    DeviceBatches,
    learning_rate_at,
    make_optimizer,
    train,
    training_step,
)
from course_utils.training.precision import device_precision, make_grad_scaler

STEPS = 8


def _hand_losses(model, data, config):
    optimizer = make_optimizer(model, config)
    scaler = make_grad_scaler("cpu", device_precision("cpu", config))
    batches = DeviceBatches(data, model.config.block_size, config.batch_size, "cpu", config.seed)
    model.train()
    losses = []
    for step in range(STEPS):
        x, y = batches.sample()
        loss = training_step(
            model, optimizer, x, y, learning_rate_at(step, config), config, "cpu", scaler=scaler
        )
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("autocast_dtype", ["float32", "float16"])
@pytest.mark.parametrize("give_back", [True, False])
def test_train_replays_the_hand_loop_only_with_the_random_state_given_back(
    give_back, autocast_dtype
):
    torch.manual_seed(0)
    data = torch.randint(0, 40, (4000,))
    model_config = ModelConfig(vocab_size=40, block_size=16, d_model=32, n_heads=4, n_layers=2,
                               dropout=0.2, positional="rope")  # fmt: skip
    config = TrainConfig(batch_size=4, max_iters=STEPS, eval_interval=STEPS, eval_iters=1,
                         autocast_dtype=autocast_dtype)  # fmt: skip
    model = TinyDecoder(model_config)
    hand = copy.deepcopy(model)
    train_data, val_data = data[:3000], data[3000:]
    if give_back:
        with torch.random.fork_rng(devices=[]):
            hand_losses = _hand_losses(hand, train_data, config)
    else:
        hand_losses = _hand_losses(hand, train_data, config)
    history = train(model, train_data, val_data, config, "cpu", progress=False)
    assert len(history.batch_loss) == STEPS
    difference = max(abs(a - b) for a, b in zip(history.batch_loss, hand_losses))
    if give_back:  # the same batches, masks and operations in the same order: bit for bit
        assert difference == 0.0
    else:  # other dropout masks: other losses from the second step on
        assert difference > 1e-3
