"""Checkers of notebook 14: every catalogued mistake is rejected with its own message, right
answers written several ways pass, and no answer makes a checker fail internally."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from checker_verdict import assert_named, assert_unfinished_reported, catalogue_params, verdict

from course_utils.attention import merge_heads, split_heads
from course_utils.exercises import check_cross_attention, check_encoder_decoder_masks
from course_utils.exercises.nb14_encoder_decoder import (
    CROSS_ATTENTION_MISTAKES,
    ENCODER_DECODER_MASKS_MISTAKES,
)

CATALOGUES = [
    (check_cross_attention, CROSS_ATTENTION_MISTAKES),
    (check_encoder_decoder_masks, ENCODER_DECODER_MASKS_MISTAKES),
]


@pytest.mark.parametrize(("checker", "message", "wrong"), **catalogue_params(CATALOGUES))
def test_each_catalogued_mistake_is_named(checker, message, wrong, capsys):
    assert_named(checker, wrong, message, capsys)


def test_unfinished_exercises_are_reported_not_raised(capsys):
    assert_unfinished_reported(CATALOGUES, capsys)


# --- cross-attention ------------------------------------------------------------------------


def _right(x, memory, w_q, w_k, w_v, n_heads, memory_mask):
    q = split_heads(w_q(x), n_heads)  # (B, h, T_tgt, d_k)
    k, v = split_heads(w_k(memory), n_heads), split_heads(w_v(memory), n_heads)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, h, T_tgt, T_src)
    weights = scores.masked_fill(~memory_mask[:, None, None, :], float("-inf")).softmax(-1)
    return merge_heads(weights @ v), weights


def _einsum_and_where(x, memory, w_q, w_k, w_v, n_heads, memory_mask):
    b, t_tgt, c = x.shape
    d_k = c // n_heads
    q = w_q(x).view(b, t_tgt, n_heads, d_k)  # (B, T_tgt, h, d_k)
    k = w_k(memory).view(b, -1, n_heads, d_k)
    v = w_v(memory).view(b, -1, n_heads, d_k)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * d_k**-0.5
    scores = torch.where(memory_mask[:, None, None, :], scores, torch.tensor(-1e30))
    weights = F.softmax(scores, dim=-1)
    out = torch.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, t_tgt, c)
    return out, weights


def _sdpa(x, memory, w_q, w_k, w_v, n_heads, memory_mask):  # PyTorch's kernel for the output
    q, k, v = (split_heads(w(s), n_heads) for w, s in ((w_q, x), (w_k, memory), (w_v, memory)))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=memory_mask[:, None, None, :])
    return merge_heads(out), _right(x, memory, w_q, w_k, w_v, n_heads, memory_mask)[1]


CROSS_RIGHT = {
    "by hand": _right,
    "einsum and torch.where": _einsum_and_where,
    "F.scaled_dot_product_attention": _sdpa,
    "float64": lambda x, m, wq, wk, wv, h, mask: tuple(
        t.double() for t in _right(x, m, wq, wk, wv, h, mask)
    ),
    "a list": lambda *case: list(_right(*case)),
}


@pytest.mark.parametrize("name", CROSS_RIGHT)
def test_cross_attention_right_answers_pass(name, capsys):
    assert verdict(check_cross_attention, CROSS_RIGHT[name], capsys) == (
        True,
        "✅ cross_attention: correct\n",
    )


@pytest.mark.parametrize(
    ("wrong", "said"),
    [
        (lambda *case: _right(*case)[::-1], "is (weights, output), in another order"),
        (lambda *case: _right(*case)[0], "should be the tuple (output, weights)"),
        (lambda *case: (_right(*case)[0], _right(*case)[1] > 0), "is a bool mask"),
        (lambda *case: (_right(*case)[0] * 1.5, _right(*case)[1]), "differs by up to"),
        (lambda x, m, wq, wk, wv, h, mask: _right(x, m, wq, wk, wv, 2, mask), "n_heads=2 gives"),
    ],
)
def test_cross_attention_says_what_else_is_wrong(wrong, said, capsys):
    passed, out = verdict(check_cross_attention, wrong, capsys)
    assert not passed and said in out, out


# --- the three masks ----------------------------------------------------------------------


def _right_masks(src_lengths, t_src, t_tgt):
    real = torch.arange(t_src) < torch.tensor(src_lengths)[:, None]  # (B, T_src)
    padding = real[:, None, None, :]  # (B, 1, 1, T_src)
    return padding, torch.ones(t_tgt, t_tgt, dtype=torch.bool).tril(), padding


def _full_masks(src_lengths, t_src, t_tgt):  # every mask at its full (B, 1, T_q, T_k) size
    b = len(src_lengths)
    encoder, decoder, cross = _right_masks(src_lengths, t_src, t_tgt)
    return (
        encoder.expand(b, 1, t_src, t_src),
        decoder.expand(b, 1, t_tgt, t_tgt),
        cross.expand(b, 1, t_tgt, t_src),
    )


def _loops(src_lengths, t_src, t_tgt):  # element by element, as lists turned into tensors
    real = torch.tensor([[j < n for j in range(t_src)] for n in src_lengths])
    causal = torch.tensor([[j <= i for j in range(t_tgt)] for i in range(t_tgt)])
    return real[:, None, None, :], causal, real[:, None, None, :]


MASKS_RIGHT = {
    "broadcastable": _right_masks,
    "full size (expanded views)": _full_masks,
    "loops": _loops,
    "a list": lambda *case: list(_right_masks(*case)),
}


@pytest.mark.parametrize("name", MASKS_RIGHT)
def test_masks_right_answers_pass(name, capsys):
    assert verdict(check_encoder_decoder_masks, MASKS_RIGHT[name], capsys) == (
        True,
        "✅ make_masks: correct\n",
    )


@pytest.mark.parametrize(
    ("wrong", "said"),
    [
        (lambda *case: tuple(m.float() for m in _right_masks(*case)), "a mask is torch.bool"),
        (lambda *case: _right_masks(*case)[:2], "has 2 items, expected 3"),
        (lambda *case: _right_masks(*case)[0], "should be the tuple"),
    ],
)
def test_masks_say_what_else_is_wrong(wrong, said, capsys):
    passed, out = verdict(check_encoder_decoder_masks, wrong, capsys)
    assert not passed and said in out, out
