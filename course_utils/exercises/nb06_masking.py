"""Checkers for notebook 06: masking."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.difference import Tolerance
from course_utils.exercises.judge import Case, judge
from course_utils.lab.language import N_, tr


def _causal(T: int) -> torch.Tensor:
    positions = torch.arange(T)
    return (
        positions[None, :] <= positions[:, None]
    )  # (T_q, T_k): key s visible to query t iff s <= t


def _ones(T: int) -> torch.Tensor:
    return torch.ones(T, T, dtype=torch.bool)


_CAUSAL_MISTAKES = (
    (N_("a mask that is True above the diagonal (the future): True = hidden, the convention "
        "of nn.MultiheadAttention's attn_mask and key_padding_mask. The course and "
        "F.scaled_dot_product_attention use True = may attend: negate it (~mask)"),
     lambda T: _ones(T).triu(1)),
    (N_("the upper triangle: query t would see the future and not the past; the lower triangle, "
        "tril(), is what a query may see"), lambda T: _ones(T).triu()),
    (N_("a mask that hides the diagonal: a query may attend to itself (s <= t), tril(diagonal=0)"),
     lambda T: _ones(T).tril(-1)),
    (N_("a mask that lets query t see key t + 1: tril(diagonal=0), not tril(diagonal=1)"),
     lambda T: _ones(T).tril(1)),
    (N_("a mask of 0s and 1s as floats (torch.ones(T, T).tril()): a mask is torch.bool, "
        "dtype=torch.bool or a comparison of positions (<=)"),
     lambda T: torch.ones(T, T).tril()),
    (N_("a mask of 0s and 1s as integers: a mask is torch.bool (use a comparison, or .bool())"),
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
    (N_("a mask that is True at the padding: True = hidden, the convention of "
        "nn.MultiheadAttention's attn_mask and key_padding_mask. The course and "
        "F.scaled_dot_product_attention use True = may attend: negate it (~mask)"),
     lambda lengths, T: ~_padding(lengths, T)),
    (N_("a mask that is True at j <= length: the first padding key stays visible; positions count "
        "from 0, so the real tokens are j < length"),
     lambda lengths, T: _padding([n + 1 for n in lengths], T)),
    (N_("the (B, T) mask without the two singleton axes for heads and queries: add them, "
        "mask[:, None, None, :] -> (B, 1, 1, T)"),
     lambda lengths, T: _padding(lengths, T)[:, 0, 0]),
    (N_("a (B, T) mask, True at the padding: two mistakes, the convention (True = hidden, the "
        "convention of nn.MultiheadAttention's attn_mask and key_padding_mask. The course and "
        "F.scaled_dot_product_attention use True = may attend: negate it (~mask)) and the "
        "missing singleton axes for heads and queries, (B, 1, 1, T)"),
     lambda lengths, T: ~_padding(lengths, T)[:, 0, 0]),
    (N_("a (B, 1, T) mask: it needs two singleton axes, for heads and queries, (B, 1, 1, T)"),
     lambda lengths, T: _padding(lengths, T)[:, 0]),
    (N_("a (B, T, 1, 1) mask: the singleton axes go before T, (B, 1, 1, T), so that T meets the "
        "keys' axis"), lambda lengths, T: _padding(lengths, T)[:, 0, 0, :, None, None]),
    (N_("a mask of 0s and 1s as floats or integers: a mask is torch.bool (use the comparison "
        "itself, or .bool())"), lambda lengths, T: _padding(lengths, T).float()),
    (N_("a mask as wide as the longest sequence, max(lengths): the batch is padded to T "
        "positions, which may be more; build it from torch.arange(T)"),
     lambda lengths, T: _padding(lengths, max(lengths))),
)  # fmt: skip


def check_padding_mask(padding_mask: Callable) -> bool:
    """Exercise 06.2: ``padding_mask(lengths, T)`` is a ``(B, 1, 1, T)`` torch.bool key mask,
    True at the real tokens ``j < lengths[b]`` of right-padded sequences.

    Tried on six batches (B = 1 to 4; T = 1 to 7; a length 0, full lengths, and batches padded
    to a fixed T longer than every sequence, where a mask sized max(lengths) shows).
    Names the inverted convention (True at the padding, as ``nn.MultiheadAttention``'s
    ``key_padding_mask``), ``j <= length``, the missing or misplaced singleton axes, float or
    integer masks, and a mask as wide as the longest sequence.
    """
    return judge(
        "padding_mask",
        padding_mask,
        _padding,
        [([6, 4], 6), ([3, 1, 4, 0], 4), ([1], 1), ([2, 7, 5], 7), ([2, 3], 6), ([4], 5)],
        _PADDING_MISTAKES,
        axes="B h T_q T_k",
        tolerance=Tolerance(exact_dtype=True),
    )


def _masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The reference, computed in float32 (float64 kept), cast back to the scores' dtype."""
    work = scores if scores.dtype == torch.float64 else scores.float()
    weights = torch.softmax(work.masked_fill(~mask, float("-inf")), dim=-1)
    return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0).to(scores.dtype)


