"""The SwiGLU feed-forward network against transformers' LlamaMLP with the same weights."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaMLP

from course_utils.layers import FeedForward
from course_utils.swiglu import SwiGLUFeedForward, swiglu_hidden_width


def test_swiglu_equals_llama_mlp():
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=24, intermediate_size=64, num_attention_heads=3)
    reference = LlamaMLP(config).eval()
    ours = SwiGLUFeedForward(24, 64)
    with torch.no_grad():
        for name in ("gate", "up", "down"):
            weight = getattr(reference, f"{name}_proj").weight
            weight.normal_(0.0, 0.3)
            getattr(ours, name).weight.copy_(weight)
    x = torch.randn(2, 6, 24)
    torch.testing.assert_close(ours(x), reference(x), atol=1e-6, rtol=1e-5)
    # the gate matters: without it (silu(up x) alone) the result differs
    assert (ours(x) - ours.down(F.silu(ours.up(x)))).abs().max() > 1e-2


def test_swiglu_has_no_biases_and_the_parameters_of_a_4x_mlp():
    ours = SwiGLUFeedForward(128, swiglu_hidden_width(512))
    assert swiglu_hidden_width(512) == 344 and all(p.ndim == 2 for p in ours.parameters())
    classic = sum(p.numel() for p in FeedForward(128, 512).parameters())
    modern = sum(p.numel() for p in ours.parameters())
    assert abs(modern - classic) / classic < 0.01


def test_swiglu_acts_on_each_position_alone():
    ours, x = SwiGLUFeedForward(24, 40), torch.randn(2, 6, 24)
    torch.testing.assert_close(ours(x)[:, 3], ours(x[:, 3:4])[:, 0])


def test_swiglu_errors():
    with pytest.raises(ValueError, match="d_model=24"):
        SwiGLUFeedForward(24, 64)(torch.zeros(2, 3, 8))
    with pytest.raises(TypeError, match="d_ff"):
        SwiGLUFeedForward(24, 64.0)
    with pytest.raises(TypeError, match="bias"):
        SwiGLUFeedForward(24, 64, bias="no")
