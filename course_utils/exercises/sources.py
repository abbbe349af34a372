"""The source of a learner's part, with what it needs from the other cells of their notebook.

A part is saved as text (:mod:`course_utils.lab.parts`) and run later from one file, so every
global name it reads must be there too. :func:`with_helpers` finds those names (with
:mod:`symtable`) and brings each along: a function or class of the learner's (its source,
and in turn what it needs), a module (``import numpy as np``), an object of an importable
module (``from math import sqrt``), or a plain value (``NEG = -1e9``). What cannot be brought
(a tensor, a model built in another cell) is refused with its name: :class:`MissingHelper`.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import linecache
import math
import symtable
import sys
import textwrap
import types

from course_utils.lab.language import tr

__all__ = ["MissingHelper", "free_names", "source_of", "with_helpers"]


class MissingHelper(Exception):
    """A global name a part reads that cannot be saved with it (the message names it, in the
    current language: it becomes the verdict on the part)."""


def source_of(obj: object) -> str:
    """The source text of a function or class, also one defined in a notebook cell.

    ``inspect.getsource`` finds a function typed in a Jupyter cell (IPython keeps each cell
    in ``linecache``) but not a class, whose module ``__main__`` has no file; a class is
    found through one of its methods' code, then cut out of that cell with ``ast``.

    Raises:
        TypeError: ``obj`` has no source that can be found.
    """
    try:
        return textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError):
        if not isinstance(obj, type):
            raise TypeError(f"no source found for {obj!r}") from None
    return _class_source(obj)


def _class_source(cls: type) -> str:
    codes = [f.__code__ for f in vars(cls).values() if isinstance(f, types.FunctionType)]
    for code in codes:
        lines = linecache.getlines(code.co_filename)
        tree = ast.parse("".join(lines))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                # whole lines: a comment after the last statement belongs to the class too
                return textwrap.dedent("".join(lines[first - 1 : node.end_lineno]))
    raise TypeError(f"no source found for class {cls.__name__}")


def free_names(source: str) -> list[str]:
    """The global names ``source`` reads but does not define, in order of first use."""
    table = symtable.symtable(source, "<part>", "exec")
    defined = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    found: list[str] = []

    def walk(scope) -> None:
        for symbol in scope.get_symbols():
            name = symbol.get_name()
            if symbol.is_global() and symbol.is_referenced() and name not in defined:
                if name not in found:
                    found.append(name)
        for child in scope.get_children():
            walk(child)

    walk(table)
    return found


def _namespace(obj: object) -> dict:
    """The globals a function (or a class's methods) reads."""
    if isinstance(obj, types.FunctionType):
        return obj.__globals__
    for value in vars(obj).values():
        if isinstance(value, types.FunctionType):
            return value.__globals__
    module = sys.modules.get(getattr(obj, "__module__", ""), None)
    return vars(module) if module is not None else {}


def global_values(obj: object) -> dict[str, object]:
    """The names from outside that the code of ``obj`` (a function, or a class's methods)
    reads, with their values: a notebook's globals, or an enclosing function's variables."""
    functions = [obj] if isinstance(obj, types.FunctionType) else [
        f for f in vars(obj).values() if isinstance(f, types.FunctionType)
    ]  # fmt: skip
    found: dict[str, object] = {}
    for function in functions:
        seen = inspect.getclosurevars(function)
        found.update(seen.nonlocals)
        found.update(seen.globals)
    return found


def _plain_value(name: str, value) -> str | None:
    """``name = <value>`` for a value that reads back as itself, else None."""
    if isinstance(value, float) and not math.isfinite(value):
        return f'{name} = float("{value}")'
    if isinstance(value, (bool, int, float, str, type(None), tuple)) or "torch.dtype" in str(
        type(value)
    ):
        text = repr(value)
        try:
            import torch

            if eval(text, {"torch": torch, "__builtins__": {}}) == value:  # noqa: S307
                return f"{name} = {text}"
        except Exception:  # not a literal
            return None
    return None


def _imported(name: str, value) -> str | None:
    """The import line that gives ``value`` the name ``name``, when its module has it."""
    if isinstance(value, types.ModuleType):
        module = value.__name__
        if "." in module and module.rsplit(".", 1)[1] == name:
            return f"from {module.rsplit('.', 1)[0]} import {name}"
        return f"import {module}" if module == name else f"import {module} as {name}"
    module = getattr(value, "__module__", None)
    if not module or module == "__main__":
        return None
    for attribute in (getattr(value, "__qualname__", None), getattr(value, "__name__", None)):
        if not isinstance(attribute, str) or "." in attribute:
            continue
        try:
            found = getattr(importlib.import_module(module), attribute)
        except Exception:  # not importable from there
            continue
        if found is value:
            line = f"from {module} import {attribute}"
            return line if attribute == name else f"{line} as {name}"
    return None


def _learners(value) -> bool:
    """A function or class of the learner's (its module cannot be imported again)."""
    if not isinstance(value, (types.FunctionType, type)):
        return False
    return _imported(getattr(value, "__name__", ""), value) is None


def with_helpers(part: object, provided: set[str]) -> tuple[str, list[str]]:
    """The text to save for ``part``: the helpers it needs (``provided`` names aside: the
    saved file's own imports, the other parts, builtins), then its own source; and the
    helpers' names.

    Raises:
        TypeError: the part's (or a helper's) source cannot be found.
        MissingHelper: a global name that cannot be saved with the part (message names it).
    """
    blocks: list[str] = []
    names: list[str] = []
    source = source_of(part)
    _gather(part, source, provided | {part.__name__}, blocks, names, part.__name__)
    return "".join(f"{b.strip()}\n\n\n" for b in blocks) + source, names


def _gather(obj, source: str, skip: set[str], blocks: list, names: list, part: str) -> None:
    namespace = _namespace(obj)
    for name in free_names(source):
        if name in skip or name in names or hasattr(builtins, name):
            continue
        if name not in namespace:
            raise MissingHelper(
                tr(
                    "{part} uses `{name}`, which is not defined in your notebook: define it (in "
                    "{part}, or in a helper function) and run the cell again"
                ).format(part=part, name=name)
            )
        value = namespace[name]
        names.append(name)
        line = _imported(name, value) if not _learners(value) else None
        if line is None and not _learners(value):
            line = _plain_value(name, value)
        if line is not None:
            blocks.append(line)
            continue
        if not _learners(value):
            raise MissingHelper(
                tr(
                    "{part} uses `{name}`, a {kind} from another cell of your notebook, which "
                    "cannot be saved with it for my_model: compute it inside {part} (or in a "
                    "helper function)"
                ).format(part=part, name=name, kind=type(value).__name__)
            )
        helper_source = source_of(value)
        _gather(value, helper_source, skip, blocks, names, part)
        blocks.append(helper_source)
