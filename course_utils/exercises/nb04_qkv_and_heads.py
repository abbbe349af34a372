"""Checkers for notebook 04: Q, K, V and heads."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.core import compare, run_check


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
            problem = compare(answer, expected, name)
            if problem:
                return problem
        return None

    return run_check("split_heads", attempt)


def check_head_queries(head_queries: Callable) -> bool:
    """Exercise 04.2: ``head_queries(x, W_q, head, n_heads)`` is head ``head``'s queries,
    ``(B, T, d_k)``, computed as ``x @ W_i^Q`` with ``W_i^Q`` the ``(C, d_k)`` block of
    columns of ``W_q`` (paper orientation, ``(C, C)``; §3.2.2).

    Every head of the running example (C=24, h=3) and of C=12, h=4 is tried.
    """

    def attempt() -> str | None:
        for (batch, time, channels, heads), seed in (((2, 6, 24, 3), 42), ((1, 5, 12, 4), 43)):
            x = _randn_04(batch, time, channels, seed=seed)
            w_q = _randn_04(channels, channels, seed=seed + 100)
            d_k = channels // heads
            for head in range(heads):
                expected = x @ w_q[:, head * d_k : (head + 1) * d_k]
                answer = head_queries(x.clone(), w_q.clone(), head, heads)
                name = f"head_queries(..., head={head}, n_heads={heads}) with C={channels}"
                problem = compare(answer, expected, name, atol=1e-4)
                if problem:
                    return problem
        return None

    return run_check("head_queries", attempt)
