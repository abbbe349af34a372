"""Checkers for notebook 04: Q, K, V and heads."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.core import TorchCall, compare, record_torch_calls, run_check


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


_PRODUCTS = {"matmul", "__matmul__", "mm", "bmm", "einsum", "linear", "tensordot"}


def _head_queries_problem(calls: list[TorchCall], w_q: torch.Tensor, d_k: int) -> str | None:
    """What the recorded calls show the student did wrong, in the exercise's words, or None."""
    for call in calls:
        if call.name in _PRODUCTS and call.uses(w_q):
            return (
                "it computes the full projection x @ W_q (all h heads) and then slices it; "
                "multiply x by head i's own (C, d_k) block of columns only"
            )
    for call in calls:
        if call.name == "__getitem__" and call.uses(w_q):
            index = call.args[1]
            rows = isinstance(index, slice) or (
                isinstance(index, tuple)
                and index
                and isinstance(index[0], slice)
                and index[0] != slice(None)
                and (len(index) == 1 or index[1] == slice(None))
            )
            if rows:
                return (
                    f"it slices rows of W_q (W_q[a:b] is ({d_k}, C), a block of input channels); "
                    "head i's matrix W_i^Q is a block of columns: W_q[:, i*d_k:(i+1)*d_k]"
                )
    return None


def check_head_queries(head_queries: Callable) -> bool:
    """Exercise 04.2: ``head_queries(x, W_q, head, n_heads)`` is head ``head``'s queries,
    ``(B, T, d_k)``, computed as ``x @ W_i^Q`` with ``W_i^Q`` the ``(C, d_k)`` block of
    columns of ``W_q`` (paper orientation, ``(C, C)``; §3.2.2).

    Every head of the running example (C=24, h=3) and of C=12, h=4 is tried. The exercise
    forbids the full projection: an answer that multiplies by the whole ``W_q`` and then
    slices is rejected even though its numbers are right. Slicing rows of ``W_q`` instead of
    columns is named as such.
    """

    def attempt() -> str | None:
        for (batch, time, channels, heads), seed in (((2, 6, 24, 3), 42), ((1, 5, 12, 4), 43)):
            x = _randn_04(batch, time, channels, seed=seed)
            w_q = _randn_04(channels, channels, seed=seed + 100)
            d_k = channels // heads
            for head in range(heads):
                expected = x @ w_q[:, head * d_k : (head + 1) * d_k]
                name = f"head_queries(..., head={head}, n_heads={heads}) with C={channels}"
                given = w_q.clone()
                with record_torch_calls() as calls:
                    try:
                        answer = head_queries(x.clone(), given, head, heads)
                    except NotImplementedError:
                        raise
                    except Exception:
                        problem = _head_queries_problem(calls, given, d_k)
                        if problem is None:
                            raise
                        return f"{name}: {problem}"
                problem = _head_queries_problem(calls, given, d_k)
                if problem is None:
                    problem = compare(answer, expected, name, atol=1e-4)
                else:
                    problem = f"{name}: {problem}"
                if problem:
                    return problem
        return None

    return run_check("head_queries", attempt)
