"""The KV cache against the uncached model: the same logits (1e-5) and the same tokens, for
every kind of positions, B > 1, a one-token prompt, sampling, and generation past block_size;
and the mistakes it must not make (no RoPE offset, a top-left causal mask) shown to matter."""

from __future__ import annotations

import pytest
import torch

from course_utils.config import ModelConfig
from course_utils.generation import generate, generate_with_cache
from course_utils.kv_cache import KVCache, forward_with_cache
from course_utils.lab.assets import asset_path
from course_utils.layers import PostLNDecoderBlock
from course_utils.measure.generation_timing import time_per_token
from course_utils.model import TinyDecoder
from course_utils.rotary import RotaryEmbedding, apply_rotary_embedding
from course_utils.sampling import seeded_generator

KINDS = ("rope", "sinusoidal", "learned")
V, BLOCK = 11, 16


def tiny_model(kind: str = "rope", dtype: torch.dtype = torch.float32) -> TinyDecoder:
    """Two blocks with weights made large enough that the logits are far from ties."""
    torch.manual_seed(0)
    config = ModelConfig(V, BLOCK, d_model=24, n_heads=3, n_layers=2, positional=kind)
    model = TinyDecoder(config).to(dtype)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.3 * torch.randn_like(parameter))
    return model.eval()


def prompt(b: int = 3, t: int = 5, seed: int = 1) -> torch.Tensor:
    return torch.randint(V, (b, t), generator=torch.Generator().manual_seed(seed))


def test_rotary_offset_rotates_by_absolute_positions():
    x = torch.randn(2, 3, 4, 8, generator=torch.Generator().manual_seed(0))
    rotary = RotaryEmbedding(8, 16)
    expected = apply_rotary_embedding(x, positions=torch.arange(5, 9))
    torch.testing.assert_close(rotary(x, offset=5), expected)
    torch.testing.assert_close(rotary(x, offset=0), rotary(x))
    assert not torch.allclose(rotary(x, offset=5), rotary(x), atol=1e-3)
    with pytest.raises(ValueError, match="offset=13 exceeds max_len=16"):
        rotary(x, offset=13)
    with pytest.raises(ValueError, match="offset must be >= 0"):
        rotary(x, offset=-1)


@pytest.mark.parametrize("kind", KINDS)
def test_prefill_then_one_token_at_a_time_equals_the_full_forward(kind):
    model, ids = tiny_model(kind), prompt(b=3, t=BLOCK)
    full = model(ids)[0]  # (B, T, V)
    cache = KVCache()
    pieces = [forward_with_cache(model, ids[:, :6], cache)]  # prefill 6 tokens
    pieces += [forward_with_cache(model, ids[:, t : t + 1], cache) for t in range(6, BLOCK)]
    cached = torch.cat(pieces, dim=1)
    assert cached.shape == full.shape == (3, BLOCK, V)
    assert torch.allclose(cached, full, atol=1e-5)
    assert len(cache) == BLOCK
    for keys, values in zip(cache.keys, cache.values):
        assert keys.shape == values.shape == (3, 3, BLOCK, 8)  # (B, h, T_cached, d_k)


@pytest.mark.parametrize("kind", KINDS)
def test_several_new_tokens_after_a_cache_use_an_offset_causal_mask(kind):
    model, ids = tiny_model(kind), prompt(b=2, t=12)
    cache = KVCache()
    first = forward_with_cache(model, ids[:, :4], cache)
    second = forward_with_cache(model, ids[:, 4:12], cache)  # T_new = 8 after 4 cached
    assert torch.allclose(torch.cat([first, second], 1), model(ids)[0], atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "options",
    [dict(greedy=True), dict(temperature=0.8, top_k=5), dict(top_p=0.9), dict(temperature=1.5)],
    ids=["greedy", "temperature-top_k", "top_p", "hot"],
)
def test_cached_and_uncached_generation_agree_past_block_size(kind, options):
    model, ids = tiny_model(kind), prompt(b=3, t=5)
    steps = 3 * BLOCK  # the window fills and is cropped several times
    plain, plain_logits = generate(
        model, ids, steps, return_logits=True, generator=seeded_generator(7), **options
    )
    cached, cached_logits = generate_with_cache(
        model, ids, steps, return_logits=True, generator=seeded_generator(7), **options
    )
    assert plain.shape == cached.shape == (3, 5 + steps)
    assert torch.equal(plain, cached)
    assert plain_logits.shape == (3, steps, V)
    assert torch.allclose(plain_logits, cached_logits, atol=1e-5)


