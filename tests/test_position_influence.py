"""position_influence: the gradient test for causality (§3.2.3), checked on functions whose
dependence pattern is known exactly, and on attention with and without the causal mask."""

from __future__ import annotations

import re

import pytest
import torch

from course_utils.attention import MultiHeadAttention, position_influence

B, T, C = 2, 6, 24


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_influence_of_a_cumulative_sum_is_the_lower_triangle():
    """out[t] = sum_{s<=t} x[s]: each input channel moves one output channel by exactly 1."""
    influence = position_influence(lambda x: x.cumsum(dim=1), randn(B, T, C))
    expected = torch.ones(T, T).tril() * B * C  # B sequences x C channels, each |d| = 1
    assert influence.shape == (T, T)
    torch.testing.assert_close(influence, expected)


def test_influence_of_a_shift_is_the_superdiagonal():
    """out[t] = 3 * x[t + 1] (a model that peeks one step ahead)."""
    influence = position_influence(lambda x: 3 * x.roll(-1, dims=1), randn(1, T, 4))
    expected = torch.zeros(T, T)
    for t in range(T):
        expected[t, (t + 1) % T] = 3 * 4
    torch.testing.assert_close(influence, expected)


def test_works_for_outputs_of_another_width_and_length():
    weight = randn(C, 5, seed=1)
    influence = position_influence(lambda x: (x @ weight)[:, :4], randn(B, T, C))
    assert influence.shape == (4, T)
    assert torch.all(influence[:, :4].diagonal() > 0) and torch.all(influence[:, 4:] == 0)


def test_causal_attention_has_no_future_influence_and_unmasked_does():
    torch.manual_seed(0)
    attention = MultiHeadAttention(C, 3).eval()
    x = randn(1, T, C, seed=2)
    causal = position_influence(lambda inp: attention(inp, is_causal=True), x)
    past = torch.ones(T, T, dtype=torch.bool).tril()
    assert torch.all(causal[~past] == 0) and torch.all(causal[past] > 0)
    unmasked = position_influence(attention, x)
    assert torch.all(unmasked > 0)


def test_does_not_touch_the_callers_tensor():
    x = randn(B, T, C)
    before = x.clone()
    position_influence(lambda inp: inp * 2, x)
    assert torch.equal(x, before) and x.grad is None


def test_rejects_integer_input():
    with pytest.raises(TypeError, match="float tensor .* got torch.int64"):
        position_influence(lambda x: x, torch.zeros(B, T, dtype=torch.long))


def test_rejects_1d_input():
    with pytest.raises(ValueError, match=re.escape("at least 2 axes (B, T, ...), got shape (6,)")):
        position_influence(lambda x: x, randn(T))


def test_rejects_output_without_the_batch_axis():
    with pytest.raises(
        ValueError, match=re.escape("fn must return (B=2, T_out, ...), got shape (6, 24)")
    ):
        position_influence(lambda x: x.sum(dim=0), randn(B, T, C))


def test_influence_of_a_one_position_sequence():
    """T = 1: the only output position depends on the only input position."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 4)
    influence = position_influence(layer, torch.randn(2, 1, 3))
    assert influence.shape == (1, 1) and influence.item() > 0
