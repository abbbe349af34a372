"""Grouped-query attention: both paths, against multi-head attention, transformers' repeat_kv,
and a per-head computation by hand."""

from __future__ import annotations

import math

import pytest
import torch
from transformers.models.llama.modeling_llama import repeat_kv

from course_utils.attention import MultiHeadAttention, position_influence
from course_utils.gqa import GroupedQueryAttention, expand_kv_heads

B, T, D_MODEL, N_HEADS, N_KV_HEADS, D_K = 3, 7, 24, 4, 2, 6  # every axis a different size


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def gqa(n_kv_heads: int = N_KV_HEADS, **options) -> GroupedQueryAttention:
    torch.manual_seed(0)
    module = GroupedQueryAttention(D_MODEL, N_HEADS, n_kv_heads, D_K, **options).eval()
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.normal_(1.0 if parameter.ndim == 1 else 0.0, 0.3)
    return module


def test_expand_kv_heads_equals_transformers_repeat_kv_not_repeat():
    k = randn(B, N_KV_HEADS, T, D_K)
    expanded = expand_kv_heads(k, N_HEADS)
    assert expanded.shape == (B, N_HEADS, T, D_K)
    torch.testing.assert_close(expanded, repeat_kv(k, N_HEADS // N_KV_HEADS), rtol=0, atol=0)
    assert not torch.equal(expanded, k.repeat(1, N_HEADS // N_KV_HEADS, 1, 1))  # the mistake
    for head in range(N_HEADS):  # query head i uses key head i // group
        assert torch.equal(expanded[:, head], k[:, head // (N_HEADS // N_KV_HEADS)])


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
@pytest.mark.parametrize("options", [{}, {"qk_norm": True, "rotary_max_len": 16}, {"bias": True}])
def test_teaching_path_equals_fast_path(n_kv_heads, options):
    module, x = gqa(n_kv_heads, **options), randn(B, T, D_MODEL)
    fast = module(x)
    teaching = module(x, need_weights=True)
    torch.testing.assert_close(teaching, fast, atol=1e-5, rtol=1e-5)
    assert module.attention_weights.shape == (B, N_HEADS, T, T)
    torch.testing.assert_close(module.attention_weights.sum(-1), torch.ones(B, N_HEADS, T))


def test_n_kv_heads_equal_to_n_heads_is_the_course_multi_head_attention():
    module = gqa(N_HEADS, rotary_max_len=16)
    reference = MultiHeadAttention(D_MODEL, N_HEADS, bias=False, rotary_max_len=16).eval()
    reference.load_state_dict(module.state_dict(), strict=False)  # no q_norm / k_norm here
    x = randn(B, T, D_MODEL)
    torch.testing.assert_close(module(x), reference(x, is_causal=True), atol=1e-5, rtol=1e-5)


def test_multi_query_attention_by_hand():
    module, x = gqa(1), randn(B, T, D_MODEL)
    k = module.w_k(x)  # (B, T, d_k): the one key head every query head shares
    v = module.w_v(x)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    heads = []
    for head in range(N_HEADS):
        q = module.w_q(x)[..., head * D_K : (head + 1) * D_K]  # (B, T, d_k)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(D_K)).masked_fill(~causal, -math.inf)
        heads.append(torch.softmax(scores, dim=-1) @ v)
    expected = module.w_o(torch.cat(heads, dim=-1))
    torch.testing.assert_close(module(x), expected, atol=1e-5, rtol=1e-5)


def test_fewer_kv_heads_mean_smaller_projections_and_causal_attention():
    module = gqa(1)
    assert module.w_k.weight.shape == (D_K, D_MODEL) and module.w_q.weight.shape == (24, 24)
    influence = position_influence(module, randn(2, T, D_MODEL))
    assert torch.all(influence.triu(1) == 0) and torch.all(influence.diagonal() > 0)


def test_gqa_errors_name_the_argument():
    with pytest.raises(ValueError, match="n_kv_heads=3 must divide n_heads=4"):
        GroupedQueryAttention(D_MODEL, 4, 3)
    with pytest.raises(ValueError, match="multiple of n_kv_heads=3"):
        expand_kv_heads(torch.zeros(1, 3, 2, 4), 4)
    with pytest.raises(ValueError, match="d_model=24"):
        gqa()(torch.zeros(2, 3, 8))
    with pytest.raises(TypeError, match="qk_norm"):
        GroupedQueryAttention(D_MODEL, 4, qk_norm="yes")


def test_an_explicit_d_k_frees_d_model_from_n_heads():
    """Qwen3-style heads: d_k given, so d_model need not be a multiple of n_heads."""
    attention = GroupedQueryAttention(10, 4, 2, d_k=8)
    assert attention.w_q.weight.shape == (32, 10) and attention.w_k.weight.shape == (16, 10)
    assert attention(torch.randn(1, 3, 10)).shape == (1, 3, 10)
    with pytest.raises(ValueError, match="d_model=10 is not divisible by n_heads=4"):
        GroupedQueryAttention(10, 4, 2)


def test_project_starts_at_position_0_by_default():
    """The prompt's first token is at position 0: project(x) rotates as offset=0 does, and a
    later offset rotates differently."""
    torch.manual_seed(0)
    attention = GroupedQueryAttention(16, 4, 2, rotary_max_len=8)
    x = torch.randn(1, 3, 16)
    default, at_0, at_1 = attention.project(x), attention.project(x, 0), attention.project(x, 1)
    for a, b in zip(default, at_0):
        assert torch.equal(a, b)
    assert not torch.allclose(default[0], at_1[0])
