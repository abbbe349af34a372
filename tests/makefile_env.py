"""The environment for a test's own ``make`` call: the Makefile's defaults, whatever the outer
``make`` was given.

``make test TORCH=system`` puts ``TORCH=system`` into the environment of its recipes (and into
``MAKEFLAGS``), so a test that runs ``make -n setup`` to check the default would otherwise see
the instructor's choice instead of the default.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The variables of the course's Makefile that a user may set on the command line: every
# `NAME ?= default` in it (VENV, PYTHON, TORCH, PORT, ARGS, WORK, TESTS, NBVAL, JOBS, CONFIG,
# NPROC, SAMPLE, SEED, MODULES...), read from the Makefile so a new one is never forgotten.
MAKEFILE_VARIABLES = tuple(
    re.findall(
        r"^([A-Z][A-Z0-9_]*) \?=",
        (ROOT / "Makefile").read_text(),
        re.M,
    )
)
MAKE_STATE = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")


def clean_make_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """``os.environ`` without the outer make's state and Makefile variables, plus ``extra``."""
    dropped = set(MAKEFILE_VARIABLES) | set(MAKE_STATE)
    return {**{k: v for k, v in os.environ.items() if k not in dropped}, **(extra or {})}


def run_make(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: int = 300
) -> subprocess.CompletedProcess:
    """``make --no-print-directory ARGS`` in ``cwd`` (the repository by default) with
    :func:`clean_make_env`, output captured as text."""
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=cwd or ROOT,
        env=clean_make_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def venv_as_is(venv: Path = ROOT / ".venv") -> list[str]:
    """``make`` arguments that use ``venv`` as it is: its setup counts as done (``-o`` on every
    stamp), and a venv made by ``make setup TORCH=system`` is called so (the Makefile's default,
    TORCH=pinned, would rebuild it: a test must never delete the .venv it runs in)."""
    config = (venv / "pyvenv.cfg").read_text() if (venv / "pyvenv.cfg").is_file() else ""
    system = "include-system-site-packages = true" in config
    names = {".installed", ".installed-torch-system", *(p.name for p in venv.glob(".installed*"))}
    stamps = [venv / name for name in sorted(names)]
    return [
        *(a for stamp in stamps for a in ("-o", str(stamp))),
        *(["TORCH=system"] if system else []),
    ]
