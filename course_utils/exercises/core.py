"""What every checker shares: comparing an answer, running a check, and a helper for cells
that must raise.

A checker calls the student's function on fixed inputs, compares the result with a
reference, and prints one clear line: a tick when it matches, otherwise what differs (the
type, the shape, or the largest deviation and where it is). Checkers never raise on a wrong
answer, so a notebook with an unfinished exercise still runs to the end; they return
``True`` or ``False``.

New checkers are written with :func:`course_utils.exercises.judge.judge` (its module docstring
is the whole API): the learner's function is run on many cases beside a reference and a
catalogue of named mistakes, and :func:`course_utils.exercises.difference.difference` says
where an unnamed difference lies. :func:`compare` and :func:`run_check` below are the older,
smaller pair, kept for the checkers written with them.
"""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import Callable, Iterator

import torch

from course_utils.lab.language import tr


def compare(answer, expected: torch.Tensor, name: str = "answer", atol: float = 1e-5) -> str | None:
    """Why ``answer`` differs from ``expected``, or None when they match.

    Checks, in order: that ``answer`` is a tensor, its shape, its dtype kind (float vs
    integer vs bool), NaNs, then values to ``atol`` (absolute) and 1e-5 relative tolerance.

    Raises:
        TypeError: ``expected`` (the reference, not the student's answer) is not a tensor.
    """
    if not isinstance(expected, torch.Tensor):
        raise TypeError(
            f"expected must be the reference torch.Tensor, got {type(expected).__name__}; "
            "convert it with torch.as_tensor(expected)"
        )
    if not isinstance(answer, torch.Tensor):
        return tr("{name} should be a torch.Tensor, got {kind}").format(
            name=name, kind=type(answer).__name__
        )
    if answer.shape != expected.shape:
        return tr("{name} has shape {shape}, expected {expected}").format(
            name=name, shape=tuple(answer.shape), expected=tuple(expected.shape)
        )
    if answer.dtype.is_floating_point != expected.dtype.is_floating_point or (
        (answer.dtype == torch.bool) != (expected.dtype == torch.bool)
    ):
        return tr("{name} has dtype {dtype}, expected {expected}").format(
            name=name, dtype=answer.dtype, expected=expected.dtype
        )
    if expected.dtype == torch.bool or not expected.dtype.is_floating_point:
        wrong = (answer != expected).nonzero()
        if len(wrong):
            index = tuple(wrong[0].tolist())
            return tr(
                "{name} differs at {count} positions, first at index {index}: "
                "{value} instead of {expected}"
            ).format(
                name=name,
                count=len(wrong),
                index=index,
                value=answer[index].item(),
                expected=expected[index].item(),
            )
        return None
    answer, expected = answer.detach().double().cpu(), expected.detach().double().cpu()
    if torch.isnan(answer).any() and not torch.isnan(expected).any():
        where = tuple(torch.isnan(answer).nonzero()[0].tolist())
        return tr("{name} contains NaN at {index}").format(name=name, index=where)
    if not torch.allclose(answer, expected, atol=atol, rtol=1e-5, equal_nan=True):
        deviation = (answer - expected).abs().nan_to_num(0.0)
        index = tuple(int(i) for i in torch.unravel_index(deviation.argmax(), deviation.shape))
        return tr(
            "{name} differs by up to {deviation:.3g} (at index {index}: {value:.6g} instead of "
            "{expected:.6g})"
        ).format(
            name=name,
            deviation=deviation.max().item(),
            index=index,
            value=answer[index].item(),
            expected=expected[index].item(),
        )
    return None


def run_check(title: str, attempt: Callable[[], str | None]) -> bool:
    """Run ``attempt`` (which returns None when right, else a reason) and print the verdict.

    An exception raised inside the student's code is reported, not propagated. A checker
    given a value (a tensor, say) where it expects the student's function is told to pass
    the function itself, not its result.
    """
    problem = _not_a_function(inspect.currentframe().f_back)
    try:
        problem = problem or attempt()
    except NotImplementedError:
        problem = tr("not implemented yet")
    except TypeError as error:
        problem = tr("raised {kind}: {error}").format(kind="TypeError", error=error)
        if "object is not callable" in str(error):
            problem += tr(
                "; pass the function itself, not its result: check_x(my_function), not "
                "check_x(my_function(...))"
            )
    except Exception as error:  # the student's code may fail in any way
        problem = tr("raised {kind}: {error}").format(kind=type(error).__name__, error=error)
    if problem is None:
        print(tr("✅ {title}: correct").format(title=title))
        return True
    print(tr("❌ {title}: {problem}").format(title=title, problem=problem))
    return False


def _not_a_function(frame) -> str | None:
    """The problem when the checker that called :func:`run_check` (``frame``) was given a
    non-callable for a parameter annotated ``Callable``; None otherwise."""
    if frame is None:
        return None
    checker = frame.f_globals.get(frame.f_code.co_name)
    annotations = getattr(checker, "__annotations__", {})
    for name in frame.f_code.co_varnames[: frame.f_code.co_argcount]:
        value = frame.f_locals.get(name)
        if "Callable" in str(annotations.get(name, "")) and not callable(value):
            got = type(value).__name__
            if isinstance(value, torch.Tensor):
                got = tr("a Tensor of shape {shape}").format(shape=tuple(value.shape))
            checker_name = frame.f_code.co_name
            return tr(
                "{name} should be a function, got {got}; pass the function itself, not its "
                "result: {checker}(my_function), not {checker}(my_function(...))"
            ).format(name=name, got=got, checker=checker_name)
    return None


