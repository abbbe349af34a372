"""Checkers for notebook 05: scores and scaling."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from course_utils.exercises.core import compare, run_check
from course_utils.exercises.difference import Tolerance
from course_utils.exercises.judge import Case, judge
from course_utils.lab.language import N_, tr


def _scaled_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T_q, T_k)


def _scores_cases() -> list[Case]:
    """T_q, T_k and d_k all different where they can be (a transposed product cannot pass),
    4-D, 3-D and 2-D inputs, T = 1, float64, non-contiguous views."""
    generator = torch.Generator().manual_seed(50)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=generator, dtype=dtype)

    q_view = randn(2, 6, 3, 8).transpose(1, 2)  # (B, h, T, d_k) as split_heads returns it
    return [
        Case(randn(2, 3, 6, 8), randn(2, 3, 5, 8)),
        Case(randn(4, 16, dtype=torch.float64), randn(7, 16, dtype=torch.float64)),
        Case(randn(3, 1, 4), randn(3, 1, 4), label=tr("q, k (3, 1, 4): T = 1")),
        Case(
            q_view,
            randn(2, 6, 3, 8).transpose(1, 2),
            label=tr("q, k non-contiguous (2, 3, 6, 8)"),
        ),
        Case(randn(1, 2, 9, 32), randn(1, 2, 3, 32)),
    ]


_SCORES_MISTAKES = (
    (N_("q @ k^T without the 1/sqrt(d_k) scale: divide by math.sqrt(q.shape[-1])"),
     lambda q, k: q @ k.transpose(-2, -1)),
    (N_("the scores divided by d_k: divide by its square root, sqrt(d_k)"),
     lambda q, k: q @ k.transpose(-2, -1) / q.shape[-1]),
    (N_("the scores multiplied by sqrt(d_k): divide by it"),
     lambda q, k: q @ k.transpose(-2, -1) * math.sqrt(q.shape[-1])),
    (N_("a scale of sqrt(T_q): d_k is the last axis of q and k, q.shape[-1]"),
     lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(q.shape[-2])),
    (N_("a scale of sqrt(T_k): d_k is the last axis of q and k, q.shape[-1]"),
     lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(k.shape[-2])),
    (N_("a fixed scale sqrt(8), the running example's d_k (a notebook global?): read d_k from "
        "q.shape[-1]"), lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(8)),
    (N_("a fixed scale sqrt(24), the running example's d_model: each head divides by "
        "sqrt(d_k), its own size q.shape[-1]"),
     lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(24)),
    (N_("k @ q^T: the scores transposed, (..., T_k, T_q); one row per query is q @ k^T"),
     lambda q, k: k @ q.transpose(-2, -1) / math.sqrt(q.shape[-1])),
    (N_("q^T @ k: that sums over the positions and gives a (d_k, d_k) matrix of channels; the "
        "scores are q @ k.transpose(-2, -1)"),
     lambda q, k: q.transpose(-2, -1) @ k / math.sqrt(q.shape[-1])),
    (N_("a conversion to float32: keep the inputs' dtype"),
     lambda q, k: _scaled_scores(q.float(), k.float())),
)  # fmt: skip

_SCORES_ERRORS = (
    (RuntimeError, r"cannot be multiplied|Expected size|must match the size",
     N_("the product's shapes do not fit: q (..., T_q, d_k) @ k.transpose(-2, -1) "
        "(..., d_k, T_k)")),
    (RuntimeError, r"view size is not compatible",
     N_("q and k may be non-contiguous views (split_heads returns one): use reshape, not view")),
)  # fmt: skip


def check_scaled_scores(scaled_scores: Callable) -> bool:
    """Exercise 05.1: ``scaled_scores(q, k)`` is ``q @ k^T / sqrt(d_k)`` (§3.2.1, Eq. 1).

    Shapes: q ``(..., T_q, d_k)``, k ``(..., T_k, d_k)`` -> ``(..., T_q, T_k)``, keeping the
    inputs' dtype. Five cases (4-D, 3-D, 2-D; T_q != T_k; T = 1; float64; non-contiguous
    views; d_k 4 to 32); ten named mistakes (the scale missing, by d_k, by sqrt(T), a fixed
    constant, a transposed product, q^T k, float32) and two named errors.
    """
    return judge(
        "scaled_scores",
        scaled_scores,
        _scaled_scores,
        _scores_cases(),
        _SCORES_MISTAKES,
        axes="B h T_q T_k",
        tolerance=Tolerance(atol=1e-5, rtol=1e-5, exact_dtype=True),
        errors=_SCORES_ERRORS,
        trains=True,
    )


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
            name = tr("softmax_jacobian(p of length {length})").format(length=len(p))
            problem = compare(answer, expected, name)
            if problem:
                return problem + _jacobian_hint(answer, p)
        return None

    return run_check("softmax_jacobian", attempt)


def _jacobian_hint(answer, p: torch.Tensor) -> str:
    """A hint that names the mistake, when ``answer`` matches a known wrong Jacobian."""
    if not isinstance(answer, torch.Tensor) or answer.shape != (len(p), len(p)):
        return ""
    mistakes = {
        tr("; the off-diagonal terms are missing: for i != j, d p_i / d s_j = -p_i p_j"): (
            torch.diag(p)
        ),
        tr("; the sign is flipped: J = diag(p) - p p^T (p_i grows with its own score)"): (
            torch.outer(p, p) - torch.diag(p)
        ),
        tr(
            "; the diagonal is p_i (1 - p_i): the Kronecker delta is multiplied by p_i, "
            "J = diag(p) - p p^T, not I - p p^T"
        ): torch.eye(len(p)) - torch.outer(p, p),
    }
    for hint, wrong in mistakes.items():
        if wrong is not None and torch.allclose(
            answer.detach().double(), wrong.double(), atol=1e-6
        ):
            return hint
    return ""
