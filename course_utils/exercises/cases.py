"""The cases a checker runs, and running the learner's function on them (for :mod:`.judge`).

:class:`Case` holds one set of arguments, copied fresh for every call; :func:`_run_answer` runs
the learner's function on a case, wraps what it raises (:class:`_LearnerError`) and notes the
arguments it changed in place; :class:`Problem` is what a harness returns to report what it
saw directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from course_utils.exercises.runner import changed_in_place, copies, copy_value
from course_utils.lab.language import tr, translated

__all__ = ["Case", "CheckerFailure", "Problem"]


class Problem(str):
    """What a harness (``call``) returns instead of a result when the learner's function did
    something no comparison can show (a loss returned as a tensor, say): the sentence itself,
    reported as it is (translated with :func:`course_utils.lab.language.translated`, so it may be
    a text marked with ``N_``)."""


class CheckerFailure(str):
    """A verdict that says the checker itself failed (never the learner's mistake): the
    assembly and :func:`.keeping.quiet_verdict` do not hold it against the part."""


class Case:
    """One set of arguments: ``Case(*args, label=None, **kwargs)``; ``label`` replaces the
    description built from the arguments (``x of shape (2, 6, 24), eps=1e-06``)."""

    def __init__(self, *args, label: str | None = None, **kwargs) -> None:
        self.args, self.kwargs, self.label = args, kwargs, label

    def fresh(self) -> tuple[tuple, dict]:
        """Copies of the arguments, so an answer that edits its inputs harms nothing."""
        return copies(self.args, self.kwargs)

    def describe(self, names: Sequence[str]) -> str:
        """The case in words, in the current language: its ``label`` (a text the checker may
        mark with ``N_``), else its arguments (``x of shape (2, 6, 24), eps=1e-06``)."""
        if self.label:
            return translated(self.label)
        named = list(zip(names, self.args)) + list(self.kwargs.items())
        if len(names) < len(self.args):
            named = [
                (tr("argument {index}").format(index=i), a) for i, a in enumerate(self.args)
            ] + named[len(names) :]
        return ", ".join(_describe(n, v) for n, v in named)


def _describe(name: str, value) -> str:
    if isinstance(value, torch.Tensor):
        return tr("{name} of shape {shape}").format(name=name, shape=tuple(value.shape))
    if isinstance(value, (int, float, str, bool)) or value is None:
        return f"{name}={value!r}"
    if isinstance(value, (list, tuple)) and len(value) <= 6:
        return f"{name}={value!r}"
    return f"{name} ({type(value).__name__})"


class _LearnerError(Exception):
    """The learner's function raised: ``error`` is what it raised."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class _Options:
    """What :func:`judge` was given besides the functions (one object to pass along)."""

    def __init__(self, call, axes, tolerance, errors, hint, cases) -> None:
        self.call, self.axes, self.tolerance = call, axes, tolerance
        self.errors, self.hint, self.cases = errors, hint, cases
        self.results: dict = {}  # (function, case id, is the answer) -> result or _FAILED


def _outcome(function: Callable, case: Case, options: _Options, answer: bool = False):
    """``function``'s result on ``case`` (run as the learner's with ``answer``), or
    :data:`_FAILED` when it raises; each is run once per judge call (a harness may train a
    model: naming a mistake compares the same results many times)."""
    key = (function, id(case), answer)
    if key not in options.results:
        run = _run_answer if answer else _run
        options.results[key] = _try(lambda: run(function, case, options.call))
    return options.results[key]


_FAILED = object()


def _run(function: Callable, case: Case, call: Callable | None):
    args, kwargs = case.fresh()
    return call(function, *args, **kwargs) if call else function(*args, **kwargs)


def _run_answer(answer: Callable, case: Case, call: Callable | None, changed: list | None = None):
    """The learner's result; their exceptions come back wrapped in :class:`_LearnerError`.
    With ``changed`` (a list), the positions of the arguments the answer changed in place
    are appended to it."""
    args, kwargs = case.fresh()
    before = [copy_value(a) for a in args] if changed is not None else []
    try:
        result = call(answer, *args, **kwargs) if call else answer(*args, **kwargs)
    except NotImplementedError:
        raise
    except Exception as error:  # anything the learner's code raised is theirs to fix
        raise _LearnerError(error) from error
    if changed is not None:
        changed.extend(i for i, (a, b) in enumerate(zip(args, before)) if changed_in_place(a, b))
    return result


def _try(thunk):
    try:
        return thunk()
    except Exception:  # the answer (or a mistake) cannot run on this case
        return _FAILED
