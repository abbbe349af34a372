"""The core path (issue 41): each notebook 00-12 runs without its deeper part, and the core of
00-12 reads in the time the course promises.

A notebook's deeper part is every cell from the markdown heading ``## Going deeper`` to the end
(scripts/reading_time.py). The learner who reads only the cores must never meet a name that a
deeper cell defines: each notebook is executed here with its deeper part removed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from notebook_runner import execute_or_fail  # noqa: E402
from script_loader import load_script  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
reading_time = load_script("scripts/reading_time.py", "reading_time_core_path", register=True)
CORE_NOTEBOOKS = [p for p in reading_time.course_notebooks() if p.name[:2] <= "12"]
CORE_PATH_MINUTES = 180  # issue 41: the core path 00-12 reads in at most three hours


def core_only(path: Path) -> nbformat.NotebookNode:
    """The notebook without its deeper part (outputs cleared)."""
    notebook = nbformat.read(path, as_version=4)
    cells = [nbformat.from_dict(c) for c in notebook.cells]
    notebook.cells = cells[: reading_time.deeper_start(cells)]
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return notebook


def test_every_lesson_up_to_12_has_a_deeper_part_after_its_core():
    for path in CORE_NOTEBOOKS:
        core, deeper = reading_time.core_and_deeper(path)
        assert deeper != reading_time.NOTHING or path.name.startswith("00"), (
            f"{path.name}: no '## Going deeper' heading; the proofs go under it"
        )
        assert core.minutes > 0


def test_the_core_path_reads_within_its_promise():
    minutes = sum(reading_time.core_and_deeper(p)[0].minutes for p in CORE_NOTEBOOKS)
    assert minutes <= CORE_PATH_MINUTES, f"the cores of 00-12 read in {minutes:.0f} min"


def test_core_only_drops_the_deeper_cells_and_keeps_the_rest(tmp_path):
    path = tmp_path / "05_x.ipynb"
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# 05"),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_markdown_cell("## Going deeper (optional)\n\nmore"),
        nbformat.v4.new_code_cell("y = x + 1"),
    ])  # fmt: skip
    nbformat.write(notebook, path)
    assert [c.source for c in core_only(path).cells] == ["# 05", "x = 1"]


@pytest.mark.tooling
@pytest.mark.parametrize("path", CORE_NOTEBOOKS, ids=lambda p: p.name[:2])
def test_each_core_runs_without_its_deeper_part(path, tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_MY_MODEL", str(tmp_path / "my_model"))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("COURSE_CHECK_LADDER", raising=False)
    monkeypatch.delenv("COURSE_WRITE_LADDER", raising=False)
    execute_or_fail(core_only(path), tmp_path, f"{path.name} without its deeper part", 600)
