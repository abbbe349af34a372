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

from course_utils.lab.language import N_, tr, translated

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
    answer, expected, name: str = N_("the answer"), axes: str | Sequence[str] | None = None,
    tolerance: Tolerance | None = None,
) -> str | None:  # fmt: skip
    """Why ``answer`` differs from ``expected`` (one sentence, in the current language), or
    None when they match.

    ``expected`` is what a right answer returns: a tensor, a Python number or bool, None, or a
    tuple of these. ``name`` (a text the caller may mark with ``N_``: it is translated here)
    and ``axes`` are used in the sentence: ``axes`` names the axes of a tensor
    (``"B h T_q T_k"``), or, for a tuple, gives one name per item (``("output", "weights")``).
    """
    tolerance = tolerance or Tolerance()
    name = translated(name)
    if answer is None and expected is not None:
        return tr(
            "{name} is None: the function returns nothing (is the return statement missing?)"
        ).format(name=name)
    if isinstance(expected, tuple):
        return _tuple_difference(answer, expected, name, axes, tolerance)
    if isinstance(expected, torch.Tensor):
        return _tensor_difference(answer, expected, name, axes, tolerance)
    if isinstance(expected, bool) or expected is None:
        return None if answer is expected else _is_not(name, answer, expected)
    if isinstance(expected, (int, float)):
        return _number_difference(answer, expected, name, tolerance)
    return None if answer == expected else _is_not(name, answer, expected)


def _is_not(name: str, answer, expected) -> str:
    return tr("{name} is {answer}, expected {expected}").format(
        name=name, answer=repr(answer), expected=repr(expected)
    )


def _kind(value) -> str:
    if isinstance(value, torch.Tensor):
        return tr("a tensor of shape {shape} ({dtype})").format(
            shape=tuple(value.shape), dtype=value.dtype
        )
    if isinstance(value, (list, tuple)):
        return tr("a {kind} of {count} items").format(kind=type(value).__name__, count=len(value))
    module = type(value).__module__
    prefix = "" if module == "builtins" else module.split(".")[0] + "."
    return tr("a {kind}").format(kind=f"{prefix}{type(value).__name__}")


def _tuple_difference(answer, expected: tuple, name, axes, tolerance) -> str | None:
    """A tuple (or, when allowed, a list) of the same length, in the same order, each item
    matching."""
    names = list(axes) if isinstance(axes, (list, tuple)) and len(axes) == len(expected) else None
    names = names or [tr("item {index}").format(index=i) for i in range(len(expected))]
    wanted = f"({', '.join(names)})"
    containers = (tuple, list) if tolerance.allow_list else (tuple,)
    if isinstance(answer, list) and not tolerance.allow_list:
        return tr("{name} is a list; return a tuple {wanted}").format(name=name, wanted=wanted)
    if not isinstance(answer, containers):
        return tr("{name} should be the tuple {wanted}, got {kind}").format(
            name=name, wanted=wanted, kind=_kind(answer)
        )
    if len(answer) != len(expected):
        return tr("{name} has {count} items, expected {expected}: return {wanted}").format(
            name=name, count=len(answer), expected=len(expected), wanted=wanted
        )

    def item(n: str) -> str:
        if name == tr("the result"):
            return tr("the {item}").format(item=n)
        return tr("{name}'s {item}").format(name=name, item=n)

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
            return tr("{name} is ({got}), in another order: return {wanted}").format(
                name=name, got=got, wanted=wanted
            )
    return next(p for p in problems if p is not None)


def _number_difference(answer, expected: float, name: str, tolerance) -> str | None:
    want = "int" if isinstance(expected, int) else "float"
    if isinstance(answer, torch.Tensor):
        return tr("{name} is {kind}; return a Python {want} (tensor.item())").format(
            name=name, kind=_kind(answer), want=want
        )
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        if type(answer).__module__ == "numpy" and hasattr(answer, "item"):
            answer = answer.item()  # a numpy scalar: compare its value
        else:
            return tr("{name} should be a Python {want}, got {kind}").format(
                name=name, want=want, kind=_kind(answer)
            )
    if isinstance(expected, int) and not isinstance(answer, int):
        return tr("{name} is the float {answer}; return an int ({expected})").format(
            name=name, answer=repr(answer), expected=expected
        )
    if math.isclose(answer, expected, rel_tol=tolerance.rtol, abs_tol=tolerance.atol * 1e-3):
        return None
    return tr("{name} is {answer:.6g}, expected {expected:.6g}").format(
        name=name, answer=answer, expected=expected
    )


