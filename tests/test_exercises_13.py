"""Checkers of notebook 13 (generation and the KV cache): every catalogued mistake is rejected
with its own message, right answers written several ways pass, and no answer makes a checker
fail internally."""

from __future__ import annotations

import pytest
import torch
from checker_verdict import assert_named, assert_unfinished_reported, catalogue_params, verdict

from course_utils.exercises import check_append_to_cache, check_new_positions, check_top_p_filter
from course_utils.exercises.nb13_generation import (
    APPEND_TO_CACHE_MISTAKES,
    NEW_POSITIONS_MISTAKES,
    TOP_P_MISTAKES,
)
from course_utils.rotary import apply_rotary_embedding
from course_utils.sampling import top_p_filter as course_top_p_filter

CATALOGUES = [
    (check_append_to_cache, APPEND_TO_CACHE_MISTAKES),
    (check_new_positions, NEW_POSITIONS_MISTAKES),
    (check_top_p_filter, TOP_P_MISTAKES),
]


@pytest.mark.parametrize(("checker", "message", "wrong"), **catalogue_params(CATALOGUES))
def test_each_catalogued_mistake_is_named(checker, message, wrong, capsys):
    assert_named(checker, wrong, message, capsys)


def test_unfinished_exercises_are_reported_not_raised(capsys):
    assert_unfinished_reported(CATALOGUES, capsys)


# --- append to the cache ---------------------------------------------------------------


def _right_cache(ck, cv, k, v):
    return torch.cat([ck, k], dim=2), torch.cat([cv, v], dim=2)


def _preallocated(ck, cv, k, v):  # a buffer filled by slices, returned as views
    buffer = torch.empty(
        2, *ck.shape[:2], ck.shape[2] + k.shape[2], ck.shape[3], dtype=ck.dtype, device=ck.device
    )
    buffer[:, :, :, : ck.shape[2]] = torch.stack([ck, cv])
    buffer[:, :, :, ck.shape[2] :] = torch.stack([k, v])
    return buffer[0], buffer[1]


CACHE_RIGHT = {
    "cat on dim=2": _right_cache,
    "cat on dim=-2": lambda ck, cv, k, v: (torch.cat([ck, k], -2), torch.cat([cv, v], -2)),
    "a list [k, v]": lambda ck, cv, k, v: list(_right_cache(ck, cv, k, v)),
    "torch.concat in float64": lambda ck, cv, k, v: tuple(
        torch.concat([a.double(), b.double()], dim=2) for a, b in ((ck, k), (cv, v))
    ),
    "a preallocated buffer (views)": _preallocated,
}


def test_append_to_cache_names_a_buffer_made_on_the_cpu(capsys):
    """Issue 42: a buffer made without device= is on the CPU whatever the cache's device."""

    def on_the_cpu(ck, cv, k, v):
        buffer = torch.empty(2, *ck.shape[:2], ck.shape[2] + k.shape[2], ck.shape[3])
        buffer[:, :, :, : ck.shape[2]] = torch.stack([ck, cv])
        buffer[:, :, :, ck.shape[2] :] = torch.stack([k, v])
        return buffer[0], buffer[1]

    passed, out = verdict(check_append_to_cache, on_the_cpu, capsys)
    assert not passed and "it returns a tensor made on the CPU by torch.empty (line" in out, out


@pytest.mark.parametrize("name", CACHE_RIGHT)
def test_append_to_cache_right_answers_pass(name, capsys):
    assert verdict(check_append_to_cache, CACHE_RIGHT[name], capsys) == (
        True,
        "✅ append_to_cache: correct\n",
    )


@pytest.mark.parametrize(
    ("wrong", "said"),
    [
        (lambda ck, cv, k, v: _right_cache(ck, cv, k, v)[::-1], "(values, keys), in another order"),
        (lambda ck, cv, k, v: torch.cat([ck, k], 2), "should be the tuple (keys, values)"),
        (lambda ck, cv, k, v: torch.stack([ck, k]), "torch.cat on dim=2"),
        (lambda ck, cv, k, v: (torch.cat([ck, k], 2),), "has 1 items, expected 2"),
    ],
)
def test_append_to_cache_says_what_else_is_wrong(wrong, said, capsys):
    passed, out = verdict(check_append_to_cache, wrong, capsys)
    assert not passed and said in out, out


# --- the position of the next token -------------------------------------------------------

POSITIONS_RIGHT = {
    "arange": lambda c, n: torch.arange(c, c + n),
    "addition": lambda c, n: c + torch.arange(n, dtype=torch.long),
    "from a list": lambda c, n: torch.tensor(list(range(c, c + n))),
    "a view of a longer arange": lambda c, n: torch.arange(c + n + 5)[c : c + n],
}