def _masked_softmax_cases() -> list[Case]:
    """The running example's causal & left-padding mask (two empty rows in sequence 1) in
    float32, float16 and bfloat16; a (3, 1, 4, 7) float64 case with a (B, 1, 1, T_k) padding
    mask, one sequence fully hidden (T_q != T_k); a T_q = 1 case with a 1-D mask."""
    generator = torch.Generator().manual_seed(60)
    scores = torch.randn(2, 3, 6, 6, generator=generator)
    keep = (torch.arange(6)[None, :] >= torch.tensor([0, 2])[:, None])[:, None, None, :]
    mask = torch.ones(6, 6, dtype=torch.bool).tril() & keep  # rows 0, 1 of item 1: empty
    padding = (torch.arange(7)[None, :] < torch.tensor([7, 0, 3])[:, None])[:, None, None, :]
    cases = [
        Case(
            scores.to(dtype),
            mask,
            label=tr("scores (2, 3, 6, 6) {dtype}, causal & padding").format(dtype=str(dtype)[6:]),
        )
        for dtype in (torch.float32, torch.float16, torch.bfloat16)
    ]
    cases.append(
        Case(
            torch.randn(3, 1, 4, 7, generator=generator, dtype=torch.float64),
            padding,
            label=tr("scores (3, 1, 4, 7) float64, a (3, 1, 1, 7) padding mask, sequence 1 empty"),
        )
    )
    cases.append(
        Case(
            torch.randn(1, 2, 1, 5, generator=generator),
            torch.tensor([True, False, True, True, False]),
            label=tr("scores (1, 2, 1, 5), a 1-D mask of 5 keys"),
        )
    )
    return cases


_MASKED_SOFTMAX_MISTAKES = (
    (N_("NaN in the fully masked rows (softmax of all -inf): set the rows with no visible key to 0 "
        "(mask.any(dim=-1, keepdim=True))"),
     lambda s, m: torch.softmax(s.masked_fill(~m, float("-inf")), dim=-1)),
    (N_("a fully masked row that is uniform (1/T on hidden keys), as with a large negative fill "
        "(-1e9, finfo.min): it must be all zeros; zero the rows with no visible key"),
     lambda s, m: torch.softmax(s.masked_fill(~m, torch.finfo(s.dtype).min), dim=-1)),
    (N_("an inverted mask: it hides the keys where the mask is True; True = may attend, so fill "
        "where ~mask"), lambda s, m: _masked_softmax(s, ~m.expand(s.shape))),
    (N_("the hidden scores filled with 0, not -inf: a score of 0 still gets weight exp(0)"),
     lambda s, m: torch.softmax(s.masked_fill(~m, 0.0), dim=-1) * m.any(-1, keepdim=True)),
    (N_("the weights masked after the softmax (weights * mask): the rows no longer sum to 1; mask "
        "the scores with -inf, then the softmax"), lambda s, m: torch.softmax(s, dim=-1) * m),
    (N_("a softmax over the queries (dim=-2): it runs over the keys, the last axis"),
     lambda s, m: torch.softmax(s.masked_fill(~m, float("-inf")), dim=-2)),
    (N_("weights in another dtype than the scores (float32 for float16 scores): keep the scores' "
        "dtype (mixed precision relies on it)"),
     lambda s, m: _masked_softmax(s.float(), m)),
)  # fmt: skip

_MASKED_SOFTMAX_ERRORS = (
    (RuntimeError, "overflow",
     N_("a fill like -1e9 does not fit in torch.float16 (its most negative number is -65504): fill "
        "with float('-inf') or torch.finfo(scores.dtype).min, then zero the empty rows")),
)  # fmt: skip


def check_masked_softmax(masked_softmax: Callable) -> bool:
    """Exercise 06.3: ``masked_softmax(scores, mask)`` is the softmax over the last axis (key
    positions) with hidden keys (``mask == False``) getting weight 0, and a query whose keys
    are all hidden getting an all-zero row, never NaN or a uniform row.

    Shapes: scores ``(B, h, T_q, T_k)`` float, mask bool broadcastable to it. Tried in
    float32, float16 and bfloat16 (the dtypes of mixed-precision training), and the answer
    must keep the scores' dtype: ``masked_fill(~mask, -1e9)`` fails in float16, where -1e9
    overflows, and the checker says so. Also tried in float64 with a (B, 1, 1, T_k) padding mask
    and T_q != T_k, and with T_q = 1 and a 1-D mask; seven named mistakes.
    """
    return judge(
        "masked_softmax",
        masked_softmax,
        _masked_softmax,
        _masked_softmax_cases(),
        _MASKED_SOFTMAX_MISTAKES,
        axes="B h T_q T_k",
        tolerance=Tolerance(atol=1e-2, rtol=1e-2, exact_dtype=True),
        errors=_MASKED_SOFTMAX_ERRORS,
        trains=True,
    )
