"""Checkers for notebook 14: the encoder–decoder Transformer.

Written with :func:`course_utils.exercises.judge.judge`: each checker varies every argument,
and names the mistake of its catalogue that the answer makes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from course_utils.attention import merge_heads, split_heads
from course_utils.exercises.judge import Case, judge
from course_utils.lab.language import N_, tr

# --- cross-attention ---------------------------------------------------------------------------


def _cross(
    x, memory, w_q, w_k, w_v, n_heads, real, *, causal=False, padding=True, scale="d_k",
    fill=float("-inf"), softmax_dim=-1, after=False, merge=True,
):  # fmt: skip
    """Cross-attention written out; the keywords make the known mistakes."""
    q = split_heads(w_q(x), n_heads)  # (B, T_tgt, C) -> (B, h, T_tgt, d_k)
    k = split_heads(w_k(memory), n_heads)  # (B, T_src, C) -> (B, h, T_src, d_k)
    v = split_heads(w_v(memory), n_heads)
    divisor = {"d_k": math.sqrt(q.shape[-1]), "d_model": math.sqrt(x.shape[-1]), None: 1.0}
    scores = q @ k.transpose(-2, -1) / divisor[scale]  # (B, h, T_tgt, T_src)
    mask = torch.ones_like(scores, dtype=torch.bool)
    if padding:
        mask = mask & (real if padding is True else ~real)[:, None, None, :]
    if causal:
        mask = mask & torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
    if after:  # the mistake: masked after the softmax, rows no longer sum to 1
        weights = scores.softmax(dim=-1) * mask
    else:
        weights = scores.masked_fill(~mask, fill).softmax(dim=softmax_dim)
    out = weights @ v  # (B, h, T_tgt, d_k)
    if merge == "no transpose":  # the mistake: heads reshaped without moving them back
        return out.reshape(x.shape), weights
    return (merge_heads(out) if merge else out), weights


def _swapped_sources(x, memory, *rest):
    return _cross(memory, x, *rest)


CROSS_ATTENTION_MISTAKES = [
    (
        N_("keys and values from the decoder (x); take them from memory, the encoder output"),
        lambda x, m, *rest: _cross(x, x, *rest),
    ),
    (
        N_("queries from memory and keys and values from x: the queries come from the decoder (x)"),
        _swapped_sources,
    ),
    (
        N_(
            "a causal mask: in cross-attention every target position may read the whole source "
            "(it is known before decoding starts); hide only the padding"
        ),
        lambda *case: _cross(*case, causal=True),
    ),
    (N_("scores not divided by sqrt(d_k) (§3.2.1)"), lambda *case: _cross(*case, scale=None)),
    (
        N_("scores divided by sqrt(d_model); divide by sqrt(d_k), the size of one head"),
        lambda *case: _cross(*case, scale="d_model"),
    ),
    (
        N_("the padding ignored: hide keys where memory_mask is False"),
        lambda *case: _cross(*case, padding=False),
    ),
    (
        N_(
            "the padding convention inverted: memory_mask is True for real tokens, hide where it "
            "is False (masked_fill(~memory_mask, -inf))"
        ),
        lambda *case: _cross(*case, padding="inverted"),
    ),
    (
        N_(
            "the padding convention inverted (rows with no real key then turned from NaN to 0): "
            "memory_mask is True for real tokens, hide where it is False"
        ),
        lambda *case: tuple(t.nan_to_num(0.0) for t in _cross(*case, padding="inverted")),
    ),
    (
        N_("hidden scores set to 0; set them to -inf, so their weight is exactly 0"),
        lambda *case: _cross(*case, fill=0.0),
    ),
    (
        N_(
            "the mask applied after the softmax: the weights of a row no longer sum to 1; fill "
            "the scores with -inf before the softmax"
        ),
        lambda *case: _cross(*case, after=True),
    ),
    (
        N_("a softmax over the queries (dim=-2); softmax runs over the keys, the last axis"),
        lambda *case: _cross(*case, softmax_dim=-2),
    ),
    (
        N_(
            "head-averaged weights of shape (B, T_tgt, T_src), nn.MultiheadAttention's default; "
            "return every head's weights, (B, h, T_tgt, T_src)"
        ),
        lambda *case: (_cross(*case)[0], _cross(*case)[1].mean(dim=1)),
    ),
    (
        N_("the heads not merged back: merge_heads(weights @ V) gives (B, T_tgt, C)"),
        lambda *case: _cross(*case, merge=False),
    ),
    (
        N_(
            "the heads reshaped to (B, T_tgt, C) without moving the head axis back: transpose(1, "
            "2) "
            "first (merge_heads does it)"
        ),
        lambda *case: _cross(*case, merge="no transpose"),
    ),
]


def _cross_cases() -> list[Case]:
    """B, T_tgt, T_src (equal, larger, smaller, T_tgt = 1), C, n_heads (1 to 4), the layers and
    the source lengths (no padding, one real token) all varied. The first case has
    T_tgt == T_src, where swapping x and memory keeps every shape."""
    generator = torch.Generator().manual_seed(14)
    cases = []
    for b, t_tgt, t_src, c, h, lengths in (
        (2, 6, 6, 12, 2, [3, 6]),
        (2, 5, 7, 24, 3, [7, 4]),
        (1, 1, 4, 8, 1, [2]),
        (3, 4, 3, 16, 4, [3, 1, 2]),
    ):
        with torch.random.fork_rng(devices=[]):  # leave the notebook's random state alone
            torch.manual_seed(14 + t_tgt)
            w_q, w_k, w_v = (nn.Linear(c, c) for _ in range(3))
        x = torch.randn(b, t_tgt, c, generator=generator)
        memory = torch.randn(b, t_src, c, generator=generator)
        real = torch.arange(t_src) < torch.tensor(lengths)[:, None]  # (B, T_src)
        cases.append(Case(x, memory, w_q, w_k, w_v, h, real))
    return cases


def check_cross_attention(cross_attention: Callable) -> bool:
    """Check ``cross_attention(x, memory, w_q, w_k, w_v, n_heads, memory_mask)``.

    ``x`` ``(B, T_tgt, C)`` is the decoder's stream, ``memory`` ``(B, T_src, C)`` the encoder
    output, ``memory_mask`` ``(B, T_src)`` bool (True = a real source token). Expected:
    ``(output, weights)``, ``output = merge_heads(weights @ V)`` ``(B, T_tgt, C)`` (no W_o) and
    ``weights`` ``(B, h, T_tgt, T_src)`` (Vaswani et al. 2017, §3.2.3). Four cases vary every
    argument. Names each mistake of :data:`CROSS_ATTENTION_MISTAKES` and the two results
    returned in swapped order.
    """
    return judge(
        "cross_attention",
        cross_attention,
        _cross,
        _cross_cases(),
        CROSS_ATTENTION_MISTAKES,
        axes=(tr("output"), tr("weights")),
        trains=True,
    )


# --- the three masks of an encoder–decoder ----------------------------------------------------


def _masks(src_lengths, t_src, t_tgt, *, encoder_causal=False, cross_causal=False,
           decoder_causal=True, padding=True, diagonal=0, triu=False, rows=False,
           query_rows_too=False):  # fmt: skip
    """(encoder_self, decoder_self, cross) written out; the keywords make the known mistakes."""
    real = torch.arange(t_src) < torch.tensor(src_lengths)[:, None]  # (B, T_src)
    padding_mask = real[:, None, :, None] if rows else real[:, None, None, :]  # (B, 1, 1, T_src)
    if not padding:
        padding_mask = torch.ones_like(padding_mask)
    causal = torch.ones(t_tgt, t_tgt, dtype=torch.bool)  # (T_tgt, T_tgt)
    causal = causal.triu(diagonal) if triu else causal.tril(diagonal)
    if not decoder_causal:
        causal = torch.ones(t_tgt, t_tgt, dtype=torch.bool)
    encoder, cross = padding_mask, padding_mask
    if query_rows_too:  # the encoder's padded queries hidden as well: (B, 1, T_src, T_src)
        encoder = padding_mask & real[:, None, :, None]
    if encoder_causal:
        encoder = padding_mask & torch.ones(t_src, t_src, dtype=torch.bool).tril()
    if cross_causal:
        cross = padding_mask & torch.ones(t_tgt, t_src, dtype=torch.bool).tril()
    return encoder, causal, cross


def _inverted(*case):
    return tuple(~m for m in _masks(*case))


def _from_longest(src_lengths, t_src, t_tgt):
    return _masks(src_lengths, max(src_lengths), t_tgt)


ENCODER_DECODER_MASKS_MISTAKES = [
    (N_("the convention inverted: True means 'may attend', False hides"), _inverted),
    (
        N_(
            "a causal mask in the encoder: the encoder reads the whole source in both directions; "
            "hide only the padding"
        ),
        lambda *case: _masks(*case, encoder_causal=True),
    ),
    (
        N_(
            "a causal mask in cross-attention: the source is fully known, every target position "
            "may read every real source token"
        ),
        lambda *case: _masks(*case, cross_causal=True),
    ),
    (
        N_(
            "no causal mask in the decoder: a target position would see later target tokens; use "
            "torch.ones(t_tgt, t_tgt, dtype=torch.bool).tril()"
        ),
        lambda *case: _masks(*case, decoder_causal=False),
    ),
    (
        N_(
            "the source padding not hidden: mask keys j >= length in the encoder and in "
            "cross-attention"
        ),
        lambda *case: _masks(*case, padding=False),
    ),
    (
        N_(
            "tril(-1), which hides the diagonal too: each target position must also see itself "
            "(tril() with diagonal 0)"
        ),
        lambda *case: _masks(*case, diagonal=-1),
    ),
    (
        N_("triu instead of tril: a target position sees the future and not the past"),
        lambda *case: _masks(*case, triu=True),
    ),
    (
        N_(
            "the padding mask on the query rows (B, 1, T_src, 1); padding hides keys, the last "
            "axis: real[:, None, None, :]"
        ),
        lambda *case: _masks(*case, rows=True),
    ),
    (
        N_(
            "the padded query rows hidden too: a padded source position then sees no key at all "
            "(a row of -inf, NaN after the softmax); padding hides keys only: real[:, None, None, "
            ":]"
        ),
        lambda *case: _masks(*case, query_rows_too=True),
    ),
    (
        N_(
            "masks as wide as the longest source, max(src_lengths); the batch is padded to "
            "t_src positions: build them from torch.arange(t_src)"
        ),
        _from_longest,
    ),
    (
        N_("the masks in another order; return (encoder_self, decoder_self, cross)"),
        lambda *case: (_masks(*case)[1], _masks(*case)[0], _masks(*case)[2]),
    ),
]


def _broadcast(make_masks, src_lengths, t_src, t_tgt):
    """Each mask broadcast to (B, 1, T_q, T_k), so (B, 1, 1, T) and (B, 1, T_q, T) compare
    equal; a mask that does not broadcast is compared as it is (and its shape reported)."""
    masks = make_masks(src_lengths, t_src, t_tgt)
    if not isinstance(masks, (tuple, list)) or len(masks) != 3:
        return masks
    batch = len(src_lengths)
    sizes = ((t_src, t_src), (t_tgt, t_tgt), (t_tgt, t_src))
    out = []
    for mask, (t_q, t_k) in zip(masks, sizes):
        try:
            out.append(torch.broadcast_to(mask, (batch, 1, t_q, t_k)))
        except (RuntimeError, TypeError):
            out.append(mask)
    return tuple(out)


def check_encoder_decoder_masks(make_masks: Callable) -> bool:
    """Check ``make_masks(src_lengths, t_src, t_tgt)`` -> ``(encoder_self, decoder_self, cross)``.

    Each is a bool mask (True = may attend) that broadcasts to ``(B, h, T_q, T_k)``: the
    encoder's self-attention ``(T_src, T_src)`` hides source padding only; the decoder's
    self-attention ``(T_tgt, T_tgt)`` is causal; cross-attention ``(T_tgt, T_src)`` hides
    source padding only. Masks are compared after broadcasting, so ``(B, 1, 1, T)`` and
    ``(B, 1, T_q, T)`` are both accepted. Five cases vary B, the lengths, t_src (past the
    longest source too) and t_tgt (1 included). Names each mistake of
    :data:`ENCODER_DECODER_MASKS_MISTAKES`.
    """
    cases = [
        Case([7, 4], 7, 5),
        Case([2, 6, 3], 6, 4),
        Case([5, 3], 8, 6),
        Case([1], 3, 1),
        Case([4, 4], 4, 4),
    ]
    return judge(
        "make_masks",
        make_masks,
        _masks,
        cases,
        ENCODER_DECODER_MASKS_MISTAKES,
        call=_broadcast,
        axes=("encoder_self", "decoder_self", "cross"),
    )
