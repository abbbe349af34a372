"""Writable per-user folders for caches (matplotlib, jieba, tiktoken), standard library only.

Split from :mod:`course_utils.lab.bootstrap` so that :mod:`course_utils.lab.viz` can point
matplotlib at a writable folder before importing it without importing the setup cell's module
(which imports viz): no import circle.
"""

from __future__ import annotations

import getpass
import os
import stat
import sys
import tempfile
from pathlib import Path

APP_NAME = "transformer-course"


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

    Raises:
        TypeError: ``name`` is not a str.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str (a sub-folder name), got {type(name).__name__}")
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
