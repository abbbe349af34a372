"""Checkers for notebook 08: concat and W_o."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.core import compare, run_check


def check_merge_heads(merge_heads: Callable) -> bool:
    """Check ``merge_heads(x)``: ``(B, h, T, d_k)`` -> ``(B, T, h * d_k)``, where row t holds
    head 0's vector of token t, then head 1's, ... (the Concat of §3.2.2).

    Uses x ``(2, 3, 5, 4)`` (B, h, T, d_k all different), so a ``view`` without the transpose
    (right shape, scrambled values) is caught and named, as is a ``view`` of the transposed,
    non-contiguous tensor.
    """

    def attempt() -> str | None:
        x = torch.randn(2, 3, 5, 4, generator=torch.Generator().manual_seed(9))
        expected = torch.cat(x.unbind(dim=1), dim=-1)  # Concat(head_1, ..., head_h): (B, T, C)
        try:
            answer = merge_heads(x.clone())
        except RuntimeError as error:
            if "view size is not compatible" not in str(error):
                raise
            return (
                f"raised RuntimeError: {error}. After transpose(1, 2) the tensor is not "
                "contiguous: call .contiguous() before .view(), or use .reshape()"
            )
        problem = compare(answer, expected, "merge_heads(x)")
        if problem and compare(answer, x.reshape(expected.shape)) is None:
            return (
                f"{problem}; it views (B, h, T, d_k) as (B, T, C) without moving the heads: "
                "row t then mixes several tokens of one head; transpose(1, 2) first"
            )
        return problem

    return run_check("merge heads", attempt)


def check_multi_head_attention(multi_head_attention: Callable) -> bool:
    """Check ``multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, causal=False)``, the
    whole of §3.2.2: ``(B, T, C)`` -> ``(B, T, C)``.

    The four weights are ``(C, C)`` in ``nn.Linear`` layout (``y = x @ w.T``) without biases.
    Uses B=2, T=5, C=12, h=3 (d_k=4), with and without the causal mask, against a reference
    built on ``F.scaled_dot_product_attention``. Names the paper's ``x @ w`` layout used for
    ``nn.Linear`` weights, a missing W_o, heads merged without the transpose, and the causal
    flag ignored.
    """

    def attempt() -> str | None:
        generator = torch.Generator().manual_seed(10)
        batch, time, channels, heads = 2, 5, 12, 3
        x = torch.randn(batch, time, channels, generator=generator)
        w_q, w_k, w_v, w_o = (
            torch.randn(channels, channels, generator=generator) / channels**0.5 for _ in range(4)
        )

        def split(t: torch.Tensor) -> torch.Tensor:  # (B, T, C) -> (B, h, T, d_k)
            return t.view(batch, time, heads, channels // heads).transpose(1, 2)

        def reference(w_q, w_k, w_v, w_o, causal, plain_view=False):
            out = torch.nn.functional.scaled_dot_product_attention(
                split(x @ w_q.T), split(x @ w_k.T), split(x @ w_v.T), is_causal=causal
            )  # (B, h, T, d_k)
            merged = out.reshape(x.shape) if plain_view else out.transpose(1, 2).reshape(x.shape)
            return merged @ w_o.T  # (B, T, C)

        eye = torch.eye(channels)
        for causal in (False, True):
            expected = reference(w_q, w_k, w_v, w_o, causal)
            answer = multi_head_attention(x.clone(), w_q, w_k, w_v, w_o, heads, causal=causal)
            problem = compare(answer, expected, f"output with causal={causal}")
            if not problem:
                continue
            mistakes = {
                "the weights are used as x @ w, the paper's layout; here they are nn.Linear "
                "(out, in) matrices: y = x @ w.T": reference(w_q.T, w_k.T, w_v.T, w_o.T, causal),
                "W_o is missing: project the merged heads with x @ w_o.T": (
                    reference(w_q, w_k, w_v, eye, causal)
                ),
                "the heads are merged by a view without the transpose (B, h, T, d_k) -> "
                "(B, T, C); transpose(1, 2) first": reference(w_q, w_k, w_v, w_o, causal, True),
                "the causal mask is ignored: with causal=True hide the keys after each query": (
                    reference(w_q, w_k, w_v, w_o, False)
                ),
            }
            for reason, wrong in mistakes.items():
                if compare(answer, wrong) is None:
                    return f"{problem}; {reason}"
            return problem
        return None

    return run_check("multi-head attention", attempt)
