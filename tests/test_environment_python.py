"""`make setup PYTHON=...` with an interpreter that is not there says so in one line, with how to
name one (issue 23); before, it blamed a missing venv module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from makefile_env import run_make

pytestmark = pytest.mark.tooling  # make test-tooling (CI), not make test

ROOT = Path(__file__).resolve().parents[1]


def _make_venv(tmp_path: Path, python: str, path: str | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": path} if path is not None else None
    return run_make("venv", f"VENV={tmp_path / 'v'}", f"PYTHON={python}", env=env)


def _pyenv_shim(folder: Path) -> Path:
    """What pyenv's shim does for a version that is not installed: a message, exit 127."""
    folder.mkdir()
    shim = folder / "python3.12"
    shim.write_text(
        "#!/bin/sh\n"
        'echo "pyenv: python3.12: command not found" >&2\n'
        "echo \"The 'python3.12' command exists in these Python versions: 3.12.4\" >&2\n"
        "exit 127\n"
    )
    shim.chmod(0o755)
    return shim


@pytest.mark.parametrize("kind", ["absent", "pyenv shim", "absent path"])
def test_an_interpreter_that_is_not_there_is_named_with_the_fix(tmp_path, kind):
    import os

    path = None
    if kind == "absent":
        python = "python3.12-not-installed-anywhere"
    elif kind == "absent path":
        python = str(tmp_path / "no" / "python3.12")
    else:
        shims = tmp_path / "shims"
        _pyenv_shim(shims)
        python, path = "python3.12", f"{shims}:{os.environ['PATH']}"
    result = _make_venv(tmp_path, python, path)
    assert result.returncode != 0
    (line,) = result.stdout.strip().splitlines()
    assert f"PYTHON={python} was not found" in line
    assert "make setup PYTHON=/path/to/python3.12" in line
    assert "venv module" not in line and "python3-venv" not in line  # not the old wrong blame
    assert not (tmp_path / "v").exists()


def test_a_working_interpreter_still_makes_the_venv(tmp_path):
    """The check lets a real Python through (PYTHON given by its path, as the message says)."""
    result = _make_venv(tmp_path, sys.executable)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "was not found" not in result.stdout
    assert (tmp_path / "v" / "bin" / "python").exists()
