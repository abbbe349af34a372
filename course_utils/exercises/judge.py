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

- ``part``: the answer is a part of the learner's decoder: a pass saves it (and says where),
  a failure says which version the model uses meanwhile (:func:`course_utils.lab.parts.keep`).
- ``trains``: once every case matches, run the stage of :mod:`.in_training` (inputs left
  alone, the result in train mode, one backward pass, gradients compared); ``runner`` prepares
  each call there (a :class:`.in_training.Runner`, the default, or the module judge's). Every
  checker whose cases hold tensors also runs the answer on the meta device (a tensor made on
  the CPU inside it is named).

The verdict, printed in one line (``✅ title: correct`` or ``❌ title: ...``); judge returns
True or False and never raises: not a function, a signature that does not fit, "not
implemented yet", the learner's own exception (named as theirs, with the case), the first
catalogued mistake the answer equals on every case ("looks like ..."), a scalar argument the
answer ignores, confirmed on every case ("the result is what eps=1e-06 gives"), a result that
changes from run to run (dropout), a mistake that fits this case only (said so), else where
and by how much it differs (:func:`.difference.difference`) and which cases it got right.
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Callable, Sequence

import torch

from course_utils.exercises.core import _not_a_function
from course_utils.exercises.difference import Tolerance, difference
from course_utils.exercises.in_training import (
    Runner,
    changed_in_place,
    device_problem,
    training_problem,
)
from course_utils.exercises.watch import Watch, rewrite_in_place, storage_of, traceback_line

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
    trains: bool = False,
    runner: Runner | None = None,
    part: bool = False,
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
        if runner is None and call is None:
            runner = Runner(names)
        if problem is None and runner is not None:
            problem = _training_stage(answer, reference, cases, names, options, trains, runner)
    except NotImplementedError:
        problem = "not implemented yet"
    except Exception as error:  # the checker's own failure: said so, never the learner's
        problem = (
            f"the checker itself failed ({type(error).__name__}: {error}); this is not your "
            "mistake, please report it"
        )
    return report(title, answer, problem, part)


def report(title: str, answer, problem: str | None, part: bool = False) -> bool:
    """Print the verdict line (``✅ title: correct`` or ``❌ title: problem``) and return
    whether it passed; for a ``part``, :func:`course_utils.lab.parts.keep` saves it or says
    which version the model uses meanwhile, in the same line."""
    note = ""
    if part:
        from course_utils.lab.parts import keep

        problem, note = keep(answer, problem)
    if problem is None:
        print(f"✅ {title}: correct{note}")
        return True
    print(f"❌ {title}: {problem}{note}")
    return False


def _training_stage(answer, reference, cases, names, options, trains, runner) -> str | None:
    if trains:
        return training_problem(
            runner, answer, reference, cases, names, options.axes, options.tolerance
        )
    return device_problem(runner, answer, cases)


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


def _run_answer(answer: Callable, case: Case, call: Callable | None, changed: list | None = None):
    """The learner's result; their exceptions come back wrapped in :class:`_LearnerError`.
    With ``changed`` (a list), the positions of the arguments the answer changed in place
    are appended to it."""
    args, kwargs = case.fresh()
    before = [_copy(a) for a in args] if changed is not None else []
    try:
        result = call(answer, *args, **kwargs) if call else answer(*args, **kwargs)
    except NotImplementedError:
        raise
    except Exception as error:  # anything the learner's code raised is theirs to fix
        raise _LearnerError(error) from error
    if changed is not None:
        changed.extend(i for i, (a, b) in enumerate(zip(args, before)) if changed_in_place(a, b))
    return result


def _in_place(answer, case: Case, index: int, names, options) -> str:
    """The learner's function changed argument ``index`` of ``case``: said, with the line
    (run again under a :class:`.watch.Watch`) and the line to write instead."""
    name = names[index] if index < len(names) else f"argument {index}"
    args, kwargs = case.fresh()
    with Watch() as watch:
        _try(
            lambda: (
                options.call(answer, *args, **kwargs) if options.call else answer(*args, **kwargs)
            )
        )
    value = args[index]
    storage = storage_of(value) if isinstance(value, torch.Tensor) else None
    event = next((e for e in watch.in_place if storage is not None and e.storage == storage), None)
    where = f"on {case.describe(names)}, it changes its argument {name} in place"
    if event is None:
        kind = type(value).__name__
        return (
            f"{where}: the caller's {kind} is not the same afterwards; leave it as it is and "
            "build a new one"
        )
    fix = rewrite_in_place(event.line)
    instead = f"write `{fix}` instead, which makes a new tensor" if fix else (
        f"copy it first ({name} = {name}.clone()) or build a new tensor"
    )  # fmt: skip
    return f"{where} ({event}): the caller's tensor changes; {instead}"


def _verdict(answer, reference, mistakes, names, options: _Options) -> str | None:
    passed = []
    for case in options.cases:
        expected = _run(reference, case, options.call)
        changed: list[int] = []
        try:
            got = _run_answer(answer, case, options.call, changed)
        except NotImplementedError:
            return "not implemented yet"
        except _LearnerError as wrapped:
            raised = _learner_error(
                wrapped.error, case.describe(names), options.errors, options.answer
            )
            return _named_elsewhere(answer, reference, mistakes, names, options, raised)
        if isinstance(got, Problem):
            return f"on {case.describe(names)}, {got}"
        if changed:
            return _in_place(answer, case, changed[0], names, options)
        problem = difference(got, expected, "the result", options.axes, options.tolerance)
        if problem is None:
            passed.append(case)
            continue
        return (
            _named(got, expected, case, mistakes, reference, names, options)
            or _random(answer, case, names, options)
            or _unnamed(problem, case, passed, names, options)
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


def _learner_error(error: BaseException, where: str, errors, answer=None) -> str:
    said = f"your function raised {type(error).__name__}: {str(error).strip()}"
    line = traceback_line(error)
    where = f"{where}, at {line}" if line else where
    for kind, pattern, hint in errors:
        if isinstance(error, kind) and re.search(pattern, str(error)):
            return f"{said} (on {where}): {hint}{_globals_read(answer)}"
    return f"{said} (on {where}){_globals_read(answer)}"


def _same(got, output, options: _Options) -> bool:
    return difference(got, output, "", options.axes, options.tolerance) is None


def _named(got, expected, case: Case, mistakes, reference, names, options) -> str | None:
    """The first catalogued mistake whose output the answer equals on this case (where it
    differs from the right output) and on every other case it can be run on; else a scalar
    argument the answer ignores, confirmed the same way; else a mistake that fits this case
    only, said so."""
    fits = [
        (message, wrong)
        for message, wrong in mistakes
        if _fits(got, expected, case, wrong, options)
    ]
    others = _others(case, reference, options) if fits else []
    for message, wrong in fits:
        if all(_holds(o, c, wrong, options) for c, o, _ in others):
            return f"looks like {message}"
    ignored = _ignored_argument(got, expected, case, reference, names, options)
    if ignored is not None or not fits:
        return ignored
    message, wrong = max(fits, key=lambda f: sum(_holds(o, c, f[1], options) for c, o, _ in others))
    wrong_elsewhere = next(c for c, o, _ in others if not _holds(o, c, wrong, options))
    return (
        f"looks like {message} (on {case.describe(names)}); on "
        f"{wrong_elsewhere.describe(names)} it differs from that mistake too, so something "
        "else is wrong as well"
    )


def _others(case: Case, reference, options) -> list[tuple]:
    """(case, the answer's result, the right result) for every other case."""
    return [
        (c, _try(lambda c=c: _run_answer(options.answer, c, options.call)),
         _try(lambda c=c: _run(reference, c, options.call)))
        for c in options.cases
        if c is not case
    ]  # fmt: skip


def _holds(got, case: Case, wrong, options) -> bool:
    """The answer's result on ``case`` is the mistake's (or one of them cannot run there)."""
    output = _try(lambda: _run(wrong, case, options.call))
    if output is _FAILED or got is _FAILED:
        return True
    return _same(got, output, options)


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
    in another case, or a common default) on this case and on every other case: the function
    ignores that argument. Values that give the same result everywhere are all named."""
    for i, value in enumerate(case.args):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or i >= len(names):
            continue
        seen = [c.args[i] for c in options.cases if len(c.args) > i]
        held = [
            other
            for other in dict.fromkeys([*seen, 1e-5, 1e-6, 1.0, 0.0, 1, 2])
            if other != value
            and type(other) is type(value)
            and _fixed_at(got, expected, case, i, other, reference, options)
            and all(_fixed_at(o, None, c, i, other, reference, options)
                    for c, o, _ in _others(case, reference, options))
        ]  # fmt: skip
        if held:
            shown = " or ".join(f"{names[i]}={v!r}" for v in held)
            return (
                f"the result is what {shown} gives, not {names[i]}={value!r} (on "
                f"{case.describe(names)}, and the same on every case): use the argument "
                f"{names[i]}, not a fixed value or a notebook global"
            )
    return None


def _fixed_at(got, expected, case: Case, i: int, value, reference, options) -> bool:
    """The answer's result on ``case`` is the reference's with argument ``i`` set to ``value``
    (and, when ``expected`` is given, that differs from the right result)."""
    if got is _FAILED or len(case.args) <= i:
        return True
    args = case.args[:i] + (value,) + case.args[i + 1 :]
    output = _try(lambda: _run(reference, Case(*args, **case.kwargs), options.call))
    if output is _FAILED:
        return expected is None
    if expected is not None and _same(output, expected, options):
        return False
    return _same(got, output, options)


def _unnamed(problem: str, case: Case, passed: list[Case], names, options) -> str:
    text = f"on {case.describe(names)}, {problem}"
    if passed:
        text += f" (it was right on {passed[0].describe(names)})"
    text += _globals_read(options.answer)
    return f"{text}; {options.hint}" if options.hint else text


def _globals_read(answer) -> str:
    """``; it reads B = 2 ... from your notebook`` when the answer's code reads global names
    bound to numbers (sizes, a scale): what an argument or the input's shape should give."""
    from course_utils.exercises.sources import global_values

    try:
        values = global_values(answer)
    except Exception:  # no source to read: say nothing
        return ""
    numbers = [
        f"{n} = {v!r}"
        for n, v in values.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    ]
    if not numbers:
        return ""
    return (
        f"; it reads {', '.join(numbers[:4])} from your notebook's globals: take sizes from "
        "the arguments and the inputs' shapes instead"
    )


def _random(answer, case: Case, names, options) -> str | None:
    """The answer's result changes between two runs on ``case``: said, with the dropout the
    watch saw."""
    results = []
    with Watch() as watch:
        for seed in (0, 1):
            with torch.random.fork_rng(devices=[]):
                torch.default_generator.manual_seed(seed)
                results.append(_try(lambda: _run_answer(answer, case, options.call)))
    if any(r is _FAILED for r in results) or _try(lambda: _same(*results, options)) is not False:
        return None
    seen = f" ({watch.dropout[0]})" if watch.dropout else ""
    return (
        f"on {case.describe(names)}, its result changes from one run to the next: it is "
        f"random{seen}; the specification has no randomness (no dropout)"
    )
