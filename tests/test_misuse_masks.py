"""Misuse class 1, masks: every wrong mask raises an error that names the argument, the
expected and the actual value, and the fix; every unambiguous mask is accepted correctly."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from course_utils.attention import (
    MultiHeadAttention,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
)
from course_utils.layers import DecoderBlock

B, H, T, D = 2, 3, 5, 4


def qkv(batch: int = B, time: int = T) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    return tuple(torch.randn(batch, H, time, D) for _ in range(3))


def inverted_causal(size: int = T) -> torch.Tensor:
    return torch.triu(torch.ones(size, size, dtype=torch.bool), diagonal=1)  # True = hidden


@pytest.mark.parametrize(
    "mask",
    [
        inverted_causal(),
        ~causal_mask(T),
        inverted_causal()[None, None].expand(B, H, T, T),
        torch.zeros(T, T, dtype=torch.bool),
        ~torch.eye(T, dtype=torch.bool),
    ],
    ids=["triu1", "not-causal", "4d-triu1", "all-hidden", "not-eye"],
)
def test_inverted_self_attention_mask_is_refused(mask):
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"mask hides every query's own position") as info:
        scaled_dot_product_attention(q, k, v, mask=mask)
    message = str(info.value)
    assert "True = may attend" in message and "True = hidden" in message
    assert "~mask" in message and "nn.MultiheadAttention" in message


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("is_causal", [False, True])
def test_inverted_mask_refused_by_module(need_weights, is_causal):
    attention = MultiHeadAttention(12, 3).eval()
    with pytest.raises(ValueError, match=r"~mask"):
        attention(
            torch.randn(B, T, 12),
            mask=inverted_causal(),
            is_causal=is_causal,
            need_weights=need_weights,
        )
    block = DecoderBlock(12, 3, 48).eval()
    with pytest.raises(ValueError, match=r"inverted"):
        block(torch.randn(B, T, 12), mask=inverted_causal())


@pytest.mark.parametrize(
    "mask, dtype_name, fix",
    [
        (causal_mask(T).to(torch.uint8), "torch.uint8", r"mask == 0"),
        (causal_mask(T).long(), "torch.int64", r"mask.bool\(\)"),
        (causal_mask(T).int(), "torch.int32", r"mask.bool\(\)"),
        (causal_mask(T).float(), "torch.float32", r"mask == 0"),
        (
            torch.zeros(T, T).masked_fill(~causal_mask(T), float("-inf")),
            "torch.float32",
            "additive",
        ),
        (causal_mask(T).half(), "torch.float16", r"mask.bool\(\)"),
    ],
    ids=["uint8", "int64", "int32", "float01", "additive", "half"],
)
def test_non_bool_mask_is_refused(mask, dtype_name, fix):
    q, k, v = qkv()
    for call in (
        lambda: scaled_dot_product_attention(q, k, v, mask=mask),
        lambda: MultiHeadAttention(12, 3)(torch.randn(B, T, 12), mask=mask),
    ):
        with pytest.raises(TypeError, match=r"mask must be a torch.bool tensor") as info:
            call()
        assert dtype_name in str(info.value)
        assert pytest.importorskip("re").search(fix, str(info.value))


@pytest.mark.parametrize("mask", [[[True] * T] * T, None], ids=["list", "none-kpm"])
def test_mask_that_is_not_a_tensor(mask):
    q, k, v = qkv()
    if mask is None:
        with pytest.raises(TypeError, match=r"key_padding_mask must be a torch.bool tensor.*list"):
            scaled_dot_product_attention(q, k, v, key_padding_mask=[[True] * T] * B)
    else:
        with pytest.raises(TypeError, match=r"mask must be a torch.bool tensor.*got list"):
            scaled_dot_product_attention(q, k, v, mask=mask)


@pytest.mark.parametrize("lengths", [[4, 2, 3, 5], [5, 1, 5, 2], [3, 3, 4, 4]])
def test_padding_mask_passed_as_mask_when_b_equals_t_is_refused(lengths):
    batch = time = 4 if len(lengths) == 4 else 5
    lengths = [min(n, time) for n in lengths]
    q, k, v = qkv(batch, time)
    flat = padding_mask(lengths, time)[:, 0, 0]  # (B, T_k) with B == T
    with pytest.raises(ValueError, match=r"ambiguous.*key_padding_mask=.*mask\[None, None\]"):
        scaled_dot_product_attention(q, k, v, mask=flat)
    with pytest.raises(ValueError, match=r"ambiguous"):
        MultiHeadAttention(12, 3)(torch.randn(batch, time, 12), mask=flat)
    # the same mask as key_padding_mask, or stated as (1, 1, T_q, T_k), is unambiguous
    out, _ = scaled_dot_product_attention(q, k, v, key_padding_mask=flat)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=flat[:, None, None, :])
    assert torch.allclose(out, expected, atol=1e-6)
    scaled_dot_product_attention(q, k, v, mask=flat[None, None])


@pytest.mark.parametrize("batch", [2, 3, 7])
def test_padding_mask_passed_as_mask_when_b_differs_names_key_padding_mask(batch):
    q, k, v = qkv(batch, T)
    flat = torch.ones(batch, T, dtype=torch.bool)
    flat[0, -1] = False
    with pytest.raises(ValueError, match=r"does not broadcast.*key_padding_mask=") as info:
        scaled_dot_product_attention(q, k, v, mask=flat)
    assert str((batch, T)) in str(info.value)


def test_causal_mask_with_b_equals_t_is_accepted():
    q, k, v = qkv(T, T)
    out, _ = scaled_dot_product_attention(q, k, v, mask=causal_mask(T))
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-6)
    x = torch.randn(T, T, 12)
    block = DecoderBlock(12, 3, 48).eval()
    assert torch.allclose(block(x, mask=causal_mask(T)), block(x), atol=1e-6)


@pytest.mark.parametrize("lengths, time", [([4, 2], 4), ([5, 3, 1], 5), ([3, 5], 6), ([2, 2], 3)])
def test_inverted_key_padding_mask_is_refused(lengths, time):
    q, k, v = qkv(len(lengths), time)
    real = padding_mask(lengths, time)[:, 0, 0]
    with pytest.raises(ValueError, match=r"key_padding_mask.*~key_padding_mask") as info:
        scaled_dot_product_attention(q, k, v, key_padding_mask=~real)
    assert "True = padding" in str(info.value) or "True = hidden" in str(info.value)
    with pytest.raises(ValueError, match=r"~key_padding_mask"):
        MultiHeadAttention(12, 3)(torch.randn(len(lengths), time, 12), key_padding_mask=~real)


@pytest.mark.parametrize(
    "kpm_shape", [(B, 1, 1, T), (T,), (B, T + 1), (B + 1, T)], ids=["4d", "1d", "long", "batch"]
)
def test_key_padding_mask_wrong_shape(kpm_shape):
    q, k, v = qkv()
    with pytest.raises(
        ValueError, match=r"key_padding_mask must have shape \(B=2, T_k=5\)"
    ) as info:
        scaled_dot_product_attention(
            q, k, v, key_padding_mask=torch.ones(kpm_shape, dtype=torch.bool)
        )
    assert str(kpm_shape) in str(info.value)


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("lengths", [[5, 3], [2, 5], [1, 4]])
def test_key_padding_mask_matches_pytorch(lengths, need_weights):
    torch.manual_seed(1)
    attention = MultiHeadAttention(12, 3).eval()
    reference = torch.nn.MultiheadAttention(12, 3, batch_first=True).eval()
    with torch.no_grad():
        reference.in_proj_weight.copy_(
            torch.cat([attention.w_q.weight, attention.w_k.weight, attention.w_v.weight])
        )
        reference.in_proj_bias.copy_(
            torch.cat([attention.w_q.bias, attention.w_k.bias, attention.w_v.bias])
        )
        reference.out_proj.weight.copy_(attention.w_o.weight)
        reference.out_proj.bias.copy_(attention.w_o.bias)
    x = torch.randn(2, T, 12)
    real = padding_mask(lengths, T)[:, 0, 0]
    ours = attention(x, key_padding_mask=real, need_weights=need_weights)
    theirs, _ = reference(x, x, x, key_padding_mask=~real)  # their convention: True = padding
    assert torch.allclose(ours, theirs, atol=1e-5)


def test_key_padding_mask_and_causal_combine():
    torch.manual_seed(2)
    attention = MultiHeadAttention(12, 3).eval()
    x = torch.randn(2, T, 12)
    real = padding_mask([5, 3], T)[:, 0, 0]
    expected = attention(x, mask=causal_mask(T) & real[:, None, None, :])
    assert torch.allclose(attention(x, is_causal=True, key_padding_mask=real), expected, atol=1e-6)
    assert torch.allclose(
        attention(x, is_causal=True, key_padding_mask=real, need_weights=True), expected, atol=1e-6
    )


def test_key_padding_mask_positional_is_refused():
    q, k, v = qkv()
    real = torch.ones(B, T, dtype=torch.bool)
    with pytest.raises(TypeError):
        scaled_dot_product_attention(q, k, v, None, 0.0, real)  # keyword only


@pytest.mark.parametrize("dropout_p", [-0.1, 1.0, 1.5, float("nan")])
def test_dropout_p_out_of_range(dropout_p):
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"dropout_p must be a probability in \[0, 1\)") as info:
        scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    assert str(dropout_p) in str(info.value)
