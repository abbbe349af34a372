"""Checkers for notebook 05: scores and scaling."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.core import compare, run_check


def check_scaled_scores(scaled_scores: Callable) -> bool:
    """Exercise 05.1: ``scaled_scores(q, k)`` is ``q @ k^T / sqrt(d_k)`` (§3.2.1, Eq. 1).

    Shapes: q ``(..., T_q, d_k)``, k ``(..., T_k, d_k)`` -> ``(..., T_q, T_k)``. Tried with
    T_q, T_k and d_k all different, so a transposed product cannot pass.
    """

    def attempt() -> str | None:
        generator = torch.Generator().manual_seed(50)
        for q_shape, k_shape in (((2, 3, 6, 8), (2, 3, 5, 8)), ((4, 16), (7, 16))):
            q = torch.randn(*q_shape, generator=generator)
            k = torch.randn(*k_shape, generator=generator)
            raw = q @ k.transpose(-2, -1)
            d_k = q.shape[-1]
            answer = scaled_scores(q.clone(), k.clone())
            name = f"scaled_scores(q {q_shape}, k {k_shape})"
            if isinstance(answer, torch.Tensor) and answer.shape == raw.shape:
                if torch.allclose(answer, raw, atol=1e-5):
                    return f"{name} is q @ k^T without the 1/sqrt(d_k) scale"
                if torch.allclose(answer, raw / d_k, atol=1e-5):
                    return f"{name} divides by d_k = {d_k}; divide by sqrt(d_k) = {d_k**0.5:g}"
                for axis, size in (("T_q", q.shape[-2]), ("T_k", k.shape[-2])):
                    if torch.allclose(answer, raw / size**0.5, atol=1e-5):
                        return (
                            f"{name} divides by sqrt({axis}) = sqrt({size}); d_k is the last "
                            f"axis of q and k, q.shape[-1] = {d_k}"
                        )
            problem = compare(answer, raw / d_k**0.5, name)
            if problem:
                return problem
        return None

    return run_check("scaled_scores", attempt)


def check_softmax_jacobian(softmax_jacobian: Callable) -> bool:
    """Exercise 05.2: ``softmax_jacobian(p)`` for ``p = softmax(s)`` of shape ``(T,)`` is the
    ``(T, T)`` matrix ``J[i, j] = d p_i / d s_j``, compared with autograd's Jacobian.

    Tried on a spread-out and on a nearly one-hot (saturated) distribution.
    """

    def attempt() -> str | None:
        for scores in (
            torch.tensor([0.5, -1.0, 2.0, 0.0, 1.0]),
            torch.tensor([12.0, 0.0, 3.0, -2.0]),
        ):
            p = torch.softmax(scores, dim=-1)
            expected = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, -1), scores)
            answer = softmax_jacobian(p.clone())
            problem = compare(answer, expected, f"softmax_jacobian(p of length {len(p)})")
            if problem:
                return problem + _jacobian_hint(answer, p)
        return None

    return run_check("softmax_jacobian", attempt)


def _jacobian_hint(answer, p: torch.Tensor) -> str:
    """A hint that names the mistake, when ``answer`` matches a known wrong Jacobian."""
    if not isinstance(answer, torch.Tensor) or answer.shape != (len(p), len(p)):
        return ""
    mistakes = {
        "; the off-diagonal terms are missing: for i != j, d p_i / d s_j = -p_i p_j": torch.diag(p),
        "; the sign is flipped: J = diag(p) - p p^T (p_i grows with its own score)": (
            torch.outer(p, p) - torch.diag(p)
        ),
        "; the diagonal is p_i (1 - p_i): the Kronecker delta is multiplied by p_i, "
        "J = diag(p) - p p^T, not I - p p^T": torch.eye(len(p)) - torch.outer(p, p),
    }
    for hint, wrong in mistakes.items():
        if wrong is not None and torch.allclose(
            answer.detach().double(), wrong.double(), atol=1e-6
        ):
            return hint
    return ""
