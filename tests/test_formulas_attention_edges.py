"""Attention's and the encoder-decoder's checks at their edges: the divisors a split hint
lists, d_k above 256 (compared by value), and greedy decoding up to exactly ``max_len``."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from course_utils.attention import scaled_dot_product_attention, split_heads
from course_utils.encoder_decoder import EncoderDecoder, EncoderDecoderConfig


def test_the_split_hint_lists_the_divisors_of_c():
    with pytest.raises(ValueError) as info:
        split_heads(torch.zeros(1, 2, 24), 5)
    assert "e.g. [1, 2, 3, 4, 6, 8, 12, 24]" in str(info.value)


def test_attention_with_d_k_above_256_equals_pytorch():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 3, 300, generator=g) for _ in range(3))
    out, _ = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))


def _model() -> EncoderDecoder:
    torch.manual_seed(0)
    config = EncoderDecoderConfig(
        src_vocab_size=11, tgt_vocab_size=13, d_model=24, n_heads=3, d_ff=48,
        n_encoder_layers=1, n_decoder_layers=1, max_len=6,
    )  # fmt: skip
    return EncoderDecoder(config).eval()


def test_greedy_decode_may_fill_max_len_exactly_and_no_more():
    model, src = _model(), torch.tensor([[1, 2, 3], [4, 5, 6]])
    start = torch.ones(2, 1, dtype=torch.long)
    out = model.greedy_decode(src, start, eos_id=12, max_new_tokens=5)  # 1 + 5 = max_len
    assert out.shape[0] == 2 and out.shape[1] <= 6
    with pytest.raises(ValueError, match="exceeds max_len"):
        model.greedy_decode(src, start, eos_id=12, max_new_tokens=6)


@pytest.mark.parametrize(
    "start", [torch.ones(2, 1, 1), torch.ones(3, 1), torch.ones(1, 1)], ids=["3-D", "B+1", "B-1"]
)
def test_greedy_decode_start_must_be_b_by_t0(start):
    with pytest.raises(ValueError, match="start must be"):
        _model().greedy_decode(torch.tensor([[1, 2, 3], [4, 5, 6]]), start.long(), 12, 2)


def test_ids_zero_are_legal_pad_and_eos_and_negative_ones_are_not():
    """Id 0 is a token like any other (often <pad> or <eos>); -1 is no id."""
    model = _model()
    out = model.greedy_decode(torch.tensor([[1, 2]]), torch.ones(1, 1, dtype=torch.long), 0, 2)
    assert out.shape[0] == 1
    settings = dict(src_vocab_size=11, tgt_vocab_size=13, d_model=24, n_heads=3, d_ff=48)
    settings |= dict(n_encoder_layers=1, n_decoder_layers=1, max_len=6)
    assert EncoderDecoderConfig(**settings, pad_id=0).pad_id == 0
    with pytest.raises(ValueError, match="pad_id"):
        EncoderDecoderConfig(**settings, pad_id=-1)
