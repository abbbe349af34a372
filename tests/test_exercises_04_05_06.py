"""The checkers of notebooks 04 (Q, K, V and heads), 05 (scores and scaling) and 06 (masking):
each accepts the right answer and rejects typical wrong ones with a message that says why."""

from __future__ import annotations

import math

import pytest
import torch
from checker_verdict import unfinished, verdict

from course_utils.exercises import (
    check_causal_mask,
    check_head_queries,
    check_masked_softmax,
    check_padding_mask,
    check_scaled_scores,
    check_softmax_jacobian,
    check_split_heads,
)

# --- notebook 04 ------------------------------------------------------------------------------


def split_heads_right(x, n_heads):
    batch, time, channels = x.shape
    return x.view(batch, time, n_heads, channels // n_heads).transpose(1, 2)


@pytest.mark.parametrize(
    "right",
    [
        split_heads_right,
        lambda x, h: x.unflatten(-1, (h, -1)).transpose(1, 2),  # a non-contiguous view
        lambda x, h: x.reshape(*x.shape[:2], h, -1).permute(0, 2, 1, 3).contiguous(),
        lambda x, h: torch.stack(x.chunk(h, dim=-1), dim=1),  # heads by chunks
        lambda x, h: torch.einsum("bthd->bhtd", x.reshape(*x.shape[:2], h, -1)),
    ],
)
def test_split_heads_accepts_right_variants(right, capsys):
    assert verdict(check_split_heads, right, capsys) == (True, "✅ split_heads: correct\n")


B_, T_, H_ = 2, 6, 3  # the running example's globals, read by some wrong answers


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda x, h: x.view(x.shape[0], h, x.shape[1], -1), "looks like x.view(B, h, T, d_k)"),
        (lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1), "in one step"),
        (lambda x, h: x.view(x.shape[0], x.shape[1], h, -1), "the heads cut but not moved"),
        (
            lambda x, h: x.view(x.shape[0], x.shape[1], -1, h).permute(0, 3, 1, 2),
            "deals the channels out in turn",
        ),
        (lambda x, h: x.view(*x.shape[:2], h, -1).transpose(2, 3), "transpose(2, 3)"),
        (lambda x, h: x.view(*x.shape[:2], h, -1).permute(2, 0, 1, 3), "moved to the front"),
        (lambda x, h: split_heads_right(x.float(), h), "a conversion to float32"),
        (lambda x, h: split_heads_right(x, H_), "what n_heads=3 gives, not n_heads=4"),
        (lambda x, h: x.view(B_, T_, h, -1).transpose(1, 2), "not notebook globals"),
        (lambda x, h: x.view(*x.shape[:2], h, x.shape[2] / h).transpose(1, 2), "not C / n_heads"),
        (lambda x, h: split_heads_right(x, h).numpy(), "got a numpy.ndarray"),
        (lambda x, h: [split_heads_right(x, h)], "should be a torch.Tensor, got a list"),
        (lambda x, h: None, "the function returns nothing"),
        (lambda x: x, "give it exactly these parameters"),
        (unfinished, "not implemented yet"),
    ],
)
def test_split_heads_rejects_and_names(wrong, message, capsys):
    result, out = verdict(check_split_heads, wrong, capsys)
    assert result is False and out.startswith("❌ split_heads") and message in out, out


def test_split_heads_saves_the_learner_s_source_after_a_pass(tmp_path, monkeypatch, capsys):
    import linecache

    monkeypatch.setenv("COURSE_MY_MODEL", str(tmp_path))
    source = (
        "def split_heads(x, n_heads):\n"
        "    B, T, C = x.shape\n"
        "    return x.reshape(B, T, n_heads, C // n_heads).permute(0, 2, 1, 3)\n"
    )
    linecache.cache["<cell-04>"] = (len(source), None, source.splitlines(True), "<cell-04>")
    namespace: dict = {}
    exec(compile(source, "<cell-04>", "exec"), namespace)
    assert verdict(check_split_heads, namespace["split_heads"], capsys)[0] is True
    assert (tmp_path / "split_heads.py").read_text() == source
    assert verdict(check_split_heads, lambda x, h: x, capsys)[0] is False  # a failure: not saved
    assert (tmp_path / "split_heads.py").read_text() == source


