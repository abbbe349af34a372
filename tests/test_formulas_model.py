"""What the decoder promises beyond its logits: where positions enter, that generation
builds no autograd graph, and the hints of its errors (each checked with an input that would
get the other hint)."""

from __future__ import annotations

import pytest
import torch

from course_utils.config import ModelConfig
from course_utils.embedding import TokenEmbedding, check_token_ids
from course_utils.model import TinyDecoder

V, BLOCK = 20, 8


def _model(**changes) -> TinyDecoder:
    torch.manual_seed(0)
    settings = dict(vocab_size=V, block_size=BLOCK, d_model=24, n_heads=3, n_layers=2)
    return TinyDecoder(ModelConfig(**{**settings, **changes})).eval()


def test_learned_positions_enter_only_through_the_table():
    """With the learned table zeroed, one causal block sees the earlier tokens as a set: the
    last position's logits do not change when they are permuted (no rotation hides in q, k).
    (One block: in a second one the earlier positions' own prefixes would differ.)"""
    model = _model(positional="learned", n_layers=1).double()  # float64: any sum order agrees
    assert all(block.attention.rotary is None for block in model.blocks)
    with torch.no_grad():
        model.position.weight.zero_()
        ids = torch.tensor([[3, 7, 1, 12, 5, 9]])
        permuted = ids[:, [2, 0, 4, 1, 3, 5]]  # earlier tokens reordered, the last one kept
        last, _ = model(ids)
        last_permuted, _ = model(permuted)
    torch.testing.assert_close(last[0, -1], last_permuted[0, -1], rtol=0, atol=1e-12)
    # with RoPE the order matters even with nothing added to the embeddings
    rope = _model(positional="rope", n_layers=1).double()
    with torch.no_grad():
        change = (rope(ids)[0][0, -1] - rope(permuted)[0][0, -1]).abs().max()
    assert change > 1e-6, change


def test_generate_builds_no_autograd_graph():
    """Generation runs under no_grad: no graph (and no memory for one) per new token."""
    model = _model()
    seen = []
    model.lm_head.register_forward_hook(lambda m, i, out: seen.append(out.requires_grad))
    out = model.generate(torch.tensor([[1, 2]]), max_new_tokens=3, greedy=True)
    assert out.shape == (1, 5) and seen == [False, False, False]
    assert torch.is_grad_enabled()  # and grad mode is back afterwards


@pytest.mark.parametrize(
    "ids, hint",
    [
        (torch.tensor([1, 2, 3]), "add a batch axis with ids[None]"),
        (torch.tensor([[[1, 2, 3]]]), "pass one (B, T) batch"),
        (torch.tensor(4), "pass one (B, T) batch"),
    ],
    ids=["1-D", "3-D", "0-D"],
)
def test_ids_of_the_wrong_rank_get_the_matching_hint(ids, hint):
    with pytest.raises(ValueError, match="must be a \\(B, T\\) tensor") as info:
        _model()(ids)
    assert hint in str(info.value)


def test_minus_100_in_the_ids_is_explained_and_other_negatives_are_not():
    with pytest.raises(ValueError, match="ignore_index") as info:
        check_token_ids(torch.tensor([[1, -100, 2]]), V)
    assert "min -100" in str(info.value)
    for ids in ([[1, -1, 2]], [[1, -101, 2]], [[1, 2, V]]):
        with pytest.raises(ValueError, match="different tokenizer") as info:
            check_token_ids(torch.tensor(ids), V)
        assert "ignore_index" not in str(info.value)


def test_embedding_sizes_start_at_one():
    assert TokenEmbedding(vocab_size=1, d_model=1)(torch.zeros(1, 1, dtype=torch.long)).shape == (
        1,
        1,
        1,
    )
    with pytest.raises(ValueError, match="vocab_size"):
        TokenEmbedding(vocab_size=0, d_model=4)


@pytest.mark.parametrize("temperature", [0.0, -1.0, float("inf"), float("nan")])
def test_generate_refuses_temperatures_outside_zero_to_infinity(temperature):
    """T must be in (0, inf): T = inf would make every token equally likely (and NaN logits)."""
    with pytest.raises(ValueError, match="temperature"):
        _model().generate(torch.tensor([[1]]), max_new_tokens=1, temperature=temperature)
