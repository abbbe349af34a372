"""How an answer differs from the expected value, in one sentence a learner can act on.

:func:`difference` compares any answer (a tensor, a number, a tuple of them, None, something
else entirely) with the expected value and returns None when they match, otherwise the
reason: the wrong type or container, the values in another order, the shape (with the axes
named), the dtype, or where the values differ (how many positions, on which slice of which
axis, the largest gap, and the expected value there). It never raises on a learner's answer.
Float answers of any precision are compared in float64, so a float64 answer to a float32
exercise is accepted.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch

__all__ = ["Tolerance", "difference"]


class Tolerance:
    """How close counts as equal: ``atol`` absolute plus ``rtol`` relative (as
    ``torch.isclose``); ``exact_dtype`` also requires the same integer or float dtype (for
    example int64 positions, not int32); ``allow_list`` accepts a list where a tuple is
    returned."""

    def __init__(
        self, atol: float = 1e-5, rtol: float = 1e-5, exact_dtype: bool = False,
        allow_list: bool = True,
    ) -> None:  # fmt: skip
        self.atol, self.rtol = atol, rtol
        self.exact_dtype, self.allow_list = exact_dtype, allow_list


def difference(
    answer, expected, name: str = "the answer", axes: str | Sequence[str] | None = None,
    tolerance: Tolerance | None = None,
) -> str | None:  # fmt: skip
    """Why ``answer`` differs from ``expected`` (one sentence), or None when they match.

    ``expected`` is what a right answer returns: a tensor, a Python number or bool, None, or a
    tuple of these. ``axes`` names the axes of a tensor (``"B h T_q T_k"``), or, for a tuple,
    gives one name per item (``("output", "weights")``), used in the sentence.
    """
    tolerance = tolerance or Tolerance()
    if answer is None and expected is not None:
        return f"{name} is None: the function returns nothing (is the return statement missing?)"
    if isinstance(expected, tuple):
        return _tuple_difference(answer, expected, name, axes, tolerance)
    if isinstance(expected, torch.Tensor):
        return _tensor_difference(answer, expected, name, axes, tolerance)
    if isinstance(expected, bool) or expected is None:
        return None if answer is expected else f"{name} is {answer!r}, expected {expected!r}"
    if isinstance(expected, (int, float)):
        return _number_difference(answer, expected, name, tolerance)
    return None if answer == expected else f"{name} is {answer!r}, expected {expected!r}"


def _kind(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} ({value.dtype})"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)} items"
    module = type(value).__module__
    prefix = "" if module == "builtins" else module.split(".")[0] + "."
    return f"a {prefix}{type(value).__name__}"


def _tuple_difference(answer, expected: tuple, name, axes, tolerance) -> str | None:
    """A tuple (or, when allowed, a list) of the same length, in the same order, each item
    matching."""
    names = list(axes) if isinstance(axes, (list, tuple)) and len(axes) == len(expected) else None
    names = names or [f"item {i}" for i in range(len(expected))]
    wanted = f"({', '.join(names)})"
    containers = (tuple, list) if tolerance.allow_list else (tuple,)
    if isinstance(answer, list) and not tolerance.allow_list:
        return f"{name} is a list; return a tuple {wanted}"
    if not isinstance(answer, containers):
        return f"{name} should be the tuple {wanted}, got {_kind(answer)}"
    if len(answer) != len(expected):
        return f"{name} has {len(answer)} items, expected {len(expected)}: return {wanted}"
    item = (lambda n: f"the {n}") if name == "the result" else (lambda n: f"{name}'s {n}")
    problems = [
        difference(a, e, item(n), None, tolerance) for a, e, n in zip(answer, expected, names)
    ]
    if all(p is None for p in problems):
        return None
    if len(expected) > 4:  # a harness's report (5! orders and more): not a returned tuple
        return next(p for p in problems if p is not None)
    for order in itertools.permutations(range(len(expected))):
        if list(order) != sorted(order) and all(
            difference(answer[i], e, "", None, tolerance) is None for i, e in zip(order, expected)
        ):
            got = ", ".join(names[order.index(i)] for i in range(len(expected)))
            return f"{name} is ({got}), in another order: return {wanted}"
    return next(p for p in problems if p is not None)


def _number_difference(answer, expected: float, name: str, tolerance) -> str | None:
    want = "int" if isinstance(expected, int) else "float"
    if isinstance(answer, torch.Tensor):
        return f"{name} is {_kind(answer)}; return a Python {want} (tensor.item())"
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        if type(answer).__module__ == "numpy" and hasattr(answer, "item"):
            answer = answer.item()  # a numpy scalar: compare its value
        else:
            return f"{name} should be a Python {want}, got {_kind(answer)}"
    if isinstance(expected, int) and not isinstance(answer, int):
        return f"{name} is the float {answer!r}; return an int ({expected})"
    if math.isclose(answer, expected, rel_tol=tolerance.rtol, abs_tol=tolerance.atol * 1e-3):
        return None
    return f"{name} is {answer:.6g}, expected {expected:.6g}"


def _axis_names(axes, ndim: int) -> list[str]:
    names = axes.split() if isinstance(axes, str) else list(axes or [])
    return names if len(names) == ndim else [f"dim {d}" for d in range(ndim)]


def _shape(shape, names: list[str]) -> str:
    sizes = ", ".join(str(s) for s in shape)
    if names and not names[0].startswith("dim "):
        return f"({', '.join(names)}) = ({sizes})"
    return f"({sizes})"


def _shape_difference(answer: torch.Tensor, expected: torch.Tensor, name, names) -> str:
    got, want = tuple(answer.shape), tuple(expected.shape)
    head = f"{name} has shape {got}, expected {_shape(want, names)}"
    if sorted(got) == sorted(want) and len(set(want)) == len(want):
        order = [names[want.index(s)] for s in got]
        return f"{head}: the axes are in the order ({', '.join(order)}); transpose or permute"
    for d in range(len(want)):
        if got == want[:d] + want[d + 1 :]:
            return f"{head}: the axis {names[d]} is missing (averaged, summed or squeezed away?)"
    if answer.numel() == expected.numel():
        return f"{head}: the same number of values in another shape (check the reshape/view)"
    return head


def _tensor_difference(answer, expected: torch.Tensor, name, axes, tolerance) -> str | None:
    if not isinstance(answer, torch.Tensor):
        fix = "torch.stack or torch.tensor" if isinstance(answer, (list, tuple)) else "torch"
        if type(answer).__module__ == "numpy":
            fix = "torch.from_numpy"
        return f"{name} should be a torch.Tensor, got {_kind(answer)} (use {fix})"
    names = _axis_names(axes, expected.dim())
    if answer.shape != expected.shape:
        return _shape_difference(answer, expected, name, names)
    problem = _dtype_difference(answer, expected, name, tolerance)
    if problem is not None:
        return problem
    answer, expected = answer.detach().cpu(), expected.detach().cpu()
    if expected.dtype == torch.bool or not expected.dtype.is_floating_point:
        wrong = answer != expected
    else:
        answer, expected = answer.double(), expected.double()
        nan = answer.isnan() & ~expected.isnan()
        if nan.any():
            where = tuple(nan.nonzero()[0].tolist())
            return (
                f"{name} contains NaN at {nan.sum().item()} positions, first at index {where} "
                f"where {expected[where].item():.6g} is expected (0/0, or a softmax over a row "
                "that is all -inf?)"
            )
        wrong = ~torch.isclose(
            answer, expected, rtol=tolerance.rtol, atol=tolerance.atol, equal_nan=True
        )
    return _where(answer, expected, wrong, name, names) if wrong.any() else None


def _dtype_difference(answer, expected, name, tolerance) -> str | None:
    a, e = answer.dtype, expected.dtype
    if e == torch.bool and a != torch.bool:
        return f"{name} has dtype {a}; a mask is torch.bool (compare with <, == or use .bool())"
    if a == torch.bool and e != torch.bool:
        return f"{name} is a bool mask (dtype torch.bool); expected {e} values"
    if a.is_complex:
        return f"{name} has the complex dtype {a}; expected {e}"
    if e.is_floating_point and not a.is_floating_point:
        return f"{name} has the integer dtype {a}; expected floating point ({e})"
    if a.is_floating_point and not e.is_floating_point:
        return f"{name} has the float dtype {a}; expected integers ({e})"
    if tolerance.exact_dtype and a != e:
        return f"{name} has dtype {a}; expected {e}"
    return None


def _where(answer, expected, wrong: torch.Tensor, name: str, names: list[str]) -> str:
    """How many positions differ, on which slice, the largest gap and the value expected."""
    count, total = int(wrong.sum()), wrong.numel()
    gap = (answer.double() - expected.double()).abs()
    gap = torch.where(wrong, gap.nan_to_num(nan=math.inf), torch.zeros_like(gap))
    index = tuple(int(i) for i in torch.unravel_index(gap.argmax(), gap.shape))
    slices = []
    for d in range(wrong.dim()):
        other = [i for i in range(wrong.dim()) if i != d]
        touched = wrong.any(dim=other).nonzero().flatten().tolist() if other else []
        if other and len(touched) < wrong.shape[d] and len(touched) <= 3:
            slices.append(f"{names[d]} = {', '.join(str(i) for i in touched)}")
    on = f" (only where {' and '.join(slices)})" if slices else ""
    got, want = answer[index].item(), expected[index].item()
    finite = expected.dtype.is_floating_point and math.isfinite(gap[index].item())
    size = f"by up to {gap[index].item():.3g} " if finite else ""
    at = f"index {index}"
    if names and not names[0].startswith("dim "):
        at = ", ".join(f"{n} = {i}" for n, i in zip(names, index))
    return (
        f"{name} differs {size}at {count} of {total} positions{on}; at {at} it is "
        f"{_number(got)} instead of {_number(want)}"
    )


def _number(value) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)