def head_queries_right(x, w_q, head, n_heads):
    d_k = w_q.shape[1] // n_heads
    return x @ w_q[:, head * d_k : (head + 1) * d_k]


def test_head_queries_accepts_the_column_block(capsys):
    assert verdict(check_head_queries, head_queries_right, capsys)[0] is True


_A_B = "i * (w.shape[1] // h) : (i + 1) * (w.shape[1] // h)"  # head i's columns a:b


def _block(w, i, h):
    d_k = w.shape[1] // h
    return slice(i * d_k, (i + 1) * d_k)


@pytest.mark.parametrize(
    "answer",
    [
        lambda x, w, i, h: x @ w.split(w.shape[1] // h, dim=1)[i],
        lambda x, w, i, h: x @ w.chunk(h, dim=-1)[i],
        lambda x, w, i, h: x @ w.view(w.shape[0], h, -1)[:, i],
        # W_q.T routes: the same block of columns, reached through the transpose (issue 22)
        lambda x, w, i, h: torch.nn.functional.linear(x, w.T[_block(w, i, h)]),
        lambda x, w, i, h: x @ w.T[_block(w, i, h)].T,
        # a copy of the block, einsum, and broadcasting over the block only
        lambda x, w, i, h: x @ w[:, _block(w, i, h)].clone(),
        lambda x, w, i, h: torch.einsum("btc,cd->btd", x, w[:, _block(w, i, h)]),
        lambda x, w, i, h: (x[..., None] * w[:, _block(w, i, h)]).sum(dim=-2),
    ],
)
def test_head_queries_accepts_other_ways_to_take_the_columns(answer, capsys):
    result, out = verdict(check_head_queries, answer, capsys)
    assert result is True, out


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        # rows instead of columns: (d_k, C) cannot multiply (B, T, C); named, not a raw error
        (lambda x, w, i, h: x @ w[_block(w, i, h)], "rows of W_q"),
        (lambda x, w, i, h: x @ w[_block(w, i, h), :], "rows of W_q"),
        # rows through the transpose: the nn.Linear orientation, right shape, wrong numbers
        (lambda x, w, i, h: x @ w.T[:, _block(w, i, h)], "it uses rows of W_q"),
        (lambda x, w, i, h: torch.nn.functional.linear(x, w[_block(w, i, h)]), "uses rows of W_q"),
        # the forbidden "project everything, then slice": right numbers, wrong method. The work
        # done gives it away, whichever route: on W_q, on a copy, by broadcasting, by einsum.
        (lambda x, w, i, h: (x @ w)[..., _block(w, i, h)], "computes the full projection"),
        (lambda x, w, i, h: (x @ w.clone())[..., _block(w, i, h)], "computes the full projection"),
        (
            lambda x, w, i, h: (x[..., None] * w).sum(dim=-2)[..., _block(w, i, h)],
            "computes the full projection",
        ),
        (
            lambda x, w, i, h: torch.einsum("btc,cd->btd", x, w.T.T)[..., _block(w, i, h)],
            "computes the full projection",
        ),
        (
            lambda x, w, i, h: split_heads_right(torch.matmul(x, w), h)[:, i],
            "computes the full projection x @ W_q",
        ),
        # the full projection viewed without the transpose
        (
            lambda x, w, i, h: (x @ w).view(x.shape[0], h, x.shape[1], -1)[:, i],
            "computes the full projection x @ W_q",
        ),
        # always head 0
        (lambda x, w, i, h: head_queries_right(x, w, 0, h), "head=1"),
        # float32 forced on the float64 case
        (lambda x, w, i, h: head_queries_right(x.float(), w.float(), i, h), "dtype"),
    ],
)
def test_head_queries_rejects(wrong, message, capsys):
    result, out = verdict(check_head_queries, wrong, capsys)
    assert result is False and out.startswith("❌ head_queries") and message in out, out


def test_head_queries_full_projection_detection_counts_multiplications():
    # How the forbidden route is detected: the ATen-level count of scalar multiplications.
    from course_utils.exercises.core import count_multiplications

    x, w = torch.randn(2, 6, 24), torch.randn(24, 24)
    with count_multiplications() as own:
        x @ w[:, :8]
    with count_multiplications() as full:
        (x[..., None] * w.clone()).sum(dim=-2)[..., :8]
    assert own.total == 2 * 6 * 24 * 8 and full.total == 3 * own.total


