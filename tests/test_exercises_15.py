"""Checkers of notebook 15: every catalogued mistake is rejected with its own message, right
answers written several ways pass, and no answer makes a checker fail internally."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from checker_verdict import assert_unfinished_reported, verdict

from course_utils.exercises.nb15_todays_decoder import (
    EXPAND_KV_HEADS_MISTAKES,
    RMS_NORM_MISTAKES,
    check_expand_kv_heads,
    check_rms_norm,
)


def _rms(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _rms_sum(x, w, eps):  # the mean written as a sum over C
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) / x.shape[-1] + eps) * w


def _rms_module(x, w, eps):  # PyTorch's module, without its own gain
    return torch.nn.RMSNorm(x.shape[-1], eps=eps, elementwise_affine=False)(x) * w


def _rms_view(x, w, eps):  # a non-contiguous view of x
    return _rms(x.transpose(0, -1).contiguous().transpose(0, -1), w, eps)


RMS_RIGHT = {
    "rsqrt": _rms,
    "sum over C": _rms_sum,
    "F.rms_norm": lambda x, w, eps: F.rms_norm(x, (x.shape[-1],), w, eps),
    "nn.RMSNorm": _rms_module,
    "float64": lambda x, w, eps: _rms(x.double(), w.double(), eps),
    "a non-contiguous view": _rms_view,
}


@pytest.mark.parametrize("name", RMS_RIGHT)
def test_rms_norm_right_answers_pass(name, capsys):
    passed, out = verdict(check_rms_norm, RMS_RIGHT[name], capsys)
    assert passed and "✅ rms_norm: correct" in out, out


@pytest.mark.parametrize("index", range(len(RMS_NORM_MISTAKES)))
def test_rms_norm_names_each_catalogued_mistake(index, capsys):
    message, wrong = RMS_NORM_MISTAKES[index]
    passed, out = verdict(check_rms_norm, wrong, capsys)
    assert not passed and f"looks like {message}" in out, out


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (lambda x, w, eps: _rms(x, w, 1e-5), "what eps=1e-05 gives"),  # eps hard-coded
        (lambda x, w, eps: x * torch.rsqrt(x.pow(2).mean(-1) + eps) * w, "keepdim=True"),
        (lambda x, w, eps: _rms(x, w, eps).sum(-1), "has shape"),
        (lambda x, w, eps: _rms(x, w, eps) * math.sqrt(x.shape[-1]), "differs by up to"),
        (lambda x, w, eps: _rms(x, w, eps) > 0, "is a bool mask"),
        (lambda x, w, eps: _rms(x, w, eps).tolist(), "should be a torch.Tensor"),
        (lambda x, w, eps: None, "returns nothing"),
        (lambda x, eps: x, "your function takes (x, eps)"),
        (lambda x, w, eps: x.undefined, "your function raised AttributeError"),
    ],
)
def test_rms_norm_other_wrong_answers_are_said_without_breaking(answer, said, capsys):
    passed, out = verdict(check_rms_norm, answer, capsys)
    assert not passed and said in out, out


EXPAND_RIGHT = {
    "repeat_interleave": lambda k, h: k.repeat_interleave(h // k.shape[1], dim=1),
    "expand-reshape": lambda k, h: (
        k[:, :, None].expand(-1, -1, h // k.shape[1], -1, -1).reshape(k.shape[0], h, *k.shape[2:])
    ),
    "index_select": lambda k, h: k.index_select(
        1, torch.arange(h, device=k.device) // (h // k.shape[1])
    ),
    "float64": lambda k, h: k.double().repeat_interleave(h // k.shape[1], dim=1),
    "a loop and torch.cat": lambda k, h: torch.cat(
        [k[:, i // (h // k.shape[1])][:, None] for i in range(h)], dim=1
    ),
}


def test_expand_kv_heads_names_an_index_made_on_the_cpu(capsys):
    """Issue 42: index_select needs its index on k's device (plain indexing does not)."""
    on_the_cpu = lambda k, h: k.index_select(1, torch.arange(h) // (h // k.shape[1]))  # noqa: E731
    passed, out = verdict(check_expand_kv_heads, on_the_cpu, capsys)
    assert not passed and "`index_select` meets it" in out and "(device=k.device)" in out, out


@pytest.mark.parametrize("name", EXPAND_RIGHT)
def test_expand_kv_heads_right_answers_pass(name, capsys):
    passed, out = verdict(check_expand_kv_heads, EXPAND_RIGHT[name], capsys)
    assert passed and "✅ expand_kv_heads: correct" in out, out


@pytest.mark.parametrize("index", range(len(EXPAND_KV_HEADS_MISTAKES)))
def test_expand_kv_heads_names_each_catalogued_mistake(index, capsys):
    message, wrong = EXPAND_KV_HEADS_MISTAKES[index]
    passed, out = verdict(check_expand_kv_heads, wrong, capsys)
    assert not passed and f"looks like {message}" in out, out


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (lambda k, h: k.repeat_interleave(6 // k.shape[1], dim=1), "what n_heads=6 gives"),
        (lambda k, h: k.repeat_interleave(h // k.shape[1], dim=1).flip(1), "differs"),
        (lambda k, h: (k, k), "should be a torch.Tensor"),
    ],
)
def test_expand_kv_heads_other_wrong_answers_are_said(answer, said, capsys):
    passed, out = verdict(check_expand_kv_heads, answer, capsys)
    assert not passed and said in out, out


def test_unfinished_exercises_are_reported_not_raised(capsys):
    catalogues = [
        (check_rms_norm, RMS_NORM_MISTAKES),
        (check_expand_kv_heads, EXPAND_KV_HEADS_MISTAKES),
    ]
    assert_unfinished_reported(catalogues, capsys)
