"""Checkers of notebook 03: every catalogued mistake is rejected with its own message, right
answers written several ways pass, and no answer makes a checker fail internally."""

from __future__ import annotations

import math

import pytest
import torch
from checker_verdict import assert_named, assert_unfinished_reported, catalogue_params, verdict

from course_utils.exercises import check_pe_shift_matrix, check_sinusoidal_table
from course_utils.exercises.nb03_positional_encoding import SHIFT_MISTAKES, TABLE_MISTAKES
from course_utils.positional import pe_shift_matrix, sinusoidal_positional_encoding

CATALOGUES = [(check_sinusoidal_table, TABLE_MISTAKES), (check_pe_shift_matrix, SHIFT_MISTAKES)]


@pytest.mark.parametrize(("checker", "message", "wrong"), **catalogue_params(CATALOGUES))
def test_each_catalogued_mistake_is_named(checker, message, wrong, capsys):
    assert_named(checker, wrong, message, capsys)


def test_unfinished_exercises_are_reported_not_raised(capsys):
    assert_unfinished_reported(CATALOGUES, capsys)


# --- the sinusoidal table --------------------------------------------------------------------


def _vectorised(max_len, d_model):  # float32, strided assignment
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    i = torch.arange(0, d_model // 2, dtype=torch.float64)
    angle = position / 10000.0 ** (2 * i / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return pe.float()


def _loops(max_len, d_model):  # the formula with two loops, in float64
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    for pos in range(max_len):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            pe[pos, 2 * i], pe[pos, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return pe


def _exp_log(max_len, d_model):  # the frequencies as exp(-2i ln(10000) / d)
    position = torch.arange(max_len).unsqueeze(1)
    omega = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    pe = torch.empty(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(position * omega), torch.cos(position * omega)
    return pe


TABLE_RIGHT = {
    "vectorised, float32": _vectorised,
    "two loops, float64": _loops,
    "exp and log": _exp_log,
    "the course's function": lambda n, d: sinusoidal_positional_encoding(n, d),
    "a non-contiguous view": lambda n, d: _loops(n, d).T.contiguous().T,
}


@pytest.mark.parametrize("name", TABLE_RIGHT)
def test_sinusoidal_table_right_answers_pass(name, capsys):
    assert verdict(check_sinusoidal_table, TABLE_RIGHT[name], capsys) == (
        True,
        "✅ sinusoidal positional encoding table: correct\n",
    )


@pytest.mark.parametrize(
    ("wrong", "said"),
    [
        (lambda n, d: _loops(100, d), "has shape (100, 24)"),
        (lambda n, d: _loops(n, d)[:, : d // 2], "has shape (50, 12)"),
        (lambda n, d: _loops(n, d) * 1.01, "channel 2i is sin, 2i+1 is cos"),
        (lambda n, d: _loops(n, d).numpy(), "torch.from_numpy"),
        (lambda n: _loops(n, 24), "your function takes (n)"),
    ],
)
def test_sinusoidal_table_says_what_else_is_wrong(wrong, said, capsys):
    passed, out = verdict(check_sinusoidal_table, wrong, capsys)
    assert not passed and said in out, out


# --- the shift matrix ----------------------------------------------------------------------


def _by_hand(k, d_model):
    blocks = []
    for i in range(d_model // 2):
        angle = k / 10000 ** (2 * i / d_model)
        c, s = math.cos(angle), math.sin(angle)
        blocks.append(torch.tensor([[c, s], [-s, c]], dtype=torch.float64))
    return torch.block_diag(*blocks)


def _scatter(k, d_model):  # the four entries of every block set by strided indexing, float32
    omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    m = torch.zeros(d_model, d_model)
    even, odd = torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)
    m[even, even], m[odd, odd] = torch.cos(k * omega), torch.cos(k * omega)
    m[even, odd], m[odd, even] = torch.sin(k * omega), -torch.sin(k * omega)
    return m


SHIFT_RIGHT = {
    "block_diag by hand": _by_hand,
    "strided indexing, float32": _scatter,
    "the course's function": lambda k, d: pe_shift_matrix(k, d),
    "a non-contiguous view": lambda k, d: _by_hand(-k, d).T,
}


@pytest.mark.parametrize("name", SHIFT_RIGHT)
def test_shift_matrix_right_answers_pass(name, capsys):
    assert verdict(check_pe_shift_matrix, SHIFT_RIGHT[name], capsys) == (
        True,
        "✅ shift matrix M(k): correct\n",
    )


@pytest.mark.parametrize(
    ("wrong", "said"),
    [
        (lambda k, d: _by_hand(3, d), "what k=3 gives"),
        (lambda k, d: _by_hand(k, d)[:-1], "has shape (23, 24)"),
    ],
)
def test_shift_matrix_says_what_else_is_wrong(wrong, said, capsys):
    passed, out = verdict(check_pe_shift_matrix, wrong, capsys)
    assert not passed and said in out, out