# --- notebook 05 ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "right",
    [
        lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]),
        lambda q, k: q @ k.mT * q.shape[-1] ** -0.5,
        lambda q, k: torch.einsum("...td,...sd->...ts", q / q.size(-1) ** 0.5, k),
        lambda q, k: torch.matmul(q.double(), k.double().mT).div(q.shape[-1] ** 0.5).to(q.dtype),
        lambda q, k: (q[..., :, None, :] * k[..., None, :, :]).sum(-1) / math.sqrt(q.shape[-1]),
    ],
)
def test_scaled_scores_accepts_right_variants(right, capsys):
    assert verdict(check_scaled_scores, right, capsys) == (True, "✅ scaled_scores: correct\n")


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda q, k: q @ k.transpose(-2, -1), "without the 1/sqrt(d_k) scale"),
        (lambda q, k: q @ k.transpose(-2, -1) / q.shape[-1], "divided by d_k"),
        (lambda q, k: q @ k.mT * q.shape[-1] ** 0.5, "multiplied by sqrt(d_k)"),
        (lambda q, k: q.transpose(-2, -1) @ k / 8**0.5, "the product's shapes do not fit"),
        (lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(q.shape[-2]), "a scale of sqrt(T_q)"),
        (lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(k.shape[-2]), "a scale of sqrt(T_k)"),
        (lambda q, k: q @ k.mT / math.sqrt(8), "the running example's d_k"),
        (lambda q, k: q @ k.mT / math.sqrt(24), "the running example's d_model"),
        (lambda q, k: k @ q.mT / math.sqrt(q.shape[-1]), "the scores transposed"),
        (lambda q, k: (q @ k.mT / math.sqrt(q.shape[-1])).float(), "a conversion to float32"),
        (
            lambda q, k: q.view(*q.shape[:-2], -1).view(q.shape) @ k.mT / q.shape[-1] ** 0.5,
            "use reshape, not view",
        ),
        (lambda q, k: (q @ k.mT).numpy(), "numpy.ndarray"),
        (lambda q: q, "give it exactly these parameters"),
        (unfinished, "not implemented yet"),
    ],
)
def test_scaled_scores_rejects_and_names(wrong, message, capsys):
    result, out = verdict(check_scaled_scores, wrong, capsys)
    assert result is False and out.startswith("❌ scaled_scores") and message in out, out


def test_softmax_jacobian_accepts_the_closed_form(capsys):
    def right(p):
        return torch.diag(p) - torch.outer(p, p)

    assert verdict(check_softmax_jacobian, right, capsys)[0] is True


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (torch.diag, "the off-diagonal terms are missing"),
        (lambda p: torch.outer(p, p) - torch.diag(p), "the sign is flipped"),
        (lambda p: torch.eye(len(p)) - torch.outer(p, p), "not I - p p^T"),
    ],
)
def test_softmax_jacobian_rejects(wrong, message, capsys):
    result, out = verdict(check_softmax_jacobian, wrong, capsys)
    assert result is False and "softmax_jacobian(p of length 5) differs by up to" in out
    assert message in out, out


@pytest.mark.parametrize(
    "right",
    [
        lambda p: p[:, None] * (torch.eye(len(p)) - p[None, :]),  # p_i (delta_ij - p_j)
        lambda p: torch.autograd.functional.jacobian(lambda s: torch.softmax(s, -1), p.log()),
    ],
)
def test_softmax_jacobian_accepts_other_forms(right, capsys):
    assert verdict(check_softmax_jacobian, right, capsys)[0] is True


# --- notebook 06 ------------------------------------------------------------------------------


