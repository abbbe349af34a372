"""Key-padding masks when queries and keys have different lengths (T_q != T_k).

A key-padding mask is ``(B, T_k)``: it hides the padded *keys* of each sequence, for every
query. With T_q == T_k a mask reshaped along the wrong axis (the queries) can go unnoticed;
these tests use T_q != T_k, as in cross-attention (target queries over source keys) and in
decoding with a cache (new queries over all earlier keys), and compare with PyTorch's own
``F.scaled_dot_product_attention`` and ``nn.MultiheadAttention``.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from references import copy_attention_weights
from torch import nn

from course_utils.attention import scaled_dot_product_attention
from course_utils.encoder_decoder_blocks import CrossAttention
from course_utils.masks import combine_masks

B, H, T_Q, T_K, D_K = 2, 3, 4, 6, 8
LENGTHS = torch.tensor([6, 3])  # the second sequence has 3 real keys, 3 padded


def _real_keys() -> torch.Tensor:
    """(B, T_k) bool, True = a real token."""
    return torch.arange(T_K)[None, :] < LENGTHS[:, None]


def _qkv(t_q: int = T_Q, t_k: int = T_K) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(B, H, t, D_K, generator=g) for t in (t_q, t_k, t_k))


@pytest.mark.parametrize("t_q", [1, T_Q, 9], ids=["one-new-query", "shorter", "longer"])
def test_key_padding_with_t_q_not_t_k_equals_pytorch(t_q):
    """Reference: F.scaled_dot_product_attention with the mask broadcast over queries."""
    q, k, v = _qkv(t_q)
    out, weights = scaled_dot_product_attention(q, k, v, key_padding_mask=_real_keys())
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=_real_keys()[:, None, None, :])
    torch.testing.assert_close(out, expected)
    assert weights.shape == (B, H, t_q, T_K)
    # every query of the second sequence gives its 3 padded keys exactly zero weight
    assert torch.all(weights[1, :, :, 3:] == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, t_q))


@pytest.mark.parametrize("t_q", [1, T_Q, 9])
def test_combined_key_padding_mask_hides_keys_for_every_query(t_q):
    """combine_masks turns (B, T_k) into a mask over (B, h, T_q, T_k): key j of sequence b is
    hidden from every head and every query exactly when it is padding."""
    mask = combine_masks(None, _real_keys(), (B, H, t_q, T_K))
    full = mask.expand(B, H, t_q, T_K)
    expected = _real_keys()[:, None, None, :].expand(B, H, t_q, T_K)
    assert torch.equal(full, expected)


def test_key_padding_equals_the_same_mask_given_as_mask():
    """The (B, T_k) key-padding mask means the (B, 1, 1, T_k) mask, whatever T_q is."""
    q, k, v = _qkv()
    by_padding = scaled_dot_product_attention(q, k, v, key_padding_mask=_real_keys())
    by_mask = scaled_dot_product_attention(q, k, v, mask=_real_keys()[:, None, None, :])
    for ours, theirs in zip(by_padding, by_mask, strict=True):
        torch.testing.assert_close(ours, theirs)


def test_key_padding_combined_with_a_mask_when_t_q_differs():
    """Both masks hide keys: the result is their AND (here with a (T_q, T_k) band mask)."""
    q, k, v = _qkv()
    band = torch.ones(T_Q, T_K, dtype=torch.bool).tril(diagonal=T_K - T_Q)  # (T_q, T_k)
    out, _ = scaled_dot_product_attention(q, k, v, mask=band, key_padding_mask=_real_keys())
    both = band[None, None] & _real_keys()[:, None, None, :]  # (B, 1, T_q, T_k)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=both))


@pytest.mark.parametrize("need_weights", [False, True], ids=["fast-path", "teaching-path"])
def test_cross_attention_key_padding_equals_nn_multihead_attention(need_weights):
    """Target (B, T_tgt=4, C) over a padded source (B, T_src=6, C); nn.MultiheadAttention's
    key_padding_mask is True for *padding*, the course's for real tokens: pass ``~mask``."""
    torch.manual_seed(0)
    d_model = H * D_K
    ours = CrossAttention(d_model, H).eval()
    theirs = nn.MultiheadAttention(d_model, H, batch_first=True).eval()
    copy_attention_weights(ours, theirs)
    x, memory = torch.randn(B, T_Q, d_model), torch.randn(B, T_K, d_model)
    got = ours(x, memory, _real_keys(), need_weights=need_weights)
    expected, _ = theirs(x, memory, memory, key_padding_mask=~_real_keys())
    torch.testing.assert_close(got, expected)
    # the padded source tokens do not matter at all
    changed = memory.clone()
    changed[1, 3:] = 100.0
    torch.testing.assert_close(ours(x, changed, _real_keys(), need_weights=need_weights), got)


