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


def test_cached_generation_runs_one_forward_per_new_token_and_no_more(monkeypatch):
    """The prompt once, then one step per new token but the last, whose logits nobody reads:
    n forward passes for n tokens when no crop is needed. 300 tokens go past the small ints
    Python shares, so the stop test must compare values, not objects."""
    from course_utils import generation

    torch.manual_seed(0)
    config = ModelConfig(vocab_size=12, block_size=512, d_model=8, n_heads=2, n_layers=1)
    model = TinyDecoder(config).eval()
    calls = []
    real = generation.forward_with_cache
    monkeypatch.setattr(
        generation,
        "forward_with_cache",
        lambda m, ids, cache: calls.append(ids.shape[1]) or real(m, ids, cache),
    )
    for n in (1, 2, 5, 300):
        calls.clear()
        out = generate_with_cache(model, torch.tensor([[1, 2]]), max_new_tokens=n, greedy=True)
        assert out.shape == (1, 2 + n)
        assert calls == [2] + [1] * (n - 1), n  # the prompt's 2 tokens, then 1 per step


def test_a_cache_of_many_layers_fills_each_layer_once_then_grows_it():
    """Layer 299 of 300: its first append makes the entry, its second grows it (layer indices
    past Python's shared small ints compared by value)."""
    cache = KVCache()
    step = torch.zeros(1, 1, 1, 2)
    for layer in range(300):
        keys, _ = cache.append(layer, step, step)
        assert keys.shape == (1, 1, 1, 2)
    assert len(cache.keys) == len(cache.values) == 300 and len(cache) == 1
    keys, values = cache.append(299, step + 1, step + 1)
    assert keys.shape == values.shape == (1, 1, 2, 2)
    assert torch.equal(keys[:, :, 1], torch.ones(1, 1, 2))


@pytest.mark.parametrize("d_k", [3, 5])
def test_new_keys_narrower_or_wider_than_the_cache_are_refused(d_k):
    cache = KVCache()
    cache.append(0, torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    new = torch.zeros(1, 2, 1, d_k)
    with pytest.raises(ValueError, match=r"differ in B, h or d_k"):
        cache.append(0, new, new)
    assert cache.keys[0].shape == (1, 2, 3, 4)  # nothing appended


@pytest.mark.parametrize("name", ["keys", "values"])
def test_a_cache_built_from_lists_checks_every_tensor(name):
    good = torch.zeros(1, 1, 1, 2)
    lists = {"keys": [good, good], "values": [good, good]}
    lists[name] = [good, [[0.0, 1.0]]]  # the second layer is a list, not a tensor
    with pytest.raises(TypeError, match=rf"{name}\[1\]"):
        KVCache(**lists)
    assert len(KVCache(keys=[good], values=[good])) == 1
