"""Cross-attention's shape checks (Vaswani et al. 2017, §3.2.3) and SwiGLU's sizes, each
tested from both sides: too few *and* too many axes, heads, sequences or channels."""

from __future__ import annotations

import pytest
import torch

from course_utils.encoder_decoder_blocks import CrossAttention
from course_utils.swiglu import SwiGLUFeedForward, swiglu_hidden_width

D_MODEL, H = 24, 3


@pytest.fixture
def attention() -> CrossAttention:
    torch.manual_seed(0)
    return CrossAttention(D_MODEL, H).eval()


@pytest.mark.parametrize("shape", [(4, D_MODEL), (1, 2, 4, D_MODEL)], ids=["2-D", "4-D"])
def test_x_and_memory_must_be_3d(attention, shape):
    good = torch.randn(2, 4, D_MODEL)
    with pytest.raises(ValueError, match="expected x of shape"):
        attention(torch.randn(shape), good)
    with pytest.raises(ValueError, match="expected memory of shape"):
        attention(good, torch.randn(shape))


@pytest.mark.parametrize("batches", [(3, 2), (2, 3)], ids=["more-targets", "more-sources"])
def test_x_and_memory_need_the_same_batch(attention, batches):
    x, memory = torch.randn(batches[0], 4, D_MODEL), torch.randn(batches[1], 5, D_MODEL)
    with pytest.raises(ValueError, match="same batch size"):
        attention(x, memory)


@pytest.mark.parametrize("heads", [H - 1, H + 1], ids=["fewer-heads", "more-heads"])
def test_memory_kv_with_another_number_of_heads_is_refused(attention, heads):
    x = torch.randn(2, 4, D_MODEL)
    k = torch.randn(2, heads, 5, D_MODEL // H)
    with pytest.raises(ValueError, match="memory_kv tensors must be"):
        attention(x, None, memory_kv=(k, k.clone()))


def test_cached_keys_values_work_with_more_than_256_heads():
    """Sizes compared by value: 300 heads of width 1 (CPython shares ints only up to 256)."""
    torch.manual_seed(0)
    wide = CrossAttention(300, 300).eval()
    x, memory = torch.randn(1, 2, 300), torch.randn(1, 3, 300)
    torch.testing.assert_close(wide(x, None, memory_kv=wide.keys_values(memory)), wide(x, memory))


def test_swiglu_width_rounds_two_thirds_to_the_nearest_multiple():
    """2/3 * 4 = 2.67 -> 3 (nearest, not floor); 2/3 * 512 = 341.3 -> 344 (multiple of 8)."""
    assert swiglu_hidden_width(4, multiple_of=1) == 3
    assert swiglu_hidden_width(512) == 344


@pytest.mark.parametrize("width", [20, 28], ids=["narrower", "wider"])
def test_swiglu_refuses_another_width(width):
    with pytest.raises(ValueError, match="24"):
        SwiGLUFeedForward(24, 64)(torch.randn(2, 3, width))


def test_swiglu_of_more_than_256_channels():
    ffn = SwiGLUFeedForward(300, 8)
    assert ffn(torch.randn(2, 300)).shape == (2, 300)


def test_decoder_block_keeps_attention_weights_only_when_asked():
    """By default the fast path runs and no (B, h, T, T) weights are kept in memory."""
    from course_utils.encoder_decoder_blocks import CrossDecoderBlock

    torch.manual_seed(0)
    block = CrossDecoderBlock(D_MODEL, H, 48).eval()
    y, memory = torch.randn(2, 4, D_MODEL), torch.randn(2, 5, D_MODEL)
    fast = block(y, memory)
    assert block.self_attention.attention_weights is None
    assert block.cross_attention.attention_weights is None
    explicit = block(y, memory, need_weights=True)
    assert block.cross_attention.attention_weights.shape == (2, H, 4, 5)
    torch.testing.assert_close(fast, explicit)
