"""Sinusoidal positional encoding (Vaswani §3.5): the table, the rotation property, the module."""

from __future__ import annotations

import math

import pytest
import torch

from course_utils.positional import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    sinusoidal_positional_encoding,
)

MAX_LEN, D_MODEL = 50, 24


def reference_table(max_len: int, d_model: int) -> torch.Tensor:
    """Scalar loops straight from the paper: pair index i, channels 2i (sin) and 2i+1 (cos)."""
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    for pos in range(max_len):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            table[pos, 2 * i] = math.sin(angle)
            table[pos, 2 * i + 1] = math.cos(angle)
    return table


def buggy_table(max_len: int, d_model: int) -> torch.Tensor:
    """A common wrong version: base 100000 and the *channel* index j in the exponent."""
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    for pos in range(max_len):
        for j in range(0, d_model, 2):
            angle = pos / 100000 ** (2 * j / d_model)
            table[pos, j] = math.sin(angle)
            table[pos, j + 1] = math.cos(angle)
    return table


def rotation(k: int, d_model: int) -> torch.Tensor:
    """Block-diagonal M(k): one 2x2 rotation by w_i * k per pair; depends on k, not on pos.

    With (sin a, cos a) in a pair, sin(a + b) = sin a cos b + cos a sin b and
    cos(a + b) = cos a cos b - sin a sin b, so the block is [[cos b, sin b], [-sin b, cos b]].
    """
    blocks = []
    for i in range(d_model // 2):
        b = k / 10000 ** (2 * i / d_model)
        block = [[math.cos(b), math.sin(b)], [-math.sin(b), math.cos(b)]]
        blocks.append(torch.tensor(block, dtype=torch.float64))
    return torch.block_diag(*blocks)


def test_table_matches_scalar_reference():
    expected = reference_table(MAX_LEN, D_MODEL)
    table64 = sinusoidal_positional_encoding(MAX_LEN, D_MODEL, dtype=torch.float64)
    torch.testing.assert_close(table64, expected, rtol=0, atol=1e-12)
    table32 = sinusoidal_positional_encoding(MAX_LEN, D_MODEL)
    assert table32.dtype == torch.float32 and table32.shape == (MAX_LEN, D_MODEL)
    torch.testing.assert_close(table32, expected.float(), rtol=0, atol=1e-6)


def test_buggy_table_is_detected():
    """The comparison above can fail: a plausible wrong table is far from the reference."""
    expected = reference_table(MAX_LEN, D_MODEL)
    wrong = buggy_table(MAX_LEN, D_MODEL)
    assert not torch.allclose(wrong, expected, atol=1e-3)
    assert (wrong - expected).abs().max() > 0.5


@pytest.mark.parametrize("k", [1, 3, 7, 20])
def test_shift_by_k_is_a_fixed_rotation(k):
    """PE[pos + k] = M(k) PE[pos] for every pos, with M(k) built from the frequencies only."""
    table = sinusoidal_positional_encoding(MAX_LEN, D_MODEL, dtype=torch.float64)
    m = rotation(k, D_MODEL)
    predicted = table[: MAX_LEN - k] @ m.T  # row vectors: (M v)^T = v^T M^T
    torch.testing.assert_close(predicted, table[k:], rtol=0, atol=1e-10)
    assert not torch.allclose(table[: MAX_LEN - k], table[k:], atol=1e-3)  # a real change


def test_module_adds_the_first_t_rows():
    module = SinusoidalPositionalEncoding(max_len=16, d_model=D_MODEL)
    x = torch.randn(2, 5, D_MODEL, generator=torch.Generator().manual_seed(0))
    out = module(x)
    expected = x + reference_table(16, D_MODEL)[:5].float()
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)
    assert list(module.parameters()) == []  # fixed, nothing to train


def test_learned_module_adds_the_first_t_rows_of_its_table():
    module = LearnedPositionalEmbedding(max_len=16, d_model=D_MODEL)
    x = torch.randn(2, 5, D_MODEL, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(module(x), x + module.weight.detach()[:5].expand(2, -1, -1))


@pytest.mark.parametrize("module_class", [SinusoidalPositionalEncoding, LearnedPositionalEmbedding])
def test_too_long_input_names_both_lengths(module_class):
    module = module_class(16, D_MODEL)
    with pytest.raises(ValueError, match=r"T=17 exceeds max_len=16"):
        module(torch.zeros(1, 17, D_MODEL))


def test_wrong_width_is_rejected():
    module = SinusoidalPositionalEncoding(16, D_MODEL)
    with pytest.raises(ValueError, match=r"d_model=24\), got \(1, 4, 10\)"):
        module(torch.zeros(1, 4, 10))


def test_odd_d_model_is_rejected():
    with pytest.raises(ValueError, match=r"d_model must be even .* got 7"):
        sinusoidal_positional_encoding(10, 7)


def test_non_positive_sizes_are_rejected():
    with pytest.raises(ValueError, match=r"max_len must be at least 1 .*got 0"):
        sinusoidal_positional_encoding(0, 8)