@contextlib.contextmanager
def expect_error(exception: type[BaseException], match: str | None = None) -> Iterator[None]:
    """Context manager for a cell that must raise: prints the message, and fails if nothing
    (or something else) is raised.

    nbval's ``NBVAL_RAISES_EXCEPTION`` marker passes even when nothing is raised; this does not.

    Raises:
        AssertionError: nothing was raised, or the message does not match ``match``.
        TypeError: ``exception`` is not an exception class (e.g. the name ``"ValueError"``
            as a str), or ``match`` is not a str.
    """
    classes = exception if isinstance(exception, tuple) else (exception,)
    if not classes or not all(
        isinstance(c, type) and issubclass(c, BaseException) for c in classes
    ):
        raise TypeError(
            f"exception must be an exception class such as ValueError, got {exception!r} "
            f"({type(exception).__name__}); pass the class itself, not its name"
        )
    if match is not None and not isinstance(match, str):
        raise TypeError(f"match must be a regular expression str or None, got {match!r}")
    try:
        yield
    except exception as error:
        if match is not None and not re.search(match, str(error)):
            raise AssertionError(
                f"{type(error).__name__} raised, but {str(error)!r} does not match {match!r}"
            ) from error
        print(
            tr("{kind} raised, as expected: {error}").format(kind=type(error).__name__, error=error)
        )
    else:
        expected = " or ".join(c.__name__ for c in classes)
        raise AssertionError(f"expected {expected}, but nothing was raised")


class TorchCall:
    """One torch function or tensor method the student's code called: ``name``, ``args``,
    ``kwargs`` (recorded by :func:`record_torch_calls`)."""

    def __init__(self, name: str, args: tuple, kwargs: dict) -> None:
        self.name, self.args, self.kwargs = name, args, kwargs

    def uses(self, tensor: torch.Tensor) -> bool:
        """Whether ``tensor`` (or a view of the same memory and shape) is a positional argument."""
        return any(
            isinstance(arg, torch.Tensor)
            and arg.shape == tensor.shape
            and arg.data_ptr() == tensor.data_ptr()
            for arg in self.args
        )


@contextlib.contextmanager
def record_torch_calls() -> Iterator[list[TorchCall]]:
    """Record the torch functions and tensor methods called inside the block, so a checker can
    tell *how* an answer was computed (e.g. ``W[ids]`` where the exercise asks for
    ``one_hot(ids) @ W``). Uses :class:`torch.overrides.TorchFunctionMode`; the calls still run.
    """
    from torch.overrides import TorchFunctionMode

    calls: list[TorchCall] = []

    class _Recorder(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            calls.append(TorchCall(getattr(func, "__name__", str(func)), tuple(args), kwargs))
            return func(*args, **kwargs)

    with _Recorder():
        yield calls


class MultiplicationCount:
    """How many scalar multiplications the ops inside :func:`count_multiplications` did:
    ``total``, and ``largest``, the most done by one op; ``ops`` is the set of ATen op names
    that ran (e.g. ``"_softmax"``), whatever Python function called them."""

    def __init__(self) -> None:
        self.total, self.largest = 0, 0
        self.ops: set[str] = set()

    def add(self, count: int) -> None:
        self.total += count
        self.largest = max(self.largest, count)


def _multiplications(func, args, out) -> int:
    """Scalar multiplications of one ATen op: m·k·n for a (batched) matrix product, one per
    output element for an elementwise product, 0 for anything else."""
    import math

    aten = torch.ops.aten
    name = func.overloadpacket
    with_input = (aten.addmm, aten.baddbmm, aten.addbmm, aten.addmv)  # (input, first, second)
    if name in (aten.mm, aten.bmm, aten.mv, *with_input):
        first, second = (args[1], args[2]) if name in with_input else args[:2]
        columns = 1 if name in (aten.mv, aten.addmv) else second.shape[-1]
        return math.prod(first.shape) * columns
    if name in (aten.dot, aten.vdot):
        return args[0].numel()
    if name in (aten.mul, aten.mul_) and isinstance(out, torch.Tensor):
        return out.numel()
    return 0


@contextlib.contextmanager
def count_multiplications() -> Iterator[MultiplicationCount]:
    """Count the scalar multiplications of the tensor ops inside the block, at the ATen level,
    so every route to a product is seen: ``@``, ``F.linear``, ``einsum``, ``tensordot``, a
    product on a copy or a transposed view, or broadcasting ``(x[..., None] * W).sum(-2)``.

    A checker uses it to tell *how much* work an answer did, e.g. that it computed the full
    ``(C, C)`` projection (h times head i's own work) before slicing, or no product at all.
    Uses :class:`torch.utils._python_dispatch.TorchDispatchMode`; the ops still run.
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    count = MultiplicationCount()

    class _Counter(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            count.add(_multiplications(func, args, out))
            count.ops.add(func.overloadpacket.__name__)
            return out

    with _Counter():
        yield count
