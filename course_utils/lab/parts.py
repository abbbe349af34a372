"""The learner's decoder, part by part: saved when an exercise passes, assembled in one file.

The exercises of notebooks 04-11 are the parts of one decoder (:data:`PARTS`). When a part's
checker passes, it calls :func:`save_part`, which keeps the learner's source in
``my_model/<name>.py`` beside the notebook (the folder named by the environment variable
``COURSE_MY_MODEL``, if set). :func:`my_model` assembles every part in one file,
``my_model/my_model.py`` (imports, then the parts in the order of the course), imports it and
returns it; a part the learner has not written yet is taken from the course's solution
(:mod:`course_utils.exercises.solution_model`), with one line saying so. The assembled model
is then checked against the course's solution with the same weights; a part that makes it
differ is named and replaced by the solution, so notebook 12 always trains a working model.

In Colab every notebook runs on its own machine, so parts saved in one notebook are not there
in the next unless ``COURSE_MY_MODEL`` names a folder on a mounted Google Drive.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import linecache
import os
import sys
import tempfile
import textwrap
import types
from pathlib import Path

import torch

import course_utils.exercises.solution_model as solution_model

#: The learner's parts in the order the decoder file defines them, and the notebook of each.
PARTS = {
    "split_heads": "04",
    "attention": "07",
    "merge_heads": "08",
    "MultiHeadAttention": "08",
    "LayerNorm": "09",
    "FeedForward": "10",
    "Block": "11",
    "Decoder": "11",
}
FOLDER_ENV = "COURSE_MY_MODEL"
HEADER = '''"""My decoder-only Transformer: the parts of notebooks 04-11 in one file, each marked as
mine or as the course's solution (for a part I skipped)."""

import math

