"""Teaching modules read like nanoGPT's ``model.py``: checks in small named helpers.

A student who opens ``attention.py`` or ``data.py`` should see the computation of each public
function at a glance. So a public function or method of a teaching module (the top level of
``course_utils``, ``tokenization`` and ``training``) raises nothing itself: every refusal lives in
a helper named for what it checks (``check_*`` or a private ``_check_*`` next to it) and is
called before the math. ``checks.py`` is the shared helpers' module and is exempt.

Size keeps each file to one concept: a teaching module past ~400 lines, or a function whose
code (its docstring aside) runs past 60 lines, is split by concept rather than let grow.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "course_utils"
TEACHING_DIRS = (PACKAGE, PACKAGE / "tokenization", PACKAGE / "training")
HELPER_MODULES = {"checks.py"}  # the shared argument checks themselves
MAX_MODULE_LINES = 420  # "~400": room for a docstring line, not for a second concept
MAX_FUNCTION_LINES = 60


def teaching_files() -> list[Path]:
    return sorted(
        path
        for folder in TEACHING_DIRS
        for path in folder.glob("*.py")
        if path.name not in HELPER_MODULES and path.name != "__init__.py"
    )


def is_public(name: str) -> bool:
    """Public API: no leading underscore, dunders (``__init__``, ``__call__``) included."""
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def is_check_helper(name: str) -> bool:
    return name.startswith(("check_", "_check_"))


def own_raises(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[int]:
    """Line numbers of the ``raise`` statements in ``function``'s own body (nested defs and
    classes are their own functions and are judged on their own)."""
    found, stack = [], list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Raise):
            found.append(node.lineno)
        stack.extend(ast.iter_child_nodes(node))
    return sorted(found)


def public_functions(tree: ast.Module):
    """(qualified name, node) of every public function and method, nested classes included."""

    def visit(body, prefix):
        for node in body:
            if isinstance(node, ast.ClassDef):
                yield from visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if is_public(node.name) and not is_check_helper(node.name):
                    yield f"{prefix}{node.name}", node

    yield from visit(tree.body, "")


def inline_raises(source: str) -> list[str]:
    tree = ast.parse(source)
    return [
        f"{name} raises at line(s) {lines}"
        for name, node in public_functions(tree)
        if (lines := own_raises(node))
    ]


def test_there_are_teaching_modules_to_scan():
    names = {path.name for path in teaching_files()}
    assert {"attention.py", "data.py", "bpe.py", "loop.py"} <= names
    assert "checks.py" not in names


@pytest.mark.parametrize("path", teaching_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_public_functions_keep_their_checks_in_named_helpers(path):
    found = inline_raises(path.read_text(encoding="utf-8"))
    assert not found, (
        f"{path.relative_to(ROOT)}: move each `if ...: raise` into a named helper "
        f"(`_check_<what>` next to the function) called before the computation: {found}"
    )


def code_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the function's end."""
    body = function.body
    has_docstring = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    first = body[1] if has_docstring and len(body) > 1 else body[0]
    return function.end_lineno - first.lineno + 1


@pytest.mark.parametrize("path", teaching_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_teaching_modules_and_functions_stay_small(path):
    source = path.read_text(encoding="utf-8")
    assert len(source.splitlines()) <= MAX_MODULE_LINES, f"{path.name}: split it by concept"
    tree = ast.parse(source)
    long = [
        (node.name, code_lines(node))
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and code_lines(node) > MAX_FUNCTION_LINES
    ]
    assert not long, f"{path.name}: functions past {MAX_FUNCTION_LINES} lines of code: {long}"


def test_code_lines_leave_the_docstring_out():
    function = ast.parse('def f():\n    """Doc\n    string."""\n    x = 1\n    return x\n').body[0]
    assert code_lines(function) == 2
    assert code_lines(ast.parse("def g():\n    return 1\n").body[0]) == 1


def test_the_scan_finds_an_inline_raise_and_spares_helpers():
    source = """
def split(x, n):
    if x.ndim != 3:
        raise ValueError("x")
    return x

class Layer:
    def __init__(self, d):
        def inner():
            raise RuntimeError("nested functions are judged on their own")
        if d < 1:
            raise ValueError("d")

    def forward(self, x):
        try:
            return x + 1
        except TypeError as err:
            raise TypeError("course voice") from err

    def _check_x(self, x):
        raise ValueError("private helper")

def check_n(n):
    raise ValueError("public helper")

def _private(n):
    raise ValueError("private")

def ok(x):
    _private(x)
    return x
"""
    assert inline_raises(source) == [
        "split raises at line(s) [4]",
        "Layer.__init__ raises at line(s) [12]",
        "Layer.forward raises at line(s) [18]",
    ]
