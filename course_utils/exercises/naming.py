"""Naming what is wrong with an answer (for :mod:`.judge`): the catalogued mistake it equals on
every case, a scalar argument it ignores, a result that changes from run to run, the
argument it changed in place, the exception it raised with its line, the notebook globals it
reads; else where and by how much it differs, and which cases it got right.
"""

from __future__ import annotations

import re

import torch

from course_utils.exercises.cases import (
    _FAILED,
    Case,
    _Options,
    _outcome,
    _run,
    _run_answer,
    _try,
)
from course_utils.exercises.difference import difference
from course_utils.exercises.watch import Watch, in_place_remedy, storage_of, traceback_line
from course_utils.lab.language import tr, translated


def _in_place(answer, case: Case, index: int, names, options) -> str:
    """The learner's function changed argument ``index`` of ``case``: said, with the line
    (run again under a :class:`.watch.Watch`) and the line to write instead."""
    name = names[index] if index < len(names) else tr("argument {index}").format(index=index)
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
    where = tr("on {case}, it changes its argument {name} in place").format(
        case=case.describe(names), name=name
    )
    if event is None:
        return tr(
            "{where}: the caller's {kind} is not the same afterwards; leave it as it is and "
            "build a new one"
        ).format(where=where, kind=type(value).__name__)
    return tr("{where} ({event}): the caller's tensor changes; {remedy}").format(
        where=where, event=event, remedy=in_place_remedy(event, name)
    )


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
            return tr("{named} ({raised})").format(named=named, raised=raised)
    return raised


def _learner_error(error: BaseException, where: str, errors, answer=None) -> str:
    line = traceback_line(error)
    fields = dict(kind=type(error).__name__, error=str(error).strip(), where=where, line=line)
    if line:
        said = tr("your function raised {kind}: {error} (on {where}, at {line})").format(**fields)
    else:
        said = tr("your function raised {kind}: {error} (on {where})").format(**fields)
    for kind, pattern, hint in errors:
        if isinstance(error, kind) and re.search(pattern, str(error)):
            said = tr("{said}: {hint}").format(said=said, hint=translated(hint))
            break
    return said + _globals_read(answer)


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
            return tr("looks like {mistake}").format(mistake=translated(message))
    ignored = _ignored_argument(got, expected, case, reference, names, options)
    if ignored is not None or not fits:
        return ignored
    message, wrong = max(fits, key=lambda f: sum(_holds(o, c, f[1], options) for c, o, _ in others))
    wrong_elsewhere = next(c for c, o, _ in others if not _holds(o, c, wrong, options))
    return tr(
        "looks like {mistake} (on {case}); on {other} it differs from that mistake too, so "
        "something else is wrong as well"
    ).format(
        mistake=translated(message),
        case=case.describe(names),
        other=wrong_elsewhere.describe(names),
    )


def _others(case: Case, reference, options) -> list[tuple]:
    """(case, the answer's result, the right result) for every other case."""
    return [
        (c, _outcome(options.answer, c, options, answer=True), _outcome(reference, c, options))
        for c in options.cases
        if c is not case
    ]  # fmt: skip


def _holds(got, case: Case, wrong, options) -> bool:
    """The answer's result on ``case`` is the mistake's (or one of them cannot run there)."""
    output = _outcome(wrong, case, options)
    if output is _FAILED or got is _FAILED:
        return True
    return _same(got, output, options)


def _fits(got, expected, case: Case, wrong, options) -> bool:
    """``wrong`` runs on ``case``, gives something else than the right output, and the answer
    equals it."""
    output = _outcome(wrong, case, options)
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
            shown = tr(" or ").join(f"{names[i]}={v!r}" for v in held)
            return tr(
                "the result is what {values} gives, not {name}={value} (on {case}, and the same "
                "on every case): use the argument {name}, not a fixed value or a notebook global"
            ).format(values=shown, name=names[i], value=repr(value), case=case.describe(names))
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
    if passed:
        text = tr("on {case}, {problem} (it was right on {right})").format(
            case=case.describe(names), problem=problem, right=passed[0].describe(names)
        )
    else:
        text = tr("on {case}, {problem}").format(case=case.describe(names), problem=problem)
    text += _globals_read(options.answer)
    if options.hint:
        return tr("{verdict}; {hint}").format(verdict=text, hint=translated(options.hint))
    return text


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
    return tr(
        "; it reads {values} from your notebook's globals: take sizes from the arguments and "
        "the inputs' shapes instead"
    ).format(values=", ".join(numbers[:4]))


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
    return tr(
        "on {case}, its result changes from one run to the next: it is random{seen}; the "
        "specification has no randomness (no dropout)"
    ).format(case=case.describe(names), seen=seen)
