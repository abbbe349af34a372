"""ModelConfig's recipe switches, ``bias`` and ``embedding_scale`` (the GPU recipe ablation in
benchmarks/README.md): what each one removes, checked against the computation written out."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.config import ModelConfig
from course_utils.layers import FeedForward
from course_utils.model import TinyDecoder
from course_utils.modern_model import ModernConfig
from course_utils.training import load_checkpoint, save_checkpoint

SIZES = dict(vocab_size=11, block_size=8, d_model=16, n_heads=2, n_layers=2, positional="learned")


def _model(**switches) -> TinyDecoder:
    torch.manual_seed(0)
    return TinyDecoder(ModelConfig(**SIZES, **switches)).eval()


def test_defaults_are_the_papers_and_modern_config_keeps_its_own():
    config = ModelConfig(**SIZES)
    assert config.bias is True and config.embedding_scale is True
    modern = ModernConfig(**SIZES)
    assert modern.bias is False and modern.embedding_scale is False


@pytest.mark.parametrize("name", ["bias", "embedding_scale"])
@pytest.mark.parametrize("value", ["false", 0, None])
def test_a_switch_that_is_not_a_bool_is_refused_by_name(name, value):
    with pytest.raises(TypeError, match=rf"{name} must be True or False, got {value!r}"):
        ModelConfig(**SIZES, **{name: value})


def test_bias_false_removes_exactly_the_projection_biases():
    with_bias, without = _model(), _model(bias=False)
    linears = [m for m in without.modules() if isinstance(m, nn.Linear)]
    assert linears and all(m.bias is None for m in linears)
    # per block: W_q, W_k, W_v, W_o (C each) and the FFN's up (d_ff) and down (C)
    C, d_ff, layers = SIZES["d_model"], 4 * SIZES["d_model"], SIZES["n_layers"]
    removed = layers * (4 * C + d_ff + C)
    assert with_bias.num_parameters() - without.num_parameters() == removed
    norms = [m for m in without.modules() if type(m).__name__ == "LayerNorm"]
    assert norms and all(m.bias is not None for m in norms)  # LayerNorms keep theirs


def test_feed_forward_without_bias_is_two_plain_products():
    torch.manual_seed(1)
    ffn = FeedForward(6, 10, bias=False)
    x = torch.randn(2, 3, 6)
    expected = F.linear(F.gelu(F.linear(x, ffn.up.weight)), ffn.down.weight)
    torch.testing.assert_close(ffn(x), expected)
    with pytest.raises(TypeError, match="bias must be True or False"):
        FeedForward(6, 10, bias="no")


def test_embedding_scale_false_looks_rows_up_unscaled():
    scaled, plain = _model(), _model(embedding_scale=False)
    ids = torch.tensor([[3, 1, 4, 1, 5]])
    table = plain.token_embedding.weight
    torch.testing.assert_close(plain.token_embedding(ids), table[ids])
    factor = math.sqrt(SIZES["d_model"])
    torch.testing.assert_close(
        scaled.token_embedding(ids), scaled.token_embedding.weight[ids] * factor
    )
    # the same initial weights (same seed), so the switch is all that differs
    torch.testing.assert_close(table, scaled.token_embedding.weight)
    assert not torch.allclose(plain(ids)[0], scaled(ids)[0])


def test_a_checkpoint_written_before_the_switches_existed_loads(tmp_path):
    model = _model()
    path = tmp_path / "old.pt"
    save_checkpoint(path, model, None, 0)
    state = torch.load(path, weights_only=False)
    for name in ("bias", "embedding_scale"):
        del state["model_config"][name]  # as written by an earlier version
    state.pop("checksum", None)
    torch.save(state, path)
    fresh = _model()
    load_checkpoint(path, fresh)
    with pytest.raises(ValueError, match="bias: checkpoint True vs model False"):
        load_checkpoint(path, _model(bias=False))
