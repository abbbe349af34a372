"""Checkers for notebook 06: masking."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.core import compare, run_check
from course_utils.exercises.difference import Tolerance
from course_utils.exercises.judge import judge

_INVERTED = (
    "True = hidden, the convention of nn.MultiheadAttention's attn_mask and "
    "key_padding_mask. The course and F.scaled_dot_product_attention use True = may attend: "
    "negate it (~mask)"
)


def _causal(T: int) -> torch.Tensor:
    positions = torch.arange(T)
    return (
        positions[None, :] <= positions[:, None]
    )  # (T_q, T_k): key s visible to query t iff s <= t


def _ones(T: int) -> torch.Tensor:
    return torch.ones(T, T, dtype=torch.bool)


_CAUSAL_MISTAKES = (
    (f"a mask that is True above the diagonal (the future): {_INVERTED}",
     lambda T: _ones(T).triu(1)),
    ("the upper triangle: query t would see the future and not the past; the lower triangle, "
     "tril(), is what a query may see", lambda T: _ones(T).triu()),
    ("a mask that hides the diagonal: a query may attend to itself (s <= t), tril(diagonal=0)",
     lambda T: _ones(T).tril(-1)),
    ("a mask that lets query t see key t + 1: tril(diagonal=0), not tril(diagonal=1)",
     lambda T: _ones(T).tril(1)),
    ("a mask of 0s and 1s as floats (torch.ones(T, T).tril()): a mask is torch.bool, "
     "dtype=torch.bool or a comparison of positions (<=)",
     lambda T: torch.ones(T, T).tril()),
    ("a mask of 0s and 1s as integers: a mask is torch.bool (use a comparison, or .bool())",
     lambda T: _causal(T).long()),
)  # fmt: skip


def check_causal_mask(causal_mask: Callable) -> bool:
    """Exercise 06.1: ``causal_mask(T)`` is a ``(T, T)`` torch.bool mask, True where query t
    may attend to key s, i.e. ``s <= t`` (itself included; §3.2.3).

    Tried with T = 4, 6, 1 and 9 (a size from a notebook global fails). Names the inverted
    convention (True = hidden, as in ``nn.MultiheadAttention``), the upper triangle, the
    diagonal hidden, the next key visible, float and integer masks.
    """
    return judge(
        "causal_mask",
        causal_mask,
        _causal,
        [(4,), (6,), (1,), (9,)],
        _CAUSAL_MISTAKES,
        axes="T_q T_k",
        tolerance=Tolerance(exact_dtype=True),
    )


def _padding(lengths: list[int], T: int) -> torch.Tensor:
    real = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T_k)
    return real[:, None, None, :]  # (B, 1, 1, T_k)


_PADDING_MISTAKES = (
    (f"a mask that is True at the padding: {_INVERTED}",
     lambda lengths, T: ~_padding(lengths, T)),
    ("a mask that is True at j <= length: the first padding key stays visible; positions count "
     "from 0, so the real tokens are j < length",
     lambda lengths, T: _padding([n + 1 for n in lengths], T)),
    ("the (B, T) mask without the two singleton axes for heads and queries: add them, "
     "mask[:, None, None, :] -> (B, 1, 1, T)", lambda lengths, T: _padding(lengths, T)[:, 0, 0]),
    (f"a (B, T) mask, True at the padding: two mistakes, the convention ({_INVERTED}) and the "
     "missing singleton axes for heads and queries, (B, 1, 1, T)",
     lambda lengths, T: ~_padding(lengths, T)[:, 0, 0]),
    ("a (B, 1, T) mask: it needs two singleton axes, for heads and queries, (B, 1, 1, T)",
     lambda lengths, T: _padding(lengths, T)[:, 0]),
    ("a (B, T, 1, 1) mask: the singleton axes go before T, (B, 1, 1, T), so that T meets the "
     "keys' axis", lambda lengths, T: _padding(lengths, T)[:, 0, 0, :, None, None]),
    ("a mask of 0s and 1s as floats or integers: a mask is torch.bool (use the comparison "
     "itself, or .bool())", lambda lengths, T: _padding(lengths, T).float()),
)  # fmt: skip


def check_padding_mask(padding_mask: Callable) -> bool:
    """Exercise 06.2: ``padding_mask(lengths, T)`` is a ``(B, 1, 1, T)`` torch.bool key mask,
    True at the real tokens ``j < lengths[b]`` of right-padded sequences.

    Tried on four batches (B = 2, 4, 1, 3; T = 6, 4, 1, 7; a length 0 and full lengths).
    Names the inverted convention (True at the padding, as ``nn.MultiheadAttention``'s
    ``key_padding_mask``), ``j <= length``, the missing or misplaced singleton axes, and
    float or integer masks.
    """
    return judge(
        "padding_mask",
        padding_mask,
        _padding,
        [([6, 4], 6), ([3, 1, 4, 0], 4), ([1], 1), ([2, 7, 5], 7)],
        _PADDING_MISTAKES,
        axes="B h T_q T_k",
        tolerance=Tolerance(exact_dtype=True),
    )


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
