"""Checkers for notebook 15: today's decoder (RMSNorm, grouped-query attention).

Written with :func:`course_utils.exercises.judge.judge`: each checker varies every argument,
and names the mistake of its catalogue that the answer makes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from course_utils.exercises.judge import Case, judge
from course_utils.lab.language import N_, tr

# --- RMSNorm ------------------------------------------------------------------------------


def _rms_norm_cases() -> list[Case]:
    """Every argument varied: x of 2 to 4 axes (T = 1 included), C in {24, 10, 8, 6}, a
    shifted x (a subtracted mean shows), small values with eps 0.5 (eps inside or outside
    the root matters), weights far from 1."""
    generator = torch.Generator().manual_seed(15)
    cases = []
    for shape, shift, scale, eps in (
        ((2, 6, 24), 1.5, 2.0, 1e-6),
        ((3, 5, 10), 0.0, 0.3, 0.5),
        ((1, 1, 8), 0.5, 1.0, 0.1),
        ((4, 6), -1.0, 0.5, 1e-5),
        ((2, 3, 2, 6), 0.0, 0.1, 0.01),
    ):
        x = torch.randn(*shape, generator=generator) * scale + shift
        weight = torch.randn(shape[-1], generator=generator) * 0.5 + 1.0
        cases.append(Case(x, weight, eps))
    return cases


def _rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _mean_square(x, dim=-1):
    return x.pow(2).mean(dim, keepdim=True)


RMS_NORM_MISTAKES = [
    (
        N_("LayerNorm: the mean was subtracted; RMSNorm divides x itself by its root mean square"),
        lambda x, w, eps: F.layer_norm(x, x.shape[-1:], eps=eps) * w,
    ),
    (
        N_("x.var(): the variance is not the mean square, RMSNorm does not centre x"),
        lambda x, w, eps: x * torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * w,
    ),
    (
        N_("eps outside the square root; it goes inside: x / sqrt(mean(x^2) + eps)"),
        lambda x, w, eps: x / (_mean_square(x).sqrt() + eps) * w,
    ),
    (
        N_("the gain weight is missing: multiply by weight"),
        lambda x, w, eps: _rms_norm(x, 1.0, eps),
    ),
    (N_("the weight is added; it multiplies"), lambda x, w, eps: _rms_norm(x, 1.0, eps) + w),
    (
        N_("the mean square over the time axis (dim=-2); it runs over the channels, the last axis"),
        lambda x, w, eps: x * torch.rsqrt(_mean_square(x, -2) + eps) * w,
    ),
    (
        N_("one mean square over the whole tensor; take it per position, over the last axis"),
        lambda x, w, eps: x * torch.rsqrt(x.pow(2).mean() + eps) * w,
    ),
    (
        N_("a division by mean(x^2) + eps without the square root: RMS = sqrt(mean(x^2))"),
        lambda x, w, eps: x / (_mean_square(x) + eps) * w,
    ),
    (
        N_(
            "a division by the L2 norm ||x||; the RMS is ||x|| / sqrt(C): use the mean, not the sum"
        ),
        lambda x, w, eps: x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps) * w,
    ),
    (
        N_("the unbiased std (x.std()): RMSNorm neither centres x nor divides by C - 1"),
        lambda x, w, eps: x / (x.std(-1, keepdim=True) + eps) * w,
    ),
]


def check_rms_norm(rms_norm: Callable) -> bool:
    """Check ``rms_norm(x, weight, eps)`` = ``x / sqrt(mean(x^2, last axis) + eps) * weight``
    (Zhang & Sennrich 2019, Eq. 4) for ``x`` of shape ``(..., C)``, on five cases that vary x's
    shape (2 to 4 axes, T = 1), C, the weight and eps. Names each mistake of
    :data:`RMS_NORM_MISTAKES` and an eps that is ignored."""
    return judge(
        "rms_norm",
        rms_norm,
        _rms_norm,
        _rms_norm_cases(),
        RMS_NORM_MISTAKES,
        errors=[
            (RuntimeError, "size of tensor", tr("keep the reduced axis: mean(-1, keepdim=True)"))
        ],
        trains=True,
    )


# --- grouped-query attention: expanding the key and value heads ----------------------------

_NOTEBOOK_N_KV_HEADS = 2  # the notebook's global: an answer that reads it fails n_kv_heads = 1


def _expand_kv_heads(k, n_heads):
    index = torch.arange(n_heads) // (n_heads // k.shape[1])  # query head i -> key head i // g
    return k[:, index]


def _group(k, n_heads):
    return n_heads // k.shape[1]


EXPAND_KV_HEADS_MISTAKES = [
    (
        N_(
            "k.repeat, which tiles the stack (k0 k1 k0 k1); each key head serves the consecutive "
            "query heads of its group (k0 k0 k1 k1): use k.repeat_interleave(group, dim=1)"
        ),
        lambda k, h: k.repeat(1, _group(k, h), 1, 1),
    ),
    (
        N_("n_kv_heads read from the notebook's global (2); take it from the input: k.shape[1]"),
        lambda k, h: k.repeat_interleave(h // _NOTEBOOK_N_KV_HEADS, dim=1),
    ),
    (
        N_("a fixed group of 2; the group is n_heads // n_kv_heads, from the arguments"),
        lambda k, h: k.repeat_interleave(2, dim=1),
    ),
    (
        N_("each key head repeated n_heads times; repeat it by the group n_heads // n_kv_heads"),
        lambda k, h: k.repeat_interleave(h, dim=1),
    ),
    (
        N_("the time axis (dim=2) repeated; the head axis is dim 1 of (B, n_kv_heads, T, d_k)"),
        lambda k, h: k.repeat_interleave(_group(k, h), dim=2),
    ),
    (
        N_(
            "the expanded (B, n_kv_heads, group, T, d_k) view was not reshaped to (B, n_heads, T, "
            "d_k)"
        ),
        lambda k, h: k[:, :, None].expand(-1, -1, _group(k, h), -1, -1),
    ),
    (N_("k returned unchanged: the head axis must grow to n_heads"), lambda k, h: k),
]


def _expand_cases() -> list[Case]:
    """(B, n_kv_heads, T, d_k) and n_heads all varied: groups 2, 3, 4 and 1, n_kv_heads = 1,
    T = 1."""
    generator = torch.Generator().manual_seed(16)
    shapes = [((3, 2, 7, 6), 4), ((2, 2, 5, 4), 6), ((2, 1, 3, 4), 4), ((1, 3, 1, 2), 3)]
    shapes.append(((2, 4, 3, 5), 8))
    return [Case(torch.randn(*s, generator=generator), h) for s, h in shapes]


def check_expand_kv_heads(expand_kv_heads: Callable) -> bool:
    """Check ``expand_kv_heads(k, n_heads)``: ``(B, n_kv_heads, T, d_k)`` ->
    ``(B, n_heads, T, d_k)``, query head ``i`` getting key head ``i // (n_heads / n_kv_heads)``
    (Ainslie et al. 2023, §2.2), as ``transformers``' ``repeat_kv``. Five cases vary the
    shape, n_kv_heads (1 to 4) and n_heads (3 to 8). Names each mistake of
    :data:`EXPAND_KV_HEADS_MISTAKES` (``repeat``, a global n_kv_heads, ...)."""
    return judge(
        "expand_kv_heads",
        expand_kv_heads,
        _expand_kv_heads,
        _expand_cases(),
        EXPAND_KV_HEADS_MISTAKES,
        axes="B n_heads T d_k",
        trains=True,
    )
