"""Checkers of notebooks 07 (softmax and weighted values) and 08 (concat and W_o): each accepts
the right answer and rejects the typical wrong ones with a message that says what differs."""

import math

import pytest
import torch

from course_utils.exercises import (
    check_attention_output,
    check_merge_heads,
    check_multi_head_attention,
    check_stable_softmax,
)

# --- notebook 07 -------------------------------------------------------------------------


def stable_softmax(scores, temperature=1.0):
    z = scores / temperature
    e = (z - z.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)


def test_stable_softmax_accepts_the_right_answer(capsys):
    assert check_stable_softmax(stable_softmax) is True
    assert "✅ stable softmax: correct" in capsys.readouterr().out


def test_stable_softmax_rejects_the_naive_softmax_that_overflows(capsys):
    def naive(scores, temperature=1.0):
        e = (scores / temperature).exp()
        return e / e.sum(dim=-1, keepdim=True)

    assert check_stable_softmax(naive) is False
    out = capsys.readouterr().out
    assert "❌ stable softmax" in out and "NaN at (0, 0)" in out and "own maximum" in out


def test_stable_softmax_rejects_a_global_maximum(capsys):
    def global_max(scores, temperature=1.0):
        z = scores / temperature
        e = (z - z.max()).exp()  # one maximum for the whole tensor: small rows underflow
        return e / e.sum(dim=-1, keepdim=True)

    assert check_stable_softmax(global_max) is False
    assert "NaN at (1, 0)" in capsys.readouterr().out


def test_stable_softmax_rejects_the_wrong_axis_and_a_missing_temperature(capsys):
    assert check_stable_softmax(lambda s, temperature=1.0: stable_softmax(s.mT).mT) is False
    assert "stable_softmax(scores) differs" in capsys.readouterr().out
    assert check_stable_softmax(lambda s, temperature=1.0: stable_softmax(s)) is False
    assert "temperature=0.5) differs" in capsys.readouterr().out


def test_stable_softmax_rejects_the_library_softmax(capsys):
    """The exercise forbids the library: each way of calling it is named, although the values
    are right."""
    import torch.nn.functional as F

    def library(scores, temperature=1.0):
        return torch.softmax(scores / temperature, dim=-1)

    def functional(scores, temperature=1.0):
        return F.softmax(scores / temperature, dim=-1)

    def method(scores, temperature=1.0):
        return (scores / temperature).softmax(-1)

    def via_log(scores, temperature=1.0):
        return F.log_softmax(scores / temperature, dim=-1).exp()

    def special(scores, temperature=1.0):  # issue 22: this route used to pass
        return torch.special.softmax(scores / temperature, dim=-1)

    def module(scores, temperature=1.0):
        return torch.nn.Softmax(dim=-1)(scores.clone() / temperature)

    for answer in (library, functional, method, via_log, special, module):
        assert check_stable_softmax(answer) is False
        out = capsys.readouterr().out
        assert "runs the library's softmax" in out and "write the formula out" in out, out


@pytest.mark.parametrize(
    "right",
    [
        # each row's own maximum taken by max(...).values, and division by the temperature late
        lambda s, temperature=1.0: (lambda e: e / e.sum(-1, keepdim=True))(
            ((s - s.max(dim=-1, keepdim=True).values) / temperature).exp()
        ),
        # log-sum-exp, another stable formula written with plain ops
        lambda s, temperature=1.0: (
            s / temperature - (s / temperature).logsumexp(dim=-1, keepdim=True)
        ).exp(),
    ],
)
def test_stable_softmax_accepts_other_stable_formulas(right, capsys):
    assert check_stable_softmax(right) is True, capsys.readouterr().out


def test_stable_softmax_reports_an_unfinished_stub(capsys):
    def stub(scores, temperature=1.0):
        raise NotImplementedError

    assert check_stable_softmax(stub) is False
    assert "not implemented yet" in capsys.readouterr().out


def attention(q, k, v):
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v, weights


def test_attention_output_accepts_the_right_answer(capsys):
    assert check_attention_output(attention) is True
    assert "✅ attention output: correct" in capsys.readouterr().out


def test_attention_output_rejects_typical_mistakes(capsys):
    def no_scale(q, k, v):
        weights = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
        return weights @ v, weights

    def query_axis(q, k, v):
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2)
        return weights @ v, weights

    def wrong_order(q, k, v):
        weights = attention(q, k, v)[1]
        return v @ weights, weights

    def output_only(q, k, v):
        return attention(q, k, v)[0]

    def divided_by_d_k(q, k, v):
        weights = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1], dim=-1)
        return weights @ v, weights

    assert check_attention_output(no_scale) is False
    assert "not divided by sqrt(d_k)" in capsys.readouterr().out
    assert check_attention_output(query_axis) is False
    assert "the softmax runs over the queries (dim=-2)" in capsys.readouterr().out
    assert check_attention_output(divided_by_d_k) is False
    assert "divided by d_k; divide by sqrt(d_k)" in capsys.readouterr().out
    assert check_attention_output(wrong_order) is False
    assert "the weights come first" in capsys.readouterr().out
    assert check_attention_output(output_only) is False
    assert "should return a tuple (output, weights)" in capsys.readouterr().out


