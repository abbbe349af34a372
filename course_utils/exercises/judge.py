"""Judge a learner's function against a reference and a catalogue of named mistakes.

Writing a checker (the whole API; see nb15_todays_decoder.py for a short example)::

    from course_utils.exercises.judge import Case, judge

    def check_rms_norm(rms_norm: Callable) -> bool:
        cases = [Case(x1, w1, 1e-6), Case(x2, w2, 0.5), Case(x3, w3, 1e-6, label="T = 1")]
        mistakes = [  # (what the learner did and the fix, a function making that mistake)
            ("eps outside the square root; it goes inside: x / sqrt(mean(x^2) + eps)",
             lambda x, w, eps: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * w),
        ]
        return judge("rms_norm", rms_norm, _reference, cases, mistakes, axes="B T C")

- ``cases``: argument tuples or :class:`Case` objects. Vary every argument (two values or more
  each, two shapes or more, edge sizes: T = 1, one head, T_q != T_k) so a constant or a
  notebook global fails. Tensors are cloned and other arguments deep-copied for every call.
- ``reference(*args)`` and each mistake's function take the learner's arguments and return
  what a right (or that wrong) answer returns: a tensor, a number, a tuple of them.
- ``call(fn, *args)`` (optional) runs any of those functions in a harness and returns what is
  compared, for exercises with side effects (a training step, a mode switch).
- ``axes``: the output's axis names (``"B h T_q T_k"``), or one name per item of a returned
  tuple (``("output", "weights")``); ``tolerance``: a :class:`.difference.Tolerance`.
- ``errors``: ``(exception class, regex, hint)`` for the learner's exceptions a known
  mistake raises. ``hint``: a sentence added when no mistake matches. A harness may return
  a :class:`Problem` (a str) to report what it saw directly.

The verdict, printed in one line (``✅ title: correct`` or ``❌ title: ...``); judge returns
True or False and never raises: not a function, a signature that does not fit, "not
implemented yet", the learner's own exception (named as theirs, with the case), the first
catalogued mistake the answer equals ("looks like ..."), a scalar argument the answer ignores
("behaves as if eps were 1e-05"), else where and by how much it differs
(:func:`.difference.difference`), noting when other cases passed (a global or a constant).
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Callable, Sequence

import torch

from course_utils.exercises.core import _not_a_function
from course_utils.exercises.difference import Tolerance, difference

__all__ = ["Case", "Problem", "judge"]


class Problem(str):
    """What a harness (``call``) returns instead of a result when the learner's function did
    something no comparison can show (a loss returned as a tensor, say): the sentence itself,
    reported as it is."""


class Case:
    """One set of arguments: ``Case(*args, label=None, **kwargs)``; ``label`` replaces the
    description built from the arguments (``x of shape (2, 6, 24), eps=1e-06``)."""

    def __init__(self, *args, label: str | None = None, **kwargs) -> None:
        self.args, self.kwargs, self.label = args, kwargs, label

    def fresh(self) -> tuple[tuple, dict]:
        """Copies of the arguments, so an answer that edits its inputs harms nothing."""
        return tuple(_copy(a) for a in self.args), {k: _copy(v) for k, v in self.kwargs.items()}

    def describe(self, names: Sequence[str]) -> str:
        if self.label:
            return self.label
        named = list(zip(names, self.args)) + list(self.kwargs.items())
        if len(names) < len(self.args):
            named = [(f"argument {i}", a) for i, a in enumerate(self.args)] + named[len(names) :]
        return ", ".join(_describe(n, v) for n, v in named)


def _copy(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    try:
        return copy.deepcopy(value)
    except Exception:  # not copyable: pass it as it is
        return value


def _describe(name: str, value) -> str:
    if isinstance(value, torch.Tensor):
        return f"{name} of shape {tuple(value.shape)}"
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


def judge(
    title: str,
    answer: Callable,
    reference: Callable,
    cases: Sequence,
    mistakes: Sequence[tuple[str, Callable]] = (),
    *,
    call: Callable | None = None,
    axes: str | Sequence[str] | None = None,
    tolerance: Tolerance | None = None,
    errors: Sequence[tuple[type, str, str]] = (),
    hint: str = "",
) -> bool:
    """Run ``answer`` on every case, compare with ``reference``, name the mistake; print one
    line (module docstring) and return True when every case matches. Never raises."""
    cases = [c if isinstance(c, Case) else Case(*c) for c in cases]
    names = _parameter_names(call or reference, skip=1 if call else 0)
    problem = _not_a_function(inspect.currentframe().f_back)
    if problem is None and not callable(answer):
        problem = f"expected your function, got {type(answer).__name__}; pass the function itself"
    try:
        problem = problem or _signature_problem(answer, cases, names, call)
        options = _Options(call, axes, tolerance or Tolerance(), errors, hint, cases)
        options.answer = answer
        problem = problem or _verdict(answer, reference, mistakes, names, options)
    except Exception as error:  # the checker's own failure: said so, never the learner's
        problem = (
            f"the checker itself failed ({type(error).__name__}: {error}); this is not your "
            "mistake, please report it"
        )
    if problem is None:
        print(f"✅ {title}: correct")
        return True
    print(f"❌ {title}: {problem}")
    return False


class _Options:
    """What :func:`judge` was given besides the functions (one object to pass along)."""

    def __init__(self, call, axes, tolerance, errors, hint, cases) -> None:
        self.call, self.axes, self.tolerance = call, axes, tolerance
        self.errors, self.hint, self.cases = errors, hint, cases


def _parameter_names(function: Callable, skip: int) -> list[str]:
    try:
        parameters = list(inspect.signature(function).parameters.values())[skip:]
    except (TypeError, ValueError):
        return []
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _signature_problem(answer: Callable, cases: list[Case], names, call) -> str | None:
    """The exercise calls the function with the reference's arguments: say so when the
    learner's signature cannot take them (only when the harness does not build them)."""
    if call is not None:
        return None
    try:
        signature = inspect.signature(answer)
    except (TypeError, ValueError):
        return None
    case = cases[0]
    try:
        signature.bind(*case.args, **case.kwargs)
    except TypeError:
        return (
            f"your function takes {signature}, but the exercise calls it as "
            f"f({', '.join(names)}); give it exactly these parameters"
        )
    return None


