"""The attention-share measurements of notebook 13 against torch's own FLOP counter, and by
property (the timed share grows with T; the timing wrapper is removed afterwards)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from course_utils.attention import scaled_dot_product_attention, split_heads
from course_utils.config import ModelConfig
from course_utils.measure.generation_timing import attention_flop_share, attention_time_share
from course_utils.model import TinyDecoder

V, BLOCK, C, H, LAYERS = 84, 96, 48, 4, 2


def _model() -> TinyDecoder:
    torch.manual_seed(0)
    config = ModelConfig(V, block_size=BLOCK, d_model=C, n_heads=H, n_layers=LAYERS)
    return TinyDecoder(config).eval()


def _flops(function, *args) -> int:
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        function(*args)
    return counter.get_total_flops()


@pytest.mark.parametrize("t", [1, 17, BLOCK])
def test_flop_share_matches_torch_s_flop_counter(t):
    model = _model()
    # the dense part (projections, FFN, head), counted by torch on the real forward (its CPU
    # fused attention kernel is not counted, so this is everything but the core)
    dense = _flops(model, torch.randint(V, (1, t)))
    # the core, counted by torch on the explicit softmax(Q K^T / sqrt(d_k)) V of one layer
    x = torch.randn(1, t, C)
    q = k = v = split_heads(x, H)  # (1, t, C) -> (1, H, t, d_k)
    core = LAYERS * _flops(scaled_dot_product_attention, q, k, v)
    assert attention_flop_share(model, t) == pytest.approx(core / (core + dense), rel=1e-9)


def test_flop_share_grows_with_the_context():
    model = _model()
    shares = [attention_flop_share(model, t) for t in (1, 8, 32, BLOCK)]
    assert shares == sorted(shares) and 0 < shares[0] < shares[-1] < 1


def test_time_share_is_a_share_grows_with_t_and_restores_the_kernel():
    torch.set_num_threads(1)
    model = _model()
    fused = F.scaled_dot_product_attention
    short, long = attention_time_share(model, 2), attention_time_share(model, BLOCK, repeats=5)
    assert F.scaled_dot_product_attention is fused
    assert 0 < short < long < 1


def test_bad_arguments_are_refused():
    model = _model()
    with pytest.raises(ValueError, match="context_length"):
        attention_flop_share(model, BLOCK + 1)
    with pytest.raises(TypeError, match="model"):
        attention_time_share(torch.nn.Linear(2, 2), 4)
    with pytest.raises(ValueError, match="eval"):
        attention_time_share(model.train(), 4)
