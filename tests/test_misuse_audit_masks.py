"""Audit of mask, attention-shape, device and RoPE-position misuse (course_utils.masks,
course_utils.attention, course_utils.positional).

Each silent misuse is refused with a clear error (type, argument named, expected and actual
value, the fix), and its legitimate neighbour still works and gives the reference result.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from course_utils.attention import MultiHeadAttention, scaled_dot_product_attention
from course_utils.masks import causal_mask, padding_mask
from course_utils.rotary import apply_rotary_embedding

B, H, T, D_K = 2, 2, 5, 8
D_MODEL = H * D_K


def qkv(t_q: int = T) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(B, H, t_q, D_K, generator=generator)
    k = torch.randn(B, H, T, D_K, generator=generator)
    v = torch.randn(B, H, T, D_K, generator=generator)
    return q, k, v


def mha() -> MultiHeadAttention:
    torch.manual_seed(0)
    return MultiHeadAttention(D_MODEL, H).eval()


def x_input() -> torch.Tensor:
    return torch.randn(B, T, D_MODEL, generator=torch.Generator().manual_seed(1))


# --- 1. inverted padding masks ------------------------------------------------------------------

INVERTED = {
    "inverted-padding": lambda: ~padding_mask([5, 3], T),
    "inverted-padding-4-4": lambda: ~padding_mask([4, 4], T),
    "inverted-padding-causal": lambda: ~(causal_mask(T) & padding_mask([5, 3], T)),
    "one-sequence-all-hidden": lambda: padding_mask([0, 3], T),
}
INVERTED_MESSAGE = r"mask \(shape .*\) (leaves sequence|hides key 0)"


def _assert_explains(message: str) -> None:
    assert "True = may attend" in message and "True = hidden" in message
    assert "~mask" in message and "padding_mask(lengths, T)" in message


@pytest.mark.parametrize("name", INVERTED)
@pytest.mark.parametrize("t_q", [T, 3], ids=["square", "non-square"])
def test_inverted_padding_mask_refused_by_function(name, t_q):
    q, k, v = qkv(t_q)
    mask = INVERTED[name]()
    if t_q != T and mask.shape[-2] != 1:
        mask = mask[..., :t_q, :]
    with pytest.raises(ValueError, match=INVERTED_MESSAGE) as info:
        scaled_dot_product_attention(q, k, v, mask=mask)
    _assert_explains(str(info.value))


@pytest.mark.parametrize("name", INVERTED)
@pytest.mark.parametrize("need_weights", [False, True])
def test_inverted_padding_mask_refused_by_module(name, need_weights):
    with pytest.raises(ValueError, match=INVERTED_MESSAGE) as info:
        mha()(x_input(), mask=INVERTED[name](), need_weights=need_weights)
    _assert_explains(str(info.value))


def test_diagonal_check_is_kept():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"mask hides every query's own position"):
        scaled_dot_product_attention(q, k, v, mask=~causal_mask(T))


def _left_padded(lengths: list[int]) -> torch.Tensor:
    real = torch.arange(T) >= T - torch.tensor(lengths)[:, None]  # (B, T_k)
    return real[:, None, None, :]  # (B, 1, 1, T_k)


LEGITIMATE = {
    "causal": lambda: causal_mask(T),
    "right-padding": lambda: padding_mask([5, 3], T),
    "causal+right-padding": lambda: causal_mask(T) & padding_mask([5, 3], T),
    "left-padding": lambda: _left_padded([5, 3]),
    "causal+left-padding": lambda: causal_mask(T) & _left_padded([5, 3]),
    "per-sequence-4d": lambda: causal_mask(T) & padding_mask([5, 2], T),
}


@pytest.mark.parametrize("name", LEGITIMATE)
@pytest.mark.parametrize("t_q", [T, 3], ids=["square", "non-square"])
def test_legitimate_masks_give_the_reference(name, t_q):
    q, k, v = qkv(t_q)
    mask = LEGITIMATE[name]()
    if mask.shape[-2] != 1:
        mask = mask[..., :t_q, :]
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    visible = mask.expand(weights.shape).any(-1).float()  # 0 for a query with no visible key
    torch.testing.assert_close(weights.sum(-1), visible)


@pytest.mark.parametrize("name", LEGITIMATE)
def test_legitimate_masks_work_in_the_module(name):
    attention, x = mha(), x_input()
    mask = LEGITIMATE[name]()
    fast = attention(x, mask=mask)
    teaching = attention(x, mask=mask, need_weights=True)
    torch.testing.assert_close(fast, teaching, rtol=1e-5, atol=1e-6)


def test_single_left_padded_sequence_still_passes():
    # notebook 06: one left-padded sequence (batch 1) hides key 0 from every query
    real_left = torch.arange(6) >= 2
    mask_left = causal_mask(6) & real_left
    q = torch.randn(1, H, 6, D_K, generator=torch.Generator().manual_seed(2))
    out, weights = scaled_dot_product_attention(q, q, q, mask=mask_left)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, q, q, attn_mask=mask_left))
    assert (weights[..., :2, :] == 0).all()


# --- 2. 3-D masks -------------------------------------------------------------------------------


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize(
    "mask",
    [
        (causal_mask(T) & padding_mask([5, 3], T)[:, 0]),  # (B, T, T), B == n_heads
        causal_mask(T)[None],  # (1, T, T)
    ],
    ids=["B-T-T", "1-T-T"],
)
def test_3d_mask_refused_by_module(mask, need_weights):
    with pytest.raises(ValueError, match=r"mask of shape \(\d, 5, 5\) is 3-D") as info:
        mha()(x_input(), mask=mask, need_weights=need_weights)
    message = str(info.value)
    assert "(B, 1, T_q, T_k)" in message and "mask[:, None]" in message
    assert "(B * h, T_q, T_k)" in message


def test_3d_mask_refused_by_function_with_heads():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"mask of shape \(2, 5, 5\) is 3-D"):
        scaled_dot_product_attention(q, k, v, mask=causal_mask(T).expand(B, T, T))


def test_4d_neighbour_of_3d_mask_gives_the_reference():
    attention, x = mha(), x_input()
    mask3 = causal_mask(T) & padding_mask([5, 3], T)[:, 0]  # (B, T, T)
    out = attention(x, mask=mask3[:, None])  # (B, 1, T, T)
    torch.testing.assert_close(out, attention(x, mask=causal_mask(T) & padding_mask([5, 3], T)))


def test_3d_mask_with_3d_scores_still_works():
    # no head axis: (B, T_q, T_k) lines up with the scores exactly
    q = torch.randn(B, T, D_K, generator=torch.Generator().manual_seed(3))
    mask = causal_mask(T) & padding_mask([5, 3], T)[:, 0]  # (B, T, T)
    out, _ = scaled_dot_product_attention(q, q, q, mask=mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, q, q, attn_mask=mask))


# --- 3. q, k, v shapes --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("k_shape", "v_shape", "pattern"),
    [
        ((3, 2, 5, 8), (3, 2, 5, 8), r"leading \(batch, head\) dims, got \(2, 2\), \(3, 2\)"),
        ((2, 3, 5, 8), (2, 3, 5, 8), r"leading \(batch, head\) dims, got \(2, 2\), \(2, 3\)"),
        ((2, 2, 5, 8), (3, 2, 5, 8), r"got \(2, 2\), \(2, 2\), \(3, 2\)"),
        ((2, 2, 5, 4), (2, 2, 5, 8), r"q and k must have the same d_k .* got 8 and 4"),
        ((2, 2, 5, 8), (2, 2, 4, 8), r"k and v must have the same T_k .* got 5 and 4"),
    ],
    ids=["batch", "heads", "v-batch", "d_k", "T_k"],
)
def test_qkv_shape_mismatch_is_named(k_shape, v_shape, pattern):
    q = torch.randn(2, 2, 5, 8)
    with pytest.raises(ValueError, match=pattern) as info:
        scaled_dot_product_attention(q, torch.randn(k_shape), torch.randn(v_shape))
    assert str(k_shape) in str(info.value) and "(2, 2, 5, 8)" in str(info.value)


def test_qkv_cross_attention_neighbour_still_works():
    q = torch.randn(2, 2, 3, 8)
    k, v = torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 4)  # T_k != T_q, d_v != d_k
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 2, 3, 4) and weights.shape == (2, 2, 3, 5)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))


# --- 4. causal_mask arguments -------------------------------------------------------------------


def test_causal_mask_tensor_size_is_explained():
    x = torch.randn(2, 7, 16)
    with pytest.raises(
        TypeError, match=r"size must be an int .* tensor of shape \(2, 7, 16\)"
    ) as info:
        causal_mask(x)
    message = str(info.value)
    assert "x.shape[-2]" in message and "tensor([" not in message


def test_causal_mask_unknown_device_name():
    with pytest.raises(
        ValueError,
        match=r"device must be a torch.device or a name such as 'cpu', 'cuda'.* got 'gpu'",
    ):
        causal_mask(5, device="gpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_causal_mask_missing_cuda_device():
    with pytest.raises(RuntimeError, match=r"device='cuda' was requested .* 0 CUDA device"):
        causal_mask(5, device="cuda")


@pytest.mark.parametrize("device", [None, "cpu", torch.device("cpu")])
@pytest.mark.parametrize("size", [5, torch.tensor(5)])
def test_causal_mask_neighbours_still_work(device, size):
    mask = causal_mask(size, device=device)
    assert mask.device.type == "cpu" and mask.dtype == torch.bool
    assert mask.tolist() == [[j <= i for j in range(5)] for i in range(5)]


# --- 5. RoPE positions --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x_shape", "p_shape"),
    [((B, H, T, D_K), (B, T)), ((B, H, T, D_K), (B, H, 1, T)), ((B, T, D_K), (1, 1, T))],
)
def test_rope_positions_with_unaligned_dims_refused(x_shape, p_shape):
    x = torch.randn(x_shape)
    positions = torch.arange(T).expand(p_shape)
    with pytest.raises(ValueError, match=r"positions of shape .* do not line up with") as info:
        apply_rotary_embedding(x, positions=positions)
    message = str(info.value)
    assert str(tuple(p_shape)) in message and str(x_shape[:-1]) in message
    assert f"exactly x.ndim - 1 = {len(x_shape) - 1} dims" in message
    if len(p_shape) == 2:
        assert "positions[:, None, :]" in message


def test_rope_per_sequence_positions_neighbour():
    x = torch.randn(B, H, T, D_K, generator=torch.Generator().manual_seed(4))
    positions = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])  # (B, T)
    out = apply_rotary_embedding(x, positions=positions[:, None, :])  # (B, 1, T)
    for b in range(B):
        torch.testing.assert_close(out[b], apply_rotary_embedding(x[b], positions=positions[b]))
    shared = apply_rotary_embedding(x, positions=torch.arange(T))  # (T,)
    torch.testing.assert_close(shared, apply_rotary_embedding(x))