import torch
import torch.nn.functional as F
from torch import nn
'''


def parts_folder() -> Path:
    """Where the learner's parts are kept: ``$COURSE_MY_MODEL``, else ``./my_model``."""
    return Path(os.environ.get(FOLDER_ENV) or "my_model")


def save_part(answer: object) -> Path | None:
    """Keep the source of a part that passed its checker, for :func:`my_model`.

    Called by the checkers, not by notebooks. Never raises: a part whose source cannot be
    read (typed at an interactive prompt, say) is reported in one line and not saved. The
    course's own solution is never saved: *Run All* runs the solution cells too, and they must
    not overwrite the learner's part (a part never written is the solution anyway).

    Returns:
        The file written, or None when ``answer`` is not one of :data:`PARTS`, has no source,
        or is the course's solution.
    """
    name = getattr(answer, "__name__", None)
    if name not in PARTS:
        return None
    try:
        source = source_of(answer)
        if source.strip() == solution_source(name).strip():
            return None  # a solution cell (Run All runs them too): keep the learner's own part
        folder = parts_folder()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.py"
        scratch = path.with_suffix(f".{os.getpid()}.tmp")
        scratch.write_text(source, encoding="utf-8")
        scratch.replace(path)  # atomic: a notebook reading the part never sees half of it
    except (OSError, TypeError, ValueError) as error:
        print(f"(your {name} passed, but could not be saved for notebook 11: {error})")
        return None
    return path


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


def solution_source(name: str) -> str:
    """The course's solution of part ``name`` (its def or class, as in the solution file)."""
    return source_of(getattr(solution_model, name))


def _choose_sources(verbose: bool) -> dict[str, str]:
    """Each part's source: the learner's saved one, or the course's solution (said in a line)."""
    sources = {}
    for name, notebook in PARTS.items():
        sources[name] = _saved(name) or solution_source(name)
        if verbose:
            print(f"{name:<19} notebook {notebook}: {_whose(name)}")
    return sources


def _whose(name: str) -> str:
    """ "yours" when the learner saved a part of their own, else "the course's solution"."""
    saved = _saved(name)
    mine = saved is not None and not _is_solution(name, saved)
    return "yours" if mine else "the course's solution"


def _is_solution(name: str, source: str) -> bool:
    return source.strip() == solution_source(name).strip()


def assemble(sources: dict[str, str]) -> str:
    """One file: the header's imports, then every part's source in :data:`PARTS` order."""
    return _assemble(sources, list(PARTS))


def _assemble(sources: dict[str, str], names: list[str]) -> str:
    blocks = []
    for name in names:
        whose = "the course's solution" if _is_solution(name, sources[name]) else "mine"
        blocks.append(f"\n\n# notebook {PARTS[name]}: {whose}\n{sources[name].strip()}\n")
    return HEADER + "".join(blocks)


def _saved(name: str) -> str | None:
    """The learner's saved source of part ``name``, or None."""
    path = parts_folder() / f"{name}.py"
    return path.read_text(encoding="utf-8") if path.is_file() else None


def _load(text: str, path: Path) -> types.ModuleType:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("my_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["my_model"] = module
    return module


def my_model(verbose: bool = True) -> types.ModuleType:
    """The learner's decoder: every part in one file, imported; ``m.Decoder(...)`` builds it.

    Prints one line per part: yours, or the course's solution. The assembled model is run
    against the course's solution with the same weights on a small input; a part that makes
    it fail or differ is named, replaced by the solution, and the file written again.

    Returns:
        The module ``my_model`` (file ``<parts folder>/my_model.py``), with ``split_heads``,
        ``attention``, ``merge_heads``, ``MultiHeadAttention``, ``LayerNorm``, ``FeedForward``,
        ``Block`` and ``Decoder``.
    """
    sources = _choose_sources(verbose)
    path = parts_folder() / "my_model.py"
    for _ in PARTS:  # at most one replacement per part
        problem = _differs(_try_load(assemble(sources), path))
        if problem is None:
            break
        culprit = _first_faulty_part(sources)
        print(f"{culprit}: yours {problem} once assembled; using the course's solution instead")
        sources[culprit] = solution_source(culprit)
    return _load(assemble(sources), path)


def my_parts(*names: str) -> object:
    """Some of the learner's parts (e.g. ``split_heads, attention = my_parts("split_heads",
    "attention")``): each the learner's saved one, or the course's solution, said in a line.

    Only the parts up to the last one asked for are loaded (a later part that does not load
    yet does not matter); if they fail to load, the course's solutions are used, said in a line.

    Raises:
        ValueError: a name that is not one of :data:`PARTS` (the message lists them).
    """
    _check_part_names(names)
    last = max(list(PARTS).index(n) for n in names)
    wanted = list(PARTS)[: last + 1]
    sources = {n: _saved(n) or solution_source(n) for n in wanted}
    with tempfile.TemporaryDirectory() as scratch:
        module = _try_load(_assemble(sources, wanted), Path(scratch) / "my_parts.py")
        if isinstance(module, str):
            print(f"your parts {module}; using the course's solutions instead")
            module = _load(
                _assemble({n: solution_source(n) for n in wanted}, wanted),
                Path(scratch) / "my_parts.py",
            )
    for name in names:
        print(f"{name} (notebook {PARTS[name]}): {_whose(name)}")
    found = tuple(getattr(module, n) for n in names)
    return found[0] if len(found) == 1 else found


def _check_part_names(names: tuple) -> None:
    unknown = [n for n in names if n not in PARTS]
    if not names or unknown:
        raise ValueError(
            f"my_parts needs part names from {list(PARTS)}, got {list(names)}; "
            'e.g. my_parts("split_heads", "attention")'
        )


def _try_load(text: str, path: Path) -> types.ModuleType | str:
    try:
        return _load(text, path)
    except Exception as error:  # the learner's code may fail in any way
        return f"fails to load ({type(error).__name__}: {error})"


def _differs(module: types.ModuleType | str) -> str | None:
    """Why the assembled decoder is not the solution's function (None when it is)."""
    if isinstance(module, str):
        return module
    try:
        torch.manual_seed(0)
        sizes = dict(vocab_size=11, block_size=8, d_model=24, n_heads=3, n_layers=2, d_ff=96)
        reference = solution_model.Decoder(**sizes)
        mine = module.Decoder(**sizes)
        mine.load_state_dict(reference.state_dict())
        ids = torch.randint(0, 11, (2, 7))
        with torch.no_grad():
            logits, loss = mine(ids, ids)
            expected, expected_loss = reference(ids, ids)
        if not torch.allclose(logits, expected, atol=1e-5):
            return "gives other logits"
        if not torch.allclose(loss, expected_loss, atol=1e-5):
            return "gives another loss"
    except Exception as error:  # the learner's code may fail in any way
        return f"fails ({type(error).__name__}: {error})"
    return None


def _first_faulty_part(sources: dict[str, str]) -> str:
    """The first part which, alone among the solutions, makes the decoder fail or differ."""
    for name in PARTS:
        trial = {n: solution_source(n) for n in PARTS} | {name: sources[name]}
        with tempfile.TemporaryDirectory() as scratch:
            result = _differs(_try_load(assemble(trial), Path(scratch) / "my_model.py"))
        if result is not None:
            return name
    return "Decoder"
