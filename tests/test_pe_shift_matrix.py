"""pe_shift_matrix: PE[pos + k] = M(k) PE[pos] (Vaswani et al. 2017, §3.5)."""

from __future__ import annotations

import math

import pytest
import torch

from course_utils.positional import pe_shift_matrix, sinusoidal_positional_encoding

MAX_LEN, D_MODEL = 60, 24


@pytest.mark.parametrize("k", [0, 1, 5, 17, -4])
def test_shifts_every_row_of_the_table(k):
    table = sinusoidal_positional_encoding(MAX_LEN, D_MODEL, dtype=torch.float64)
    m = pe_shift_matrix(k, D_MODEL)
    rows = range(max(0, -k), MAX_LEN - max(0, k))
    for pos in rows:
        torch.testing.assert_close(m @ table[pos], table[pos + k], rtol=0, atol=1e-10)


def test_is_block_diagonal_and_orthogonal():
    m = pe_shift_matrix(3, D_MODEL)
    assert m.shape == (D_MODEL, D_MODEL) and m.dtype == torch.float64
    torch.testing.assert_close(m @ m.T, torch.eye(D_MODEL, dtype=torch.float64))
    outside = m.clone()
    for i in range(0, D_MODEL, 2):
        outside[i : i + 2, i : i + 2] = 0
    assert outside.abs().max() == 0
    b = 3.0  # pair 0 has frequency 1: its block rotates by k radians
    expected = torch.tensor([[math.cos(b), math.sin(b)], [-math.sin(b), math.cos(b)]])
    torch.testing.assert_close(m[:2, :2], expected.double())


def test_shifts_compose():
    torch.testing.assert_close(
        pe_shift_matrix(2, D_MODEL) @ pe_shift_matrix(5, D_MODEL), pe_shift_matrix(7, D_MODEL)
    )


def test_base_and_dtype_are_honoured():
    table = sinusoidal_positional_encoding(10, 8, base=100.0, dtype=torch.float64)
    m = pe_shift_matrix(3, 8, base=100.0, dtype=torch.float32)
    assert m.dtype == torch.float32
    torch.testing.assert_close(table[:7] @ m.double().T, table[3:], atol=1e-6, rtol=0)
    assert not torch.allclose(pe_shift_matrix(3, 8), pe_shift_matrix(3, 8, base=100.0))


@pytest.mark.parametrize("d_model", [7, 0])
def test_bad_width_is_rejected(d_model):
    with pytest.raises(ValueError, match=rf"positive and even .* got {d_model}"):
        pe_shift_matrix(1, d_model)
