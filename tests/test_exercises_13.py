"""Checkers of notebook 13 (generation and the KV cache): each accepts the right answer and
rejects each plausible wrong one with the reason that fits it."""

from __future__ import annotations

import torch

from course_utils.exercises import check_append_to_cache, check_new_positions, check_top_p_filter
from course_utils.rotary import apply_rotary_embedding
from course_utils.sampling import top_p_filter as course_top_p_filter


def verdict(checker, function, capsys) -> tuple[bool, str]:
    result = checker(function)
    return result, capsys.readouterr().out


def unfinished(*args):
    raise NotImplementedError  # your code here


# --- append to the cache ---------------------------------------------------------------


def test_check_append_to_cache_accepts_a_cat_on_the_time_axis(capsys):
    def right(cached_k, cached_v, k_new, v_new):
        return torch.cat([cached_k, k_new], dim=2), torch.cat([cached_v, v_new], dim=2)

    assert verdict(check_append_to_cache, right, capsys) == (True, "✅ append_to_cache: correct\n")
    negative_axis = lambda ck, cv, k, v: (torch.cat([ck, k], -2), torch.cat([cv, v], -2))  # noqa: E731
    assert verdict(check_append_to_cache, negative_axis, capsys)[0]


def test_check_append_to_cache_names_each_mistake(capsys):
    cases = {
        "join on the time axis, dim=2": lambda ck, cv, k, v: (
            torch.cat([ck, k], 1),
            torch.cat([cv, v], 1),
        ),
        "keep the cached keys too": lambda ck, cv, k, v: (k, v),
        "the newest position goes last": lambda ck, cv, k, v: (
            torch.cat([k, ck], 2),
            torch.cat([v, cv], 2),
        ),
        "keys and values are swapped": lambda ck, cv, k, v: (
            torch.cat([cv, v], 2),
            torch.cat([ck, k], 2),
        ),
        "values after 5 cached + 1 new differs": lambda ck, cv, k, v: (
            torch.cat([ck, k], 2),
            torch.cat([cv, k], 2),  # the new key appended to the values
        ),
        "return a pair (keys, values)": lambda ck, cv, k, v: torch.cat([ck, k], 2),
        "not implemented yet": unfinished,
    }
    for reason, wrong in cases.items():
        ok, out = verdict(check_append_to_cache, wrong, capsys)
        assert not ok and out.startswith("❌ append_to_cache") and reason in out, (reason, out)


# --- the position of the next token -------------------------------------------------------


def test_check_new_positions_accepts_an_arange_from_the_cache_length(capsys):
    def right(cache_length, n_new):
        return torch.arange(cache_length, cache_length + n_new)

    assert verdict(check_new_positions, right, capsys) == (True, "✅ new_positions: correct\n")

    def by_addition(cache_length, n_new):  # a correct alternative
        return cache_length + torch.arange(n_new, dtype=torch.long)

    assert verdict(check_new_positions, by_addition, capsys)[0]


def test_check_new_positions_names_each_mistake(capsys):
    cases = {
        "starts again at 0: add the cache length": lambda c, n: torch.arange(n),
        "one too far": lambda c, n: torch.arange(c + 1, c + n + 1),
        "has dtype torch.float32": lambda c, n: torch.arange(c, c + n, dtype=torch.float32),
        "has dtype torch.int32; positions are int64": lambda c, n: torch.arange(
            c, c + n, dtype=torch.int32
        ),
        "should be a torch.Tensor": lambda c, n: list(range(c, c + n)),
        "has shape (1,), expected (5,)": lambda c, n: torch.tensor([c]),
        "not implemented yet": unfinished,
    }
    for reason, wrong in cases.items():
        ok, out = verdict(check_new_positions, wrong, capsys)
        assert not ok and out.startswith("❌ new_positions") and reason in out, (reason, out)


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


def test_check_top_p_filter_accepts_the_course_s_and_a_hand_written_filter(capsys):
    assert verdict(check_top_p_filter, course_top_p_filter, capsys) == (
        True,
        "✅ top_p_filter: correct\n",
    )
    assert verdict(check_top_p_filter, _right_top_p, capsys)[0]


def _inclusive(logits, p):  # the classic bug: the token that crosses p is dropped
    probabilities, order = torch.softmax(logits, -1).sort(dim=-1, descending=True)
    remove = probabilities.cumsum(-1) > p
    return logits.masked_fill(remove.scatter(-1, order, remove), float("-inf"))


def _strict(logits, p):  # right except on a tie: keeps the token after a mass of exactly p
    probabilities, order = torch.softmax(logits, -1).sort(dim=-1, descending=True)
    before = probabilities.cumsum(-1) - probabilities
    return logits.masked_fill((before > p).scatter(-1, order, before > p), float("-inf"))


def _vocabulary_order(logits, p):  # cumulative sum without sorting first
    probabilities = torch.softmax(logits, -1)
    remove = probabilities.cumsum(-1) - probabilities >= p
    return logits.masked_fill(remove, float("-inf"))


def _left_sorted(logits, p):
    filtered = _right_top_p(logits, p)
    return filtered.sort(dim=-1, descending=True).values


def test_check_top_p_filter_names_each_mistake(capsys):
    cases = {
        "sets removed logits to 0; use -inf": lambda x, p: (
            _right_top_p(x, p).clamp_min(0) * (_right_top_p(x, p) != float("-inf"))
        ),
        "sets removed logits to -1e+09": lambda x, p: _right_top_p(x, p).clamp_min(-1e9),
        "returned probabilities": lambda x, p: torch.softmax(_right_top_p(x, p), -1),
        "is in sorted order": _left_sorted,
        "keep the token that makes the mass reach p": _inclusive,
        "remove where that mass is >= p, not > p": _strict,
        "sum the probabilities in decreasing order": _vocabulary_order,
        "the kept logits": lambda x, p: _right_top_p(x, p) / 2.0,
        "has shape": lambda x, p: _right_top_p(x, p)[:, :-1],
        "not implemented yet": unfinished,
    }
    for reason, wrong in cases.items():
        ok, out = verdict(check_top_p_filter, wrong, capsys)
        assert not ok and out.startswith("❌ top_p_filter") and reason in out, (reason, out)
