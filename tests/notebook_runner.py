"""Run a notebook in a fresh kernel for a test; a failing cell fails the test in one line."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def execute_or_fail(notebook: nbformat.NotebookNode, workdir: Path, label: str,
                    timeout: int = 300) -> nbformat.NotebookNode:  # fmt: skip
    """Execute ``notebook`` in place (kernel ``python3``, working folder ``workdir``); on an
    error, fail the test with ``label``, the failing cell's index and the error's last line."""
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(workdir)}})  # fmt: skip
    try:
        client.execute()
    except CellExecutionError as error:
        failed = next(
            (i for i, c in enumerate(notebook.cells)
             if any(o.get("output_type") == "error" for o in c.get("outputs", []))),
            "?",
        )  # fmt: skip
        said = re.sub(r"\x1b\[[0-9;]*m", "", str(error).strip().splitlines()[-1])[:300]
        pytest.fail(f"{label}: cell {failed} failed: {said}")
    return notebook
