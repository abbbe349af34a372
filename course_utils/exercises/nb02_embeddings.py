"""Checkers for notebook 02: embeddings."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.core import TorchCall, compare, record_torch_calls, run_check


def _embedding_case() -> tuple[torch.Tensor, torch.Tensor]:
    """ids (B=2, T=5) and a table W (V=10, d_model=7). The largest id is 8 < V - 1, so a
    one-hot without ``num_classes`` comes out one column short."""
    ids = torch.tensor([[1, 4, 4, 0, 7], [3, 3, 8, 2, 5]])
    weight = torch.randn(10, 7, generator=torch.Generator().manual_seed(2))
    return ids, weight


_LOOKUPS = {"__getitem__", "embedding", "index_select", "gather", "take", "take_along_dim"}


def _one_hot_problem(calls: list[TorchCall], ids: torch.Tensor, weight: torch.Tensor) -> str | None:
    """What the recorded calls did wrong, in the exercise's words, or None."""
    for call in calls:
        if call.name in _LOOKUPS and call.uses(weight):
            return (
                f"it reads rows of W directly ({call.name}), the lookup this exercise replaces; "
                "build the one-hot matrix and multiply: one_hot(ids, num_classes=V) @ W"
            )
    for call in calls:
        if call.name == "one_hot" and "num_classes" not in call.kwargs and len(call.args) < 2:
            columns = int(ids.max()) + 1
            return (
                f"one_hot(ids) without num_classes makes max(ids) + 1 = {columns} columns, not "
                f"V = {weight.shape[0]} (the largest id here is not V - 1); pass "
                "num_classes=W.shape[0]"
            )
    for call in calls:
        integer = [
            a for a in call.args if isinstance(a, torch.Tensor) and not a.is_floating_point()
        ]
        if call.name in {"matmul", "__matmul__", "mm", "bmm", "einsum"} and integer:
            return (
                f"the one-hot matrix is {integer[0].dtype} (F.one_hot returns integers) and "
                "cannot multiply the float table; convert it first: one_hot(...).to(W.dtype)"
            )
    return None


def check_one_hot_lookup(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> bool:
    """Check ``fn(ids, weight)``: the embedding lookup written as ``one_hot(ids) @ weight``.

    ``ids`` is ``(B, T)`` int64, ``weight`` is ``(V, d_model)``; the answer must be
    ``(B, T, d_model)`` and equal ``weight[ids]`` (Vaswani et al. 2017, §3.4). The largest id
    is 8 < V - 1 = 9, so ``one_hot(ids)`` without ``num_classes`` comes out one column short,
    and the checker says so. Reading the rows directly (``W[ids]``, ``F.embedding``,
    ``index_select``) gives the right numbers but is the lookup the exercise replaces: rejected.
    """

    def attempt() -> str | None:
        ids, weight = _embedding_case()
        with record_torch_calls() as calls:
            try:
                answer = fn(ids, weight)
            except NotImplementedError:
                raise
            except Exception:
                problem = _one_hot_problem(calls, ids, weight)
                if problem is None:
                    raise
                return problem
        problem = _one_hot_problem(calls, ids, weight)
        if problem is not None:
            return problem
        return compare(answer, weight[ids], name="one_hot(ids) @ W")

    return run_check("embedding lookup as one_hot @ W", attempt)


def check_scaled_embedding(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> bool:
    """Check ``fn(ids, weight)``: the paper's token embedding ``weight[ids] * sqrt(d_model)``.

    ``d_model`` is ``weight.shape[1]`` (here 7, not the notebook's 24, so a hard-coded
    constant is caught). A wrong scale gets a hint: none, ``d_model`` (scaled twice), or
    ``sqrt(vocab_size)``.
    """

    def attempt() -> str | None:
        import math

        ids, weight = _embedding_case()
        vocab_size, d_model = weight.shape
        answer = fn(ids, weight)
        problem = compare(answer, weight[ids] * math.sqrt(d_model), name="scaled embedding")
        if problem is None or not isinstance(answer, torch.Tensor):
            return problem
        hints = {
            1.0: "it looks unscaled: multiply by sqrt(d_model)",
            float(d_model): "it looks scaled by d_model: was sqrt(d_model) applied twice?",
            math.sqrt(vocab_size): "it looks scaled by sqrt(vocab_size); d_model = weight.shape[1]",
        }
        for factor, hint in hints.items():
            if answer.shape == ids.shape + (d_model,) and torch.allclose(
                answer.detach().double(), weight[ids].double() * factor, atol=1e-5
            ):
                return f"{problem}; {hint}"
        return problem

    return run_check("scaled token embedding", attempt)
