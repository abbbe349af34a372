"""Checkers of notebook 02 (issue 32's standard): each catalogued mistake is rejected with its own
message, right answers written other ways are accepted, and no checker fails on its own."""

from __future__ import annotations

import math

import checker_verdict
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.embedding import TokenEmbedding
from course_utils.exercises import check_logit_table, check_nearest_tokens
from course_utils.exercises.nb02_embeddings import LOGIT_TABLE_MISTAKES, NEAREST_MISTAKES


def verdict(checker, answer, capsys) -> tuple[bool, str]:
    """The shared verdict, and one more check here: the checker prints one line, always."""
    result, out = checker_verdict.verdict(checker, answer, capsys)
    assert out.count("\n") == 1, out
    return result, out


# --- logit_table ------------------------------------------------------------------------


def logit_table(embedding_weight, head_weight, head_bias):
    d_model = embedding_weight.shape[1]
    return embedding_weight * math.sqrt(d_model) @ head_weight.T + head_bias


def through_modules(embedding_weight, head_weight, head_bias):
    """The model itself, built from the three tensors and run on every token."""
    vocab_size, d_model = embedding_weight.shape
    embedding = TokenEmbedding(vocab_size, d_model).to(embedding_weight)  # its dtype and device
    head = nn.Linear(d_model, vocab_size).to(embedding_weight)
    with torch.no_grad():
        embedding.weight.copy_(embedding_weight)
        head.weight.copy_(head_weight)
        head.bias.copy_(head_bias)
        return head(embedding(torch.arange(vocab_size, device=embedding_weight.device)))


RIGHT_TABLES = [
    logit_table,
    lambda e, w, b: F.linear(e * e.shape[-1] ** 0.5, w, b),
    lambda e, w, b: torch.addmm(b, e, w.T, alpha=math.sqrt(e.size(1))),
    lambda e, w, b: torch.einsum("vd,nd->vn", e.double(), w.double()) * e.shape[1] ** 0.5 + b,
    lambda e, w, b: (
        (F.one_hot(torch.arange(len(e), device=e.device)).to(e.dtype) @ e * math.sqrt(e.shape[1]))
        @ w.T.contiguous()
        + b
    ),
    lambda e, w, b: logit_table(e, w, b).T.contiguous().T,  # a non-contiguous result
    through_modules,
]


@pytest.mark.parametrize("right", RIGHT_TABLES)
def test_logit_table_accepts_right_variants(right, capsys):
    assert verdict(check_logit_table, right, capsys) == (True, "✅ logit_table: correct\n")


@pytest.mark.parametrize(("message", "wrong"), LOGIT_TABLE_MISTAKES)
def test_logit_table_names_each_mistake(message, wrong, capsys):
    ok, out = verdict(check_logit_table, wrong, capsys)
    assert not ok and f"looks like {message}" in out, out


def test_logit_table_names_what_no_catalogue_holds(capsys):
    ok, out = verdict(check_logit_table, lambda e, w, b: "table", capsys)
    assert not ok and "got a str" in out
    ok, out = verdict(check_logit_table, lambda e, w, b: None, capsys)
    assert not ok and "returns nothing" in out
    ok, out = verdict(check_logit_table, lambda e, w, b: logit_table(e, w, b)[:-1], capsys)
    assert not ok and "shape" in out
    ok, out = verdict(check_logit_table, lambda e: e, capsys)
    assert not ok and "give it exactly these parameters" in out
    ok, out = verdict(check_logit_table, lambda e, w, b: logit_table(e, w, b) + 0.1, capsys)
    assert not ok and "differ" in out


def test_logit_table_reports_a_stub(capsys):
    def stub(embedding_weight, head_weight, head_bias):
        raise NotImplementedError  # your code here

    assert verdict(check_logit_table, stub, capsys) == (
        False,
        "❌ logit_table: not implemented yet\n",
    )


# --- nearest_tokens ---------------------------------------------------------------------


