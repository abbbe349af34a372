"""Checkers for notebook 03: positional encoding."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.core import compare, run_check


def _table_variant(
    max_len: int, d_model: int, base: float = 10000.0, channel_index: bool = False,
    swap: bool = False, halves: bool = False,
) -> torch.Tensor:  # fmt: skip
    """A float64 sinusoidal table, or one of the known wrong ones (for naming a mistake)."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    pair = torch.arange(d_model // 2, dtype=torch.float64) * (2 if channel_index else 1)
    angle = position / base ** (2 * pair / d_model)  # (max_len, d_model / 2)
    first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    if halves:  # [sin of every pair | cos of every pair]
        return torch.cat([first(angle), second(angle)], dim=-1)
    return torch.stack([first(angle), second(angle)], dim=-1).flatten(-2)  # interleaved


_TABLE_MISTAKES = {
    "sin and cos are swapped: channel 2i is sin, 2i+1 is cos": dict(swap=True),
    "the exponent uses the channel index 2i where it needs the pair index i = channel // 2 "
    "(so 2i/d_model, with i stepping by 1)": dict(channel_index=True),
    "the base is 100000; the paper's is 10000": dict(base=100000.0),
    "base 100000 and the channel index in the exponent (design mistake 1): use 10000 and the "
    "pair index i = channel // 2": dict(base=100000.0, channel_index=True),
    "the sines fill the first half and the cosines the second; the paper interleaves them: "
    "channel 2i is sin, 2i+1 is cos": dict(halves=True),
}


def check_sinusoidal_table(fn: Callable[[int, int], torch.Tensor]) -> bool:
    """Check ``fn(max_len, d_model)``: the sinusoidal table of Vaswani et al. 2017, §3.5.

    The answer must be ``(max_len, d_model)`` with ``PE[pos, 2i] = sin(pos / 10000^(2i/d))``
    and ``PE[pos, 2i+1] = cos(...)``. Two sizes are tried, (50, 24) and (7, 10). Names swapped
    sin and cos, the channel index in the exponent, base 100000 (alone or with it), and the
    sines and cosines in two halves instead of interleaved.
    """

    def attempt() -> str | None:
        from course_utils.positional import sinusoidal_positional_encoding

        for max_len, d_model in [(50, 24), (7, 10)]:
            expected = sinusoidal_positional_encoding(max_len, d_model, dtype=torch.float64)
            answer = fn(max_len, d_model)
            problem = compare(answer, expected, name=f"PE({max_len}, {d_model})")
            if problem is None:
                continue
            for reason, mistake in _TABLE_MISTAKES.items():
                if compare(answer, _table_variant(max_len, d_model, **mistake)) is None:
                    return f"{problem}; {reason}"
            return (
                f"{problem}; channel 2i is sin, 2i+1 is cos, and the exponent 2i/d_model "
                "uses the pair index i = channel // 2"
            )
        return None

    return run_check("sinusoidal positional encoding table", attempt)


def check_pe_shift_matrix(fn: Callable[[int, int], torch.Tensor]) -> bool:
    """Check ``fn(k, d_model)``: the ``(d_model, d_model)`` matrix ``M(k)`` with
    ``PE[pos + k] = M(k) @ PE[pos]`` (Vaswani et al. 2017, §3.5).

    Compared with :func:`course_utils.positional.pe_shift_matrix` for k = 3 (d_model 24) and
    k = -2 (d_model 10). Names a transposed answer (the rotation by -k), the identity (no
    rotation) and a matrix that ignores k.
    """

    def attempt() -> str | None:
        from course_utils.positional import pe_shift_matrix

        for k, d_model in [(3, 24), (-2, 10)]:
            expected = pe_shift_matrix(k, d_model)
            answer = fn(k, d_model)
            problem = compare(answer, expected, name=f"M({k}) for d_model={d_model}")
            if problem is None:
                continue
            if compare(answer, expected.T) is None:
                return f"{problem}; your matrix is M(-k), the transpose: check the signs of sin"
            if compare(answer, torch.eye(d_model, dtype=expected.dtype)) is None:
                return (
                    f"{problem}; that is the identity, M(0): rotate each (sin, cos) pair by the "
                    "angle k * omega_i"
                )
            if any(compare(answer, pe_shift_matrix(j, d_model)) is None for j in (1, -1, 3)):
                return f"{problem}; it is M(j) for another j: the angle is k * omega_i, use k"
            return problem
        return None

    return run_check("shift matrix M(k)", attempt)
