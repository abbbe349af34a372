"""Attention, checked against F.scaled_dot_product_attention and nn.MultiheadAttention.

Our boolean masks mean True = "may attend" (as in F.scaled_dot_product_attention);
nn.MultiheadAttention's boolean masks mean True = "hidden", so they are inverted with ``~``.
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from references import multihead_attention_like
from torch import nn

from course_utils.attention import (
    MultiHeadAttention,
    causal_mask,
    merge_heads,
    padding_mask,
    scaled_dot_product_attention,
    split_heads,
)

B, H, T, D_MODEL = 2, 3, 6, 24
D_K = D_MODEL // H


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.fixture
def qkv() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return randn(B, H, T, D_K, seed=1), randn(B, H, T, D_K, seed=2), randn(B, H, T, D_K, seed=3)


@pytest.fixture
def attention_pair() -> tuple[MultiHeadAttention, nn.MultiheadAttention]:
    """Our module and nn.MultiheadAttention with identical weights (random, non-zero biases)."""
    torch.manual_seed(0)
    ours = MultiHeadAttention(D_MODEL, H).eval()
    with torch.no_grad():
        for linear in (ours.w_q, ours.w_k, ours.w_v, ours.w_o):
            linear.bias.normal_()
    return ours, multihead_attention_like(ours)


# --- split_heads / merge_heads -------------------------------------------------------------


def test_split_then_merge_is_the_identity():
    x = randn(B, T, D_MODEL)
    heads = split_heads(x, H)
    assert heads.shape == (B, H, T, D_K)
    assert torch.equal(merge_heads(heads), x)


def test_head_i_holds_channels_of_block_i():
    """Reference: slicing the channel axis by hand, x[..., i*d_k:(i+1)*d_k]."""
    x = randn(B, T, D_MODEL)
    heads = split_heads(x, H)
    for i in range(H):
        assert torch.equal(heads[:, i], x[:, :, i * D_K : (i + 1) * D_K])


def test_view_without_transpose_is_different():
    """The classic bug, viewing (B, T, C) straight as (B, h, T, d_k), mixes positions."""
    x = randn(B, T, D_MODEL)
    assert not torch.equal(x.view(B, H, T, D_K), split_heads(x, H))


def test_split_heads_rejects_indivisible_width():
    with pytest.raises(ValueError, match=r"C=24 is not divisible by n_heads=5"):
        split_heads(randn(B, T, D_MODEL), 5)


def test_merge_heads_rejects_3d():
    with pytest.raises(ValueError, match=re.escape("got 3-D shape (2, 6, 24)")):
        merge_heads(randn(B, T, D_MODEL))


# --- masks -----------------------------------------------------------------------------------


def test_causal_mask_values():
    """Reference: mask[i, j] is True exactly when j <= i."""
    mask = causal_mask(5)
    assert mask.dtype == torch.bool and mask.shape == (5, 5)
    expected = [[j <= i for j in range(5)] for i in range(5)]
    assert mask.tolist() == expected


def test_padding_mask_values():
    mask = padding_mask([3, 1, 4, 0], 4)
    assert mask.dtype == torch.bool and mask.shape == (4, 1, 1, 4)
    assert mask[:, 0, 0].tolist() == [
        [True, True, True, False],
        [True, False, False, False],
        [True, True, True, True],
        [False, False, False, False],
    ]


@pytest.mark.parametrize("lengths", [[5, 2], [-1, 2]])
def test_padding_mask_rejects_bad_lengths(lengths):
    with pytest.raises(ValueError, match=re.escape(f"[0, 4], got {lengths}")):
        padding_mask(lengths, 4)


# --- scaled_dot_product_attention ---------------------------------------------------------------


@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding", "causal+padding"])
def test_sdpa_matches_pytorch(qkv, mask_kind):
    """Reference: F.scaled_dot_product_attention with the same boolean mask (float32)."""
    q, k, v = qkv
    masks = {
        "none": None,
        "causal": causal_mask(T),
        "padding": padding_mask([T, 3], T),
        "causal+padding": causal_mask(T) & padding_mask([T, 3], T),
    }
    mask = masks[mask_kind]
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert out.shape == (B, H, T, D_K) and weights.shape == (B, H, T, T)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, T), rtol=0, atol=1e-6)
    if mask is not None:
        assert torch.all(weights[~mask.expand_as(weights)] == 0)


def test_sdpa_weights_are_the_softmax_of_scaled_scores(qkv):
    """Reference: Eq. 1 written with einsum; the softmax runs over keys, not d_k."""
    q, k, v = qkv
    _, weights = scaled_dot_product_attention(q, k, v)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / D_K**0.5
    torch.testing.assert_close(weights, scores.softmax(dim=-1), rtol=0, atol=1e-6)


def test_fully_masked_query_row_gives_zero_weights_not_nan(qkv):
    q, k, v = qkv
    mask = causal_mask(T).clone()
    mask[2] = False  # query 2 may see nothing
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert not torch.isnan(out).any() and not torch.isnan(weights).any()
    assert torch.all(weights[..., 2, :] == 0) and torch.all(out[..., 2, :] == 0)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(T))
    rows = [t for t in range(T) if t != 2]
    torch.testing.assert_close(out[..., rows, :], expected[..., rows, :], rtol=0, atol=1e-6)


def test_sdpa_rejects_float_mask(qkv):
    with pytest.raises(TypeError, match=r"torch.bool .* got torch.float32"):
        scaled_dot_product_attention(*qkv, mask=causal_mask(T).float())


def test_sdpa_rejects_mismatched_d_k(qkv):
    q, k, v = qkv
    with pytest.raises(ValueError, match=re.escape("got (2, 3, 6, 8), (2, 3, 6, 4)")):
        scaled_dot_product_attention(q, k[..., :4], v)


# --- MultiHeadAttention --------------------------------------------------------------------------


def test_mha_matches_nn_multihead_attention_without_mask(attention_pair):
    ours, reference = attention_pair
    x = randn(B, T, D_MODEL)
    expected, _ = reference(x, x, x, need_weights=False)
    torch.testing.assert_close(ours(x), expected, rtol=0, atol=1e-6)


def test_mha_matches_nn_multihead_attention_causal(attention_pair):
    ours, reference = attention_pair
    x = randn(B, T, D_MODEL)
    expected, expected_weights = reference(
        x, x, x, attn_mask=~causal_mask(T), need_weights=True, average_attn_weights=False
    )
    torch.testing.assert_close(ours(x, is_causal=True), expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(ours(x, mask=causal_mask(T)), expected, rtol=0, atol=1e-6)
    teaching = ours(x, is_causal=True, need_weights=True)
    torch.testing.assert_close(teaching, expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(ours.attention_weights, expected_weights, rtol=0, atol=1e-6)


def test_mha_matches_nn_multihead_attention_with_padding(attention_pair):
    ours, reference = attention_pair
    x = randn(B, T, D_MODEL)
    lengths = [T, 4]
    keep = padding_mask(lengths, T)  # (B, 1, 1, T), True = real token
    expected, _ = reference(x, x, x, key_padding_mask=~keep[:, 0, 0], need_weights=False)
    torch.testing.assert_close(ours(x, mask=keep), expected, rtol=0, atol=1e-6)
    teaching = ours(x, mask=keep, need_weights=True)
    torch.testing.assert_close(teaching, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("with_padding", [False, True])
def test_teaching_path_equals_fast_path(attention_pair, with_padding):
    ours, _ = attention_pair
    x = randn(B, T, D_MODEL, seed=5)
    mask = padding_mask([T, 3], T) if with_padding else None
    fast = ours(x, mask=mask, is_causal=True)
    teaching = ours(x, mask=mask, is_causal=True, need_weights=True)
    torch.testing.assert_close(teaching, fast, rtol=0, atol=1e-6)
    weights = ours.attention_weights
    assert weights.shape == (B, H, T, T)
    assert torch.all(weights.triu(diagonal=1) == 0)  # nothing from the future
    if with_padding:
        assert torch.all(weights[1, :, :, 3:] == 0)  # nothing from padding keys


@pytest.mark.parametrize("need_weights", [False, True])
def test_causality_by_gradients(attention_pair, need_weights):
    """d out[t] / d x[s] is exactly zero for s > t and nonzero for s <= t."""
    ours, _ = attention_pair
    x = randn(1, T, D_MODEL, seed=6)
    jacobian = torch.autograd.functional.jacobian(
        lambda inp: ours(inp, is_causal=True, need_weights=need_weights), x
    )  # (1, T, C, 1, T, C)
    influence = jacobian[0, :, :, 0].abs().sum(dim=(1, 3))  # (T_out, T_in)
    for t in range(T):
        assert torch.all(influence[t, t + 1 :] == 0), f"output {t} depends on the future"
        assert torch.all(influence[t, : t + 1] > 0), f"output {t} ignores part of its past"


def test_without_mask_every_position_sees_every_other(attention_pair):
    """The gradient check can fail: with no causal mask, the future does leak in."""
    ours, _ = attention_pair
    x = randn(1, T, D_MODEL, seed=6)
    jacobian = torch.autograd.functional.jacobian(ours, x)
    assert torch.all(jacobian[0, :, :, 0].abs().sum(dim=(1, 3)) > 0)


def test_mha_rejects_indivisible_width():
    with pytest.raises(ValueError, match=r"d_model=24 must be divisible by n_heads=5"):
        MultiHeadAttention(24, 5)


def test_mha_rejects_mask_that_does_not_broadcast(attention_pair):
    ours, _ = attention_pair
    with pytest.raises(
        ValueError,
        match=re.escape("shape (4, 4) does not broadcast to the scores' shape (2, 3, 6, 6)"),
    ):
        ours(randn(B, T, D_MODEL), mask=causal_mask(4))


def test_mha_rejects_float_mask(attention_pair):
    ours, _ = attention_pair
    with pytest.raises(TypeError, match=r"got torch.float32"):
        ours(randn(B, T, D_MODEL), mask=causal_mask(T).float())


def test_mha_rejects_wrong_width(attention_pair):
    ours, _ = attention_pair
    with pytest.raises(ValueError, match=re.escape("(B, T, d_model=24), got (2, 6, 16)")):
        ours(randn(B, T, 16))
