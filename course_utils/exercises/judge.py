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
- Language: the mistakes' messages, the hints, the case labels, a :class:`Problem` and a
  title that is not an identifier are shown with :func:`course_utils.lab.language.translated`
  when the verdict is made, so a module-level table marks them with ``N_("...")``.

- ``part``: the answer is a part of the learner's decoder: a pass saves it (and says where),
  a failure says which version the model uses meanwhile (:func:`.keeping.keep`).
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

import inspect
from collections.abc import Callable, Sequence

from course_utils.exercises.cases import (
    Case,
    CheckerFailure,
    Problem,
    _LearnerError,
    _Options,
    _run,
    _run_answer,
)
from course_utils.exercises.core import _not_a_function
from course_utils.exercises.difference import Tolerance, difference
from course_utils.exercises.in_training import Runner, device_problem, training_problem
from course_utils.exercises.keeping import heard, keep
from course_utils.exercises.naming import (
    _in_place,
    _learner_error,
    _named,
    _named_elsewhere,
    _random,
    _unnamed,
)
from course_utils.lab.language import N_, tr, translated

__all__ = ["Case", "Problem", "judge", "report"]


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
        problem = tr("expected your function, got {kind}; pass the function itself").format(
            kind=type(answer).__name__
        )
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
        problem = tr("not implemented yet")
    except Exception as error:  # the checker's own failure: said so, never the learner's
        problem = CheckerFailure(
            tr(
                "the checker itself failed ({kind}: {error}); this is not your mistake, please "
                "report it"
            ).format(kind=type(error).__name__, error=error)
        )
    return report(title, answer, problem, part)


def report(title: str, answer, problem: str | None, part: bool = False) -> bool:
    """Print the verdict line (``✅ title: correct`` or ``❌ title: problem``, in the current
    language) and return whether it passed; for a ``part``, :func:`.keeping.keep` saves it or
    says which version the model uses meanwhile, in the same line. Inside
    :func:`.keeping.quietly` the verdict is also handed to :func:`.keeping.heard`.

    ``title`` is shown translated (:func:`course_utils.lab.language.translated`) unless it is an
    identifier (a function or class name, which stays as it is)."""
    note = ""
    if part:
        problem, note = keep(answer, problem)
    heard(problem)
    shown = title if title.isidentifier() else translated(title)
    if problem is None:
        print(tr("✅ {title}: correct").format(title=shown) + note)
        return True
    print(tr("❌ {title}: {problem}").format(title=shown, problem=problem) + note)
    return False


def _training_stage(answer, reference, cases, names, options, trains, runner) -> str | None:
    if trains:
        return training_problem(
            runner, answer, reference, cases, names, options.axes, options.tolerance
        )
    return device_problem(runner, answer, cases)


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
        return tr(
            "your function takes {signature}, but the exercise calls it as f({names}); give it "
            "exactly these parameters"
        ).format(signature=signature, names=", ".join(names))
    return None


def _verdict(answer, reference, mistakes, names, options: _Options) -> str | None:
    passed = []
    for case in options.cases:
        expected = _run(reference, case, options.call)
        changed: list[int] = []
        try:
            got = _run_answer(answer, case, options.call, changed)
        except NotImplementedError:
            return tr("not implemented yet")
        except _LearnerError as wrapped:
            raised = _learner_error(
                wrapped.error, case.describe(names), options.errors, options.answer
            )
            return _named_elsewhere(answer, reference, mistakes, names, options, raised)
        if isinstance(got, Problem):
            return tr("on {case}, {problem}").format(
                case=case.describe(names), problem=translated(got)
            )
        if changed:
            return _in_place(answer, case, changed[0], names, options)
        options.results[(reference, id(case), False)] = expected
        options.results[(answer, id(case), True)] = got
        problem = difference(got, expected, N_("the result"), options.axes, options.tolerance)
        if problem is None:
            passed.append(case)
            continue
        return (
            _named(got, expected, case, mistakes, reference, names, options)
            or _random(answer, case, names, options)
            or _unnamed(problem, case, passed, names, options)
        )
    return None
