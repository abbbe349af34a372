"""Decoding with a KV cache: no autograd graph, and an empty prompt refused (Pope et al.
2022, "Efficiently Scaling Transformer Inference", §2: the cache holds K and V of the
prompt, so there must be a prompt)."""

from __future__ import annotations

import pytest
import torch

from course_utils.config import ModelConfig
from course_utils.generation import generate_with_cache
from course_utils.kv_cache import KVCache, forward_with_cache
from course_utils.model import TinyDecoder
from course_utils.rmsnorm import RMSNorm


def _model() -> TinyDecoder:
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=12, block_size=8, d_model=16, n_heads=2, n_layers=1)
    return TinyDecoder(config).eval()


def test_cached_generation_builds_no_autograd_graph():
    model = _model()
    seen = []
    model.lm_head.register_forward_hook(lambda m, i, out: seen.append(out.requires_grad))
    out = generate_with_cache(model, torch.tensor([[1, 2]]), max_new_tokens=3, greedy=True)
    assert out.shape == (1, 5) and seen and not any(seen)
    assert torch.is_grad_enabled()


def test_forward_with_cache_builds_no_autograd_graph():
    """The cached forward pass is for decoding: its logits carry no graph."""
    model = _model()
    cache = KVCache()
    logits = forward_with_cache(model, torch.tensor([[1, 2, 3]]), cache)
    assert logits.shape == (1, 3, 12) and not logits.requires_grad


@pytest.mark.parametrize("shape", [(1, 0), (0, 3)], ids=["no-token", "no-sequence"])
def test_an_empty_prompt_is_refused(shape):
    with pytest.raises(ValueError, match="ids"):
        generate_with_cache(_model(), torch.zeros(shape, dtype=torch.long), max_new_tokens=2)


def test_rmsnorm_of_one_channel():
    """C = 1 is legal: x / sqrt(x^2 + eps) * g, i.e. about sign(x) * g."""
    norm = RMSNorm(1)
    x = torch.tensor([[3.0], [-0.5]])
    expected = x / torch.sqrt(x**2 + norm.eps)
    torch.testing.assert_close(norm(x), expected)