def _axis_names(axes, ndim: int) -> list[str | None]:
    """The names of the axes; None for each when ``axes`` does not name them all."""
    names = axes.split() if isinstance(axes, str) else list(axes or [])
    return names if len(names) == ndim else [None] * ndim


def _axis(names: list, d: int) -> str:
    """Axis ``d`` in words: its name, or ``dim d``."""
    return names[d] if names[d] is not None else tr("dim {index}").format(index=d)


def _shape(shape, names: list) -> str:
    sizes = ", ".join(str(s) for s in shape)
    if names and names[0] is not None:
        return f"({', '.join(names)}) = ({sizes})"
    return f"({sizes})"


def _shape_difference(answer: torch.Tensor, expected: torch.Tensor, name, names) -> str:
    got, want = tuple(answer.shape), tuple(expected.shape)
    head = tr("{name} has shape {shape}, expected {expected}").format(
        name=name, shape=got, expected=_shape(want, names)
    )
    if sorted(got) == sorted(want) and len(set(want)) == len(want):
        order = ", ".join(_axis(names, want.index(s)) for s in got)
        return tr("{head}: the axes are in the order ({order}); transpose or permute").format(
            head=head, order=order
        )
    for d in range(len(want)):
        if got == want[:d] + want[d + 1 :]:
            return tr(
                "{head}: the axis {axis} is missing (averaged, summed or squeezed away?)"
            ).format(head=head, axis=_axis(names, d))
    if answer.numel() == expected.numel():
        return tr(
            "{head}: the same number of values in another shape (check the reshape/view)"
        ).format(head=head)
    return head


def _tensor_difference(answer, expected: torch.Tensor, name, axes, tolerance) -> str | None:
    if not isinstance(answer, torch.Tensor):
        fix = tr("torch.stack or torch.tensor") if isinstance(answer, (list, tuple)) else "torch"
        if type(answer).__module__ == "numpy":
            fix = "torch.from_numpy"
        return tr("{name} should be a torch.Tensor, got {kind} (use {fix})").format(
            name=name, kind=_kind(answer), fix=fix
        )
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
            return tr(
                "{name} contains NaN at {count} positions, first at index {index} where "
                "{expected:.6g} is expected (0/0, or a softmax over a row that is all -inf?)"
            ).format(
                name=name, count=nan.sum().item(), index=where, expected=expected[where].item()
            )
        wrong = ~torch.isclose(
            answer, expected, rtol=tolerance.rtol, atol=tolerance.atol, equal_nan=True
        )
    return _where(answer, expected, wrong, name, names) if wrong.any() else None


def _dtype_difference(answer, expected, name, tolerance) -> str | None:
    a, e = answer.dtype, expected.dtype
    if e == torch.bool and a != torch.bool:
        message = tr(
            "{name} has dtype {dtype}; a mask is torch.bool (compare with <, == or use .bool())"
        )
    elif a == torch.bool and e != torch.bool:
        message = tr("{name} is a bool mask (dtype torch.bool); expected {expected} values")
    elif a.is_complex:
        message = tr("{name} has the complex dtype {dtype}; expected {expected}")
    elif e.is_floating_point and not a.is_floating_point:
        message = tr("{name} has the integer dtype {dtype}; expected floating point ({expected})")
    elif a.is_floating_point and not e.is_floating_point:
        message = tr("{name} has the float dtype {dtype}; expected integers ({expected})")
    elif tolerance.exact_dtype and a != e:
        message = tr("{name} has dtype {dtype}; expected {expected}")
    else:
        return None
    return message.format(name=name, dtype=a, expected=e)


def _where(answer, expected, wrong: torch.Tensor, name: str, names: list) -> str:
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
            slices.append(f"{_axis(names, d)} = {', '.join(str(i) for i in touched)}")
    on = tr(" (only where {slices})").format(slices=tr(" and ").join(slices)) if slices else ""
    at = tr("index {index}").format(index=index)
    if names and names[0] is not None:
        at = ", ".join(f"{n} = {i}" for n, i in zip(names, index))
    fields = dict(name=name, count=count, total=total, on=on, at=at)
    fields.update(got=_number(answer[index].item()), want=_number(expected[index].item()))
    if expected.dtype.is_floating_point and math.isfinite(gap[index].item()):
        return tr(
            "{name} differs by up to {gap:.3g} at {count} of {total} positions{on}; at {at} it "
            "is {got} instead of {want}"
        ).format(gap=gap[index].item(), **fields)
    return tr(
        "{name} differs at {count} of {total} positions{on}; at {at} it is {got} instead of {want}"
    ).format(**fields)


def _number(value) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)
