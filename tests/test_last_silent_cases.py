"""The last silent cases of the older modules (issue 31, item 5): each now raises, naming
what is wrong, instead of giving a plausible but wrong result."""

import pytest
import torch

from course_utils.config import ModelConfig
from course_utils.kv_cache import KVCache
from course_utils.model import TinyDecoder
from course_utils.tokenization import load_encoding
from course_utils.training.checkpoint import load_checkpoint, save_checkpoint


def _filled_cache(layers: int = 2, tokens: int = 3) -> KVCache:
    cache = KVCache()
    for layer in range(layers):
        k = torch.randn(1, 2, tokens, 4)
        cache.append(layer, k, k.clone())
    return cache


def test_a_cache_whose_key_list_alone_was_reset_is_refused():
    cache = _filled_cache()
    cache.keys = []  # the values of both layers are still there: they would be reused stale
    k = torch.randn(1, 2, 1, 4)
    with pytest.raises(ValueError, match="got 0 and 2"):
        cache.append(0, k, k)


def test_a_cache_whose_keys_were_cut_alone_is_refused():
    cache = _filled_cache()
    cache.keys[1] = cache.keys[1][:, :, :1]
    k = torch.randn(1, 2, 1, 4)
    with pytest.raises(ValueError, match="layer 1 caches 1 keys but 3 values"):
        cache.append(0, k, k)


def test_a_cache_still_paired_keeps_working():
    cache = _filled_cache()
    keys, values = cache.append(0, torch.ones(1, 2, 1, 4), torch.ones(1, 2, 1, 4))
    assert keys.shape == values.shape == (1, 2, 4, 4)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda e: e.encode("a\ud800b"), "text holds a lone surrogate U\\+D800 at index 1"),
        (lambda e: e.encode_ordinary("x\udfff"), "text holds a lone surrogate U\\+DFFF"),
        (lambda e: e.encode_batch(["ok", "\udc80"]), "text\\[1\\] holds a lone surrogate"),
    ],
)
def test_tiktoken_refuses_text_with_a_lone_surrogate(call, name):
    encoding = load_encoding("cl100k_base")
    with pytest.raises(ValueError, match=name):
        call(encoding)


def test_tiktoken_round_trip_of_valid_text_is_unchanged():
    encoding = load_encoding("cl100k_base")
    text = "Chapter 1 · 我爱自然语言 😀 \U0001f600"
    assert encoding.decode(encoding.encode(text)) == text


def test_resuming_with_another_vocab_size_names_vocab_size(tmp_path):
    def model_and_optimizer(vocab_size):
        config = ModelConfig(vocab_size=vocab_size, block_size=8, d_model=16, n_heads=2, n_layers=1)
        model = TinyDecoder(config)
        optimizer = torch.optim.AdamW(model.parameters())
        ids = torch.zeros(1, 3, dtype=torch.long)
        model(ids, ids)[1].backward()
        optimizer.step()  # the optimizer now holds moments shaped like the model
        return model, optimizer

    path = save_checkpoint(tmp_path / "run.pt", *model_and_optimizer(11), step=1)
    other, other_optimizer = model_and_optimizer(12)
    with pytest.raises(ValueError, match=r"vocab_size: checkpoint 11 vs model 12"):
        load_checkpoint(path, other, other_optimizer)
