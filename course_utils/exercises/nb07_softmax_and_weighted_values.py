"""Checkers for notebook 07: softmax and weighted values."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.core import compare, count_multiplications, run_check

# Library softmaxes the exercise forbids (it asks for the max-subtraction written out), as
# the ATen ops every Python route reaches: torch.softmax, F.softmax, Tensor.softmax,
# torch.special.softmax, nn.Softmax, log_softmax, and the same on a copy or a view.
_LIBRARY_SOFTMAX = {"softmax", "log_softmax", "_softmax", "_log_softmax", "special_softmax"}


def check_stable_softmax(stable_softmax: Callable) -> bool:
    """Check ``stable_softmax(scores, temperature=1.0)``: softmax(scores / temperature) over
    the last axis (the key positions), computed without overflow (§3.2.1).

    Cases: random scores ``(2, 3, 4, 5)`` (T_q=4 differs from T_k=5, so a softmax over the
    wrong axis shows), temperatures 0.5 and 2, and float32 rows ``[100, 400, 700, 1000]``
    (``exp`` overflows to inf without the max-subtraction) and ``[1, 2, 3, 4]`` (subtracting
    one global maximum instead of each row's own underflows that row to 0 / 0). The
    exercise asks for the formula written out: an answer that runs the library's softmax is
    rejected, saying so. How it is detected: the ATen ops that ran, recorded by
    :func:`~course_utils.exercises.core.count_multiplications` below every Python route
    (``torch.softmax``, ``F.softmax``, ``Tensor.softmax``, ``torch.special.softmax``,
    ``nn.Softmax``, ``log_softmax``) all reach ``aten._softmax`` or ``aten._log_softmax``.
    """

    def attempt() -> str | None:
        scores = 3 * torch.randn(2, 3, 4, 5, generator=torch.Generator().manual_seed(7))
        with count_multiplications() as work:
            answer = stable_softmax(scores.clone())
        used = sorted(work.ops & _LIBRARY_SOFTMAX)
        if used:
            return (
                f"it runs the library's softmax (aten.{', aten.'.join(used)}); write the "
                "formula out with plain tensor ops: subtract "
                "each row's maximum, exp, divide by the row sum"
            )
        problem = compare(answer, torch.softmax(scores, dim=-1), "stable_softmax(scores)")
        if problem:
            return problem
        for temperature in (0.5, 2.0):
            problem = compare(
                stable_softmax(scores.clone(), temperature=temperature),
                torch.softmax(scores / temperature, dim=-1),
                f"stable_softmax(scores, temperature={temperature})",
            )
            if problem:
                return problem + " (divide the scores by the temperature before the softmax)"
        large = torch.tensor([[100.0, 400.0, 700.0, 1000.0], [1.0, 2.0, 3.0, 4.0]])
        problem = compare(
            stable_softmax(large.clone()),
            torch.softmax(large, dim=-1),
            "stable_softmax([[100, 400, 700, 1000], [1, 2, 3, 4]])",
        )
        if problem:
            return problem + "; subtract each row's own maximum (keepdim=True) before exp"
        return None

    return run_check("stable softmax", attempt)


def check_attention_output(attention: Callable) -> bool:
    """Check ``attention(q, k, v)`` -> ``(output, weights)``, Eq. 1 of §3.2.1:
    ``weights = softmax(q k^T / sqrt(d_k))`` over the keys, ``output = weights @ v``.

    Uses q ``(2, 3, 4, 8)``, k ``(2, 3, 5, 8)``, v ``(2, 3, 5, 6)``: T_q=4, T_k=5, d_k=8 and
    d_v=6 all differ, so a softmax over the wrong axis, a missing scale or a product in the
    wrong order is caught.
    """

    def attempt() -> str | None:
        generator = torch.Generator().manual_seed(8)
        shapes = ((4, 8), (5, 8), (5, 6))  # (T_q, d_k), (T_k, d_k), (T_k, d_v)
        q, k, v = (torch.randn(2, 3, t, d, generator=generator) for t, d in shapes)
        weights = torch.softmax(q @ k.transpose(-2, -1) / 8**0.5, dim=-1)  # (B, h, T_q, T_k)
        try:
            result = attention(q.clone(), k.clone(), v.clone())
        except RuntimeError as error:
            try:
                v @ weights  # the product in the wrong order: does it fail the same way?
            except RuntimeError as same:
                if str(same) != str(error):
                    raise error from None
            else:
                raise
            return (
                f"raised RuntimeError: {error}. The output is weights @ v: (T_q, T_k) @ "
                "(T_k, d_v) -> (T_q, d_v); the weights come first"
            )
        if not (isinstance(result, tuple) and len(result) == 2):
            return f"attention should return a tuple (output, weights), got {type(result).__name__}"
        problem = compare(result[1], weights, "weights")
        if problem:
            raw = q @ k.transpose(-2, -1)
            hints = {
                "the scores are not divided by sqrt(d_k)": torch.softmax(raw, dim=-1),
                "the softmax runs over the queries (dim=-2); it runs over the keys, the last "
                "axis": torch.softmax(raw / 8**0.5, dim=-2),
                "the scores are divided by d_k; divide by sqrt(d_k)": torch.softmax(
                    raw / 8, dim=-1
                ),
            }
            for hint, wrong in hints.items():
                if compare(result[1], wrong) is None:
                    return f"{problem}; {hint}"
            return problem
        return compare(result[0], weights @ v, "output")

    return run_check("attention output", attempt)
