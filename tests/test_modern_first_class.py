"""ModernDecoder has TinyDecoder's generation surface: ``generate`` (same signature, checks and
crop rule) and the KV cache, for every switch of ModernConfig that changes attention or the
stream (n_kv_heads, head_dim, QK-norm, RoPE's angle precision, score scales, added positions,
GPT-2's LayerNorm/GELU/biases/tied head, a padding row).

References: the uncached loop written out here (argmax of the model's last logits on the last
``block_size`` tokens), and :func:`course_utils.generation.generate` without a cache.
"""

from __future__ import annotations

import inspect

import pytest
import torch

from course_utils.generation import generate, generate_with_cache
from course_utils.kv_cache import KVCache, forward_with_cache
from course_utils.model import TinyDecoder
from course_utils.modern_model import ModernConfig, ModernDecoder

SIZES = dict(vocab_size=30, block_size=12, d_model=24, n_heads=6, n_layers=3)

#: Each ModernConfig switch that changes what the cached forward must reproduce.
VARIANTS = {
    "llama-mha": {},
    "gqa-qk-norm": dict(n_kv_heads=2, qk_norm=True),
    "mqa": dict(n_kv_heads=1),
    "head-dim-8": dict(head_dim=8, n_kv_heads=3, qk_norm=True),  # d_k != d_model / n_heads
    "angles-float32": dict(rope_angle_dtype="float32", rope_base=1_000_000.0, n_kv_heads=3),
    "scales": dict(scale_scores=False, scale_by_layer=True, n_kv_heads=2),
    "gpt2": dict(
        norm="layernorm",
        feed_forward="gelu_tanh",
        bias=True,
        positional="learned",
        tie_embeddings=True,
        norm_eps=1e-5,
        scale_by_layer=True,
    ),
    "sinusoidal-mlp-bias": dict(positional="sinusoidal", mlp_bias=True, n_kv_heads=2),
    "padding-row": dict(padding_idx=0, n_kv_heads=3),
}


def modern(seed: int = 0, **changes) -> ModernDecoder:
    torch.manual_seed(seed)
    model = ModernDecoder(ModernConfig(**{**SIZES, **changes})).eval()
    with torch.no_grad():  # trained-looking weights: norms and biases away from 1 and 0
        for name, parameter in model.named_parameters():
            if parameter.ndim == 1:
                parameter.add_(0.3 * torch.randn_like(parameter))
            if name == "lm_head.weight":
                parameter.mul_(20)  # peaked logits: sampling is not uniform
    return model


def reference_greedy(model: torch.nn.Module, ids: torch.Tensor, n: int) -> torch.Tensor:
    """The loop written out: the last block_size tokens in, the argmax of the last logits out."""
    for _ in range(n):
        logits = model(ids[:, -model.config.block_size :])[0][:, -1]  # (B, V)
        ids = torch.cat([ids, logits.argmax(-1, keepdim=True)], dim=1)
    return ids


def test_generate_has_tiny_decoder_s_signature_and_documentation():
    assert inspect.signature(ModernDecoder.generate) == inspect.signature(TinyDecoder.generate)
    assert "max_new_tokens" in ModernDecoder.generate.__doc__


@pytest.mark.parametrize("variant", ["llama-mha", "gqa-qk-norm", "gpt2"])
def test_greedy_generate_equals_the_loop_written_out_past_block_size(variant):
    model, prompt = modern(**VARIANTS[variant]), torch.randint(0, 30, (2, 5))
    out = model.generate(prompt, 20, greedy=True)  # 25 tokens: the window of 12 slides
    assert out.shape == (2, 25) and torch.equal(out[:, :5], prompt)
    assert torch.equal(out, reference_greedy(model, prompt, 20))


