"""Checkers for notebook 02: embeddings."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.core import compare, run_check


def _embedding_case() -> tuple[torch.Tensor, torch.Tensor]:
    """ids (B=2, T=5) and a table W (V=10, d_model=7). The largest id is 8 < V - 1, so a
    one-hot without ``num_classes`` comes out one column short."""
    ids = torch.tensor([[1, 4, 4, 0, 7], [3, 3, 8, 2, 5]])
    weight = torch.randn(10, 7, generator=torch.Generator().manual_seed(2))
    return ids, weight


def check_one_hot_lookup(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> bool:
    """Check ``fn(ids, weight)``: the embedding lookup written as ``one_hot(ids) @ weight``.

    ``ids`` is ``(B, T)`` int64, ``weight`` is ``(V, d_model)``; the answer must be
    ``(B, T, d_model)`` and equal ``weight[ids]`` (Vaswani et al. 2017, §3.4).
    """

    def attempt() -> str | None:
        ids, weight = _embedding_case()
        return compare(fn(ids, weight), weight[ids], name="one_hot(ids) @ W")

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
