"""The KV cache with grouped-query attention: it stores n_kv_heads heads, its measured bytes
equal 2 n_layers B T n_kv_heads d_k bytes, and cached generation equals uncached."""

from __future__ import annotations

import pytest
import torch

from course_utils.config import ModelConfig
from course_utils.generation import generate, generate_with_cache
from course_utils.kv_cache import KVCache, cache_bytes, forward_with_cache
from course_utils.model import TinyDecoder
from course_utils.modern_model import ModernConfig, ModernDecoder


def modern(n_kv_heads: int, positional: str = "rope") -> ModernDecoder:
    torch.manual_seed(0)
    config = ModernConfig(
        vocab_size=30,
        block_size=16,
        d_model=24,
        n_heads=6,
        n_layers=3,
        n_kv_heads=n_kv_heads,
        qk_norm=True,
        positional=positional,
    )
    return ModernDecoder(config).eval()


@pytest.mark.parametrize("n_kv_heads", [1, 2, 3, 6])
def test_cache_holds_n_kv_heads_and_its_bytes_follow_the_formula(n_kv_heads):
    model, cache = modern(n_kv_heads), KVCache()
    forward_with_cache(model, torch.randint(0, 30, (2, 11)), cache)
    assert cache.keys[0].shape == (2, n_kv_heads, 11, 4)  # (B, n_kv_heads, T, d_k)
    formula = 2 * 3 * 2 * 11 * n_kv_heads * 4 * 4  # 2 n_layers B T n_kv_heads d_k bytes
    assert cache.nbytes() == cache_bytes(model.config, 2, 11) == formula


@pytest.mark.parametrize("positional", ["rope", "learned"])
@pytest.mark.parametrize("n_kv_heads", [1, 2])
def test_cached_generation_equals_uncached(positional, n_kv_heads):
    model, prompt = modern(n_kv_heads, positional), torch.randint(0, 30, (2, 5))
    plain, plain_logits = generate(model, prompt, 20, greedy=True, return_logits=True)
    cached, cached_logits = generate_with_cache(model, prompt, 20, greedy=True, return_logits=True)
    assert torch.equal(plain, cached)  # 20 new tokens: the window of 16 is cropped on the way
    torch.testing.assert_close(cached_logits, plain_logits, atol=1e-5, rtol=1e-5)


def test_prompt_then_one_token_equals_the_full_forward():
    model, ids = modern(2), torch.randint(0, 30, (2, 9))
    cache = KVCache()
    first = forward_with_cache(model, ids[:, :6], cache)
    rest = [forward_with_cache(model, ids[:, t : t + 1], cache) for t in range(6, 9)]
    torch.testing.assert_close(torch.cat([first, *rest], 1), model(ids)[0], atol=1e-5, rtol=1e-5)


def test_the_tiny_decoder_cache_still_holds_n_heads():
    config = ModelConfig(vocab_size=30, block_size=16, d_model=24, n_heads=3, n_layers=2)
    model, cache = TinyDecoder(config).eval(), KVCache()
    forward_with_cache(model, torch.randint(0, 30, (1, 4)), cache)
    assert cache.nbytes() == cache_bytes(config, 1, 4) == 2 * 2 * 1 * 4 * 24 * 4


def test_cache_bytes_errors():
    config = ModernConfig(vocab_size=30, block_size=16, d_model=24, n_heads=6, n_layers=1)
    with pytest.raises(TypeError, match="dtype"):
        cache_bytes(config, 1, 4, dtype="float32")
    with pytest.raises(TypeError, match="dtype must be a floating dtype"):
        cache_bytes(config, 1, 4, dtype=torch.int8)
    with pytest.raises(ValueError, match="length"):
        cache_bytes(config, 1, -1)
    assert cache_bytes(config, 1, 4, torch.bfloat16) == cache_bytes(config, 1, 4) // 2
