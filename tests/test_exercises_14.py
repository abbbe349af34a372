"""Checkers of notebook 14 accept a right answer and reject each plausible wrong one, for the
right reason (each mistake alone)."""

from __future__ import annotations

import math

import pytest
import torch

from course_utils.attention import merge_heads, split_heads
from course_utils.exercises import check_cross_attention, check_encoder_decoder_masks


def _cross(x, memory, w_q, w_k, w_v, n_heads, memory_mask, *, kv_from="memory", causal=False,
           padding=True, inverted=False, scale=True, q_from="x", softmax_dim=-1):  # fmt: skip
    sources = {"x": x, "memory": memory}
    q = split_heads(w_q(sources[q_from]), n_heads)
    k = split_heads(w_k(sources[kv_from]), n_heads)
    v = split_heads(w_v(sources[kv_from]), n_heads)
    scores = q @ k.transpose(-2, -1)
    if scale:
        scores = scores / math.sqrt(q.shape[-1])
    t_q, t_k = scores.shape[-2:]
    keep = torch.ones(scores.shape, dtype=torch.bool)
    if padding and t_k == memory_mask.shape[1]:
        real = ~memory_mask if inverted else memory_mask
        keep = keep & real[:, None, None, :]
    if causal:
        keep = keep & torch.ones(t_q, t_k, dtype=torch.bool).tril()
    weights = scores.masked_fill(~keep, float("-inf")).softmax(dim=softmax_dim).nan_to_num(0.0)
    return merge_heads(weights @ v), weights


def test_cross_attention_right_answer_passes(capsys):
    assert check_cross_attention(_cross)
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("mistake", "reason"),
    [
        (dict(kv_from="x"), "keys and values must come from memory"),
        (dict(q_from="memory"), "queries must come from x"),
        (dict(causal=True), "a causal mask was applied"),
        (dict(padding=False), "padded source positions get weight"),
        (dict(inverted=True), "memory_mask is True for real tokens"),
        (dict(scale=False), "not divided by sqrt(d_k)"),
        (dict(softmax_dim=-2), "differs by up to"),
    ],
)
def test_cross_attention_wrong_answers_fail_for_their_reason(mistake, reason, capsys):
    assert not check_cross_attention(lambda *a: _cross(*a, **mistake))
    out = capsys.readouterr().out
    assert "❌" in out and reason in out, out


def test_kv_from_the_decoder_is_named_even_when_lengths_are_equal(capsys):
    # With T_tgt == T_src the shapes agree; the checker still names the mistake.
    from course_utils.exercises.nb14_encoder_decoder import _cross_cases, _diagnose_cross

    case = _cross_cases()[1]
    assert case[0].shape[1] == case[1].shape[1]
    answer = _cross(*case, kv_from="x")
    assert "from the decoder" in _diagnose_cross(answer, case)


def test_cross_attention_reports_wrong_return_type(capsys):
    assert not check_cross_attention(lambda *a: _cross(*a)[1])
    assert "should return (output, weights)" in capsys.readouterr().out


def _masks(lengths, t_src, t_tgt, *, encoder_causal=False, decoder_causal=True,
           cross_causal=False, encoder_padding=True, cross_padding=True, inverted=False,
           broadcast_shape=True):  # fmt: skip
    real = torch.arange(t_src) < torch.tensor(lengths)[:, None]
    padding = real[:, None, None, :]
    encoder = padding if encoder_padding else torch.ones(t_src, t_src, dtype=torch.bool)
    if encoder_causal:
        encoder = encoder & torch.ones(t_src, t_src, dtype=torch.bool).tril()
    decoder = torch.ones(t_tgt, t_tgt, dtype=torch.bool)
    if decoder_causal:
        decoder = decoder.tril()
    cross = padding if cross_padding else torch.ones(t_tgt, t_src, dtype=torch.bool)
    if cross_causal:
        cross = cross & torch.ones(t_tgt, t_src, dtype=torch.bool).tril()
    if not broadcast_shape:
        cross = padding[:, 0, 0, :]  # (B, T_src): does not broadcast against (T_q, T_k)
    masks = (encoder, decoder, cross)
    return tuple(~m for m in masks) if inverted else masks


def test_masks_right_answer_passes_in_both_shapes(capsys):
    assert check_encoder_decoder_masks(_masks)

    def full(lengths, t_src, t_tgt):  # every mask materialised as (B, 1, T_q, T_k)
        encoder, decoder, cross = _masks(lengths, t_src, t_tgt)
        batch = len(lengths)
        return (
            encoder.expand(batch, 1, t_src, t_src).clone(),
            decoder.expand(batch, 1, t_tgt, t_tgt).clone(),
            cross.expand(batch, 1, t_tgt, t_src).clone(),
        )

    assert check_encoder_decoder_masks(full)


