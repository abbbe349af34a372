"""Keeping the learner's parts: where they are saved, which version is the learner's, and
running a checker quietly.

The checkers call :func:`keep` with their verdict on a part (``judge(part=True)``); a pass
saves the part's source, with the helpers it needs from other cells, as ``<name>.py`` in
:func:`parts_folder`, and a failure marks it (``<name>.failed``).
:func:`course_utils.lab.parts.my_parts` and :func:`~course_utils.lab.parts.my_model` read
them. :func:`quietly` runs checkers without printing and without saving or marking anything
(the assembly judges the learner's parts with them). This module imports no checker, so the
checkers and the assembly can both import it.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import io
import os
import re
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import course_utils.exercises.solution_model as solution_model
from course_utils.exercises.cases import CheckerFailure
from course_utils.exercises.sources import MissingHelper, source_of, with_helpers
from course_utils.lab.drive import FOLDER_ENV, parts_on_drive_in_colab
from course_utils.lab.language import tr

__all__ = ["FOLDER_ENV", "PARTS", "keep", "parts_folder", "quietly", "quiet_verdict"]

#: The learner's parts in the order the decoder file defines them, and the notebook of each.
PARTS = {
    "sinusoidal_table": "03",
    "split_heads": "04",
    "attention": "07",
    "merge_heads": "08",
    "MultiHeadAttention": "08",
    "LayerNorm": "09",
    "FeedForward": "10",
    "Block": "11",
    "Decoder": "11",
}


def parts_folder() -> Path:
    """Where the learner's parts are kept: ``$COURSE_MY_MODEL``; else, in Colab, a folder on
    the learner's Google Drive, mounted the first time a notebook needs it (every notebook runs
    on its own machine there: :func:`course_utils.lab.drive.parts_on_drive_in_colab`); else
    ``./my_model``."""
    chosen = os.environ.get(FOLDER_ENV) or parts_on_drive_in_colab()  # None outside Colab
    return Path(chosen or "my_model")


def _provided() -> set[str]:
    """Names the assembled file defines for every part: its imports and the parts."""
    return {"math", "torch", "F", "nn", *PARTS}


def keep(answer: object, problem: str | None) -> tuple[str | None, str]:
    """What a checker's verdict on a part means for the learner's model, as (the problem,
    now or still; a note for the verdict line). Called by the checkers (``judge(part=True)``).

    A pass saves the part with the helpers it needs from other cells (the note says where);
    one needing a global that cannot be saved fails here, with the name
    (:func:`course_utils.exercises.sources.with_helpers`). A failure other than "not
    implemented yet" marks the part as failing, so :func:`my_parts` and :func:`my_model` no
    longer call the saved copy "yours"; the note says which version they use meanwhile. The
    course's solution (a solution cell under *Run All*) is never saved and changes nothing.
    Never raises; does nothing inside :func:`quietly`.
    """
    name = getattr(answer, "__name__", None)
    if name not in PARTS or QUIET:
        return problem, ""
    if problem is None:
        try:
            source, helpers = with_helpers(answer, _provided())
        except MissingHelper as error:
            problem = str(error)
        except (OSError, TypeError, ValueError, SyntaxError) as error:
            return None, _Unsaved.note(error)
        else:
            return None, _save(name, source, helpers)
    if not _not_implemented(problem):
        _write(_failed_path(name), problem)
    if _mine(name):
        return problem, tr(
            ". Until it passes, my_parts and my_model use your last {name} that passed ({path})"
        ).format(name=name, path=parts_folder() / (name + ".py"))
    if _not_implemented(problem):
        return problem, ""
    return problem, tr(". Until it passes, my_parts and my_model use the course's {name}").format(
        name=name
    )


def _not_implemented(problem: str) -> bool:
    """The verdict is "not implemented yet" (in English or in the current language)."""
    return problem in ("not implemented yet", tr("not implemented yet"))


class _Unsaved(str):
    """The note of a part that passed but could not be saved (:func:`save_part` tells it
    from the note of a part saved)."""

    @classmethod
    def note(cls, error: BaseException) -> _Unsaved:
        return cls(tr(" (but it could not be saved for my_model: {error})").format(error=error))


def _save(name: str, source: str, helpers: list[str]) -> str:
    if _is_solution(name, source):
        return ""  # a solution cell (Run All runs them too): keep the learner's own part
    path = parts_folder() / f"{name}.py"
    try:
        _write(path, source)
        _failed_path(name).unlink(missing_ok=True)
    except OSError as error:
        return _Unsaved.note(error)
    if helpers:
        return tr(" (saved for my_parts and my_model as {path}, with {helpers})").format(
            path=path, helpers=", ".join(helpers)
        )
    return tr(" (saved for my_parts and my_model as {path})").format(path=path)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(f".{os.getpid()}.tmp")
    scratch.write_text(text, encoding="utf-8")
    scratch.replace(path)  # atomic: a notebook reading the part never sees half of it


def _failed_path(name: str) -> Path:
    return parts_folder() / f"{name}.failed"


def save_part(answer: object) -> Path | None:
    """Save a part as a passing checker does (:func:`keep`) and return the file written; None
    when ``answer`` is not one of :data:`PARTS`, is the course's solution, or cannot be saved
    (said in one line). Never raises."""
    name = getattr(answer, "__name__", None)
    if name not in PARTS:
        return None
    problem, note = keep(answer, None)
    if problem is not None or isinstance(note, _Unsaved):
        print(
            tr("(your {name} passed, but could not be saved for my_model: {reason})").format(
                name=name, reason=problem or note
            )
        )
        return None
    return parts_folder() / f"{name}.py" if note else None


@functools.cache
def solution_source(name: str) -> str:
    """The course's solution of part ``name`` (its def or class, as in the solution file)."""
    return source_of(getattr(solution_model, name))


