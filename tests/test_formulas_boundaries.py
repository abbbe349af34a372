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

from course_utils.embedding import as_token_ids
from course_utils.layers import DecoderBlock, FeedForward, LayerNorm


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


@pytest.mark.parametrize("width", [20, 30], ids=["narrower", "wider"])
def test_a_last_axis_other_than_c_is_refused_by_the_course(width):
    """Narrower *and* wider inputs get the course's ValueError naming C, not PyTorch's."""
    x = torch.randn(2, 3, width)
    with pytest.raises(ValueError, match="24"):
        LayerNorm(24)(x)
    with pytest.raises(ValueError, match="24"):
        FeedForward(24, 96)(x)


def test_ids_that_cannot_become_an_array_get_a_type_error():
    """A list of tensors that require grad cannot go through NumPy (PyTorch raises a
    RuntimeError): the course says what it expected instead."""
    ids = [torch.tensor(1.0, requires_grad=True), torch.tensor(2.0, requires_grad=True)]
    with pytest.raises(TypeError, match="token ids must be a tensor of integer ids"):
        as_token_ids(ids, vocab_size=10)


def test_a_one_channel_sinusoidal_table_is_refused_as_odd():
    """d_model = 1 is a positive size but has no sin/cos pair: the error says why."""
    from course_utils.positional import sinusoidal_positional_encoding

    with pytest.raises(ValueError, match="even"):
        sinusoidal_positional_encoding(4, 1)
    assert sinusoidal_positional_encoding(4, 2).shape == (4, 2)


@pytest.mark.parametrize("seed", [2**64, 2**64 + 1, -1])
def test_seeds_outside_the_generator_range_are_refused_by_the_course(seed):
    """torch.Generator takes seeds in [0, 2**64); outside it the course names the range."""
    from course_utils.sampling import seeded_generator

    with pytest.raises(ValueError, match="below 2\\*\\*64"):
        seeded_generator(seed)
    assert seeded_generator(2**64 - 1).initial_seed() == 2**64 - 1


@pytest.mark.parametrize("head_dim", [0, 3])
def test_rotary_needs_a_positive_even_head_dim(head_dim):
    from course_utils.rotary import RotaryEmbedding

    with pytest.raises(ValueError, match="head_dim"):
        RotaryEmbedding(head_dim, max_len=4)
    assert RotaryEmbedding(2, max_len=4)(torch.ones(4, 2)).shape == (4, 2)


def test_swiglu_width_of_the_smallest_mlp():
    """d_ff = 1 rounds up to one multiple (8); d_ff = 0 is no MLP and is refused."""
    from course_utils.swiglu import swiglu_hidden_width

    assert swiglu_hidden_width(1) == 8 and swiglu_hidden_width(12, multiple_of=1) == 8
    with pytest.raises(ValueError, match="d_ff"):
        swiglu_hidden_width(0)
