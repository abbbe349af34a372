"""Rotary position embedding (Su et al. 2021, RoFormer, §3.4): offsets, norms, a reference."""

from __future__ import annotations

import math

import pytest
import torch

from course_utils.rotary import apply_rotary_embedding

B, H, T, D_K = 2, 3, 6, 8


def complex_reference(x: torch.Tensor, positions: list[float], base: float = 10000.0):
    """RoPE as the paper writes it: each pair (x[2i], x[2i+1]) is a complex number, multiplied
    by exp(j * m * theta_i). Built with Python floats and complex tensors, not with the
    module's sin/cos formulas."""
    d = x.shape[-1]
    theta = [base ** (-2 * i / d) for i in range(d // 2)]
    phase = torch.tensor(
        [[complex(math.cos(m * t), math.sin(m * t)) for t in theta] for m in positions],
        dtype=torch.complex128,
    )  # (T, d/2)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(z * phase).reshape(x.shape)


@pytest.fixture
def qk() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(B, H, T, D_K, generator=generator, dtype=torch.float64)
    k = torch.randn(B, H, T, D_K, generator=generator, dtype=torch.float64)
    return q, k


def test_equals_the_complex_number_reference(qk):
    q, _ = qk
    torch.testing.assert_close(
        apply_rotary_embedding(q), complex_reference(q, list(range(T))), rtol=0, atol=1e-12
    )


def test_explicit_positions_match_the_reference(qk):
    q, _ = qk
    positions = [3.0, 10.0, 11.0, 50.0, 51.0, 400.0]
    out = apply_rotary_embedding(q, positions=torch.tensor(positions))
    torch.testing.assert_close(out, complex_reference(q, positions), rtol=0, atol=1e-12)


def test_a_different_base_changes_the_result_and_matches_the_reference(qk):
    q, _ = qk
    out = apply_rotary_embedding(q, base=500.0)
    torch.testing.assert_close(out, complex_reference(q, list(range(T)), base=500.0))
    assert not torch.allclose(out, apply_rotary_embedding(q), atol=1e-3)


def test_score_depends_only_on_the_relative_offset(qk):
    """<R(m) q, R(n) k> is the same for (m, n) and (m + s, n + s)."""
    q, k = qk[0][0, 0, 0], qk[1][0, 0, 0]  # one query and one key vector, (d_k,)

    def score(m: int, n: int) -> torch.Tensor:
        q_rot = apply_rotary_embedding(q[None], positions=torch.tensor([m]))[0]
        k_rot = apply_rotary_embedding(k[None], positions=torch.tensor([n]))[0]
        return q_rot @ k_rot

    for m, n in [(0, 3), (5, 2), (7, 7)]:
        for shift in [1, 4, 100, 1000]:
            torch.testing.assert_close(score(m + shift, n + shift), score(m, n), rtol=0, atol=1e-10)
    # ... and it does depend on the offset, so the check above can fail.
    assert abs(score(0, 3) - score(0, 4)) > 1e-3


def test_score_matrix_is_constant_along_diagonals():
    """The same vector at every position: scores[m, n] depends on n - m only (Toeplitz)."""
    v = torch.randn(D_K, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    rotated = apply_rotary_embedding(v.expand(T, D_K))  # (T, d)
    scores = rotated @ rotated.T  # (T, T)
    for offset in range(-T + 1, T):
        diagonal = scores.diagonal(offset)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal))


def test_rotation_preserves_norms_and_position_zero_is_identity(qk):
    q, _ = qk
    out = apply_rotary_embedding(q)
    torch.testing.assert_close(out.norm(dim=-1), q.norm(dim=-1), rtol=0, atol=1e-12)
    torch.testing.assert_close(out[..., 0, :], q[..., 0, :], rtol=0, atol=0)
    assert not torch.allclose(out[..., 1:, :], q[..., 1:, :], atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_keeps_shape_and_dtype(dtype):
    x = torch.randn(B, H, T, D_K).to(dtype)
    out = apply_rotary_embedding(x)
    assert out.shape == x.shape and out.dtype == dtype
    two_d = apply_rotary_embedding(x[0, 0])  # (T, d) works too
    torch.testing.assert_close(two_d, out[0, 0])


def test_per_batch_positions_broadcast(qk):
    q, _ = qk
    starts = torch.tensor([0, 10])
    positions = starts[:, None, None] + torch.arange(T)  # (B, 1, T)
    out = apply_rotary_embedding(q, positions=positions)
    torch.testing.assert_close(out[0], apply_rotary_embedding(q[0]))
    torch.testing.assert_close(out[1], apply_rotary_embedding(q[1], torch.arange(10, 10 + T)))


def test_odd_dimension_is_rejected():
    with pytest.raises(ValueError, match=r"d must be even .* got d=7 in shape \(2, 5, 7\)"):
        apply_rotary_embedding(torch.zeros(2, 5, 7))


def test_integer_input_is_rejected():
    with pytest.raises(TypeError, match=r"float tensor .* got torch.int64"):
        apply_rotary_embedding(torch.zeros(5, 8, dtype=torch.long))


def test_one_dimensional_input_is_rejected():
    with pytest.raises(ValueError, match=r"\(\.\.\., T, d\), got \(8,\)"):
        apply_rotary_embedding(torch.zeros(8))


@pytest.mark.parametrize("shape", [(T + 1,), (4, T), (B, H, T, 1)])
def test_positions_that_do_not_fit_are_rejected(shape):
    with pytest.raises(
        ValueError, match=r"do not (broadcast to|line up with) x.shape\[:-1\] = \(2, 3, 6\)"
    ):
        apply_rotary_embedding(torch.zeros(B, H, T, D_K), positions=torch.zeros(shape))


def test_bool_positions_are_rejected():
    with pytest.raises(TypeError, match="integer or float, got dtype torch.bool"):
        apply_rotary_embedding(torch.zeros(T, D_K), positions=torch.ones(T, dtype=torch.bool))


@pytest.mark.parametrize("real_path", [False, True], ids=["complex", "real"])
def test_rotary_module_equals_the_function(real_path, monkeypatch):
    """The cached module (complex product, or the real-number form used on MPS and under
    torch.compile) rotates exactly as apply_rotary_embedding."""
    from course_utils.rotary import RotaryEmbedding

    if real_path:
        monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    x = torch.randn(2, 3, 6, 8, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(RotaryEmbedding(8, 16)(x), apply_rotary_embedding(x))
    with pytest.raises(ValueError, match="exceeds max_len=4"):
        RotaryEmbedding(8, 4)(x)