@pytest.mark.parametrize("name", POSITIONS_RIGHT)
def test_new_positions_right_answers_pass(name, capsys):
    assert verdict(check_new_positions, POSITIONS_RIGHT[name], capsys) == (
        True,
        "✅ new_positions: correct\n",
    )


@pytest.mark.parametrize(
    ("wrong", "said"),
    [
        (lambda c, n: list(range(c, c + n)), "should be a torch.Tensor, got a list"),
        (lambda c, n: torch.tensor([c, c]), "has shape (2,), expected (T_new) = (5)"),
        (lambda c, n: torch.tensor([c]), "what n_new=1 gives"),
        (lambda c, n: torch.arange(7, 7 + n), "what cache_length=7 gives"),
    ],
)
def test_new_positions_says_what_else_is_wrong(wrong, said, capsys):
    passed, out = verdict(check_new_positions, wrong, capsys)
    assert not passed and said in out, out


def test_the_positions_rotate_a_new_key_like_the_full_sequence():
    """Why the exercise matters: rotating by the returned positions reproduces the key that a
    full forward would compute at that position."""
    keys = torch.randn(1, 2, 9, 8, generator=torch.Generator().manual_seed(0))
    full = apply_rotary_embedding(keys)  # positions 0..8
    last = apply_rotary_embedding(keys[:, :, 8:], positions=torch.arange(8, 9))
    torch.testing.assert_close(last, full[:, :, 8:])
    assert not torch.allclose(apply_rotary_embedding(keys[:, :, 8:]), full[:, :, 8:], atol=1e-3)


# --- top-p -----------------------------------------------------------------------------


def _right_top_p(logits, p):
    probabilities, order = torch.softmax(logits, -1).sort(dim=-1, descending=True)
    before = probabilities.cumsum(-1) - probabilities
    remove = (before >= p).scatter(-1, order, before >= p)
    return logits.masked_fill(remove, float("-inf"))


def _ascending_like_transformers(logits, p):  # HF's TopPLogitsWarper: ascending, <= 1 - p
    probabilities, order = torch.softmax(logits, -1).sort(dim=-1, descending=False)
    remove = probabilities.cumsum(-1) <= 1 - p
    remove[..., -1] = False  # always keep the most likely token
    return logits.masked_fill(remove.scatter(-1, order, remove), float("-inf"))


def _per_row(logits, p):  # one row at a time, with argsort and an inverse permutation
    rows = []
    for row in logits:
        order = row.argsort(descending=True)
        probabilities = torch.softmax(row, -1)[order]
        keep_sorted = probabilities.cumsum(0) - probabilities < p
        keep = torch.empty_like(keep_sorted)
        keep[order] = keep_sorted
        rows.append(torch.where(keep, row, torch.tensor(float("-inf"))))
    return torch.stack(rows)


TOP_P_RIGHT = {
    "the course's": course_top_p_filter,
    "by hand": _right_top_p,
    "ascending sort with <= 1 - p (transformers)": _ascending_like_transformers,
    "one row at a time": _per_row,
    "float64": lambda x, p: _right_top_p(x.double(), p),
    "a non-contiguous view": lambda x, p: _right_top_p(x.T.contiguous().T, p),
}


@pytest.mark.parametrize("name", TOP_P_RIGHT)
def test_top_p_right_answers_pass(name, capsys):
    assert verdict(check_top_p_filter, TOP_P_RIGHT[name], capsys) == (
        True,
        "✅ top_p_filter: correct\n",
    )


@pytest.mark.parametrize(
    ("wrong", "said"),
    [
        (lambda x, p: _right_top_p(x, 0.9), "what p=0.9 gives"),
        (lambda x, p: _right_top_p(x, p) / 2.0, "differs by up to"),
        (lambda x, p: _right_top_p(x, p)[:, :-1], "has shape"),
        (lambda x, p: _right_top_p(x, p).numpy(), "torch.from_numpy"),
    ],
)
def test_top_p_says_what_else_is_wrong(wrong, said, capsys):
    passed, out = verdict(check_top_p_filter, wrong, capsys)
    assert not passed and said in out, out


def test_top_p_names_the_strict_and_the_inclusive_comparisons(capsys):
    def inclusive_strict(logits, p):  # cumsum > p: drops the crossing token too
        probabilities, order = torch.softmax(logits, -1).sort(dim=-1, descending=True)
        remove = probabilities.cumsum(-1) > p
        return logits.masked_fill(remove.scatter(-1, order, remove), float("-inf"))

    passed, out = verdict(check_top_p_filter, inclusive_strict, capsys)
    assert not passed and "the token that makes the mass reach p dropped" in out, out
