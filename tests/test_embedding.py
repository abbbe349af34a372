"""TokenEmbedding: a lookup scaled by sqrt(d_model), checked against nn.Embedding and one-hot."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.embedding import TokenEmbedding

VOCAB, D_MODEL = 20, 24


@pytest.fixture
def embedding() -> TokenEmbedding:
    torch.manual_seed(0)
    return TokenEmbedding(VOCAB, D_MODEL)


@pytest.fixture
def ids() -> torch.Tensor:
    return torch.randint(VOCAB, (3, 7), generator=torch.Generator().manual_seed(1))


def test_equals_nn_embedding_times_sqrt_d_model(embedding, ids):
    """Reference: nn.Embedding with the same table, times sqrt(d_model) (Vaswani §3.4)."""
    reference = nn.Embedding(VOCAB, D_MODEL)
    with torch.no_grad():
        reference.weight.copy_(embedding.weight)
    out = embedding(ids)
    assert out.shape == (3, 7, D_MODEL)
    torch.testing.assert_close(out, reference(ids) * math.sqrt(D_MODEL), rtol=0, atol=1e-7)


def test_equals_one_hot_matrix_product(embedding, ids):
    """Reference: one_hot(ids) @ W * sqrt(d_model); the lookup is that product done fast."""
    one_hot = F.one_hot(ids, VOCAB).float()  # (B, T, V)
    expected = one_hot @ embedding.weight * math.sqrt(D_MODEL)
    torch.testing.assert_close(embedding(ids), expected, rtol=0, atol=1e-6)


def test_unscaled_variant_is_a_plain_lookup(ids):
    torch.manual_seed(0)
    embedding = TokenEmbedding(VOCAB, D_MODEL, scale=False)
    assert torch.equal(embedding(ids), F.embedding(ids, embedding.weight))


def test_gradient_reaches_only_the_used_rows(embedding):
    """Rows of W for ids that do not occur get zero gradient (as for nn.Embedding)."""
    embedding(torch.tensor([[2, 5, 5]])).sum().backward()
    used = embedding.weight.grad.abs().sum(dim=1) != 0
    assert used.nonzero().flatten().tolist() == [2, 5]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bool])
def test_non_integer_ids_raise_type_error(embedding, dtype):
    with pytest.raises(TypeError, match=rf"got dtype {dtype}"):
        embedding(torch.zeros(2, 3, dtype=dtype))


def test_id_equal_to_vocab_size_is_rejected(embedding):
    ids = torch.tensor([[0, 3, VOCAB]])
    with pytest.raises(ValueError, match=rf"vocab_size={VOCAB}\), got min 0 and max {VOCAB}"):
        embedding(ids)


def test_negative_id_is_rejected(embedding):
    ids = torch.tensor([[-3, 1, 2]])
    with pytest.raises(ValueError, match=rf"vocab_size={VOCAB}\), got min -3 and max 2"):
        embedding(ids)


def test_trusted_token_ids_skips_only_the_range_check():
    """Inside the block (train() after checking its data once) no value is read back."""
    from course_utils.embedding import check_token_ids, trusted_token_ids

    out_of_range = torch.tensor([[0, 99]])
    with trusted_token_ids():
        check_token_ids(out_of_range, vocab_size=10)  # not read back: no error
        with pytest.raises(TypeError, match="integer tensor"):
            check_token_ids(out_of_range.float(), vocab_size=10)
    with pytest.raises(ValueError, match="max 99"):
        check_token_ids(out_of_range, vocab_size=10)
