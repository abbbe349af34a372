"""The smallest legal sizes work, and one below is refused.

A size check with the wrong bound (``minimum=2`` for a width that may be 1, ``>`` for ``>=``)
passes every test that uses typical sizes. Here each component is built at its smallest legal
size and still matches its reference, and the size just below raises an error naming it.
"""

from __future__ import annotations

import pytest
import torch
from references import encoder_layer_like
from torch import nn

from course_utils.layers import DecoderBlock


def test_decoder_block_with_a_one_unit_hidden_layer_matches_pytorch():
    """d_ff = 1 (a one-unit FFN) is legal and still the pre-LN block of PyTorch."""
    torch.manual_seed(0)
    block = DecoderBlock(d_model=4, n_heads=2, d_ff=1).eval()
    reference = encoder_layer_like(block, norm_first=True)
    x = torch.randn(2, 5, 4)
    with torch.no_grad():
        expected = reference(
            x, src_mask=nn.Transformer.generate_square_subsequent_mask(5), is_causal=True
        )
        torch.testing.assert_close(block(x), expected, rtol=0, atol=1e-5)


def test_decoder_block_refuses_d_ff_zero():
    with pytest.raises(ValueError, match="d_ff"):
        DecoderBlock(d_model=4, n_heads=2, d_ff=0)
