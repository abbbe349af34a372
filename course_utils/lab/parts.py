"""The learner's decoder, part by part: saved when an exercise passes, assembled in one file.

The exercises of notebooks 03-11 are the parts of one decoder (:data:`PARTS`). A part's
checker calls :func:`keep` with its verdict: a pass saves the learner's source, with the
helpers it reads from other cells (:func:`course_utils.exercises.sources.with_helpers`), in
``my_model/<name>.py`` (the folder named by the environment variable ``COURSE_MY_MODEL``, if
set) and the checker's line says where; a part needing a global that cannot be saved fails at
once, with its name; a failure marks the part (``<name>.failed``), so that :func:`my_parts`
and :func:`my_model` no longer call the saved copy "yours", and the line says which version
they use meanwhile (the last that passed, or the course's). :func:`my_model` assembles every
part in one file, ``my_model/my_model.py`` (imports, then the parts in the order of the
course), a part the learner has not written yet taken from the course's solution
(:mod:`course_utils.exercises.solution_model`); it then judges each of the learner's parts
inside that file with its own checker, and the decoder with notebook 11's
(:mod:`course_utils.exercises.assembly`), and replaces a part that fails by the solution,
naming what was found, so notebook 12 always trains a working model.

In Colab every notebook runs on its own machine: the first time a notebook needs the parts
folder, :func:`parts_on_drive_in_colab` puts it on the learner's Google Drive (Colab asks them
to allow it), so the next notebook finds their parts; :func:`keep_parts_on_drive` does it at
once.
"""

from __future__ import annotations

import importlib.util
import linecache
import sys
import tempfile
import types
from pathlib import Path

from course_utils.exercises.assembly import judged
from course_utils.exercises.keeping import (  # noqa: F401 (this module's API, kept here too)
    FOLDER_ENV,
    PARTS,
    _failed_path,
    _is_solution,
    _mine,
    _saved,
    keep,
    parts_folder,
    save_part,
    solution_source,
)
from course_utils.lab.drive import (  # noqa: F401 (notebook 00 and the README name them here)
    DRIVE_FOLDER,
    keep_parts_on_drive,
    parts_on_drive_in_colab,
)
from course_utils.lab.language import tr

HEADER = '''"""My decoder-only Transformer: the parts of notebooks 03-11 in one file, each marked as
mine or as the course's solution (for a part I skipped)."""

import math

import torch
import torch.nn.functional as F
from torch import nn
'''


def _choose_sources(verbose: bool) -> dict[str, str]:
    """Each part's source: the learner's saved one, or the course's solution (said in a line)."""
    sources = {}
    for name, notebook in PARTS.items():
        sources[name] = _saved(name) or solution_source(name)
        if verbose:
            print(
                tr("{name:<19} notebook {notebook}: {whose}").format(
                    name=name, notebook=notebook, whose=_whose(name)
                )
            )
    return sources


def _whose(name: str) -> str:
    """Which version of part ``name`` the model uses, in the learner's words."""
    failing = _failed_path(name).is_file()
    if _mine(name):
        if failing:
            return tr("your last version that passed (the one in your notebook fails its check)")
        return tr("yours")
    if failing:
        return tr("the course's solution (yours does not pass its check yet)")
    return tr("the course's solution")


def assemble(sources: dict[str, str]) -> str:
    """One file: the header's imports, then every part's source in :data:`PARTS` order."""
    return _assemble(sources, list(PARTS))


def _assemble(sources: dict[str, str], names: list[str]) -> str:
    blocks = []
    for name in names:
        whose = "the course's solution" if _is_solution(name, sources[name]) else "mine"
        blocks.append(f"\n\n# notebook {PARTS[name]}: {whose}\n{sources[name].strip()}\n")
    return HEADER + "".join(blocks)


def _load(text: str, path: Path, module_name: str = "my_model") -> types.ModuleType:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    # its lines stay readable after a scratch file is gone (a checker quotes the learner's line)
    linecache.cache[str(path)] = (len(text), None, text.splitlines(True), str(path))
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if module_name == "my_model":
        sys.modules["my_model"] = module
    return module


def my_model(verbose: bool = True) -> types.ModuleType:
    """The learner's decoder: every part in one file, imported; ``m.Decoder(...)`` builds it.

    Prints one line per part: yours, your last version that passed, or the course's solution.
    Then each of the learner's parts is judged inside the assembled file by its own checker
    (the same cases, tolerance and accepted forms), and the decoder by notebook 11's checker
    (logits, loss, gradients of every parameter, train mode, the device); a part that fails
    is replaced by the course's solution, with one line naming what was found.

    Returns:
        The module ``my_model`` (file ``<parts folder>/my_model.py``), with ``split_heads``,
        ``attention``, ``merge_heads``, ``MultiHeadAttention``, ``LayerNorm``, ``FeedForward``,
        ``Block`` and ``Decoder``.
    """
    sources = _choose_sources(verbose)
    path = parts_folder() / "my_model.py"
    sources = judged(sources, {n: solution_source(n) for n in PARTS}, _trial_load)
    return _load(assemble(sources), path)


def _trial_load(sources: dict[str, str]) -> types.ModuleType | str:
    """The assembled file of ``sources``, loaded from a scratch folder, or why it fails."""
    with tempfile.TemporaryDirectory() as scratch:
        return _try_load(assemble(sources), Path(scratch) / "my_model_trial.py", "my_model_trial")


def my_parts(*names: str) -> object:
    """Some of the learner's parts (e.g. ``split_heads, attention = my_parts("split_heads",
    "attention")``): each the learner's saved one, or the course's solution, said in a line
    (and whether the version in the notebook now fails its check).

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
            print(
                tr("your parts {problem}; using the course's solutions instead").format(
                    problem=module
                )
            )
            module = _load(
                _assemble({n: solution_source(n) for n in wanted}, wanted),
                Path(scratch) / "my_parts.py",
            )
    for name in names:
        print(
            tr("{name} (notebook {notebook}): {whose}").format(
                name=name, notebook=PARTS[name], whose=_whose(name)
            )
        )
    found = tuple(getattr(module, n) for n in names)
    return found[0] if len(found) == 1 else found


def _check_part_names(names: tuple) -> None:
    unknown = [n for n in names if n not in PARTS]
    if not names or unknown:
        raise ValueError(
            f"my_parts needs part names from {list(PARTS)}, got {list(names)}; "
            'e.g. my_parts("split_heads", "attention")'
        )


def _try_load(text: str, path: Path, module_name: str = "my_model") -> types.ModuleType | str:
    try:
        return _load(text, path, module_name)
    except Exception as error:  # the learner's code may fail in any way
        return tr("fails to load ({kind}: {error})").format(kind=type(error).__name__, error=error)
