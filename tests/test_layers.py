"""LayerNorm, FeedForward and the pre-LN DecoderBlock, checked against PyTorch's own layers."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from references import encoder_layer_like
from torch import nn

from course_utils.layers import DecoderBlock, FeedForward, LayerNorm

B, T, D_MODEL, H, D_FF = 2, 6, 24, 3, 96


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def layer_norm_pair(width: int, explicit: bool = True) -> tuple[LayerNorm, nn.LayerNorm]:
    """Ours and nn.LayerNorm with the same random (non-trivial) weight and bias."""
    ours, reference = LayerNorm(width, explicit=explicit), nn.LayerNorm(width, eps=1e-5)
    with torch.no_grad():
        ours.weight.copy_(randn(width, seed=1) + 1.0)
        ours.bias.copy_(randn(width, seed=2))
        reference.weight.copy_(ours.weight)
        reference.bias.copy_(ours.bias)
    return ours, reference


def unbiased_std_layer_norm(x: torch.Tensor, layer: LayerNorm) -> torch.Tensor:
    """A common hand-written mistake: unbiased std (divide by C - 1) and eps outside sqrt."""
    mean = x.mean(dim=-1, keepdim=True)
    std = x.std(dim=-1, keepdim=True)  # unbiased by default
    return (x - mean) / (std + layer.eps) * layer.weight + layer.bias


@pytest.mark.parametrize("width", [4, D_MODEL])
@pytest.mark.parametrize("explicit", [True, False], ids=["formula", "fused"])
def test_layer_norm_matches_nn_layer_norm(width, explicit):
    """Both paths, the written-out formula and the fused kernel, against nn.LayerNorm."""
    ours, reference = layer_norm_pair(width, explicit)
    x = randn(B, T, width, seed=3) * 3.0 + 1.5
    torch.testing.assert_close(ours(x), reference(x), rtol=0, atol=1e-6)


def test_layer_norm_formula_path_has_the_same_gradients_as_nn_layer_norm():
    ours, reference = layer_norm_pair(D_MODEL, explicit=True)
    x = (randn(B, T, D_MODEL, seed=3) * 3.0 + 1.5).requires_grad_()
    upstream = randn(B, T, D_MODEL, seed=4)
    ours_grads = torch.autograd.grad((ours(x) * upstream).sum(), [x, ours.weight, ours.bias])
    reference_grads = torch.autograd.grad(
        (reference(x) * upstream).sum(), [x, reference.weight, reference.bias]
    )
    for mine, theirs in zip(ours_grads, reference_grads):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-5)


def test_layer_norm_check_can_fail():
    """The unbiased-std variant is measurably off for small C, so the check above would catch it."""
    ours, reference = layer_norm_pair(4)
    x = randn(B, T, 4, seed=3) * 3.0 + 1.5
    wrong = unbiased_std_layer_norm(x, ours)
    assert (wrong - reference(x)).abs().max() > 1e-3
    assert (ours(x) - reference(x)).abs().max() < 1e-6


def test_layer_norm_output_has_zero_mean_unit_variance_before_affine():
    layer = LayerNorm(D_MODEL)  # weight 1, bias 0
    y = layer(randn(B, T, D_MODEL) * 5.0 - 2.0)
    torch.testing.assert_close(y.mean(-1), torch.zeros(B, T), rtol=0, atol=1e-5)
    torch.testing.assert_close(y.var(-1, unbiased=False), torch.ones(B, T), rtol=0, atol=1e-3)


def test_layer_norm_rejects_wrong_width():
    with pytest.raises(ValueError, match=r"last axis of size 24, got shape \(2, 6, 10\)"):
        LayerNorm(D_MODEL)(torch.zeros(B, T, 10))


@pytest.mark.parametrize(("activation", "function"), [("gelu", F.gelu), ("relu", F.relu)])
def test_feed_forward_matches_its_formula(activation, function):
    """Reference: W2 act(W1 x + b1) + b2 written with F.linear."""
    torch.manual_seed(0)
    ffn = FeedForward(D_MODEL, D_FF, activation=activation)
    x = randn(B, T, D_MODEL)
    hidden = function(F.linear(x, ffn.up.weight, ffn.up.bias))
    expected = F.linear(hidden, ffn.down.weight, ffn.down.bias)
    torch.testing.assert_close(ffn(x), expected, rtol=0, atol=1e-6)


def test_feed_forward_is_position_wise():
    """Permuting positions permutes outputs; changing one position changes only its output."""
    torch.manual_seed(0)
    ffn = FeedForward(D_MODEL, D_FF)
    x = randn(B, T, D_MODEL)
    out = ffn(x)
    permutation = torch.randperm(T, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(ffn(x[:, permutation]), out[:, permutation], rtol=0, atol=1e-6)
    changed = x.clone()
    changed[:, 3] = randn(B, D_MODEL, seed=9)
    out_changed = ffn(changed)
    others = [t for t in range(T) if t != 3]
    torch.testing.assert_close(out_changed[:, others], out[:, others], rtol=0, atol=1e-6)
    assert not torch.allclose(out_changed[:, 3], out[:, 3])


def test_feed_forward_rejects_unknown_activation():
    with pytest.raises(ValueError, match=r"\['gelu', 'relu'\], got 'swish'"):
        FeedForward(D_MODEL, D_FF, activation="swish")


def test_decoder_block_matches_transformer_encoder_layer():
    """Reference: nn.TransformerEncoderLayer(norm_first=True, gelu) with a causal src_mask.

    A decoder-only block is an encoder layer with a causal mask: pre-LN attention then
    pre-LN feed-forward, each added to the residual stream.
    """
    torch.manual_seed(0)
    block = DecoderBlock(D_MODEL, H, D_FF).eval()
    with torch.no_grad():
        for parameter in block.parameters():  # non-trivial norms and biases too
            parameter.add_(0.1 * torch.randn_like(parameter))
    reference = encoder_layer_like(block, norm_first=True)
    assert reference.norm1.eps == block.ln_1.eps == 1e-5
    x = randn(B, T, D_MODEL, seed=4)
    src_mask = nn.Transformer.generate_square_subsequent_mask(T)
    with torch.no_grad():
        expected = reference(x, src_mask=src_mask, is_causal=True)
        torch.testing.assert_close(block(x), expected, rtol=0, atol=1e-5)
        torch.testing.assert_close(block(x, need_weights=True), expected, rtol=0, atol=1e-5)
        # Without the causal mask the reference differs: the comparison can fail.
        assert not torch.allclose(reference(x), expected, atol=1e-3)


def test_decoder_block_names_a_bad_d_ff_before_any_sublayer_is_built():
    """d_ff is checked first, so two mistakes at once (d_ff = 0 and 5 heads for C = 24) name
    d_ff, the block's own argument, rather than an error from inside MultiHeadAttention."""
    with pytest.raises(ValueError, match=r"d_ff must be at least 1 \(the hidden width"):
        DecoderBlock(24, 5, 0)
