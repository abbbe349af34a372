"""The post-LN block (the paper's ordering), checked against nn.TransformerEncoderLayer."""

from __future__ import annotations

import torch
from references import encoder_layer_like
from torch import nn

from course_utils.layers import DecoderBlock, PostLNDecoderBlock

B, T, D_MODEL, H, D_FF = 2, 6, 24, 3, 96


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def post_ln_block(seed: int = 0) -> PostLNDecoderBlock:
    torch.manual_seed(seed)
    block = PostLNDecoderBlock(D_MODEL, H, D_FF).eval()
    with torch.no_grad():
        for parameter in block.parameters():  # non-trivial norms and biases too
            parameter.add_(0.1 * torch.randn_like(parameter))
    return block


def test_post_ln_block_matches_transformer_encoder_layer_with_norm_last():
    block = post_ln_block()
    reference = encoder_layer_like(block, norm_first=False)
    x = randn(B, T, D_MODEL, seed=4)
    src_mask = nn.Transformer.generate_square_subsequent_mask(T)
    with torch.no_grad():
        expected = reference(x, src_mask=src_mask, is_causal=True)
        torch.testing.assert_close(block(x), expected, rtol=0, atol=1e-5)
        torch.testing.assert_close(block(x, need_weights=True), expected, rtol=0, atol=1e-5)
        # The pre-LN reference with the same weights computes something else.
        pre = encoder_layer_like(block, norm_first=True)
        assert not torch.allclose(pre(x, src_mask=src_mask, is_causal=True), expected, atol=1e-3)


def test_post_ln_output_is_normalised_per_token():
    torch.manual_seed(0)
    block = PostLNDecoderBlock(D_MODEL, H, D_FF).eval()  # LayerNorm weight 1, bias 0
    with torch.no_grad():
        y = block(randn(B, T, D_MODEL) * 7.0 + 3.0)
    torch.testing.assert_close(y.mean(-1), torch.zeros(B, T), rtol=0, atol=1e-5)
    torch.testing.assert_close(y.var(-1, unbiased=False), torch.ones(B, T), rtol=0, atol=1e-3)


def test_weights_move_between_pre_and_post_ln_and_only_the_order_differs():
    torch.manual_seed(0)
    pre = DecoderBlock(D_MODEL, H, D_FF).eval()
    post = PostLNDecoderBlock(D_MODEL, H, D_FF).eval()
    post.load_state_dict(pre.state_dict())  # same names, same shapes
    x = randn(B, T, D_MODEL, seed=5)
    with torch.no_grad():
        assert not torch.allclose(pre(x), post(x), atol=1e-3)
        by_hand = pre.ln_1(x + pre.attention(x, is_causal=True))
        by_hand = pre.ln_2(by_hand + pre.feed_forward(by_hand))
        torch.testing.assert_close(post(x), by_hand, rtol=0, atol=1e-6)


def test_post_ln_block_is_causal():
    block = post_ln_block()
    x = randn(1, T, D_MODEL, seed=6).requires_grad_(True)
    block(x)[0, 2].sum().backward()
    assert x.grad[0, 3:].abs().max() == 0, "position 2 must not see later positions"
    assert x.grad[0, :3].abs().max() > 0