def test_attention_output_accepts_other_right_answers(capsys):
    def by_einsum(q, k, v):
        scores = torch.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5
        weights = scores.softmax(dim=-1)
        return torch.einsum("...qk,...kd->...qd", weights, v), weights

    def stable_by_hand(q, k, v):
        scores = q @ k.mT / math.sqrt(q.size(-1))
        e = (scores - scores.amax(-1, keepdim=True)).exp()
        weights = e / e.sum(-1, keepdim=True)
        return torch.matmul(weights, v), weights

    assert check_attention_output(by_einsum) is True
    assert check_attention_output(stable_by_hand) is True, capsys.readouterr().out


# --- notebook 08 -------------------------------------------------------------------------


def merge(x):
    batch, heads, time, head_dim = x.shape
    return x.transpose(1, 2).contiguous().view(batch, time, heads * head_dim)


def test_merge_heads_accepts_the_right_answer(capsys):
    assert check_merge_heads(merge) is True
    assert check_merge_heads(lambda x: x.permute(0, 2, 1, 3).reshape(2, 5, 12)) is True
    assert capsys.readouterr().out.count("✅ merge heads: correct") == 2


def test_merge_heads_rejects_typical_mistakes(capsys):
    def view_without_transpose(x):
        batch, heads, time, head_dim = x.shape
        return x.view(batch, time, heads * head_dim)

    def view_without_contiguous(x):
        batch, heads, time, head_dim = x.shape
        return x.transpose(1, 2).view(batch, time, heads * head_dim)

    assert check_merge_heads(view_without_transpose) is False
    assert "without moving the heads" in capsys.readouterr().out
    assert check_merge_heads(view_without_contiguous) is False
    out = capsys.readouterr().out
    assert "view size is not compatible" in out and "call .contiguous()" in out
    assert check_merge_heads(lambda x: x.transpose(1, 2)) is False
    assert "shape (2, 5, 3, 4), expected (2, 5, 12)" in capsys.readouterr().out


def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, causal=False, merge_fn=merge):
    batch, time, channels = x.shape

    def split(t):
        return t.view(batch, time, n_heads, channels // n_heads).transpose(1, 2)

    q, k, v = split(x @ w_q.T), split(x @ w_k.T), split(x @ w_v.T)
    scores = q @ k.transpose(-2, -1) / math.sqrt(channels // n_heads)
    if causal:
        future = torch.ones(time, time, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return merge_fn(torch.softmax(scores, dim=-1) @ v) @ w_o.T


def test_multi_head_attention_accepts_the_right_answer(capsys):
    assert check_multi_head_attention(multi_head_attention) is True
    assert "✅ multi-head attention: correct" in capsys.readouterr().out


def test_multi_head_attention_rejects_typical_mistakes(capsys):
    def untransposed_weights(x, w_q, w_k, w_v, w_o, n_heads, causal=False):
        return multi_head_attention(x, w_q.T, w_k.T, w_v.T, w_o.T, n_heads, causal)

    def no_w_o(x, w_q, w_k, w_v, w_o, n_heads, causal=False):
        eye = torch.eye(x.shape[-1])
        return multi_head_attention(x, w_q, w_k, w_v, eye, n_heads, causal)

    def ignores_causal(x, w_q, w_k, w_v, w_o, n_heads, causal=False):
        return multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads)

    def merge_by_plain_view(x, w_q, w_k, w_v, w_o, n_heads, causal=False):
        def plain_view(heads):
            return heads.reshape(x.shape)

        return multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, causal, merge_fn=plain_view)

    for wrong, reason in (
        (untransposed_weights, "the paper's layout"),
        (no_w_o, "W_o is missing"),
        (merge_by_plain_view, "merged by a view without the transpose"),
    ):
        assert check_multi_head_attention(wrong) is False
        out = capsys.readouterr().out
        assert "output with causal=False differs by up to" in out and reason in out, out
    assert check_multi_head_attention(ignores_causal) is False
    out = capsys.readouterr().out
    assert "output with causal=True differs by up to" in out and "causal mask is ignored" in out


def test_multi_head_attention_accepts_the_course_s_module_with_copied_weights(capsys):
    from course_utils.attention import MultiHeadAttention

    def with_module(x, w_q, w_k, w_v, w_o, n_heads, causal=False):
        module = MultiHeadAttention(x.shape[-1], n_heads, bias=False)
        with torch.no_grad():
            for linear, weight in zip(
                (module.w_q, module.w_k, module.w_v, module.w_o), (w_q, w_k, w_v, w_o)
            ):
                linear.weight.copy_(weight)
        mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).tril() if causal else None
        return module(x, mask=mask)

    assert check_multi_head_attention(with_module) is True, capsys.readouterr().out