def test_causal_mask_accepts_the_lower_triangle(capsys):
    def right(size):
        return torch.ones(size, size, dtype=torch.bool).tril()

    assert verdict(check_causal_mask, right, capsys) == (True, "✅ causal_mask: correct\n")
    # the same mask from a comparison of positions, and from tril_indices
    assert verdict(
        check_causal_mask, lambda n: torch.arange(n)[:, None] >= torch.arange(n), capsys
    )[0]

    def from_indices(size):
        mask = torch.zeros(size, size, dtype=torch.bool)
        rows, cols = torch.tril_indices(size, size)
        mask[rows, cols] = True
        return mask

    assert verdict(check_causal_mask, from_indices, capsys)[0]


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda n: torch.ones(n, n, dtype=torch.bool).triu(), "upper triangle"),
        (lambda n: torch.ones(n, n).tril(), "a mask is torch.bool"),
        (lambda n: torch.ones(6, 6, dtype=torch.bool).tril(), "use the argument T"),
        (lambda n: torch.ones(n, n, dtype=torch.bool).tril(1), "see key t + 1"),
        (lambda n: [[s <= t for s in range(n)] for t in range(n)], "got a list"),
        (lambda: None, "give it exactly these parameters"),
        (lambda n: torch.ones(n, n, dtype=torch.bool).tril(-1), "hides the diagonal"),
        # nn.MultiheadAttention's convention, True = hidden: recognised and named
        (lambda n: torch.ones(n, n, dtype=torch.bool).triu(1), "True = hidden"),
        (lambda n: ~torch.ones(n, n, dtype=torch.bool).tril(), "nn.MultiheadAttention"),
    ],
)
def test_causal_mask_rejects(wrong, message, capsys):
    result, out = verdict(check_causal_mask, wrong, capsys)
    assert result is False and message in out


def test_padding_mask_accepts_b11t(capsys):
    def right(lengths, size):
        return (torch.arange(size) < torch.tensor(lengths)[:, None])[:, None, None, :]

    assert verdict(check_padding_mask, right, capsys)[0] is True

    def by_rows(lengths, size):
        mask = torch.zeros(len(lengths), 1, 1, size, dtype=torch.bool)
        for b, length in enumerate(lengths):
            mask[b, ..., :length] = True
        return mask

    assert verdict(check_padding_mask, by_rows, capsys)[0] is True


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda lengths, n: torch.arange(n) < torch.tensor(lengths)[:, None], "(B, 1, 1, T)"),
        (
            lambda lengths, n: (torch.arange(n) <= torch.tensor(lengths)[:, None])[:, None, None],
            "the first padding key stays visible",
        ),
        # nn.MultiheadAttention's key_padding_mask convention, True = padding: named
        (
            lambda lengths, n: (torch.arange(n) >= torch.tensor(lengths)[:, None])[:, None, None],
            "True at the padding: True = hidden",
        ),
        (lambda lengths, n: torch.arange(n) >= torch.tensor(lengths)[:, None], "~mask"),
        (
            lambda lengths, n: (torch.arange(n) < torch.tensor(lengths)[:, None])[:, None],
            "a (B, 1, T) mask",
        ),
        (
            lambda lengths, n: (torch.arange(n) < torch.tensor(lengths)[:, None])[
                :, None, None
            ].int(),
            "a mask is torch.bool",
        ),
        (
            lambda lengths, n: (torch.arange(6) < torch.tensor(lengths)[:, None])[:, None, None],
            "not T=4",
        ),
        (lambda lengths: lengths, "give it exactly these parameters"),
    ],
)
def test_padding_mask_rejects(wrong, message, capsys):
    result, out = verdict(check_padding_mask, wrong, capsys)
    assert result is False and message in out


def masked_softmax_right(scores, mask):
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)


def masked_softmax_minus_1e9(scores, mask):
    weights = torch.softmax(scores.masked_fill(mask == 0, -1e9), dim=-1)
    return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)


def test_masked_softmax_accepts_zero_rows(capsys):
    assert verdict(check_masked_softmax, masked_softmax_right, capsys) == (
        True,
        "✅ masked_softmax: correct\n",
    )


def test_masked_softmax_accepts_the_dtype_minimum(capsys):
    def right(scores, mask):
        weights = torch.softmax(scores.masked_fill(~mask, torch.finfo(scores.dtype).min), dim=-1)
        return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)

    assert verdict(check_masked_softmax, right, capsys)[0] is True


def test_the_minus_1e9_answer_is_right_in_float32_and_bfloat16():
    # So the checker rejects it only because of float16 (the mistake it teaches), which this
    # pins down: bfloat16 has float32's range and represents -1e9.
    for dtype in (torch.float32, torch.bfloat16):
        scores = torch.randn(2, 3, 6, 6).to(dtype)
        mask = torch.ones(6, 6, dtype=torch.bool).tril()
        mask = mask & (torch.arange(6) >= torch.tensor([[0], [2]]))[:, None, None, :]
        torch.testing.assert_close(
            masked_softmax_minus_1e9(scores, mask), masked_softmax_right(scores, mask)
        )
    with pytest.raises(RuntimeError, match="overflow"):
        masked_softmax_minus_1e9(torch.zeros(6, 6).half(), torch.ones(6, 6, dtype=torch.bool))


