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
    assert "❌" in out and "differs by up to" in out and "design mistake 1" in out


def test_sinusoidal_table_rejects_swapped_sin_and_cos(capsys):
    assert check_sinusoidal_table(lambda n, d: table(n, d, swap=True)) is False
    assert "sin and cos are swapped" in capsys.readouterr().out


def test_sinusoidal_table_names_the_channel_index_and_the_base_alone(capsys):
    assert check_sinusoidal_table(lambda n, d: table(n, d, pair_step=2)) is False
    assert "where it needs the pair index" in capsys.readouterr().out
    assert check_sinusoidal_table(lambda n, d: table(n, d, base=100000.0)) is False
    assert "the base is 100000" in capsys.readouterr().out


def test_sinusoidal_table_names_sines_and_cosines_in_two_halves(capsys):
    def halves(max_len, d_model):
        pe = table(max_len, d_model)
        return torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=-1)

    assert check_sinusoidal_table(halves) is False
    assert "the paper interleaves them" in capsys.readouterr().out


def test_sinusoidal_table_accepts_other_right_answers(capsys):
    import math

    def loops(max_len, d_model):  # the formula written with two loops, in float64
        pe = torch.zeros(max_len, d_model, dtype=torch.float64)
        for pos in range(max_len):
            for i in range(d_model // 2):
                angle = pos / 10000 ** (2 * i / d_model)
                pe[pos, 2 * i], pe[pos, 2 * i + 1] = math.sin(angle), math.cos(angle)
        return pe

    def exp_log(max_len, d_model):  # the frequencies as exp(-2i ln(10000) / d)
        position = torch.arange(max_len).unsqueeze(1)
        omega = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.empty(max_len, d_model)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(position * omega), torch.cos(position * omega)
        return pe

    assert check_sinusoidal_table(loops) is True
    assert check_sinusoidal_table(exp_log) is True, capsys.readouterr().out


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
    assert "that is the identity, M(0)" in capsys.readouterr().out


def test_shift_matrix_rejects_a_matrix_that_ignores_k(capsys):
    assert check_pe_shift_matrix(lambda k, d: pe_shift_matrix(1, d)) is False
    out = capsys.readouterr().out
    assert "M(3) for d_model=24 differs" in out and "it is M(j) for another j" in out


def test_shift_matrix_accepts_a_block_diagonal_built_by_hand(capsys):
    import math

    def by_hand(k, d_model):
        blocks = []
        for i in range(d_model // 2):
            angle = k / 10000 ** (2 * i / d_model)
            c, s = math.cos(angle), math.sin(angle)
            blocks.append(torch.tensor([[c, s], [-s, c]], dtype=torch.float64))
        return torch.block_diag(*blocks)

    assert check_pe_shift_matrix(by_hand) is True, capsys.readouterr().out
