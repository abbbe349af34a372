"""Checkers for notebook 08: concat and W_o."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.core import compare, run_check


def check_merge_heads(merge_heads: Callable) -> bool:
    """Check ``merge_heads(x)``: ``(B, h, T, d_k)`` -> ``(B, T, h * d_k)``, where row t holds
    head 0's vector of token t, then head 1's, ... (the Concat of §3.2.2).

    Uses x ``(2, 3, 5, 4)`` (B, h, T, d_k all different), so a ``view`` without the transpose
    (right shape, scrambled values) is caught.
    """

    def attempt() -> str | None:
        x = torch.randn(2, 3, 5, 4, generator=torch.Generator().manual_seed(9))
        expected = torch.cat(x.unbind(dim=1), dim=-1)  # Concat(head_1, ..., head_h): (B, T, C)
        return compare(merge_heads(x.clone()), expected, "merge_heads(x)")

    return run_check("merge heads", attempt)


def check_multi_head_attention(multi_head_attention: Callable) -> bool:
    """Check ``multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, causal=False)``, the
    whole of §3.2.2: ``(B, T, C)`` -> ``(B, T, C)``.

    The four weights are ``(C, C)`` in ``nn.Linear`` layout (``y = x @ w.T``) without biases.
    Uses B=2, T=5, C=12, h=3 (d_k=4), with and without the causal mask, against a reference
    built on ``F.scaled_dot_product_attention``.
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

        for causal in (False, True):
            out = torch.nn.functional.scaled_dot_product_attention(
                split(x @ w_q.T), split(x @ w_k.T), split(x @ w_v.T), is_causal=causal
            )  # (B, h, T, d_k)
            expected = out.transpose(1, 2).reshape(batch, time, channels) @ w_o.T  # (B, T, C)
            answer = multi_head_attention(x.clone(), w_q, w_k, w_v, w_o, heads, causal=causal)
            problem = compare(answer, expected, f"output with causal={causal}")
            if problem:
                return problem
        return None

    return run_check("multi-head attention", attempt)
