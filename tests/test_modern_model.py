"""ModernDecoder / ModernConfig: shapes, causality, training with the course's loop, errors."""

from __future__ import annotations

import pytest
import torch

from course_utils.attention import position_influence
from course_utils.config import TrainConfig
from course_utils.measure.compare_blocks import ARMS, arm_config, build_model, parse_args
from course_utils.model import TinyDecoder
from course_utils.modern_model import ModernConfig, ModernDecoder
from course_utils.rmsnorm import RMSNorm
from course_utils.swiglu import SwiGLUFeedForward
from course_utils.training import train

SMALL = dict(vocab_size=84, block_size=16, d_model=24, n_heads=4, n_layers=2, n_kv_heads=2)


def test_defaults_are_the_llama_recipe():
    config = ModernConfig(**SMALL)
    model = ModernDecoder(config)
    assert (config.positional, config.norm, config.feed_forward, config.bias) == (
        "rope",
        "rmsnorm",
        "swiglu",
        False,
    )
    assert config.d_ff == 64  # swiglu_hidden_width(4 * 24)
    assert isinstance(model.blocks[0].ln_1, RMSNorm) and isinstance(model.final_norm, RMSNorm)
    assert isinstance(model.blocks[0].feed_forward, SwiGLUFeedForward)
    assert model.lm_head.weight is not model.token_embedding.weight  # untied
    assert not any(name.endswith("bias") for name, _ in model.named_parameters())
    assert config.qk_norm is False and model.blocks[0].attention.q_norm is None  # Llama: none
    assert model.blocks[0].attention.rotary is not None  # RoPE inside attention


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_added_positions_leave_attention_unrotated(positional):
    """Only RoPE rotates q and k; the added kinds go in at the embedding, once."""
    model = ModernDecoder(ModernConfig(**SMALL, positional=positional))
    assert all(block.attention.rotary is None for block in model.blocks)
    assert not isinstance(model.position, torch.nn.Identity)


def test_logits_shape_loss_at_init_and_hidden_states():
    model = ModernDecoder(ModernConfig(**SMALL, qk_norm=True)).eval()
    ids = torch.randint(0, 84, (3, 7))
    logits, loss = model(ids, ids)
    assert logits.shape == (3, 7, 84) and abs(loss.item() - torch.log(torch.tensor(84.0))) < 0.2
    states = model.hidden_states(ids)
    assert len(states) == 3 and all(s.shape == (3, 7, 24) for s in states)
    torch.testing.assert_close(model(ids, need_weights=True)[0], logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("positional", ["rope", "learned"])
def test_no_position_sees_the_future(positional):
    model = ModernDecoder(ModernConfig(**SMALL, positional=positional)).eval()
    ids = torch.randint(0, 84, (2, 9))

    def from_embeddings(x):  # the blocks on given embeddings
        for block in model.blocks:
            x = block(x)
        return x

    influence = position_influence(from_embeddings, model.token_embedding(ids))
    assert torch.all(influence.triu(1) == 0) and torch.all(influence.diagonal() > 0)


def test_the_course_training_loop_trains_it(shakespeare_text):
    data = torch.tensor([ord(c) % 84 for c in shakespeare_text[:20000]])
    torch.manual_seed(0)
    model = ModernDecoder(ModernConfig(**SMALL))
    config = TrainConfig(batch_size=8, max_iters=60, eval_interval=60, eval_iters=4)
    history = train(model, data[:18000], data[18000:], config, progress=False)
    assert history.val_loss[-1] < torch.log(torch.tensor(84.0)) - 0.5  # ln V at init


def test_measured_arms_have_the_same_parameter_count_within_5_percent():
    classic = build_model(arm_config("classic", 84))
    modern = build_model(arm_config("modern", 84))
    assert isinstance(classic, TinyDecoder) and isinstance(modern, ModernDecoder)
    assert abs(modern.num_parameters() / classic.num_parameters() - 1) < 0.05
    assert [arm_config(a, 84).n_kv_heads for a in ARMS[2:]] == [1, 2, 4]
    assert arm_config("gqa-kv2", 84) == arm_config("modern", 84)  # one arm, two names


def test_config_errors_name_the_argument():
    with pytest.raises(ValueError, match="n_kv_heads=3 must divide n_heads=4"):
        ModernConfig(**{**SMALL, "n_kv_heads": 3})
    with pytest.raises(ValueError, match="feed_forward"):
        ModernConfig(**SMALL, feed_forward="relu")
    with pytest.raises(ValueError, match="norm"):
        ModernConfig(**SMALL, norm="batchnorm")
    with pytest.raises(TypeError, match="qk_norm"):
        ModernConfig(**SMALL, qk_norm=1)
    with pytest.raises(TypeError, match="ModernConfig"):
        ModernDecoder(SMALL)


def test_compare_blocks_command_line_mistakes_exit_2(capsys):
    for argv in (["train", "--arm", "mystery"], ["train", "--arm", "modern", "--threads", "0"]):
        with pytest.raises(SystemExit) as info:
            parse_args(argv)
        assert info.value.code == 2
    assert "--threads must be at least 1" in capsys.readouterr().err


def test_hidden_states_keep_no_attention_weights_unless_asked():
    """The fast path by default: no (B, h, T, T) weights kept; need_weights=True keeps them."""
    model = ModernDecoder(ModernConfig(**SMALL)).eval()
    ids = torch.tensor([[1, 2, 3]])
    model.hidden_states(ids)
    assert all(block.attention.attention_weights is None for block in model.blocks)
    model.hidden_states(ids, need_weights=True)
    weights = model.blocks[0].attention.attention_weights
    assert weights is not None and weights.shape[-2:] == (3, 3)