def nearest_tokens(weight, token, k):
    unit = weight / weight.norm(dim=1, keepdim=True)
    similarity = unit @ unit[token]
    similarity[token] = float("-inf")
    return similarity.topk(k).indices


def by_cosine_similarity(weight, token, k):
    similarity = F.cosine_similarity(weight, weight[token][None], dim=-1)
    order = similarity.argsort(descending=True)
    return order[order != token][:k]


def as_python_list(weight, token, k):
    unit = F.normalize(weight.double(), dim=1)
    scores = (unit @ unit[token]).tolist()
    ranked = sorted((i for i in range(len(scores)) if i != token), key=lambda i: -scores[i])
    return ranked[:k]


RIGHT_NEAREST = [
    nearest_tokens,
    by_cosine_similarity,
    as_python_list,
    lambda w, t, k: tuple(nearest_tokens(w, t, k).tolist()),
    lambda w, t, k: (w / w.norm(dim=1, keepdim=True)).matmul(w[t]).topk(k + 1).indices[1:],
]


@pytest.mark.parametrize("right", RIGHT_NEAREST)
def test_nearest_tokens_accepts_right_variants(right, capsys):
    assert verdict(check_nearest_tokens, right, capsys) == (True, "✅ nearest_tokens: correct\n")


@pytest.mark.parametrize(("message", "wrong"), NEAREST_MISTAKES)
def test_nearest_tokens_names_each_mistake(message, wrong, capsys):
    ok, out = verdict(check_nearest_tokens, wrong, capsys)
    assert not ok and f"looks like {message}" in out, out


def test_nearest_tokens_names_what_comes_back_instead_of_ids(capsys):
    def pair(weight, token, k):
        similarity = F.cosine_similarity(weight, weight[token][None], dim=-1)
        similarity[token] = -2.0
        return similarity.topk(k)

    ok, out = verdict(check_nearest_tokens, pair, capsys)
    assert not ok and "(values, indices) pair; return its .indices" in out
    ok, out = verdict(check_nearest_tokens, lambda w, t, k: pair(w, t, k).values, capsys)
    assert not ok and "(similarities?); return the token ids" in out
    ok, out = verdict(check_nearest_tokens, lambda w, t, k: [0.5] * k, capsys)
    assert not ok and "return token ids, ints" in out
    ok, out = verdict(check_nearest_tokens, lambda w, t, k: "a", capsys)
    assert not ok and "returned a str" in out
    ok, out = verdict(check_nearest_tokens, lambda w, t, k: nearest_tokens(w, t, k).int(), capsys)
    assert not ok and "returned torch.int32 ids; the exercise asks for int64" in out  # issue 42


def test_logit_table_names_a_table_built_on_the_cpu(capsys):
    """Issue 42: a tensor made inside the function without device= is named with its line."""

    def one_hot_on_cpu(e, w, b):
        rows = F.one_hot(torch.arange(len(e))).to(e.dtype)  # on the CPU whatever e's device
        return (rows @ e * math.sqrt(e.shape[1])) @ w.T + b

    ok, out = verdict(check_logit_table, one_hot_on_cpu, capsys)
    assert not ok and "torch.arange (line" in out and "(device=embedding_weight.device)" in out


@pytest.mark.parametrize(
    ("wrong", "said"),
    [
        (lambda w, t, k: nearest_tokens(w, 3, k), "what token=3 gives"),
        (lambda w, t, k: nearest_tokens(w, t, 3), "what k=3 gives"),
    ],
)
def test_nearest_tokens_names_a_fixed_argument(wrong, said, capsys):
    ok, out = verdict(check_nearest_tokens, wrong, capsys)
    assert not ok and said in out and "not a fixed value or a notebook global" in out, out


def test_nearest_tokens_reports_a_stub(capsys):
    def stub(weight, token, k):
        raise NotImplementedError  # your code here

    assert verdict(check_nearest_tokens, stub, capsys) == (
        False,
        "❌ nearest_tokens: not implemented yet\n",
    )