@pytest.mark.parametrize(
    ("mistake", "reason"),
    [
        (dict(encoder_causal=True), "encoder self-attention mask"),
        (dict(encoder_causal=True), "a causal mask was added"),
        (dict(decoder_causal=False), "the decoder needs a causal mask"),
        (dict(cross_causal=True), "cross-attention mask"),
        (dict(encoder_padding=False), "the source padding is not hidden"),
        (dict(cross_padding=False), "cross-attention mask for lengths"),
        (dict(inverted=True), "the convention is inverted"),
        (dict(broadcast_shape=False), "does not broadcast"),
    ],
)
def test_masks_wrong_answers_fail_for_their_reason(mistake, reason, capsys):
    assert not check_encoder_decoder_masks(lambda *a: _masks(*a, **mistake))
    out = capsys.readouterr().out
    assert "❌" in out and reason in out, out


def test_cross_causal_is_named_as_such(capsys):
    assert not check_encoder_decoder_masks(lambda *a: _masks(*a, cross_causal=True))
    out = capsys.readouterr().out
    assert "cross-attention" in out and "a causal mask was added" in out, out


def test_masks_reject_float_masks(capsys):
    assert not check_encoder_decoder_masks(lambda *a: tuple(m.float() for m in _masks(*a)))
    assert "torch.bool" in capsys.readouterr().out


def test_checkers_leave_the_global_random_state_alone():
    torch.manual_seed(3)
    expected = torch.rand(3)
    torch.manual_seed(3)
    check_cross_attention(_cross)
    torch.testing.assert_close(torch.rand(3), expected)


def _masks_from_longest(lengths, t_src, t_tgt):
    """Plausible mistake: the key axis built from max(src_lengths), not T_src."""
    real = torch.arange(max(lengths)) < torch.tensor(lengths)[:, None]  # (B, max_len)
    padding = real[:, None, None, :]
    return padding, torch.ones(t_tgt, t_tgt, dtype=torch.bool).tril(), padding


def test_masks_from_the_longest_source_fail_when_the_batch_is_padded_past_it(capsys):
    assert not check_encoder_decoder_masks(_masks_from_longest)
    out = capsys.readouterr().out
    assert "❌" in out and "max(src_lengths) = 5" in out and "T_src = 8" in out, out


def test_masks_with_tril_minus_one_get_the_diagonal_hint(capsys):
    def tril_minus_one(lengths, t_src, t_tgt):
        encoder, _, cross = _masks(lengths, t_src, t_tgt)
        return encoder, torch.ones(t_tgt, t_tgt, dtype=torch.bool).tril(-1), cross

    assert not check_encoder_decoder_masks(tril_minus_one)
    out = capsys.readouterr().out
    assert "tril(-1) hides the diagonal" in out and "never padding-masked" not in out, out


def test_masks_built_row_by_row_pass(capsys):
    # A correct alternative: explicit loops, (B, 1, T_q, T_k) masks, no broadcasting tricks.
    def by_loops(lengths, t_src, t_tgt):
        batch = len(lengths)
        encoder = torch.zeros(batch, 1, t_src, t_src, dtype=torch.bool)
        cross = torch.zeros(batch, 1, t_tgt, t_src, dtype=torch.bool)
        for b, length in enumerate(lengths):
            encoder[b, 0, :, :length] = True
            cross[b, 0, :, :length] = True
        decoder = torch.tensor([[j <= i for j in range(t_tgt)] for i in range(t_tgt)])
        return encoder, decoder, cross

    assert check_encoder_decoder_masks(by_loops)
    assert "✅" in capsys.readouterr().out


def test_cross_attention_accepts_other_right_answers(capsys):
    def by_einsum(x, memory, w_q, w_k, w_v, n_heads, memory_mask):
        q = split_heads(w_q(x), n_heads)  # (B, T_tgt, C) -> (B, h, T_tgt, d_k)
        k = split_heads(w_k(memory), n_heads)  # (B, T_src, C) -> (B, h, T_src, d_k)
        v = split_heads(w_v(memory), n_heads)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
        hidden = ~memory_mask[:, None, None, :]  # (B, 1, 1, T_src)
        weights = scores.masked_fill(hidden, torch.finfo(scores.dtype).min).softmax(dim=-1)
        return merge_heads(torch.einsum("bhqk,bhkd->bhqd", weights, v)), weights

    def with_sdpa_output(x, memory, w_q, w_k, w_v, n_heads, memory_mask):
        _, weights = _cross(x, memory, w_q, w_k, w_v, n_heads, memory_mask)
        q, k, v = (split_heads(w(t), n_heads) for w, t in ((w_q, x), (w_k, memory), (w_v, memory)))
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=memory_mask[:, None, None, :]
        )
        return merge_heads(out), weights

    assert check_cross_attention(by_einsum)
    assert check_cross_attention(with_sdpa_output), capsys.readouterr().out