@pytest.mark.parametrize("crop_to", [1, 2, BLOCK // 2, BLOCK - 1, BLOCK])
def test_every_crop_size_agrees_and_one_prompt_token_is_enough(crop_to):
    model, ids = tiny_model("rope"), prompt(b=2, t=1)
    plain, plain_logits = generate(model, ids, 40, crop_to=crop_to, greedy=True, return_logits=True)
    cached, cached_logits = generate_with_cache(
        model, ids, 40, crop_to=crop_to, greedy=True, return_logits=True
    )
    assert torch.equal(plain, cached)
    assert torch.allclose(plain_logits, cached_logits, atol=1e-5)


def test_crop_to_block_size_is_the_sliding_window_of_tiny_decoder_generate():
    model, ids = tiny_model("sinusoidal"), prompt(b=2, t=3)
    reference = model.generate(ids, 40, greedy=True)
    assert torch.equal(generate_with_cache(model, ids, 40, crop_to=BLOCK, greedy=True), reference)
    # The default (crop to half the window) keeps less context after the window fills.
    logits = [
        generate_with_cache(model, ids, 40, crop_to=c, greedy=True, return_logits=True)[1]
        for c in (BLOCK, None)
    ]
    steps_before_the_first_crop = BLOCK - 3 + 1
    full, crop_half = (x[:, :steps_before_the_first_crop] for x in logits)
    assert torch.allclose(full, crop_half, atol=1e-6)
    assert not torch.allclose(logits[0], logits[1], atol=1e-3)


def test_a_prompt_longer_than_block_size_is_cropped_like_the_uncached_model():
    model, ids = tiny_model("learned"), prompt(b=2, t=BLOCK + 7)
    plain = generate(model, ids, 10, greedy=True)
    assert torch.equal(generate_with_cache(model, ids, 10, greedy=True), plain)
    assert torch.equal(plain[:, : BLOCK + 7], ids)


def test_zero_new_tokens_and_the_mode_is_restored():
    model = tiny_model().train()
    ids = prompt()
    out, logits = generate_with_cache(model, ids, 0, return_logits=True)
    assert torch.equal(out, ids) and logits.shape == (3, 0, V)
    assert model.training
    generate(model, ids, 2)
    assert model.training


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cache_memory_is_two_layers_tokens_width_bytes(dtype):
    model = tiny_model("rope", dtype)
    config, cache = model.config, KVCache()
    forward_with_cache(model, prompt(b=3, t=7), cache)
    forward_with_cache(model, prompt(b=3, t=1, seed=2), cache)
    batch, tokens, size = 3, 8, torch.finfo(dtype).bits // 8
    assert cache.nbytes() == 2 * config.n_layers * batch * tokens * config.d_model * size
    assert len(cache.keys) == config.n_layers == len(cache.values)


def test_forgetting_the_rope_offset_breaks_the_equality(monkeypatch):
    """The mistake the notebook shows: every new token rotated as if it were at position 0."""
    model, ids = tiny_model("rope"), prompt(b=2, t=4)
    right = generate_with_cache(model, ids, 8, greedy=True, return_logits=True)[1]
    forward = RotaryEmbedding.forward
    monkeypatch.setattr(RotaryEmbedding, "forward", lambda self, x, offset=0: forward(self, x))
    wrong = generate_with_cache(model, ids, 8, greedy=True, return_logits=True)[1]
    assert torch.allclose(right[:, 0], wrong[:, 0], atol=1e-5)  # the prompt has offset 0
    assert not torch.allclose(right, wrong, atol=1e-3)


def test_a_top_left_causal_mask_would_break_chunks_after_the_cache(monkeypatch):
    """F.scaled_dot_product_attention(is_causal=True) with T_q < T_k aligns the triangle to the
    top left: query 0 would see key 0 only. The cached path builds the shifted mask itself."""
    import torch.nn.functional as F

    model, ids = tiny_model("rope"), prompt(b=2, t=10)
    sdpa = F.scaled_dot_product_attention

    def top_left(q, k, v, attn_mask=None, is_causal=False, **options):
        return sdpa(q, k, v, is_causal=attn_mask is not None or is_causal, **options)

    expected = model(ids)[0][:, 4:]
    cache = KVCache()
    forward_with_cache(model, ids[:, :4], cache)
    monkeypatch.setattr(F, "scaled_dot_product_attention", top_left)
    wrong = forward_with_cache(model, ids[:, 4:], cache)
    assert not torch.allclose(wrong, expected, atol=1e-3)


def test_bad_inputs_raise_with_the_fix():
    model, cache = tiny_model(), KVCache()
    with pytest.raises(ValueError, match="exceed block_size=16; crop"):
        forward_with_cache(model, prompt(b=1, t=BLOCK + 1), cache)
    forward_with_cache(model, prompt(b=2, t=3), cache)
    with pytest.raises(ValueError, match="the cache holds B=2, ids have B=3"):
        forward_with_cache(model, prompt(b=3, t=1), cache)
    with pytest.raises(ValueError, match="model.eval"):
        forward_with_cache(tiny_model().train(), prompt(), KVCache())
    with pytest.raises(ValueError, match=r"\(B, T_new\)"):
        forward_with_cache(model, torch.tensor([1, 2]), KVCache())
    with pytest.raises(ValueError, match=r"crop_to must be an int in \[1, block_size=16\]"):
        generate_with_cache(model, prompt(), 3, crop_to=0)
    with pytest.raises(ValueError, match=r"crop_to must be an int in \[1, block_size=16\]"):
        generate(model, prompt(), 3, crop_to=BLOCK + 1)
    with pytest.raises(ValueError, match="max_new_tokens must be at least 0, got -1"):
        generate_with_cache(model, prompt(), -1)
    with pytest.raises(ValueError, match=r"ids\[None\]"):
        generate_with_cache(model, torch.tensor([1, 2, 3]), 3)
    with pytest.raises(ValueError, match="temperature must be"):
        generate_with_cache(model, prompt(), 3, temperature=0)
    with pytest.raises(ValueError, match="out of order"):
        KVCache().append(1, torch.zeros(1, 3, 1, 8), torch.zeros(1, 3, 1, 8))
    with pytest.raises(ValueError, match=r"\(B, h, T_new, d_k\)"):
        KVCache().append(0, torch.zeros(1, 1, 8), torch.zeros(1, 1, 8))


def test_post_ln_blocks_are_refused():
    model = tiny_model()
    model.blocks[0] = PostLNDecoderBlock(24, 3, 96)
    with pytest.raises(TypeError, match="pre-LN DecoderBlock"):
        forward_with_cache(model.eval(), prompt(), KVCache())


def test_time_per_token_returns_one_positive_time_per_length():
    model = tiny_model()
    for use_cache in (False, True):
        times = time_per_token(model, [1, 8, 14], use_cache=use_cache, repeats=3)
        assert len(times) == 3 and all(t > 0 for t in times)
    with pytest.raises(ValueError, match="every context length"):
        time_per_token(model, [15], use_cache=True, repeats=3)


@pytest.mark.tooling  # slow (make test-tooling, CI): keeps make test under 5 minutes
def test_the_shipped_baby_model_generates_the_same_with_and_without_the_cache():
    try:
        asset_path("checkpoints/baby.pt")
    except FileNotFoundError:
        pytest.skip("assets/checkpoints/baby.pt not there yet (make checkpoint writes it)")
    from course_utils.lab.pretrained import load_baby

    model, tokenizer = load_baby()
    ids = torch.tensor([tokenizer.encode("ROMEO:"), tokenizer.encode("JULIET")])  # (2, 6)
    steps = model.config.block_size + 20
    plain, plain_logits = generate(model, ids, steps, greedy=True, return_logits=True)
    cached, cached_logits = generate_with_cache(model, ids, steps, greedy=True, return_logits=True)
    assert torch.equal(plain, cached)
    assert torch.allclose(plain_logits, cached_logits, atol=1e-5)


def test_notebook_13_prose_quotes_its_own_outputs():
    """Numbers the prose of notebook 13 quotes must be the ones its cells printed."""
    import json
    import re
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "notebooks" / "13_generation.ipynb"
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    prose = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    printed = "\n".join(
        "".join(o.get("text", "")) for c in cells if c["cell_type"] == "code" for o in c["outputs"]
    )
    kept = re.search(r"top-p, p=0\.9, keeps \[(\d+), (\d+)\]", printed)
    assert kept, "the top-p cell no longer prints how many characters it keeps"
    assert f"({kept[1]} versus {kept[2]} characters in section 5)" in prose
    assert "from step 1 on" in printed and "Step 0 is still right" in prose
