"""Import third-party libraries without their known, harmless warnings reaching the student.

A warning printed by a library the course merely imports says nothing about the course, yet
it lands in the notebook's output (and strict nbval then fails, because the committed copy,
made with another version, has no such line). Each filter here is narrow: one library, one
import, one known message; every other warning still shows.

Known cases:

* jieba 0.42.1 imports ``pkg_resources`` (``jieba/_compat.py``). setuptools 80.9 to 81.x still
  ships ``pkg_resources`` but warns on import: ``UserWarning: pkg_resources is deprecated as
  an API ...`` (newer setuptools has no ``pkg_resources``; jieba then falls back to plain
  files; older ones import it silently).
* jieba's source has regular expressions with invalid escape sequences; Python 3.12+ reports
  them as ``SyntaxWarning: invalid escape sequence`` when it compiles jieba without a cached
  ``.pyc`` (e.g. a read-only site-packages).
"""

from __future__ import annotations

import importlib
import sys
import warnings
from types import ModuleType

# (category, message regex) pairs, each matched from the start of the warning's text.
JIEBA_WARNINGS = (
    (UserWarning, r"pkg_resources is deprecated as an API"),
    (SyntaxWarning, r"invalid escape sequence"),
    (DeprecationWarning, r"invalid escape sequence"),  # what Python 3.11 calls it (hidden)
)


def import_quietly(name: str, known: tuple[tuple[type[Warning], str], ...]) -> ModuleType:
    """``importlib.import_module(name)`` with the ``known`` warnings ignored during the import.

    Args:
        name: the module to import, e.g. ``"jieba"``.
        known: ``(category, message regex)`` pairs to ignore; any other warning passes.

    Returns:
        the module (from ``sys.modules`` when it is already imported).

    Raises:
        ModuleNotFoundError: the library is not installed (run ``make setup``).
    """
    if name in sys.modules:
        return sys.modules[name]
    with warnings.catch_warnings():
        for category, message in known:
            warnings.filterwarnings("ignore", message=message, category=category)
        return importlib.import_module(name)


def import_jieba() -> ModuleType:
    """The ``jieba`` module, imported without the warnings listed in :data:`JIEBA_WARNINGS`.

    Raises:
        ModuleNotFoundError: jieba is not installed; ``make setup`` (or, in Colab, the
            notebook's setup cell) installs it.
    """
    return import_quietly("jieba", JIEBA_WARNINGS)
