"""RoPE keeps float64 inputs in float64 (Su et al. 2021, §3.2, Eq. 34).

Reference: the rotation written with NumPy in float64, pair by pair:
``y[2i] = x[2i] cos(m theta_i) - x[2i+1] sin(m theta_i)``,
``y[2i+1] = x[2i] sin(m theta_i) + x[2i+1] cos(m theta_i)``, ``theta_i = base^(-2i/d)``.
``apply_rotary_embedding`` on a float64 input must match it to ~1e-12; a rotation done in
float32 (and cast back) is off by ~1e-7, which these tests are built to notice (checked in
each test). ``RotaryEmbedding`` multiplies a float64 input in float64, by its tables.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from course_utils.rotary import RotaryEmbedding, apply_rotary_embedding

HEAD_DIM, MAX_LEN, BASE = 8, 40, 10000.0
FLOAT64_TOLERANCE = 1e-12


def reference_rotation(x: np.ndarray, positions: np.ndarray, base: float = BASE) -> np.ndarray:
    """(..., T, d) float64 rotated pair by pair, positions (T,)."""
    d = x.shape[-1]
    theta = base ** (-2.0 * np.arange(d // 2) / d)  # (d/2,)
    angle = positions[:, None] * theta  # (T, d/2)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * np.cos(angle) - odd * np.sin(angle)
    out[..., 1::2] = even * np.sin(angle) + odd * np.cos(angle)
    return out


def _x(length: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 3, length, HEAD_DIM, generator=g, dtype=torch.float64)


def _float32_error(x: torch.Tensor, expected: np.ndarray) -> float:
    """How far a rotation computed in float32 is from the reference (it must be >> 1e-12)."""
    rotated32 = RotaryEmbedding(HEAD_DIM, MAX_LEN)(x.float()).double().numpy()
    return float(np.abs(rotated32 - expected).max())


@pytest.mark.parametrize("offset", [0, 17])
def test_rotary_module_rotates_float64_in_float64(offset):
    """The module's float64 path: float64 angles and float64 products, at any offset; a
    float32 rotation of the same input cannot meet the tolerance."""
    x = _x(12)
    rope = RotaryEmbedding(HEAD_DIM, MAX_LEN)
    rotated = rope(x, offset=offset)
    assert rotated.dtype == torch.float64
    expected = reference_rotation(x.numpy(), np.arange(offset, offset + 12, dtype=np.float64))
    assert np.abs(rotated.numpy() - expected).max() < FLOAT64_TOLERANCE
    rotated32 = rope(x.float(), offset=offset).double().numpy()  # what a float32 path gives
    assert np.abs(rotated32 - expected).max() > 1e-9


def test_rotary_module_float64_matches_the_float64_formula():
    x = _x(MAX_LEN)
    rotated = RotaryEmbedding(HEAD_DIM, MAX_LEN)(x)
    expected = reference_rotation(x.numpy(), np.arange(MAX_LEN, dtype=np.float64))
    assert np.abs(rotated.numpy() - expected).max() < FLOAT64_TOLERANCE


def test_apply_rotary_embedding_float64_matches_the_reference():
    x = _x(MAX_LEN)
    rotated = apply_rotary_embedding(x)
    assert rotated.dtype == torch.float64
    expected = reference_rotation(x.numpy(), np.arange(MAX_LEN, dtype=np.float64))
    assert np.abs(rotated.numpy() - expected).max() < FLOAT64_TOLERANCE
    assert _float32_error(x, expected) > 1e-9


def test_float32_input_stays_float32_and_close():
    """float32 in, float32 out, within float32 rounding of the float64 reference."""
    x = _x(MAX_LEN)
    rotated = RotaryEmbedding(HEAD_DIM, MAX_LEN)(x.float())
    assert rotated.dtype == torch.float32
    expected = reference_rotation(x.numpy(), np.arange(MAX_LEN, dtype=np.float64))
    assert np.abs(rotated.double().numpy() - expected).max() < 1e-5


def test_a_table_of_one_position():
    """max_len = 1 is legal: one token, rotated by angle 0 (the identity)."""
    x = torch.randn(2, 1, 4)
    torch.testing.assert_close(RotaryEmbedding(4, 1)(x), x)
    with pytest.raises(ValueError, match="max_len"):
        RotaryEmbedding(4, 1)(torch.randn(2, 2, 4))  # a second position does not fit
