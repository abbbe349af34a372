"""course_utils.lab.pretrained: loading a checkpoint, reading every head's attention maps, and
scoring heads against named patterns. Uses a small random model (no shipped checkpoint needed);
the shipped one is only loaded when it exists."""

from __future__ import annotations

import pytest
import torch

from course_utils.config import ModelConfig
from course_utils.lab import pretrained
from course_utils.lab.assets import asset_path
from course_utils.model import TinyDecoder
from course_utils.tokenization import CharTokenizer
from course_utils.training import save_checkpoint

TEXT = "to be, or not to be: that is the question."


@pytest.fixture
def small():
    torch.manual_seed(0)
    tokenizer = CharTokenizer.from_text(TEXT)
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size, block_size=48, d_model=24, n_heads=3, n_layers=2
    )
    return TinyDecoder(config).eval(), tokenizer


def test_attention_maps_are_causal_probability_rows(small):
    model, tokenizer = small
    maps = pretrained.attention_maps(model, tokenizer, TEXT)
    T = len(TEXT)
    assert maps.shape == (2, 3, T, T) and maps.dtype == torch.float32
    torch.testing.assert_close(maps.sum(dim=-1), torch.ones(2, 3, T))
    assert torch.all(maps.triu(diagonal=1) == 0), "a query attends to a later key"


def test_attention_maps_of_a_prefix_are_the_top_left_block(small):
    # Causality as a property: the first t queries cannot depend on characters after them.
    model, tokenizer = small
    full = pretrained.attention_maps(model, tokenizer, TEXT)
    prefix = pretrained.attention_maps(model, tokenizer, TEXT[:10])
    torch.testing.assert_close(prefix, full[:, :, :10, :10], atol=1e-5, rtol=1e-5)


def test_attention_maps_match_the_model_internals(small):
    # Independent reference for layer 0: softmax(q k^T / sqrt(d_k)) with a causal mask,
    # recomputed from the block's own projections via torch's fused attention weights.
    model, tokenizer = small
    if model.config.positional != "sinusoidal":
        pytest.skip("the by-hand reference below assumes an additive position table")
    ids = torch.tensor([tokenizer.encode(TEXT)])
    with torch.no_grad():
        block = model.blocks[0]
        x = block.ln_1(model.position(model.token_embedding(ids)))  # (1, T, C)
        h, d_k = model.config.n_heads, model.config.d_model // model.config.n_heads
        q = (
            block.attention.w_q(x).view(1, -1, h, d_k).transpose(1, 2)
        )  # (1, T, C) -> (1, h, T, d_k)
        k = block.attention.w_k(x).view(1, -1, h, d_k).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / d_k**0.5  # (1, h, T, T)
        mask = torch.ones(len(TEXT), len(TEXT), dtype=torch.bool).tril()
        expected = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)[0]
    maps = pretrained.attention_maps(model, tokenizer, TEXT)
    torch.testing.assert_close(maps[0], expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("text", "match"),
    [("", "1 to block_size=48"), ("x" * 49, "got 49"), ("tö be", "not in the vocabulary")],
)
def test_attention_maps_rejects_bad_text(small, text, match):
    model, tokenizer = small
    with pytest.raises(ValueError, match=match):
        pretrained.attention_maps(model, tokenizer, text)


def test_pattern_pairs_by_hand():
    pairs = pretrained.pattern_pairs("ab cde f")
    assert pairs["previous character"] == [(i, i - 1) for i in range(1, 8)]
    assert pairs["itself"] == [(i, i) for i in range(1, 8)]
    assert pairs["start of the word"] == [(5, 3)]  # "e": its word "cde" starts 2 back
    assert pairs["last space"] == [(4, 2), (5, 2), (6, 2)]  # not (7, 6): one back


def synthetic_maps(text: str, offsets: list[int]) -> torch.Tensor:
    """(1, h, T, T) maps where head j attends only to position i - offsets[j] (clamped at 0)."""
    T = len(text)
    maps = torch.zeros(1, len(offsets), T, T)
    for j, offset in enumerate(offsets):
        for i in range(T):
            maps[0, j, i, max(i - offset, 0)] = 1.0
    return maps


def test_corpus_windows_are_seeded_slices():
    windows = pretrained.corpus_windows(TEXT, n=3, length=5, seed=1)
    assert windows == pretrained.corpus_windows(TEXT, n=3, length=5, seed=1)
    assert all(len(w) == 5 and w in TEXT for w in windows)
    with pytest.raises(ValueError, match="longer than length=50"):
        pretrained.corpus_windows(TEXT, n=1, length=50)


def test_load_baby_round_trip_and_errors(small, tmp_path, monkeypatch):
    model, tokenizer = small
    path = save_checkpoint(tmp_path / "small.pt", model, None, step=0)
    with pytest.raises(FileNotFoundError):
        pretrained.load_baby(tmp_path / "absent.pt")
    # The small model's vocabulary is not the corpus's: refused with the fix.
    with pytest.raises(ValueError, match="make checkpoint"):
        pretrained.load_baby(path)
    monkeypatch.setattr(pretrained, "shakespeare_tokenizer", lambda: tokenizer)
    loaded, loaded_tokenizer = pretrained.load_baby(path)
    assert not loaded.training and loaded_tokenizer is tokenizer
    torch.testing.assert_close(
        pretrained.attention_maps(loaded, tokenizer, TEXT),
        pretrained.attention_maps(model, tokenizer, TEXT),
    )


def _shipped() -> bool:
    try:
        return asset_path(pretrained.BABY_CHECKPOINT).is_file()
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not _shipped(), reason="assets/checkpoints/baby.pt not trained yet")
def test_the_shipped_baby_checkpoint_loads():
    model, tokenizer = pretrained.load_baby()
    assert model.config.n_layers == 4 and model.config.n_heads == 4
    assert model.config.vocab_size == tokenizer.vocab_size == 84
