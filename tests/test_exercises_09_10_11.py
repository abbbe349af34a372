"""Checkers of notebooks 09 (LayerNorm), 10 (feed-forward) and 11 (logits and sampling):
each accepts the right answer and names the typical wrong ones."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course_utils.exercises import (
    check_feed_forward,
    check_ffn_parameter_count,
    check_greedy_next_token,
    check_layer_norm,
    check_pre_ln_residual,
    check_top_k_filter,
)


def verdict(checker, function, capsys) -> tuple[bool, str]:
    result = checker(function)
    return result, capsys.readouterr().out


def unfinished(*args):
    raise NotImplementedError  # your code here


# --- 09 ---------------------------------------------------------------------------------


def test_check_layer_norm_accepts_the_biased_variance_with_eps_inside(capsys):
    def layer_norm(x, weight, bias, eps):
        mean = x.mean(dim=-1, keepdim=True)
        variance = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
        return (x - mean) / torch.sqrt(variance + eps) * weight + bias

    assert verdict(check_layer_norm, layer_norm, capsys) == (True, "✅ layer_norm: correct\n")

    def with_rsqrt(x, weight, bias, eps):
        variance, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
        return torch.addcmul(bias, (x - mean) * torch.rsqrt(variance + eps), weight)

    assert verdict(check_layer_norm, with_rsqrt, capsys)[0]
    functional = lambda x, weight, bias, eps: F.layer_norm(x, x.shape[-1:], weight, bias, eps)  # noqa: E731
    assert verdict(check_layer_norm, functional, capsys)[0]


def test_check_layer_norm_names_the_classic_mistakes(capsys):
    def unbiased(x, weight, bias, eps):
        mean, variance = x.mean(-1, keepdim=True), x.var(-1, keepdim=True)  # divides by C - 1
        return (x - mean) / torch.sqrt(variance + eps) * weight + bias

    def eps_outside(x, weight, bias, eps):
        mean, std = x.mean(-1, keepdim=True), x.std(-1, keepdim=True, unbiased=False)
        return (x - mean) / (std + eps) * weight + bias

    def std_and_eps_outside(x, weight, bias, eps):  # the popular one-liner: both mistakes
        mean, std = x.mean(-1, keepdim=True), x.std(-1, keepdim=True)
        return (x - mean) / (std + eps) * weight + bias

    def no_affine(x, weight, bias, eps):
        return F.layer_norm(x, x.shape[-1:], eps=eps)

    ok, out = verdict(check_layer_norm, unbiased, capsys)
    assert (
        not ok and out.startswith("❌ layer_norm") and "unbiased variance (divide by C - 1)" in out
    )
    ok, out = verdict(check_layer_norm, eps_outside, capsys)
    assert not ok and "eps added outside the square root" in out and "(1, 3, 24)" in out
    ok, out = verdict(check_layer_norm, std_and_eps_outside, capsys)
    assert not ok and "x.std() with eps outside the square root" in out
    assert "design mistake" not in out  # no internal jargon in a student's message
    ok, out = verdict(check_layer_norm, no_affine, capsys)
    assert not ok and "weight and bias were not applied" in out
    ok, out = verdict(check_layer_norm, unfinished, capsys)
    assert not ok and "not implemented yet" in out


def test_check_pre_ln_residual(capsys):
    assert verdict(check_pre_ln_residual, lambda x, norm, f: x + f(norm(x)), capsys)[0]

    def in_two_steps(x, norm, f):
        update = f(norm(x))
        return update.add(x)

    assert verdict(check_pre_ln_residual, in_two_steps, capsys)[0]
    ok, out = verdict(check_pre_ln_residual, lambda x, norm, f: norm(x + f(x)), capsys)
    assert not ok and "post-LN" in out
    ok, out = verdict(check_pre_ln_residual, lambda x, norm, f: f(norm(x)), capsys)
    assert not ok and "without the residual" in out
    ok, out = verdict(check_pre_ln_residual, lambda x, norm, f: norm(x) + f(norm(x)), capsys)
    assert not ok and "normalised copy" in out


# --- 10 ---------------------------------------------------------------------------------


def test_check_feed_forward(capsys):
    def right(x, w1, b1, w2, b2):
        return F.gelu(x @ w1.T + b1) @ w2.T + b2

    assert verdict(check_feed_forward, right, capsys) == (True, "✅ feed_forward: correct\n")
    ok, out = verdict(
        check_feed_forward, lambda x, w1, b1, w2, b2: F.relu(x @ w1.T + b1) @ w2.T + b2, capsys
    )
    assert not ok and "ReLU instead of GELU" in out
    tanh = lambda x, w1, b1, w2, b2: F.gelu(x @ w1.T + b1, approximate="tanh") @ w2.T + b2  # noqa: E731
    assert verdict(check_feed_forward, tanh, capsys) == (True, "✅ feed_forward: correct\n")
    ok, out = verdict(check_feed_forward, lambda x, w1, b1, w2, b2: F.gelu(x @ w1.T) @ w2.T, capsys)
    assert not ok and "no biases" in out
    ok, out = verdict(
        check_feed_forward, lambda x, w1, b1, w2, b2: F.gelu(x @ w1 + b1) @ w2 + b2, capsys
    )
    assert not ok and "raised RuntimeError" in out and "use x @ w1.T" in out, out

    def with_linear(x, w1, b1, w2, b2):
        return F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)

    assert verdict(check_feed_forward, with_linear, capsys)[0]


def test_check_ffn_parameter_count(capsys):
    right = lambda d_model, d_ff: 2 * d_model * d_ff + d_ff + d_model  # noqa: E731
    assert verdict(check_ffn_parameter_count, right, capsys)[0]
    ok, out = verdict(check_ffn_parameter_count, lambda d, f: 2 * d * f, capsys)
    assert not ok and "returned 4,608, expected 4,728" in out and "without the biases" in out
    ok, out = verdict(check_ffn_parameter_count, lambda d, f: 2 * d * f + 2 * d, capsys)
    assert not ok and "first layer's bias has d_ff entries" in out
    ok, out = verdict(check_ffn_parameter_count, lambda d, f: torch.tensor(right(d, f)), capsys)
    assert not ok and "should return an int, got Tensor" in out

    def from_modules(d_model, d_ff):
        layers = (torch.nn.Linear(d_model, d_ff), torch.nn.Linear(d_ff, d_model))
        return sum(p.numel() for layer in layers for p in layer.parameters())

    assert verdict(check_ffn_parameter_count, from_modules, capsys)[0]


# --- 11 ---------------------------------------------------------------------------------


def reference_top_k(logits, k):
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def test_check_top_k_filter(capsys):
    assert verdict(check_top_k_filter, reference_top_k, capsys) == (
        True,
        "✅ top_k_filter: correct\n",
    )

    def exactly_k(logits, k):  # keeps exactly k of tied logits: also right
        keep = torch.zeros_like(logits, dtype=torch.bool)
        keep.scatter_(-1, torch.topk(logits, k, dim=-1).indices, True)
        return logits.masked_fill(~keep, float("-inf"))

    def by_sorting(logits, k):
        kth = logits.sort(dim=-1, descending=True).values[..., k - 1 : k]
        return torch.where(logits >= kth, logits, torch.tensor(float("-inf")))

    assert verdict(check_top_k_filter, exactly_k, capsys)[0]
    assert verdict(check_top_k_filter, by_sorting, capsys)[0]

    def zeros(logits, k):
        kth = torch.topk(logits, k, dim=-1).values[..., -1:]
        return logits.masked_fill(logits < kth, 0.0)

    def off_by_one(logits, k):
        kth = torch.topk(logits, k, dim=-1).values[..., -1:]
        return logits.masked_fill(logits <= kth, float("-inf"))  # drops the k-th too

    def smallest(logits, k):
        kth = torch.topk(logits, k, dim=-1, largest=False).values[..., -1:]
        return logits.masked_fill(logits > kth, float("-inf"))

    ok, out = verdict(check_top_k_filter, zeros, capsys)
    assert not ok and "use -inf" in out
    ok, out = verdict(check_top_k_filter, off_by_one, capsys)
    assert not ok and "keeps [2, 2, 2, 2] entries per row, expected k=3" in out

    def large_negative(logits, k):
        kth = torch.topk(logits, k, dim=-1).values[..., -1:]
        return logits.masked_fill(logits < kth, -1e9)

    ok, out = verdict(check_top_k_filter, large_negative, capsys)
    assert not ok and "-1e+09, a finite number; use -inf" in out and "entries per row" not in out
    ok, out = verdict(check_top_k_filter, smallest, capsys)
    assert not ok and "not the k smallest" in out
    probabilities = lambda logits, k: torch.softmax(reference_top_k(logits, k), -1)  # noqa: E731
    ok, out = verdict(check_top_k_filter, probabilities, capsys)
    assert not ok and "returned probabilities" in out


def test_check_greedy_next_token(capsys):
    right = lambda logits: logits[:, -1, :].argmax(dim=-1, keepdim=True)  # noqa: E731
    assert verdict(check_greedy_next_token, right, capsys)[0]
    by_max = lambda logits: logits[:, -1].max(dim=-1).indices.unsqueeze(1)  # noqa: E731
    assert verdict(check_greedy_next_token, by_max, capsys)[0]
    int32 = lambda logits: right(logits).int()  # noqa: E731
    ok, out = verdict(check_greedy_next_token, int32, capsys)
    assert not ok and "dtype torch.int32; token ids are int64" in out
    ok, out = verdict(check_greedy_next_token, lambda logits: logits[:, -1].argmax(-1), capsys)
    assert not ok and "shape (2,), expected (2, 1)" in out and "keepdim=True" in out
    first = lambda logits: logits[:, 0, :].argmax(dim=-1, keepdim=True)  # noqa: E731
    ok, out = verdict(check_greedy_next_token, first, capsys)
    assert not ok and "first position" in out
    ok, out = verdict(check_greedy_next_token, lambda logits: logits.argmax(dim=1), capsys)
    assert not ok and "has shape (2, 84), expected (2, 1)" in out
    ok, out = verdict(
        check_greedy_next_token,
        lambda logits: torch.softmax(logits[:, -1:], -1).max(-1).values,
        capsys,
    )
    assert not ok and "dtype torch.float32" in out