def masked_softmax_where(scores, mask):
    # right values (exp of the shifted visible scores over their sum, or 1), but a row with
    # every key hidden shifts by -inf: backward gives NaN there (issue 42)
    shifted = (
        scores - scores.masked_fill(~mask, float("-inf")).amax(-1, keepdim=True)
    ).nan_to_num()
    e = torch.where(mask, shifted.exp(), torch.zeros_like(scores))
    return e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)


@pytest.mark.parametrize(
    "right",
    [
        masked_softmax_right,
        lambda s, m: (
            torch.softmax(s.double().masked_fill(~m, float("-inf")), -1).nan_to_num(0.0).to(s.dtype)
        ),
        lambda s, m: (
            torch.softmax(s.masked_fill(~m, torch.finfo(s.dtype).min), -1) * m.any(-1, keepdim=True)
        ),
    ],
)
def test_masked_softmax_accepts_right_variants(right, capsys):
    assert verdict(check_masked_softmax, right, capsys) == (True, "✅ masked_softmax: correct\n")


def test_masked_softmax_names_a_nan_gradient(capsys):
    passed, out = verdict(check_masked_softmax, masked_softmax_where, capsys)
    assert not passed and "backward gives NaN in the gradient of scores" in out, out


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda s, m: torch.softmax(s.masked_fill(~m, float("-inf")), -1), "NaN"),
        (lambda s, m: torch.softmax(s.masked_fill(~m, -1e9), -1), "uniform"),
        (lambda s, m: torch.softmax(s, -1) * m, "masked after the softmax"),
        (lambda s, m: torch.softmax(s.masked_fill(~m, float("-inf")), -2), "over the queries"),
        (lambda s, m: masked_softmax_right(s, ~m), "an inverted mask"),
        (
            lambda s, m: torch.softmax(s.masked_fill(~m, 0.0), -1) * m.any(-1, keepdim=True),
            "filled with 0",
        ),
        # the popular -1e9 fill, empty rows zeroed: right in float32 and bfloat16, but -1e9
        # overflows float16, and the checker must say that, not just "raised"
        (masked_softmax_minus_1e9, "-1e9 does not fit in torch.float16"),
        # float32 weights for float16 scores: silently leaves mixed precision
        (lambda s, m: masked_softmax_right(s.float(), m), "keep the scores' dtype"),
        (lambda s, m: masked_softmax_right(s, m)[..., :-1], "has shape"),
        (lambda s, m: masked_softmax_right(s, m).tolist(), "got a list"),
        (lambda s: s, "give it exactly these parameters"),
    ],
)
def test_masked_softmax_rejects(wrong, message, capsys):
    result, out = verdict(check_masked_softmax, wrong, capsys)
    assert result is False and out.startswith("❌ masked_softmax") and message in out, out


# --- every catalogued mistake of 04-06 named (issue 42: the catalogue holds each mistake) -----

from checker_verdict import assert_named, catalogue_params  # noqa: E402

from course_utils.exercises.nb04_qkv_and_heads import _SPLIT_HEADS_MISTAKES  # noqa: E402
from course_utils.exercises.nb05_scores_and_scaling import _SCORES_MISTAKES  # noqa: E402
from course_utils.exercises.nb06_masking import (  # noqa: E402
    _CAUSAL_MISTAKES,
    _MASKED_SOFTMAX_MISTAKES,
    _PADDING_MISTAKES,
)

CATALOGUES = [
    (check_split_heads, _SPLIT_HEADS_MISTAKES),
    (check_scaled_scores, _SCORES_MISTAKES),
    (check_causal_mask, _CAUSAL_MISTAKES),
    (check_padding_mask, _PADDING_MISTAKES),
    (check_masked_softmax, _MASKED_SOFTMAX_MISTAKES),
]


@pytest.mark.parametrize(("checker", "message", "wrong"), **catalogue_params(CATALOGUES))
def test_each_catalogued_mistake_is_named(checker, message, wrong, capsys):
    assert_named(checker, wrong, message, capsys)
