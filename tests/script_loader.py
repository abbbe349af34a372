"""Load one of the repository's scripts (``scripts/``, ``benchmarks/``) as a module, by path:
they are not a package, and the tests call their functions directly."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(path: str | Path, name: str | None = None, register: bool = False) -> ModuleType:
    """The module of ``path`` (relative to the repository root, or absolute), named ``name``
    (default: the file's stem). ``register`` puts it in ``sys.modules`` first, which
    dataclasses defined in the script need; the caller removes it when done."""
    path = ROOT / path
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