def _mine(name: str) -> bool:
    saved = _saved(name)
    return saved is not None and not _is_solution(name, saved)


def _is_solution(name: str, source: str) -> bool:
    """``source`` is the course's solution of part ``name``, whatever language its comments,
    docstrings and messages are in (the Chinese edition's solution cells translate them)."""
    if source.strip() == solution_source(name).strip():
        return True
    code = _without_words(source)
    return code is not None and code == _without_words(solution_source(name))


def _without_words(source: str) -> str | None:
    """The code of ``source`` with its comments gone and every text literal emptied (an AST
    dump), or None when it does not parse."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
    return ast.dump(tree)


def _saved(name: str) -> str | None:
    """The learner's saved source of part ``name``, or None."""
    path = parts_folder() / f"{name}.py"
    return path.read_text(encoding="utf-8") if path.is_file() else None


#: True inside :func:`quietly`: checkers save nothing and mark nothing.
QUIET = False
#: Inside :func:`quietly`, the verdicts reported (:func:`heard`) at this level; else None.
_HEARD: list | None = None


def heard(problem: str | None) -> None:
    """Note a verdict (None for a pass) for :func:`quiet_verdict`; called by
    :func:`.judge.report`. Does nothing outside :func:`quietly`."""
    if _HEARD is not None:
        _HEARD.append(problem)


@contextlib.contextmanager
def quietly() -> Iterator[io.StringIO]:
    """Run checkers without printing (what they print is in the yielded buffer) and without
    saving or marking any part."""
    global QUIET, _HEARD
    before, QUIET = QUIET, True
    heard_before, _HEARD = _HEARD, []
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer):
            yield buffer
    finally:
        QUIET, _HEARD = before, heard_before


def quiet_verdict(checker: Callable, part: object) -> str | None:
    """What ``checker`` says of ``part``, run :func:`quietly`: None when it passes, or when
    the checker itself fails (that is never the learner's), else its reason (in the current
    language)."""
    with quietly() as printed:
        verdicts = _HEARD
        passed = checker(part)
    if passed:
        return None
    if verdicts:  # a checker written with judge: its verdict as reported
        problem = verdicts[-1]
        return None if isinstance(problem, CheckerFailure) else problem
    line = next((x for x in printed.getvalue().splitlines() if x.startswith("❌")), "")
    said = re.split(r": |：", line, maxsplit=1)  # run_check's line: "❌ title: problem"
    if "checker itself failed" in line or len(said) < 2:
        return None
    return said[1]
