"""The attention-share measurements of notebook 13 against torch's own FLOP counter, and the
timed share on a scripted clock (exact) and on the real one (only what holds for any timing:
a share in (0, 1], the timing wrapper removed afterwards)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from course_utils.attention import scaled_dot_product_attention, split_heads
from course_utils.config import ModelConfig
from course_utils.measure import generation_timing
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


def test_time_share_is_a_share_on_the_real_clock_and_restores_the_kernel():
    """What holds for any timing, on a fast or a loaded machine: a share in (0, 1], and the
    fused kernel put back. (That it grows with T is a property of the machine, not checked.)"""
    torch.set_num_threads(1)
    model = _model()
    fused = F.scaled_dot_product_attention
    for t, repeats in ((2, 3), (BLOCK, 5)):
        assert 0 < attention_time_share(model, t, repeats=repeats) <= 1
        assert F.scaled_dot_product_attention is fused


def test_time_share_divides_the_time_inside_attention_by_the_whole_forward(monkeypatch):
    """On a clock that advances by known amounts (3 per attention call, 5 per forward outside
    it, 2 layers), the share is exactly 2 * 3 / (2 * 3 + 5), however many repeats."""
    clock = [0.0]
    monkeypatch.setattr(generation_timing, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    real = F.scaled_dot_product_attention

    def slow_attention(*args, **kwargs):
        clock[0] += 3.0
        return real(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", slow_attention)
    model = _model()
    model.register_forward_pre_hook(lambda *_: clock.__setitem__(0, clock[0] + 5.0))
    for repeats in (1, 4):
        assert attention_time_share(model, 17, repeats=repeats) == LAYERS * 3 / (LAYERS * 3 + 5)
        assert F.scaled_dot_product_attention is slow_attention  # the kernel it found, put back


def test_bad_arguments_are_refused():
    model = _model()
    with pytest.raises(ValueError, match="context_length"):
        attention_flop_share(model, BLOCK + 1)
    with pytest.raises(TypeError, match="model"):
        attention_time_share(torch.nn.Linear(2, 2), 4)
    with pytest.raises(ValueError, match="eval"):
        attention_time_share(model.train(), 4)
