"""Checkers for notebook 03: positional encoding.

Written with :func:`course_utils.exercises.judge.judge`: each checker varies every argument,
and names the mistake of its catalogue that the answer makes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.judge import Case, judge
from course_utils.lab.language import N_, tr


def _table(max_len, d_model, *, base=10000.0, channel_index=False, swap=False, halves=False,
           two=2, first_position=0, multiply=False):  # fmt: skip
    """A float64 sinusoidal table (Vaswani et al. 2017, §3.5); the keywords make the known
    mistakes."""
    position = torch.arange(first_position, first_position + max_len, dtype=torch.float64)
    pair = torch.arange(d_model // 2, dtype=torch.float64) * (2 if channel_index else 1)
    frequency = base ** (two * pair / d_model)  # (d_model / 2,)
    angle = position[:, None] * frequency if multiply else position[:, None] / frequency
    first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    if halves:  # [sin of every pair | cos of every pair]
        return torch.cat([first(angle), second(angle)], dim=-1)
    return torch.stack([first(angle), second(angle)], dim=-1).flatten(-2)  # interleaved


TABLE_MISTAKES = [
    (
        N_("sin and cos swapped: channel 2i is sin, 2i+1 is cos"),
        lambda n, d: _table(n, d, swap=True),
    ),
    (
        N_(
            "base 100000 and the channel index in the exponent (design mistake 1): use 10000 and "
            "the pair index i = channel // 2"
        ),
        lambda n, d: _table(n, d, base=100000.0, channel_index=True),
    ),
    (
        N_(
            "the channel index 2i in the exponent where it needs the pair index i = channel // 2 "
            "(so 2i/d_model, with i stepping by 1)"
        ),
        lambda n, d: _table(n, d, channel_index=True),
    ),
    (N_("base 100000; the paper's is 10000"), lambda n, d: _table(n, d, base=100000.0)),
    (
        N_(
            "the sines in the first half and the cosines in the second; the paper interleaves "
            "them: channel 2i is sin, 2i+1 is cos"
        ),
        lambda n, d: _table(n, d, halves=True),
    ),
    (
        N_("the exponent i/d_model without the 2: the frequencies are 1 / 10000^(2i/d_model)"),
        lambda n, d: _table(n, d, two=1),
    ),
    (
        N_("positions counted from 1; the first position is 0 (its row is sin 0 = 0, cos 0 = 1)"),
        lambda n, d: _table(n, d, first_position=1),
    ),
    (
        N_("pos * 10000^(2i/d_model): the angle divides by it, pos / 10000^(2i/d_model)"),
        lambda n, d: _table(n, d, multiply=True),
    ),
    (
        N_("the table transposed, (d_model, max_len); rows are positions: (max_len, d_model)"),
        lambda n, d: _table(n, d).T,
    ),
]


def check_sinusoidal_table(fn: Callable[[int, int], torch.Tensor]) -> bool:
    """Check ``fn(max_len, d_model)``: the sinusoidal table of Vaswani et al. 2017, §3.5.

    The answer must be ``(max_len, d_model)`` with ``PE[pos, 2i] = sin(pos / 10000^(2i/d))``
    and ``PE[pos, 2i+1] = cos(...)``. Five sizes vary both arguments: (50, 24), (7, 10),
    (1, 2), (13, 6) and (3, 64). Names each mistake of :data:`TABLE_MISTAKES`. A table that
    passes is saved as a part of the learner's decoder (:func:`.keeping.keep`).
    """
    cases = [Case(50, 24), Case(7, 10), Case(1, 2), Case(13, 6), Case(3, 64)]
    return judge(
        tr("sinusoidal positional encoding table"),
        fn,
        _table,
        cases,
        TABLE_MISTAKES,
        axes="max_len d_model",
        hint=tr(
            "channel 2i is sin, 2i+1 is cos, and the exponent 2i/d_model uses the pair index "
            "i = channel // 2"
        ),
        part=True,  # your decoder's position code (notebooks 11 and 12)
    )


def _shift(k, d_model, *, sign=1.0, channel_index=False, angle_only=False):
    """``M(k)`` with ``PE[pos + k] = M(k) @ PE[pos]``: on each (sin, cos) pair, the rotation
    [[cos kω, sin kω], [-sin kω, cos kω]]; the keywords make the known mistakes."""
    pair = torch.arange(d_model // 2, dtype=torch.float64) * (2 if channel_index else 1)
    omega = 10000.0 ** (-2 * pair / d_model)  # (d_model / 2,)
    angle = omega if angle_only else k * omega
    c, s = torch.cos(angle), sign * torch.sin(angle)
    blocks = [torch.stack([torch.stack([ci, si]), torch.stack([-si, ci])]) for ci, si in zip(c, s)]
    return torch.block_diag(*blocks)


SHIFT_MISTAKES = [
    (
        N_(
            "M(-k), the transpose: the block [[cos, sin], [-sin, cos]] takes (sin, cos) at pos to "
            "pos + k; check the signs of sin"
        ),
        lambda k, d: _shift(k, d, sign=-1.0),
    ),
    (
        N_("the identity, M(0): rotate each (sin, cos) pair by the angle k * omega_i"),
        lambda k, d: torch.eye(d, dtype=torch.float64),
    ),
    (
        N_("a rotation by omega_i alone: the angle is k * omega_i"),
        lambda k, d: _shift(k, d, angle_only=True),
    ),
    (
        N_(
            "frequencies with the channel index in the exponent: omega_i = 10000^(-2i/d_model) "
            "for the pair index i"
        ),
        lambda k, d: _shift(k, d, channel_index=True),
    ),
]


def check_pe_shift_matrix(fn: Callable[[int, int], torch.Tensor]) -> bool:
    """Check ``fn(k, d_model)``: the ``(d_model, d_model)`` matrix ``M(k)`` with
    ``PE[pos + k] = M(k) @ PE[pos]`` (Vaswani et al. 2017, §3.5).

    Four cases vary both arguments: k = 3 (d_model 24), -2 (10), 7 (2) and 1 (6). Names each
    mistake of :data:`SHIFT_MISTAKES` and a k that is ignored.
    """
    cases = [Case(3, 24), Case(-2, 10), Case(7, 2), Case(1, 6)]
    return judge(
        tr("shift matrix M(k)"),
        fn,
        _shift,
        cases,
        SHIFT_MISTAKES,
        axes="d_model d_model",
    )
