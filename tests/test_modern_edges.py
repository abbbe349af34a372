"""Errors of the modern modules name what the caller passed (through every layer), and valid
edge inputs work: an empty batch, a non-contiguous or odd-offset view, T = 1,
n_kv_heads = n_heads."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from course_utils.config import ModelConfig
from course_utils.gqa import GroupedQueryAttention
from course_utils.model import TinyDecoder
from course_utils.modern_model import ModernConfig, ModernDecoder
from course_utils.rotary import RotaryEmbedding, apply_rotary_embedding
from course_utils.swiglu import SwiGLUFeedForward

SHAPE = dict(vocab_size=30, block_size=16, d_model=24, n_heads=4, n_layers=1)


@pytest.mark.parametrize(
    "settings, pattern",
    [
        (dict(d_k=7, rotary_max_len=8), r"d_k must be even, got d_k=7; pass an even d_k"),
        (
            dict(d_model=30, n_heads=6, rotary_max_len=8),
            r"d_k = d_model / n_heads = 30 / 6 = 5; change n_heads or d_model",
        ),
        (dict(rotary_max_len=0), r"rotary_max_len must be at least 1"),
        (dict(rotary_max_len=8, rope_base=1.0), r"rope_base must be in \(1, inf\)"),
        (dict(qk_norm=True, norm_eps=0.0), r"norm_eps must be in \(0, inf\)"),
        (dict(scale=-1.0), r"scale must be in \(0, inf\)"),
        (dict(rotary_max_len=8, rope_angle_dtype="float32"), r"rope_angle_dtype must be"),
        (dict(dropout=1.0), r"dropout must be a probability in \[0, 1\)"),
    ],
)
def test_grouped_query_attention_names_the_caller_s_arguments(settings, pattern):
    with pytest.raises(ValueError, match=pattern):
        GroupedQueryAttention(**{"d_model": 24, "n_heads": 4, **settings})


def test_grouped_query_attention_names_rotary_max_len_for_a_long_input():
    attention = GroupedQueryAttention(24, 4, 2, rotary_max_len=8)
    with pytest.raises(ValueError, match=r"T=9 tokens at offset=0 exceed rotary_max_len=8"):
        attention(torch.randn(1, 9, 24))
    with pytest.raises(ValueError, match=r"offset must be at least 0"):
        attention.project(torch.randn(1, 2, 24), offset=-1)


def test_modern_config_names_head_dim_with_its_own_arithmetic():
    with pytest.raises(ValueError, match=r"head_dim \(d_k\) must be even, got head_dim=7"):
        ModernConfig(**SHAPE, head_dim=7)
    # without head_dim, d_k comes from d_model / n_heads, and the message says so
    with pytest.raises(ValueError, match=r"d_k must be even, got 5 \(d_model=30 / n_heads=6\)"):
        ModernConfig(**{**SHAPE, "d_model": 30, "n_heads": 6})
    # with head_dim given, n_heads need not divide d_model (5 heads of 8 over 24 channels)
    model = ModernDecoder(ModernConfig(**{**SHAPE, "n_heads": 5}, head_dim=8))
    assert model(torch.randint(0, 30, (2, 7)))[0].shape == (2, 7, 30)


@pytest.mark.parametrize(
    "changes, error, pattern",
    [
        (dict(feed_forward="gelu", bias=False), ValueError, r"always has biases, got mlp_bias"),
        (dict(padding_idx=30), ValueError, r"padding_idx must be at most 29"),
        (dict(rope_angle_dtype="float16"), ValueError, r"rope_angle_dtype"),
        (dict(scale_scores="yes"), TypeError, r"scale_scores must be True or False"),
        (dict(mlp_bias=1), TypeError, r"mlp_bias must be True or False"),
    ],
)
def test_modern_config_refuses_its_new_switches_by_name(changes, error, pattern):
    with pytest.raises(error, match=pattern):
        ModernConfig(**SHAPE, **changes)


def test_each_decoder_refuses_the_other_s_config():
    with pytest.raises(TypeError, match=r"TinyDecoder takes a plain ModelConfig, got ModernConfig"):
        TinyDecoder(ModernConfig(**SHAPE))
    with pytest.raises(TypeError, match=r"must be a ModernConfig, got ModelConfig.*TinyDecoder"):
        ModernDecoder(ModelConfig(**SHAPE))


def test_swiglu_refuses_dropout_one():
    with pytest.raises(ValueError, match=r"dropout must be a probability in \[0, 1\), got 1.0"):
        SwiGLUFeedForward(24, 64, dropout=1.0)


def test_mlp_bias_and_scales_reach_the_modules():
    config = ModernConfig(**{**SHAPE, "n_layers": 3}, mlp_bias=True, scale_by_layer=True)
    model = ModernDecoder(config)
    assert model.blocks[0].feed_forward.up.bias is not None
    assert model.blocks[0].attention.w_q.bias is None  # bias=False: attention without
    scales = [block.attention.scale for block in model.blocks]
    assert scales == pytest.approx([1 / math.sqrt(6) / (i + 1) for i in range(3)])


def views(d: int) -> dict[str, torch.Tensor]:
    """Valid inputs (B, h, T, d) that are not plain contiguous tensors."""
    wide = torch.randn(2, 3, 5, d + 1)
    return {
        "empty batch": torch.randn(0, 3, 5, d),
        "T = 1": torch.randn(2, 3, 1, d),
        "transposed": torch.randn(2, 5, 3, d).transpose(1, 2),
        "odd offset": wide[..., 1:],
        "odd storage offset": torch.randn(2 * 3 * 5 * d + 1)[1:].view(2, 3, 5, d),
    }


@pytest.mark.parametrize("name", sorted(views(8)))
def test_rotary_embedding_takes_every_valid_view(name):
    x = views(8)[name]
    for dtype in (torch.float32, torch.float64):
        rotated = RotaryEmbedding(8, 16)(x.to(dtype))
        assert rotated.shape == x.shape and rotated.dtype == dtype
        expected = apply_rotary_embedding(x.to(dtype).contiguous())
        torch.testing.assert_close(rotated, expected)


def reference_gqa(attention: GroupedQueryAttention, x: torch.Tensor) -> torch.Tensor:
    """The same attention with torch's kernel on a contiguous copy, heads expanded by hand."""
    q, k, v = attention.project(x.contiguous())
    group = attention.n_heads // attention.n_kv_heads
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, h, T, d_k)
    return attention.w_o(out.transpose(1, 2).flatten(2))  # (B, T, h*d_k) -> (B, T, C)


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
@pytest.mark.parametrize("need_weights", [False, True])
def test_grouped_query_attention_takes_every_valid_view(n_kv_heads, need_weights):
    torch.manual_seed(0)
    attention = GroupedQueryAttention(24, 4, n_kv_heads, rotary_max_len=16, qk_norm=True).eval()
    wide = torch.randn(2, 5, 25)
    inputs = {
        "empty batch": torch.randn(0, 5, 24),
        "T = 1": torch.randn(2, 1, 24),
        "transposed": torch.randn(5, 2, 24).transpose(0, 1),
        "odd offset": wide[..., 1:],
    }
    for name, x in inputs.items():
        with torch.no_grad():
            out = attention(x, need_weights=need_weights)
            torch.testing.assert_close(out, reference_gqa(attention, x), msg=name)
        if need_weights:
            assert attention.attention_weights.shape == (x.shape[0], 4, x.shape[1], x.shape[1])


def test_a_custom_scale_is_the_factor_on_the_scores():
    torch.manual_seed(0)
    plain = GroupedQueryAttention(24, 4, 2, rotary_max_len=16).eval()
    unscaled = GroupedQueryAttention(24, 4, 2, rotary_max_len=16, scale=1.0).eval()
    unscaled.load_state_dict(plain.state_dict())
    x = torch.randn(2, 6, 24)
    q, k, v = plain.project(x)
    k, v = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
    weights = torch.softmax(
        (q @ k.transpose(-2, -1)).masked_fill(
            ~torch.ones(6, 6, dtype=torch.bool).tril(), -math.inf
        ),
        dim=-1,
    )  # scale 1: no sqrt(d_k)
    expected = unscaled.w_o((weights @ v).transpose(1, 2).flatten(2))
    with torch.no_grad():
        for need_weights in (False, True):
            torch.testing.assert_close(unscaled(x, need_weights=need_weights), expected)
        assert (plain(x) - expected).abs().max() > 1e-3
