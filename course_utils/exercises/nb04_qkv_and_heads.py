"""Checkers for notebook 04: Q, K, V and heads."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.core import compare, count_multiplications, run_check


def _randn_04(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def check_split_heads(split_heads: Callable) -> bool:
    """Exercise 04.1: ``split_heads(x, n_heads)`` maps ``(B, T, C)`` to ``(B, h, T, d_k)``,
    head ``i`` holding channels ``i*d_k .. (i+1)*d_k - 1`` of every position (§3.2.2).

    Tried on the running example (2, 6, 24) with h=3 and on (3, 5, 12) with h=4.
    """

    def attempt() -> str | None:
        for (batch, time, channels, heads), seed in (((2, 6, 24, 3), 40), ((3, 5, 12, 4), 41)):
            x = _randn_04(batch, time, channels, seed=seed)
            d_k = channels // heads
            expected = x.view(batch, time, heads, d_k).transpose(1, 2)
            answer = split_heads(x.clone(), heads)
            name = f"split_heads(x of shape {(batch, time, channels)}, n_heads={heads})"
            if isinstance(answer, torch.Tensor) and answer.shape == expected.shape:
                if torch.equal(answer, x.view(batch, heads, time, d_k)):
                    return (
                        f"{name} equals x.view(B, h, T, d_k): that mixes positions and "
                        "channels; view as (B, T, h, d_k) first, then swap the T and h axes"
                    )
            if isinstance(answer, torch.Tensor) and answer.shape == (batch, time, heads, d_k):
                return (
                    f"{name} has shape {tuple(answer.shape)}, (B, T, h, d_k): the heads are "
                    "split but not moved; transpose(1, 2) to get (B, h, T, d_k)"
                )
            problem = compare(answer, expected, name)
            if problem:
                return problem
        return None

    return run_check("split_heads", attempt)


def _head_queries_problem(answer, x, w_q, head: int, d_k: int, work: int) -> str | None:
    """Why ``answer`` (computed with ``work`` scalar multiplications) is not head ``head``'s
    queries, in the exercise's words, or None when it is."""
    block = slice(head * d_k, (head + 1) * d_k)
    own_work = x.shape[0] * x.shape[1] * x.shape[2] * d_k  # B * T * C * d_k
    if work >= 2 * own_work:
        return (
            f"it does {work} multiplications, {work / own_work:.0f} times the {own_work} of "
            f"x @ W_i^Q: it computes the full projection x @ W_q (all heads, on W_q or a copy, "
            "by @ or by broadcasting) and then slices it; multiply x by head i's own (C, d_k) "
            "block of columns only"
        )
    if isinstance(answer, torch.Tensor) and answer.shape == x.shape[:2] + (d_k,):
        if torch.allclose(answer.detach().double(), (x @ w_q[block].T).double(), atol=1e-4):
            return f"it uses {_ROWS}"
    return None


_ROWS = (
    "rows of W_q (W_q[a:b] is (d_k, C), a block of input channels, the nn.Linear orientation); "
    "in the paper's orientation head i's matrix W_i^Q is a block of columns: "
    "W_q[:, i*d_k:(i+1)*d_k]"
)


def check_head_queries(head_queries: Callable) -> bool:
    """Exercise 04.2: ``head_queries(x, W_q, head, n_heads)`` is head ``head``'s queries,
    ``(B, T, d_k)``, computed as ``x @ W_i^Q`` with ``W_i^Q`` the ``(C, d_k)`` block of
    columns of ``W_q`` (paper orientation, ``(C, C)``; §3.2.2).

    Every head of the running example (C=24, h=3, float32) and of C=12, h=4 (float64) is
    tried. The exercise forbids the full projection: how it is detected is by the work
    done, not by which calls were made: :func:`~course_utils.exercises.core.count_multiplications`
    counts the scalar multiplications at the ATen level, and an answer that does at least
    twice head i's own ``B*T*C*d_k`` (the full projection does h times that, on ``W_q``, a
    copy, a transposed view or by broadcasting) is rejected even though its numbers are
    right. Any route to the right block (``x @ W_q[:, a:b]``, ``F.linear(x, W_q.T[a:b])``,
    ``einsum``, broadcasting over the block) is accepted. Rows of ``W_q`` instead of columns
    are named as such.
    """

    def attempt() -> str | None:
        cases = (((2, 6, 24, 3), 42, torch.float32), ((1, 5, 12, 4), 43, torch.float64))
        for (batch, time, channels, heads), seed, dtype in cases:
            x = _randn_04(batch, time, channels, seed=seed).to(dtype)
            w_q = _randn_04(channels, channels, seed=seed + 100).to(dtype)
            d_k = channels // heads
            for head in range(heads):
                expected = x @ w_q[:, head * d_k : (head + 1) * d_k]
                name = f"head_queries(..., head={head}, n_heads={heads}) with C={channels}"
                with count_multiplications() as work:
                    try:
                        answer = head_queries(x.clone(), w_q.clone(), head, heads)
                    except RuntimeError as error:
                        if f"and {d_k}x{channels})" not in str(error):
                            raise
                        return f"{name} raised {error}: {_ROWS}"
                problem = _head_queries_problem(answer, x, w_q, head, d_k, work.total)
                if problem is None:
                    problem = compare(answer, expected, name, atol=1e-4)
                    if problem is None and answer.dtype != dtype:
                        problem = f"{name} is {answer.dtype} for {dtype} inputs; keep their dtype"
                else:
                    problem = f"{name}: {problem}"
                if problem:
                    return problem
        return None

    return run_check("head_queries", attempt)
