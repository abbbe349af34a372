"""Checkers for notebook 02: embeddings."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from course_utils.exercises.core import (
    TorchCall,
    compare,
    count_multiplications,
    record_torch_calls,
    run_check,
)


def _embedding_cases() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(ids, W) pairs: ids (2, 5) into a float32 table (V=10, d_model=7), and ids (3, 4) into a
    float64 table (V=13, d_model=12). The largest id is V - 2 in both, so a one-hot without
    ``num_classes`` comes out one column short."""
    generator = torch.Generator().manual_seed(2)
    return [
        (
            torch.tensor([[1, 4, 4, 0, 7], [3, 3, 8, 2, 5]]),
            torch.randn(10, 7, generator=generator),
        ),
        (
            torch.tensor([[11, 0, 5, 5], [2, 9, 1, 6], [10, 3, 3, 7]]),
            torch.randn(13, 12, generator=generator, dtype=torch.float64),
        ),
    ]


_PRODUCTS = {"matmul", "__matmul__", "mm", "bmm", "einsum", "linear", "tensordot"}


def _one_hot_error(calls: list[TorchCall], ids: torch.Tensor, weight: torch.Tensor) -> str | None:
    """Why the student's code raised, from the calls it made, in the exercise's words, or None."""
    for call in calls:
        if call.name == "one_hot" and "num_classes" not in call.kwargs and len(call.args) < 2:
            columns = int(ids.max()) + 1
            return (
                f"one_hot(ids) without num_classes makes max(ids) + 1 = {columns} columns, not "
                f"V = {weight.shape[0]} (the largest id here is not V - 1); pass "
                "num_classes=W.shape[0]"
            )
    for call in calls:
        tensors = [a for a in call.args if isinstance(a, torch.Tensor)]
        if call.name not in _PRODUCTS or not tensors:
            continue
        integer = [a for a in tensors if not a.is_floating_point()]
        if integer:
            return (
                f"the one-hot matrix is {integer[0].dtype} (F.one_hot returns integers) and "
                "cannot multiply the float table; convert it first: one_hot(...).to(W.dtype)"
            )
        if len({a.dtype for a in tensors}) > 1:
            return (
                f"the one-hot matrix and W have different dtypes ({tensors[0].dtype} and "
                f"{tensors[1].dtype}; this W is {weight.dtype}): convert the one-hot to W's "
                "dtype, one_hot(...).to(W.dtype), not to a fixed one such as .float()"
            )
    return None


def check_one_hot_lookup(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> bool:
    """Check ``fn(ids, weight)``: the embedding lookup written as ``one_hot(ids) @ weight``.

    ``ids`` is ``(B, T)`` int64, ``weight`` is ``(V, d_model)``; the answer must be
    ``(B, T, d_model)`` of ``weight``'s dtype and equal ``weight[ids]`` (Vaswani et al. 2017,
    §3.4). Tried on a float32 and a float64 table of different sizes; the largest id is
    V - 2, so ``one_hot(ids)`` without ``num_classes`` comes out one column short, and the
    checker says so. Reading the rows directly (``W[ids]``, ``F.embedding``, a list of rows,
    ``W.T[:, ids]``) gives the right numbers but is the lookup the exercise replaces. How that
    is detected: by the work done, not by the calls made.
    :func:`~course_utils.exercises.core.count_multiplications` counts the scalar
    multiplications, and the product of a ``(B, T, V)`` one-hot with ``W`` needs
    ``B*T*V*d_model`` of them, whatever route (``@``, ``einsum``, broadcasting); a lookup needs
    none.
    """

    def attempt() -> str | None:
        for ids, weight in _embedding_cases():
            batch, time = ids.shape
            vocab_size, d_model = weight.shape
            name = f"one_hot(ids) @ W for a {weight.dtype} W of shape {(vocab_size, d_model)}"
            with record_torch_calls() as calls, count_multiplications() as work:
                try:
                    answer = fn(ids.clone(), weight.clone())
                except NotImplementedError:
                    raise
                except Exception:
                    problem = _one_hot_error(calls, ids, weight)
                    if problem is None:
                        raise
                    return problem
            needed = batch * time * vocab_size * d_model
            if work.total < needed:
                return (
                    f"{name}: it did {work.total} multiplications, the product needs {needed} "
                    "(B*T*V*d_model): it reads rows of W directly, the lookup this exercise "
                    "replaces; build the one-hot matrix and multiply: "
                    "one_hot(ids, num_classes=V).to(W.dtype) @ W"
                )
            problem = compare(answer, weight[ids], name=name)
            if problem is None and answer.dtype != weight.dtype:
                problem = (
                    f"{name} is {answer.dtype}; keep W's dtype: one_hot(...).to(W.dtype), "
                    "not .float()"
                )
            if problem is not None:
                return problem
        return None

    return run_check("embedding lookup as one_hot @ W", attempt)


def check_scaled_embedding(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> bool:
    """Check ``fn(ids, weight)``: the paper's token embedding ``weight[ids] * sqrt(d_model)``
    (Vaswani et al. 2017, §3.4).

    ``d_model`` is ``weight.shape[1]``; two tables of different widths (7 and 12, float32 and
    float64) are tried, so a constant written for one width (``math.sqrt(7)``, or the
    notebook's 24) is caught and named. A wrong scale gets a hint: none, ``d_model`` (scaled
    twice), or ``sqrt(vocab_size)``.
    """

    def attempt() -> str | None:
        cases = _embedding_cases()
        widths = sorted({weight.shape[1] for _, weight in cases} | {24})
        for ids, weight in cases:
            vocab_size, d_model = weight.shape
            answer = fn(ids.clone(), weight.clone())
            name = f"scaled embedding of a W of shape {(vocab_size, d_model)}"
            problem = compare(answer, weight[ids] * math.sqrt(d_model), name=name)
            if problem is None or not isinstance(answer, torch.Tensor):
                if problem is None and answer.dtype != weight.dtype:
                    return f"{name} is {answer.dtype}; keep W's dtype {weight.dtype}"
                if problem is not None:
                    return problem
                continue
            hints = {
                1.0: "it looks unscaled: multiply by sqrt(d_model)",
                float(d_model): "it looks scaled by d_model: was sqrt(d_model) applied twice?",
                math.sqrt(
                    vocab_size
                ): "it looks scaled by sqrt(vocab_size); d_model = weight.shape[1]",
            }
            for width in widths:
                if width != d_model:
                    hints[math.sqrt(width)] = (
                        f"it looks scaled by sqrt({width}), a constant: this W is {d_model} wide; "
                        "take d_model from the table, weight.shape[1]"
                    )
            for factor, hint in hints.items():
                if answer.shape == ids.shape + (d_model,) and torch.allclose(
                    answer.detach().double(), weight[ids].double() * factor, atol=1e-5
                ):
                    return f"{problem}; {hint}"
            return problem
        return None

    return run_check("scaled token embedding", attempt)
