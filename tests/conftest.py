"""Shared test setup: no network, one CPU thread, the Shakespeare corpus read once per session."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Offline guarantee: every test runs with outbound connections blocked (loopback stays open,
# Jupyter kernels need it). Python processes started by the tests (kernels, subprocesses)
# get the same guard through sitecustomize.py on PYTHONPATH.
OFFLINE_DIR = Path(__file__).resolve().parent / "offline"
sys.path.insert(0, str(OFFLINE_DIR))
import network_guard  # noqa: E402

network_guard.install()
if str(OFFLINE_DIR) not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(OFFLINE_DIR), os.environ.get("PYTHONPATH")) if p
    )


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    """The tiny models in these tests are far too small to gain from intra-op threads; on a
    busy 2-core machine thread hand-offs make every LayerNorm or softmax hundreds of times
    slower. (A fixture, not an import-time call: pytest-xdist's controller, which runs no
    test, then starts its workers without first importing torch.)"""
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def shakespeare_text() -> str:
    """The full corpus (about 5 M characters), read from disk once."""
    from course_utils.data import load_shakespeare

    return load_shakespeare()
