"""Checkers for notebook 06: masking."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.core import compare, run_check

_INVERTED = (
    "True = hidden, the convention of nn.MultiheadAttention's attn_mask and "
    "key_padding_mask. The course and F.scaled_dot_product_attention use True = may attend: "
    "negate it (~mask)"
)


def check_causal_mask(causal_mask: Callable) -> bool:
    """Exercise 06.1: ``causal_mask(T)`` is a ``(T, T)`` torch.bool mask, True where query t
    may attend to key s, i.e. ``s <= t`` (itself included; §3.2.3).

    Names the usual mistakes: the inverted convention (True = hidden, as in
    ``nn.MultiheadAttention``), the upper triangle (the future visible), the diagonal left out.
    """

    def attempt() -> str | None:
        for size in (4, 6, 1):
            positions = torch.arange(size)
            expected = positions[None, :] <= positions[:, None]
            answer = causal_mask(size)
            name = f"causal_mask({size})"
            if isinstance(answer, torch.Tensor) and answer.shape == expected.shape:
                as_bool = answer.bool() if answer.dtype != torch.bool else answer
                if torch.equal(as_bool, ~expected):
                    return f"{name} is True above the diagonal (the future): {_INVERTED}"
                if torch.equal(as_bool, expected.T) and size > 1:
                    return f"{name} is the upper triangle: query t would see the future"
                if torch.equal(as_bool, expected & ~torch.eye(size, dtype=torch.bool)):
                    return f"{name} hides the diagonal: a query may attend to itself (s <= t)"
            problem = compare(answer, expected, name)
            if problem:
                return problem
        return None

    return run_check("causal_mask", attempt)


def check_padding_mask(padding_mask: Callable) -> bool:
    """Exercise 06.2: ``padding_mask(lengths, T)`` is a ``(B, 1, 1, T)`` torch.bool key mask,
    True at the real tokens ``j < lengths[b]`` of right-padded sequences.

    Names the usual mistakes: the inverted convention (True at the padding, as
    ``nn.MultiheadAttention``'s ``key_padding_mask``), the missing singleton axes ``(B, T)``.
    """

    def attempt() -> str | None:
        for lengths, size in (([6, 4], 6), ([3, 1, 4, 0], 4)):
            expected = (torch.arange(size)[None, :] < torch.tensor(lengths)[:, None])[
                :, None, None, :
            ]
            answer = padding_mask(list(lengths), size)
            name = f"padding_mask({lengths}, {size})"
            if isinstance(answer, torch.Tensor) and answer.numel() == expected.numel():
                flat = answer.reshape(expected.shape)
                flat = flat.bool() if flat.dtype != torch.bool else flat
                if torch.equal(flat, ~expected):
                    return f"{name} is True at the padding: {_INVERTED}"
            shifted = (torch.arange(size)[None, :] <= torch.tensor(lengths)[:, None])[
                :, None, None, :
            ]
            if isinstance(answer, torch.Tensor) and torch.equal(answer, shifted):
                return (
                    f"{name} is True at j <= length: the first padding key stays visible; "
                    "positions count from 0, so the real tokens are j < length"
                )
            if isinstance(answer, torch.Tensor) and answer.shape == expected.shape[::3]:
                return (
                    f"{name} has shape {tuple(answer.shape)} (B, T); add two singleton axes "
                    "for heads and queries: (B, 1, 1, T)"
                )
            problem = compare(answer, expected, name)
            if problem:
                return problem
        return None

    return run_check("padding_mask", attempt)


def _masked_softmax_case(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """scores (2, 3, 6, 6) in ``dtype``, a causal & left-padding mask with two empty rows in
    sequence 1, and the reference weights (computed in float32, then cast to ``dtype``)."""
    scores = torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(60))
    keep = (torch.arange(6)[None, :] >= torch.tensor([0, 2])[:, None])[:, None, None, :]
    mask = torch.ones(6, 6, dtype=torch.bool).tril() & keep  # rows 0, 1 of item 1: empty
    scores = scores.to(dtype)
    expected = torch.softmax(scores.float().masked_fill(~mask, float("-inf")), dim=-1)
    expected = expected.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return scores, mask, expected.to(dtype)


def _masked_softmax_problem(masked_softmax: Callable, dtype: torch.dtype) -> str | None:
    scores, mask, expected = _masked_softmax_case(dtype)
    name = f"masked_softmax(scores (2, 3, 6, 6) {str(dtype).replace('torch.', '')}, mask)"
    try:
        answer = masked_softmax(scores.clone(), mask.clone())
    except RuntimeError as error:
        if "overflow" in str(error):
            return (
                f"{name} raised RuntimeError: {error}. A fill like -1e9 does not fit in "
                f"{dtype} (its most negative number is {torch.finfo(dtype).min:g}); fill with "
                "float('-inf') or torch.finfo(scores.dtype).min, then zero the empty rows"
            )
        raise
    if isinstance(answer, torch.Tensor) and answer.shape == expected.shape:
        if torch.isnan(answer).any():
            return (
                f"{name} has NaN in the fully masked rows (softmax of all -inf); "
                "set the rows with no visible key to 0"
            )
        if torch.allclose(answer[1, :, 0].float(), torch.full((3, 6), 1 / 6), atol=1e-2):
            return (
                f"{name}: a fully masked row is uniform (1/T on hidden keys), as with a "
                "large negative fill; it must be all zeros"
            )
        if answer.dtype != dtype:
            return (
                f"{name} returned {answer.dtype}; keep the scores' dtype {dtype} (mixed "
                "precision relies on it)"
            )
    tolerance = 1e-5 if dtype == torch.float32 else 1e-2
    return compare(answer, expected, name, atol=tolerance)


def check_masked_softmax(masked_softmax: Callable) -> bool:
    """Exercise 06.3: ``masked_softmax(scores, mask)`` is the softmax over the last axis (key
    positions) with hidden keys (``mask == False``) getting weight 0, and a query whose keys
    are all hidden getting an all-zero row, never NaN or a uniform row.

    Shapes: scores ``(B, h, T_q, T_k)`` float, mask bool broadcastable to it. Tried in
    float32, float16 and bfloat16 (the dtypes of mixed-precision training), and the answer
    must keep the scores' dtype: ``masked_fill(~mask, -1e9)`` fails in float16, where -1e9
    overflows, and the checker says so.
    """

    def attempt() -> str | None:
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            problem = _masked_softmax_problem(masked_softmax, dtype)
            if problem:
                return problem
        return None

    return run_check("masked_softmax", attempt)