def _run(function: Callable, case: Case, call: Callable | None):
    args, kwargs = case.fresh()
    return call(function, *args, **kwargs) if call else function(*args, **kwargs)


def _run_answer(answer: Callable, case: Case, call: Callable | None):
    """The learner's result; their exceptions come back wrapped in :class:`_LearnerError`."""
    try:
        return _run(answer, case, call)
    except NotImplementedError:
        raise
    except Exception as error:  # anything the learner's code raised is theirs to fix
        raise _LearnerError(error) from error


def _verdict(answer, reference, mistakes, names, options: _Options) -> str | None:
    passed = []
    for case in options.cases:
        expected = _run(reference, case, options.call)
        try:
            got = _run_answer(answer, case, options.call)
        except NotImplementedError:
            return "not implemented yet"
        except _LearnerError as wrapped:
            raised = _learner_error(wrapped.error, case.describe(names), options.errors)
            return _named_elsewhere(answer, reference, mistakes, names, options, raised)
        if isinstance(got, Problem):
            return f"on {case.describe(names)}, {got}"
        problem = difference(got, expected, "the result", options.axes, options.tolerance)
        if problem is None:
            passed.append(case)
            continue
        return _named(got, expected, case, mistakes, reference, names, options) or _unnamed(
            problem, case, passed, names, options.hint
        )
    return None


def _named_elsewhere(answer, reference, mistakes, names, options, raised: str) -> str:
    """The learner's function raised on one case: a catalogued mistake it matches on another
    case names the cause better than the exception alone."""
    for case in options.cases:
        try:
            got = _run_answer(answer, case, options.call)
            expected = _run(reference, case, options.call)
        except Exception:  # this case raises too (or cannot be judged): try the next one
            continue
        named = _named(got, expected, case, mistakes, reference, names, options)
        if named is not None:
            return f"{named} ({raised})"
    return raised


def _learner_error(error: BaseException, where: str, errors) -> str:
    said = f"your function raised {type(error).__name__}: {str(error).strip()}"
    for kind, pattern, hint in errors:
        if isinstance(error, kind) and re.search(pattern, str(error)):
            return f"{said} (on {where}): {hint}"
    return f"{said} (on {where})"


def _same(got, output, options: _Options) -> bool:
    return difference(got, output, "", options.axes, options.tolerance) is None


def _named(got, expected, case: Case, mistakes, reference, names, options) -> str | None:
    """The catalogued mistake whose output the answer equals (and that differs from the right
    output on this case); when several fit this case, the one that fits the most other cases
    too. Then a scalar argument the answer ignores."""
    fits = [
        (message, wrong)
        for message, wrong in mistakes
        if _fits(got, expected, case, wrong, options)
    ]
    if len(fits) > 1:  # confirm on the other cases: the fit that holds on most of them
        others = [
            (c, _try(lambda c=c: _run_answer(options.answer, c, options.call)),
             _try(lambda c=c: _run(reference, c, options.call)))
            for c in options.cases
            if c is not case
        ]  # fmt: skip
        fits.sort(key=lambda fit: -sum(_fits(o, e, c, fit[1], options) for c, o, e in others))
    if fits:
        return f"looks like {fits[0][0]}"
    return _ignored_argument(got, expected, case, reference, names, options)


_FAILED = object()


def _try(thunk):
    try:
        return thunk()
    except Exception:  # the answer (or a mistake) cannot run on this case
        return _FAILED


def _fits(got, expected, case: Case, wrong, options) -> bool:
    """``wrong`` runs on ``case``, gives something else than the right output, and the answer
    equals it."""
    output = _try(lambda: _run(wrong, case, options.call))
    if any(value is _FAILED for value in (output, got, expected)):
        return False
    return not _same(output, expected, options) and _same(got, output, options)


def _ignored_argument(got, expected, case: Case, reference, names, options) -> str | None:
    """The answer equals the reference run with a scalar argument at another value (its value
    in another case, or a common default): the function ignores that argument."""
    for i, value in enumerate(case.args):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or i >= len(names):
            continue
        seen = [c.args[i] for c in options.cases if len(c.args) > i]
        for other in dict.fromkeys([*seen, 1e-5, 1e-6, 1.0, 0.0, 1, 2]):
            if other == value or type(other) is not type(value):
                continue
            args = case.args[:i] + (other,) + case.args[i + 1 :]
            try:
                output = _run(reference, Case(*args, **case.kwargs), options.call)
            except Exception:
                continue
            if not _same(output, expected, options) and _same(got, output, options):
                return (
                    f"the result is what {names[i]}={other!r} gives, not {names[i]}={value!r} "
                    f"(on {case.describe(names)}): use the argument {names[i]}, not a fixed "
                    "value or a notebook global"
                )
    return None


def _unnamed(problem: str, case: Case, passed: list[Case], names, hint: str) -> str:
    text = f"on {case.describe(names)}, {problem}"
    if passed:
        text += (
            f". It was right on {passed[0].describe(names)}: does it use a fixed size or a "
            "notebook global where an argument (or the input's shape) should decide?"
        )
    return f"{text}; {hint}" if hint else text
