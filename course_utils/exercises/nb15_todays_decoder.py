"""Checkers for notebook 15: today's decoder (RMSNorm, grouped-query attention)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from course_utils.exercises.core import compare, run_check


def _rms_norm_cases() -> list[tuple[torch.Tensor, torch.Tensor, float]]:
    """``(x, weight, eps)``: a shifted (B, T, C) = (2, 6, 24) batch with eps 1e-6 (a mean far
    from 0 exposes a subtracted mean), and a small-valued (3, 5, 10) batch with eps 0.5 (where
    eps inside or outside the square root matters)."""
    generator = torch.Generator().manual_seed(15)
    cases = []
    for shape, shift, scale, eps in (((2, 6, 24), 1.5, 2.0, 1e-6), ((3, 5, 10), 0.0, 0.3, 0.5)):
        x = torch.randn(*shape, generator=generator) * scale + shift
        weight = torch.randn(shape[-1], generator=generator) * 0.5 + 1.0
        cases.append((x, weight, eps))
    return cases


def _rms_norm_mistakes(x: torch.Tensor, weight: torch.Tensor, eps: float) -> dict:
    """Hint -> what that mistake computes."""
    mean_square = x.pow(2).mean(-1, keepdim=True)
    return {
        "the mean was subtracted (that is LayerNorm; RMSNorm divides x itself by its RMS)": (
            F.layer_norm(x, x.shape[-1:], eps=eps) * weight
        ),
        "eps belongs inside the square root: x / sqrt(mean(x^2) + eps)": (
            x / (mean_square.sqrt() + eps) * weight
        ),
        "the weight (gain g) is missing": x * torch.rsqrt(mean_square + eps),
        "the mean of squares must run over the last axis (channels), keepdim=True": (
            x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + eps) * weight
        ),
        "the variance (x.var) is not the mean square: RMSNorm does not centre x": (
            x * torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * weight
        ),
        "RMS is the square root of the mean square: divide by sqrt(mean(x^2) + eps)": (
            x / (mean_square + eps) * weight
        ),
    }


def check_rms_norm(rms_norm: Callable) -> bool:
    """Check ``rms_norm(x, weight, eps)`` = ``x / sqrt(mean(x^2, last axis) + eps) * weight``
    (Zhang & Sennrich 2019, Eq. 4), on two cases of different shapes and eps. Names the
    mean subtracted, eps outside the root, a missing weight, the wrong axis, the variance for
    the mean square, and a missing square root."""
    cases = _rms_norm_cases()

    def attempt() -> str | None:
        for x, weight, eps in cases:
            answer = rms_norm(x.clone(), weight.clone(), eps)
            expected = F.rms_norm(x, x.shape[-1:], weight, eps)
            problem = compare(answer, expected, name=f"rms_norm(x of shape {tuple(x.shape)})")
            if problem is None:
                continue
            if isinstance(answer, torch.Tensor) and answer.shape == expected.shape:
                for hint, wrong in _rms_norm_mistakes(x, weight, eps).items():
                    if torch.allclose(answer.detach().float(), wrong, atol=1e-5, rtol=1e-5):
                        return f"{problem}: {hint}"
            return problem
        return None

    return run_check("rms_norm", attempt)


def _expand_mistakes(k: torch.Tensor, n_heads: int) -> dict:
    """Hint -> what that mistake computes (same shape as the right answer)."""
    group = n_heads // k.shape[1]
    return {
        "k.repeat tiles the whole stack (k0 k1 k0 k1): query head 1 would read key head 1 "
        "instead of key head 0; each key head must serve the consecutive query heads of its "
        "group (k0 k0 k1 k1): repeat_interleave": k.repeat(1, group, 1, 1),
    }


def check_expand_kv_heads(expand_kv_heads: Callable) -> bool:
    """Check ``expand_kv_heads(k, n_heads)``: ``(B, n_kv_heads, T, d_k)`` ->
    ``(B, n_heads, T, d_k)``, query head ``i`` getting key head ``i // (n_heads / n_kv_heads)``
    (Ainslie et al. 2023, §2.2), as ``transformers``' ``repeat_kv``. Two cases: (3, 2, 7, 6)
    to 4 heads and (2, 2, 5, 4) to 6 heads (catches a hard-coded group). Names ``repeat``
    (tiled order) and answers with the wrong shape."""
    generator = torch.Generator().manual_seed(16)
    cases = [
        (torch.randn(3, 2, 7, 6, generator=generator), 4),
        (torch.randn(2, 2, 5, 4, generator=generator), 6),
    ]

    def attempt() -> str | None:
        for k, n_heads in cases:
            answer = expand_kv_heads(k.clone(), n_heads)
            index = torch.arange(n_heads) // (n_heads // k.shape[1])  # head i -> i // group
            expected = k[:, index]
            name = f"expand_kv_heads(k of shape {tuple(k.shape)}, n_heads={n_heads})"
            problem = compare(answer, expected, name=name)
            if problem is None:
                continue
            if isinstance(answer, torch.Tensor) and answer.shape == expected.shape:
                for hint, wrong in _expand_mistakes(k, n_heads).items():
                    if torch.equal(answer, wrong):
                        return f"{problem}: {hint}"
            elif isinstance(answer, torch.Tensor) and answer.shape[1] == k.shape[1]:
                return f"{problem}: the head axis (dim 1) must grow to n_heads={n_heads}"
            return problem
        return None

    return run_check("expand_kv_heads", attempt)