def test_a_2d_mask_that_could_be_padding_is_refused_without_a_head_axis():
    """Scores (B, T_q, T_k) with B == T_q: a 2-D mask could be (T_q, T_k) or a (B, T_k)
    padding mask; the course refuses to guess (mask[None] or key_padding_mask= say which)."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(4, 4, D_K, generator=g) for _ in range(3))  # (B=4, T=4, d_k)
    padding_like = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 0]]).bool()
    with pytest.raises(ValueError, match="ambiguous"):
        scaled_dot_product_attention(q, k, v, mask=padding_like)
    # said explicitly, both readings work
    as_attention = scaled_dot_product_attention(q, k, v, mask=padding_like[None])[0]
    as_padding = scaled_dot_product_attention(q, k, v, key_padding_mask=padding_like)[0]
    assert as_attention.shape == as_padding.shape == (4, 4, D_K)


def _attention_matches_pytorch(q, k, v, mask) -> None:
    out, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_unambiguous_masks_are_accepted_when_b_equals_t_q():
    """Only a 2-D mask whose first axis could be B *or* T_q is refused; these cannot be
    misread, so they are used as given (compared with PyTorch's attention)."""
    g = torch.Generator().manual_seed(1)
    # one sequence, one new query over 5 keys (a decoding step): (1, T_k) reads the same
    # as (T_q, T_k) and as (B, T_k)
    q, k, v = (torch.randn(1, H, t, D_K, generator=g) for t in (1, 5, 5))
    _attention_matches_pytorch(q, k, v, torch.tensor([[True, True, False, True, False]]))
    # B == T_q == 3 and a (1, T_k) mask shared by every query and sequence
    q, k, v = (torch.randn(3, H, t, D_K, generator=g) for t in (3, 4, 4))
    _attention_matches_pytorch(q, k, v, torch.tensor([[True, False, True, True]]))
    # B == T_q == T_k == 3 and a 4-D (B, 1, T_q, T_k) mask: the axes are explicit
    q, k, v = (torch.randn(3, H, 3, D_K, generator=g) for _ in range(3))
    per_sequence = torch.tensor(
        [[[1, 1, 0], [1, 1, 0], [1, 1, 0]], [[1, 1, 1]] * 3, [[1, 0, 1], [0, 1, 1], [1, 1, 0]]]
    ).bool()[:, None]  # (B, 1, T_q, T_k)
    _attention_matches_pytorch(q, k, v, per_sequence)


def test_an_ambiguous_mask_is_refused_for_a_long_batch_too():
    """B == T_q == 300: past Python's shared small ints, B and T_q are equal values held in
    distinct objects (from the tensors' shapes), and the rule compares the values."""
    q = k = v = torch.zeros(300, 300, 1)  # (B, T, d_k)
    padding_like = torch.ones(300, 300, dtype=torch.bool)
    padding_like[1, 150:] = False  # as padding: sequence 1 has 150 real tokens
    with pytest.raises(ValueError, match="ambiguous"):
        scaled_dot_product_attention(q, k, v, mask=padding_like)


def test_the_sequence_left_without_keys_is_named_when_heads_outnumber_sequences():
    """Scores (B=2, h=3, T, T): the check groups by sequence, not by head."""
    mask = torch.tensor([[True] * 4, [False] * 4])[:, None, None, :]  # (B, 1, 1, T_k)
    with pytest.raises(ValueError, match=r"leaves sequence\(s\) \[1\] with no visible key"):
        combine_masks(mask, None, (2, 3, 4, 4))
    assert combine_masks(mask[:1], None, (1, 3, 4, 4)).all()  # the real sequence alone is fine
