"""What the tests of the notebooks' checkers share (tests/test_exercises_*.py).

A checker is called on an answer and prints one line; ``verdict`` returns its result with that
line and fails the test if the checker reports that it failed itself (issue 32's standard: a
checker never breaks on a wrong answer). ``catalogue_params`` turns a file's catalogues of
mistakes, ``[(checker, [(message, wrong), ...]), ...]``, into the parametrization of "each
catalogued mistake is named"; ``assert_named`` and ``assert_unfinished_reported`` are the
checks those tests make.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Catalogues = Sequence[tuple[Callable, Sequence[tuple[str, object]]]]


def verdict(checker: Callable, answer, capsys) -> tuple[bool, str]:
    """``checker(answer)`` and what it printed, read from pytest's ``capsys``."""
    result = checker(answer)
    out = capsys.readouterr().out
    assert "checker itself failed" not in out, out
    return result, out


def catalogue_params(catalogues: Catalogues) -> dict[str, list]:
    """The ``argvalues`` and ``ids`` of
    ``pytest.mark.parametrize(("checker", "message", "wrong"), **catalogue_params(CATALOGUES))``:
    one case per catalogued mistake, named ``<checker>-<index in its catalogue>``."""
    return {
        "argvalues": [(checker, m, w) for checker, mistakes in catalogues for m, w in mistakes],
        "ids": [f"{c.__name__}-{i}" for c, mistakes in catalogues for i in range(len(mistakes))],
    }


def assert_named(checker: Callable, wrong, message: str, capsys) -> None:
    """The checker rejects ``wrong`` and names its mistake: "looks like <message>"."""
    passed, out = verdict(checker, wrong, capsys)
    assert not passed and f"looks like {message}" in out, out


def unfinished(*args):
    """An exercise as the notebook hands it out."""
    raise NotImplementedError  # your code here


def assert_unfinished_reported(catalogues: Catalogues, capsys) -> None:
    """Each checker rejects an unfinished exercise and says so ("not implemented yet"), never
    raises."""
    for checker, _ in catalogues:
        passed, out = verdict(checker, unfinished, capsys)
        assert not passed and out.endswith(": not implemented yet\n"), out


# --- batteries of right and wrong answers (issue 42) ----------------------------------------

#: Words that show a rejection names its cause or where it lies beyond "it differs by ...":
#: a catalogued mistake, an argument, a gradient, an in-place change, randomness, a device, an
#: exception, a type or shape, the learner's globals.
NAMED = (
    "looks like", "the result is what", "gradient", "in place", "random", "on the CPU",
    "raised", "not implemented", "should be", "has dtype", "has shape", "returned", "it reads",
    "NaN", "is a bool mask", "is None", "is not right yet", "uses `", "items, expected",
    "in another order", "it runs the library", "it joins the heads", "integer dtype",
    "float dtype", "is the float", "depends on self.training", "does not parse",
    "your function takes", "neither an id", "as a buffer",
)  # fmt: skip


def is_generic(line: str) -> bool:
    """A rejection that says only that (and where) values differ: no cause named."""
    return not any(word in line for word in NAMED)


def run_battery(entries, capsys) -> dict:
    """Run ``entries`` ``[(checker, label, answer, "right" | "wrong"), ...]``; return
    ``{"wrong accepted": [...], "right rejected": [...], "crashed": [...], "generic": [...],
    "rejections": n}`` (labels with the printed line)."""
    found = {"wrong accepted": [], "right rejected": [], "crashed": [], "generic": []}
    rejections = 0
    for checker, label, answer, kind in entries:
        passed = checker(answer)
        line = capsys.readouterr().out.strip()
        if "checker itself failed" in line:
            found["crashed"].append(f"{label}: {line}")
        if kind == "right" and not passed:
            found["right rejected"].append(f"{label}: {line}")
        if kind == "wrong" and passed:
            found["wrong accepted"].append(f"{label}: {line}")
        if not passed:
            rejections += 1
            if is_generic(line):
                found["generic"].append(f"{label}: {line}")
    found["rejections"] = rejections
    return found
