"""Notebook 15's decoder: its documented initialisation (measured), no sqrt(d_model) scale
on the embeddings (Llama), RoPE as the default positions, eps > 0, and weights kept only
when asked."""

from __future__ import annotations

import math

import pytest
import torch
from test_formulas_init_decay import assert_normal

from course_utils.modern_model import ModernConfig, ModernDecoder


def _config(**changes) -> ModernConfig:
    settings = dict(vocab_size=300, block_size=16, d_model=64, n_heads=4, n_layers=3)
    return ModernConfig(**{**settings, **changes})


@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
def test_modern_decoder_initialisation(tie):
    torch.manual_seed(0)
    model = ModernDecoder(_config(tie_embeddings=tie))
    assert_normal(model.token_embedding.weight, min(0.02, 2.5 / 64), "token embedding")
    std = 0.02 / math.sqrt(2 * 3)  # GPT-2's residual scaling, 3 layers
    w_o = torch.cat([b.attention.w_o.weight.flatten() for b in model.blocks])
    down = torch.cat([b.feed_forward.down.weight.flatten() for b in model.blocks])
    assert_normal(w_o, std, "attention W^O")
    assert_normal(down, std, "feed-forward down projection")


def test_embeddings_are_not_scaled():
    """Llama-style: the table's rows themselves, no sqrt(d_model) factor."""
    torch.manual_seed(0)
    model = ModernDecoder(_config())
    ids = torch.tensor([[3, 7, 1]])
    torch.testing.assert_close(model.token_embedding(ids), model.token_embedding.weight[ids])


def test_rope_is_the_default_and_order_matters():
    """Nothing is added to the embeddings, yet one block sees token order (rotations)."""
    torch.manual_seed(0)
    model = ModernDecoder(_config(n_layers=1)).double().eval()
    ids = torch.tensor([[3, 7, 1, 12, 5, 9]])
    permuted = ids[:, [2, 0, 4, 1, 3, 5]]
    with torch.no_grad():
        change = (model(ids)[0][0, -1] - model(permuted)[0][0, -1]).abs().max()
    assert change > 1e-6, change


def test_learned_positions_zeroed_leave_a_bag_of_tokens():
    torch.manual_seed(0)
    model = ModernDecoder(_config(n_layers=1, positional="learned")).double().eval()
    with torch.no_grad():
        model.position.weight.zero_()
        ids = torch.tensor([[3, 7, 1, 12, 5, 9]])
        permuted = ids[:, [2, 0, 4, 1, 3, 5]]
        torch.testing.assert_close(
            model(ids)[0][0, -1], model(permuted)[0][0, -1], rtol=0, atol=1e-12
        )


def test_norm_eps_must_be_positive():
    with pytest.raises(ValueError, match="norm_eps"):
        _config(norm_eps=0.0)


def test_attention_weights_are_kept_only_when_asked():
    torch.manual_seed(0)
    model = ModernDecoder(_config(n_layers=1)).eval()
    block = model.blocks[0]
    x = torch.randn(2, 5, 64)
    block(x)
    assert block.attention.attention_weights is None
    block(x, need_weights=True)
    assert block.attention.attention_weights.shape == (2, 4, 5, 5)


def test_the_n_kv_heads_hints_list_every_divisor_of_n_heads():
    """n_heads = 4: valid n_kv_heads are 1, 2 and 4 (4 = multi-head attention itself)."""
    from course_utils.gqa import GroupedQueryAttention

    with pytest.raises(ValueError) as info:
        GroupedQueryAttention(64, 4, n_kv_heads=3)
    assert "valid n_kv_heads: [1, 2, 4]" in str(info.value)
    with pytest.raises(ValueError) as info:
        _config(n_kv_heads=3)
    assert "valid: [1, 2, 4]" in str(info.value)


def test_leading_dims_mismatch_names_each_tensors_leading_dims():
    """3-D (B, T, d) inputs: the leading dims are (B,), not (B, T)."""
    from course_utils.attention import scaled_dot_product_attention

    q, k, v = torch.zeros(2, 3, 4), torch.zeros(2, 3, 4), torch.zeros(5, 3, 4)
    with pytest.raises(ValueError) as info:
        scaled_dot_product_attention(q, k, v)
    assert "got (2,), (2,), (5,)" in str(info.value)
