"""ModelConfig / TrainConfig validation and the named presets."""

from __future__ import annotations

import pytest

from course_utils.config import ModelConfig, TrainConfig, get_config


def test_unknown_preset_lists_the_known_names():
    with pytest.raises(
        ValueError, match=r"unknown config 'nope'; expected one of \['baby', 'cpu', 'gpu'\]"
    ):
        get_config("nope", 84)


def test_d_model_not_divisible_by_n_heads():
    with pytest.raises(ValueError, match=r"d_model=24 is not divisible by n_heads=5"):
        ModelConfig(vocab_size=20, block_size=8, d_model=24, n_heads=5, n_layers=1)


def test_unknown_override_is_named():
    with pytest.raises(ValueError, match=r"unknown config fields \['n_head'\]"):
        get_config("baby", 84, n_head=4)


def test_overrides_reach_the_right_config():
    model, train = get_config("baby", 65, max_iters=10, d_model=64, dropout=0.1)
    assert (model.vocab_size, model.d_model, model.dropout) == (65, 64, 0.1)
    assert train.max_iters == 10
    assert model.d_ff == 4 * 64  # the default follows the overridden width


def test_baby_preset():
    model, train = get_config("baby", 84)
    assert (model.n_layers, model.n_heads, model.d_model, model.block_size) == (4, 4, 128, 64)
    assert model.dropout == 0.0 and model.vocab_size == 84 and model.d_ff == 512
    assert (train.batch_size, train.max_iters, train.learning_rate) == (12, 2000, 1e-3)
    assert train.autocast_dtype == "float32"


def test_gpu_preset():
    model, train = get_config("gpu", 84)
    assert (model.n_layers, model.n_heads, model.d_model, model.block_size) == (6, 6, 384, 256)
    assert train.batch_size == 64
    assert train.autocast_dtype == "bfloat16"


def test_presets_do_not_share_mutable_state():
    """Overriding one call must not change the preset seen by the next call."""
    get_config("baby", 84, max_iters=1, d_model=32)
    model, train = get_config("baby", 84)
    assert train.max_iters == 2000 and model.d_model == 128


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(n_layers=0), "n_layers must be at least 1, got 0"),
        (dict(d_model=25, n_heads=5), "sinusoidal positions need an even d_model, got 25"),
        (dict(positional="rotary"), "got 'rotary'"),
        (dict(dropout=1.0), r"dropout must be in \[0, 1\), got 1.0"),
    ],
)
def test_model_config_rejects_bad_values(changes, message):
    settings = dict(vocab_size=20, block_size=8, d_model=24, n_heads=3, n_layers=1)
    with pytest.raises(ValueError, match=message):
        ModelConfig(**{**settings, **changes})


def test_train_config_rejects_bad_values():
    with pytest.raises(ValueError, match=r"batch_size must be at least 1, got 0"):
        TrainConfig(batch_size=0, max_iters=10)
    with pytest.raises(ValueError, match=r"got 'fp16'"):
        TrainConfig(batch_size=1, max_iters=10, autocast_dtype="fp16")
