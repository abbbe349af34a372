"""Checkers of notebook 15 accept right answers (several forms) and reject each plausible
wrong one with the hint for that mistake."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from course_utils.exercises.nb15_todays_decoder import check_expand_kv_heads, check_rms_norm


def _rms(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


@pytest.mark.parametrize(
    "answer",
    [
        _rms,
        lambda x, w, eps: x / torch.sqrt((x * x).sum(-1, keepdim=True) / x.shape[-1] + eps) * w,
        lambda x, w, eps: F.rms_norm(x, (x.shape[-1],), w, eps),
        lambda x, w, eps: torch.nn.RMSNorm(x.shape[-1], eps=eps, elementwise_affine=False)(x) * w,
    ],
    ids=["rsqrt", "sum-over-C", "F.rms_norm", "nn.RMSNorm"],
)
def test_rms_norm_right_answers_pass(answer, capsys):
    assert check_rms_norm(answer)
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda x, w, eps: F.layer_norm(x, x.shape[-1:], eps=eps) * w, "mean was subtracted"),
        (
            lambda x, w, eps: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * w,
            "eps belongs inside",
        ),
        (lambda x, w, eps: _rms(x, 1.0, eps), "weight (gain g) is missing"),
        (
            lambda x, w, eps: x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + eps) * w,
            "last axis",
        ),
        (
            lambda x, w, eps: x * torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * w,
            "variance",
        ),
        (lambda x, w, eps: x / (x.pow(2).mean(-1, keepdim=True) + eps) * w, "square root"),
        (lambda x, w, eps: _rms(x, w, eps).sum(-1), "has shape"),
        (lambda x, w, eps: _rms(x, w, eps) * math.sqrt(x.shape[-1]), "differs by up to"),
    ],
)
def test_rms_norm_wrong_answers_fail_with_their_hint(answer, hint, capsys):
    assert not check_rms_norm(answer)
    out = capsys.readouterr().out
    assert "❌" in out and hint in out, out


@pytest.mark.parametrize(
    "answer",
    [
        lambda k, h: k.repeat_interleave(h // k.shape[1], dim=1),
        lambda k, h: (
            k[:, :, None]
            .expand(k.shape[0], k.shape[1], h // k.shape[1], *k.shape[2:])
            .reshape(k.shape[0], h, *k.shape[2:])
        ),
        lambda k, h: k.index_select(1, torch.arange(h) // (h // k.shape[1])),
    ],
    ids=["repeat_interleave", "expand-reshape", "index_select"],
)
def test_expand_kv_heads_right_answers_pass(answer, capsys):
    assert check_expand_kv_heads(answer)
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda k, h: k.repeat(1, h // k.shape[1], 1, 1), "repeat_interleave"),
        (lambda k, h: k.repeat_interleave(h // k.shape[1], dim=2), "head axis (dim 1)"),
        (lambda k, h: k.repeat_interleave(2, dim=1), "has shape"),  # a hard-coded group
        (lambda k, h: k, "head axis (dim 1)"),
        (lambda k, h: k.repeat_interleave(h // k.shape[1], dim=1).flip(1), "differs by up to"),
    ],
)
def test_expand_kv_heads_wrong_answers_fail_with_their_hint(answer, hint, capsys):
    assert not check_expand_kv_heads(answer)
    out = capsys.readouterr().out
    assert "❌" in out and hint in out, out


def test_unfinished_exercises_are_reported_not_raised(capsys):
    def unfinished(*args):
        raise NotImplementedError

    assert not check_rms_norm(unfinished) and not check_expand_kv_heads(unfinished)
    assert capsys.readouterr().out.count("not implemented yet") == 2