def test_sampling_follows_temperature_top_k_and_the_generator():
    model, prompt = modern(n_kv_heads=2), torch.randint(0, 30, (3, 4))

    def sample(seed, **options):
        return model.generate(prompt, 16, generator=torch.Generator().manual_seed(seed), **options)

    assert torch.equal(sample(0, temperature=0.8, top_k=5), sample(0, temperature=0.8, top_k=5))
    assert not torch.equal(sample(0, temperature=0.8), sample(1, temperature=0.8))
    # top_k=1 keeps only the most likely token: greedy, whatever the temperature
    assert torch.equal(sample(2, top_k=1, temperature=3.0), model.generate(prompt, 16, greedy=True))
    # the same draws as course_utils.generation.generate with the sliding window (crop_to=T)
    for options in ({"temperature": 0.7}, {"temperature": 1.3, "top_k": 4}):
        shared = generate(
            model, prompt, 16, crop_to=12, generator=torch.Generator().manual_seed(5), **options
        )
        assert torch.equal(sample(5, **options), shared), options


def test_generate_restores_the_mode_and_records_no_gradient():
    model = modern(dropout=0.1).train()
    out = model.generate(torch.zeros(1, 1, dtype=torch.long), 3, greedy=True)
    assert model.training and not out.requires_grad and out.dtype == torch.int64


@pytest.mark.parametrize(
    ("options", "error", "pattern"),
    [
        (dict(temperature=0.0), ValueError, "temperature must be > 0.*greedy=True"),
        (dict(top_k=31), ValueError, r"top_k must be in \[1, vocab_size=30\], got 31"),
        (dict(greedy="yes"), TypeError, "greedy"),
        (dict(generator=0), TypeError, "generator must be a torch.Generator"),
        (dict(max_new_tokens=-1), ValueError, "max_new_tokens"),
        (dict(ids=[3, 4]), ValueError, r"add a batch axis with ids\[None\]"),
        (dict(ids=[[3, 30]]), ValueError, "vocab_size"),
    ],
)
def test_generate_refuses_bad_arguments_by_name(options, error, pattern):
    arguments = dict(ids=[[1, 2]], max_new_tokens=2) | options
    with pytest.raises(error, match=pattern):
        modern().generate(**arguments)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_cached_generation_equals_uncached(variant):
    """Tokens equal and every step's logits within 1e-5, with the window cropped twice."""
    model, prompt = modern(**VARIANTS[variant]), torch.randint(1, 30, (2, 7))
    plain, plain_logits = generate(model, prompt, 24, greedy=True, return_logits=True)
    cached, cached_logits = generate_with_cache(model, prompt, 24, greedy=True, return_logits=True)
    assert torch.equal(plain, cached)
    torch.testing.assert_close(cached_logits, plain_logits, atol=1e-5, rtol=1e-5)
    # the sliding window of ModernDecoder.generate, with the cache recomputed at each step
    slid = generate_with_cache(model, prompt, 24, crop_to=12, greedy=True)
    assert torch.equal(slid, model.generate(prompt, 24, greedy=True))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_prompt_then_one_token_at_a_time_equals_the_full_forward(variant):
    """Positions enter at the cache's offset (RoPE, or a row of the added table)."""
    model, ids = modern(**VARIANTS[variant]), torch.randint(0, 30, (2, 12))
    cache = KVCache()
    steps = [forward_with_cache(model, ids[:, :5], cache)]
    steps += [forward_with_cache(model, ids[:, t : t + 1], cache) for t in range(5, 12)]
    torch.testing.assert_close(torch.cat(steps, 1), model(ids)[0], atol=1e-5, rtol=1e-5)
    n_kv_heads, d_k = model.config.n_kv_heads, model.config.d_k
    assert cache.keys[0].shape == (2, n_kv_heads, 12, d_k)  # only the key/value heads


def test_the_cache_check_can_fail():
    """Without the offset every new token sits at position 0: the logits differ."""
    model, ids = modern(n_kv_heads=2), torch.randint(0, 30, (1, 8))
    cache = KVCache()
    forward_with_cache(model, ids[:, :7], cache)
    for block in model.blocks:  # forget the offset in every block
        block.attention.project = lambda x, offset=0, project=block.attention.project: project(x)
    wrong = forward_with_cache(model, ids[:, 7:], cache)
    gap = (wrong[:, 0] - model(ids)[0][:, -1]).abs().max().item()
    assert gap > 100 * 1e-5, gap  # far outside the tolerance the tests above hold
