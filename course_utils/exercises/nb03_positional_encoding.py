"""Checkers for notebook 03: positional encoding."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.core import compare, run_check


def check_sinusoidal_table(fn: Callable[[int, int], torch.Tensor]) -> bool:
    """Check ``fn(max_len, d_model)``: the sinusoidal table of Vaswani et al. 2017, §3.5.

    The answer must be ``(max_len, d_model)`` with ``PE[pos, 2i] = sin(pos / 10000^(2i/d))``
    and ``PE[pos, 2i+1] = cos(...)``. Two sizes are tried, (50, 24) and (7, 10).
    """

    def attempt() -> str | None:
        from course_utils.positional import sinusoidal_positional_encoding

        for max_len, d_model in [(50, 24), (7, 10)]:
            expected = sinusoidal_positional_encoding(max_len, d_model, dtype=torch.float64)
            problem = compare(fn(max_len, d_model), expected, name=f"PE({max_len}, {d_model})")
            if problem is not None:
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
    k = -2 (d_model 10). A transposed answer (the rotation by -k) gets a hint.
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
            return problem
        return None

    return run_check("shift matrix M(k)", attempt)
