"""Checkers of notebook 02: each accepts the right answer and rejects typical wrong ones."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from course_utils.exercises import check_one_hot_lookup, check_scaled_embedding


def test_one_hot_lookup_accepts_the_product(capsys):
    def right(ids, weight):
        return F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype) @ weight

    assert check_one_hot_lookup(right) is True
    assert "✅ embedding lookup as one_hot @ W: correct" in capsys.readouterr().out


def test_one_hot_lookup_rejects_a_missing_num_classes(capsys):
    def wrong(ids, weight):  # one_hot infers V from the largest id: one column short
        return F.one_hot(ids).float() @ weight

    assert check_one_hot_lookup(wrong) is False
    out = capsys.readouterr().out
    assert "❌" in out and "without num_classes makes max(ids) + 1 = 9 columns, not V = 10" in out
    assert "raised" not in out  # a hint in the course's words, not the raw matmul error


def test_one_hot_lookup_rejects_integer_one_hot(capsys):
    def wrong(ids, weight):  # int64 one-hot @ float32 table: matmul refuses mixed dtypes
        return F.one_hot(ids, weight.shape[0]) @ weight

    assert check_one_hot_lookup(wrong) is False
    out = capsys.readouterr().out
    assert "one-hot matrix is torch.int64" in out and ".to(W.dtype)" in out


@pytest.mark.parametrize(
    "lookup",
    [
        lambda ids, weight: weight[ids],
        lambda ids, weight: F.embedding(ids, weight),
        lambda ids, weight: weight.index_select(0, ids.flatten()).view(*ids.shape, -1),
        lambda ids, weight: torch.nn.Embedding.from_pretrained(weight)(ids),
        # issue 22: a lookup with no product at all, and one through the transposed table
        lambda ids, weight: torch.stack([torch.stack([weight[i] for i in row]) for row in ids]),
        lambda ids, weight: weight.T[:, ids].permute(1, 2, 0),
        # a lookup dressed up with a product that does not do the one-hot's work
        lambda ids, weight: weight[ids] * torch.ones(weight.shape[1], dtype=weight.dtype),
    ],
)
def test_one_hot_lookup_rejects_the_forbidden_direct_lookup(capsys, lookup):
    # Right numbers, but the exercise is to replace the lookup by a product.
    assert check_one_hot_lookup(lookup) is False
    assert "reads rows of W directly" in capsys.readouterr().out


def test_one_hot_lookup_accepts_a_one_hot_built_by_hand(capsys):
    def right(ids, weight):
        one_hot = ids[..., None] == torch.arange(weight.shape[0])  # (B, T, V) bool
        return one_hot.to(weight.dtype) @ weight

    assert check_one_hot_lookup(right) is True


def test_one_hot_lookup_rejects_a_fixed_float32_one_hot_on_a_float64_table(capsys):
    def wrong(ids, weight):  # right on float32 tables only
        return F.one_hot(ids, weight.shape[0]).float() @ weight

    assert check_one_hot_lookup(wrong) is False
    out = capsys.readouterr().out
    assert "different dtypes (torch.float32 and torch.float64" in out and "raised" not in out, out


def test_one_hot_lookup_rejects_a_float32_answer_for_a_float64_table(capsys):
    def wrong(ids, weight):
        return F.one_hot(ids, weight.shape[0]).float() @ weight.float()

    assert check_one_hot_lookup(wrong) is False
    assert "is torch.float32; keep W's dtype" in capsys.readouterr().out


@pytest.mark.parametrize(
    "right",
    [
        lambda ids, w: torch.einsum("btv,vd->btd", F.one_hot(ids, w.shape[0]).to(w.dtype), w),
        lambda ids, w: (F.one_hot(ids, w.shape[0]).to(w.dtype)[..., None] * w).sum(dim=-2),
        lambda ids, w: torch.eye(w.shape[0], dtype=w.dtype)[ids] @ w,
        # one position at a time: a (V,) one-hot row times W, stacked
        lambda ids, w: torch.stack(
            [torch.stack([F.one_hot(i, w.shape[0]).to(w.dtype) @ w for i in row]) for row in ids]
        ),
    ],
)
def test_one_hot_lookup_accepts_other_products(right, capsys):
    result = check_one_hot_lookup(right)
    assert result is True, capsys.readouterr().out


def test_one_hot_lookup_rejects_the_wrong_rows(capsys):
    def wrong(ids, weight):  # an off-by-one: the row of the next id
        return F.one_hot((ids + 1) % weight.shape[0], weight.shape[0]).to(weight.dtype) @ weight

    assert check_one_hot_lookup(wrong) is False
    assert "differs by up to" in capsys.readouterr().out


def test_one_hot_lookup_reports_an_unfinished_stub(capsys):
    def stub(ids, weight):
        raise NotImplementedError  # your code here

    assert check_one_hot_lookup(stub) is False
    assert "not implemented yet" in capsys.readouterr().out


def test_scaled_embedding_accepts_the_paper_scale(capsys):
    assert check_scaled_embedding(lambda ids, w: w[ids] * math.sqrt(w.shape[1])) is True
    assert "✅ scaled token embedding: correct" in capsys.readouterr().out


def test_scaled_embedding_rejects_no_scale(capsys):
    assert check_scaled_embedding(lambda ids, w: w[ids]) is False
    assert "looks unscaled" in capsys.readouterr().out


def test_scaled_embedding_rejects_scaling_twice(capsys):
    assert check_scaled_embedding(lambda ids, w: w[ids] * w.shape[1]) is False
    assert "applied twice" in capsys.readouterr().out


def test_scaled_embedding_rejects_the_vocabulary_scale(capsys):
    assert check_scaled_embedding(lambda ids, w: w[ids] * math.sqrt(w.shape[0])) is False
    assert "sqrt(vocab_size)" in capsys.readouterr().out


@pytest.mark.parametrize("width", [24, 7])
def test_scaled_embedding_rejects_a_hard_coded_d_model(width, capsys):
    # sqrt(7) is right for the first table (7 wide) and wrong for the second (12 wide).
    assert check_scaled_embedding(lambda ids, w: w[ids] * math.sqrt(width)) is False
    out = capsys.readouterr().out
    assert f"it looks scaled by sqrt({width}), a constant" in out, out


def test_scaled_embedding_accepts_other_ways_to_scale(capsys):
    assert check_scaled_embedding(lambda ids, w: w[ids] * w.shape[-1] ** 0.5) is True
    assert check_scaled_embedding(lambda ids, w: F.embedding(ids, w * math.sqrt(w.size(1)))) is True


def test_scaled_embedding_rejects_float32_on_a_float64_table(capsys):
    assert check_scaled_embedding(lambda ids, w: w[ids].float() * math.sqrt(w.shape[1])) is False
    assert "keep W's dtype torch.float64" in capsys.readouterr().out


def test_scaled_embedding_rejects_a_wrong_shape(capsys):
    assert check_scaled_embedding(lambda ids, w: (w * math.sqrt(w.shape[1]))[ids[0]]) is False
    assert "has shape (5, 7), expected (2, 5, 7)" in capsys.readouterr().out
