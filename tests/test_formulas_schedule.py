"""The learning-rate schedule's end points and make_optimizer's robustness and hints.

Schedule (the course's docstring; GPT-2/3 style): linear warm-up over ``warmup_iters`` steps
to ``learning_rate``, then a cosine decay that reaches ``min_lr`` exactly at ``max_iters``,
whatever the length of the decay (one step included).
"""

from __future__ import annotations

import math

import pytest
import torch

from course_utils.config import ModelConfig, TrainConfig
from course_utils.model import TinyDecoder
from course_utils.training import learning_rate_at, make_optimizer, schedule


@pytest.mark.parametrize("warmup, max_iters", [(0, 1), (3, 4), (2, 5), (10, 110)])
def test_decay_ends_at_min_lr_at_max_iters_and_peaks_after_warmup(warmup, max_iters):
    config = TrainConfig(
        batch_size=1, max_iters=max_iters, warmup_iters=warmup, learning_rate=1e-3, min_lr=1e-4
    )
    assert learning_rate_at(warmup, config) == pytest.approx(1e-3)  # the peak
    assert learning_rate_at(max_iters, config) == pytest.approx(1e-4)  # the end of the decay
    decay = max_iters - warmup
    midway = warmup + decay / 2
    if midway == int(midway):  # half-way down the cosine: the mean of the two rates
        assert learning_rate_at(int(midway), config) == pytest.approx(0.5 * (1e-3 + 1e-4))
    for step in range(warmup):
        assert learning_rate_at(step, config) == pytest.approx(1e-3 * (step + 1) / warmup)
    assert math.isclose(learning_rate_at(max_iters + 5, config), 1e-4)


def _helper_that_moved_inside():
    raise AttributeError("module 'torch._C' has no attribute '_get_privateuse1_backend_name'")


@pytest.mark.parametrize("change", ["removed", "broken inside"])
def test_fused_check_survives_the_private_helper_moving(monkeypatch, change):
    """The fused-kernel probe uses a private PyTorch helper; if it disappears (ImportError)
    or what it calls does (AttributeError), AdamW still builds (PyTorch then chooses)."""
    import torch.utils._foreach_utils as foreach_utils

    name = "_get_fused_kernels_supported_devices"
    if change == "removed":
        monkeypatch.delattr(foreach_utils, name)
    else:
        monkeypatch.setattr(foreach_utils, name, _helper_that_moved_inside)
    torch.manual_seed(0)
    model = TinyDecoder(ModelConfig(vocab_size=10, block_size=4, d_model=8, n_heads=2, n_layers=1))
    assert schedule._fused_adamw_supported(list(model.parameters())) is False
    optimizer = make_optimizer(model, TrainConfig(batch_size=1, max_iters=10, warmup_iters=1))
    assert isinstance(optimizer, torch.optim.AdamW)


def test_passing_the_model_config_gets_its_own_hint():
    model_config = ModelConfig(vocab_size=10, block_size=4, d_model=8, n_heads=2, n_layers=1)
    model = TinyDecoder(model_config)
    with pytest.raises(TypeError, match="that is the model's config"):
        make_optimizer(model, model_config)
    with pytest.raises(TypeError) as info:
        make_optimizer(model, {"batch_size": 1})
    assert "model's config" not in str(info.value)
