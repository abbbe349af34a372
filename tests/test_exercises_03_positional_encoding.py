"""Checkers of notebook 03: each accepts the right answer and rejects typical wrong ones."""

from __future__ import annotations

import torch

from course_utils.exercises import check_pe_shift_matrix, check_sinusoidal_table
from course_utils.positional import pe_shift_matrix


def table(max_len, d_model, base=10000.0, pair_step=1, swap=False):
    """A vectorised table; the keyword arguments reproduce typical mistakes."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    i = torch.arange(0, d_model // 2, dtype=torch.float64) * pair_step
    angle = position / base ** (2 * i / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    pe[:, 0::2], pe[:, 1::2] = first(angle), second(angle)
    return pe.float()


def test_sinusoidal_table_accepts_the_paper_formula(capsys):
    assert check_sinusoidal_table(table) is True
    assert "✅ sinusoidal positional encoding table: correct" in capsys.readouterr().out


def test_sinusoidal_table_rejects_the_buggy_base_and_channel_index(capsys):
    """Design mistake 1: base 100000 and 2*i/d with i stepping by 2 (the channel index)."""
    assert check_sinusoidal_table(lambda n, d: table(n, d, base=100000.0, pair_step=2)) is False
    out = capsys.readouterr().out
    assert "❌" in out and "differs by up to" in out and "pair index" in out


def test_sinusoidal_table_rejects_swapped_sin_and_cos(capsys):
    assert check_sinusoidal_table(lambda n, d: table(n, d, swap=True)) is False
    assert "differs by up to" in capsys.readouterr().out


def test_sinusoidal_table_rejects_a_table_sized_by_something_else(capsys):
    assert check_sinusoidal_table(lambda n, d: table(100, d)) is False
    assert "has shape (100, 24), expected (50, 24)" in capsys.readouterr().out


def test_sinusoidal_table_reports_an_unfinished_stub(capsys):
    def stub(max_len, d_model):
        raise NotImplementedError  # your code here

    assert check_sinusoidal_table(stub) is False
    assert "not implemented yet" in capsys.readouterr().out


def test_shift_matrix_accepts_the_block_rotation(capsys):
    assert check_pe_shift_matrix(lambda k, d: pe_shift_matrix(k, d)) is True
    assert "✅ shift matrix M(k): correct" in capsys.readouterr().out


def test_shift_matrix_rejects_the_transpose(capsys):
    assert check_pe_shift_matrix(lambda k, d: pe_shift_matrix(k, d).T) is False
    assert "transpose" in capsys.readouterr().out


def test_shift_matrix_rejects_the_identity(capsys):
    assert check_pe_shift_matrix(lambda k, d: torch.eye(d, dtype=torch.float64)) is False
    assert "differs by up to" in capsys.readouterr().out


def test_shift_matrix_rejects_a_matrix_that_ignores_k(capsys):
    assert check_pe_shift_matrix(lambda k, d: pe_shift_matrix(1, d)) is False
    assert "M(3) for d_model=24 differs" in capsys.readouterr().out
