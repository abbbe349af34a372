"""What the first cell of every notebook runs on your own machine: silent unless something is wrong.

The bootstrap cell (the same in every notebook, written by ``scripts/sync_notebook_headers.py``)
installs the course in Google Colab; anywhere else it calls :func:`local_setup`, which

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

import getpass
import importlib.util
import os
import stat
import sys
import tempfile
from pathlib import Path

APP_NAME = "transformer-course"
# Imported by the notebooks; find_spec only looks them up (nothing is imported).
REQUIRED_MODULES = ("torch", "numpy", "matplotlib", "tiktoken", "jieba", "tqdm")
FIX_HINT = (
    "Fix: from the repository root run `make lab` (it creates .venv, installs the course and "
    "opens JupyterLab with the right kernel), or choose the kernel of the project's .venv."
)


def _writable_dir(path: Path) -> bool:
    """True if ``path`` is (or can be made into) a directory this process can write to."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def _private_temp_dir() -> Path | None:
    """``<tempdir>/transformer-course-<user>``: created with mode 0700, or reused only if it
    is a real directory owned by this user that nobody else can write to. On a shared
    machine anyone can create a name in /tmp first; such a folder is refused."""
    user = str(os.getuid()) if hasattr(os, "getuid") else getpass.getuser()
    path = Path(tempfile.gettempdir()) / f"{APP_NAME}-{user}"
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        info = path.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode):
        return None  # a file or a symlink planted under our name
    if hasattr(os, "getuid") and (
        info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    ):
        return None
    return path if os.access(path, os.W_OK | os.X_OK) else None


def user_cache_dir(name: str = "") -> Path:
    """A writable cache folder for this user, created if needed.

    Tried in order: ``$XDG_CACHE_HOME/transformer-course``, ``~/.cache/transformer-course``,
    then a private ``<tempdir>/transformer-course-<user>`` (mode 0700; see
    :func:`_private_temp_dir`), finally a fresh ``tempfile.mkdtemp()``.

    Args:
        name: optional sub-folder, e.g. ``"matplotlib"``.

    Returns:
        The folder, which exists and is writable.
    """
    candidates = []
    if os.environ.get("XDG_CACHE_HOME"):
        candidates.append(Path(os.environ["XDG_CACHE_HOME"]) / APP_NAME)
    try:
        candidates.append(Path.home() / ".cache" / APP_NAME)
    except RuntimeError:  # no home directory at all
        pass
    for base in candidates:
        if _writable_dir(base / name if name else base):
            return base / name if name else base
    private = _private_temp_dir()
    if private is not None and _writable_dir(private / name if name else private):
        return private / name if name else private
    return Path(tempfile.mkdtemp(prefix=f"{APP_NAME}-"))


def _matplotlib_default_dirs() -> list[Path]:
    """The folders matplotlib would use, in its order (see ``matplotlib.get_configdir``)."""
    if os.environ.get("MPLCONFIGDIR"):
        return [Path(os.environ["MPLCONFIGDIR"])]
    try:
        home = Path.home()
    except RuntimeError:
        return []
    if sys.platform.startswith(("linux", "freebsd")):
        config = os.environ.get("XDG_CONFIG_HOME") or str(home / ".config")
        cache = os.environ.get("XDG_CACHE_HOME") or str(home / ".cache")
        return [Path(config) / "matplotlib", Path(cache) / "matplotlib"]
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA")
        return [Path(local) / "matplotlib" if local else home / ".matplotlib"]
    return [home / ".matplotlib"]


def configure_matplotlib_cache() -> Path | None:
    """Make sure matplotlib will find a writable config/cache folder; call before importing it.

    If the folder matplotlib would use is writable, nothing changes. Otherwise
    ``MPLCONFIGDIR`` is set to ``user_cache_dir("matplotlib")``, a persistent per-user
    folder, so the font cache is built once instead of in a new temporary folder with a
    warning in every process.

    Returns:
        The folder now set in ``MPLCONFIGDIR``, or None when nothing was changed (the default
        is writable, or matplotlib is already imported and has made its choice).
    """
    if "matplotlib" in sys.modules:
        return None
    defaults = _matplotlib_default_dirs()
    if defaults and all(_writable_dir(path) for path in defaults):
        return None
    target = user_cache_dir("matplotlib")
    os.environ["MPLCONFIGDIR"] = str(target)
    return target


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
            f"This kernel ({sys.executable}) cannot import {', '.join(missing)}, which the "
            "course needs."
        )
    root = find_project_root(start)
    if root is None:
        return problems
    package = Path(__file__).resolve().parent
    if package.parent != root:
        problems.append(
            f"course_utils is imported from {package}, not from this notebook's project "
            f"{root}; another copy of the course is installed in this environment."
        )
    venv = root / ".venv"
    if venv.is_dir() and Path(sys.prefix).resolve() != venv.resolve():
        problems.append(f"This kernel runs {sys.executable}, not the project's environment {venv}.")
    return problems


def local_setup(start: Path | None = None) -> list[str]:
    """The bootstrap cell's work outside Colab: configure matplotlib's cache, check the kernel.

    Prints nothing when all is well (so notebook outputs stay the same everywhere); otherwise
    prints each problem and how to fix it.

    Returns:
        The problems found (empty when all is well).
    """
    configure_matplotlib_cache()
    problems = kernel_problems(start)
    if problems:
        print("\n".join(["⚠ " + problem for problem in problems] + [FIX_HINT]))
    return problems
