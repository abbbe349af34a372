"""Every exercise's solution is collapsed the same way in every notebook (issue 23).

A solution is a code cell whose source starts with ``# Solution``; its source is hidden in
JupyterLab (``metadata.jupyter.source_hidden``) and in Colab (``cellView: form``, as the setup
cell's), so a student sees the exercise first and opens the solution with one click.
``scripts/sync_notebook_headers.py`` (run by ``make headers`` and ``make course``) sets both;
the script is tested here on copies.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from script_loader import load_script

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SCRIPT = ROOT / "scripts" / "sync_notebook_headers.py"


sync = load_script(SCRIPT, "sync_notebook_headers_solutions")


def _solutions(cells: list[dict]) -> list[tuple[int, dict]]:
    return [
        (i, c)
        for i, c in enumerate(cells)
        if c["cell_type"] == "code" and re.match(r"\s*# Solution\b", "".join(c["source"]))
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_solution_cell_is_collapsed(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    shown = [
        i
        for i, cell in _solutions(cells)
        if not (
            cell["metadata"].get("jupyter", {}).get("source_hidden") is True
            and cell["metadata"].get("cellView") == "form"
        )
    ]
    assert not shown, (
        f"{path.name}: the solution cells {shown} show their source in full under the "
        "exercise; run `make headers` (scripts/sync_notebook_headers.py collapses them)"
    )


def test_the_course_has_solutions_to_collapse():
    """The rule above must not pass by finding nothing: exercises live in 01-15 (not in 00,
    the overview, nor in the appendix)."""
    counts = {
        p.name[:2]: len(_solutions(json.loads(p.read_text())["cells"]))
        for p in NOTEBOOKS
        if "appendix" not in p.name
    }
    assert all(counts[n] >= 2 for n in counts if n != "00"), counts


def _copy(tmp_path: Path, name_prefix: str) -> Path:
    (source,) = [p for p in NOTEBOOKS if p.name.startswith(name_prefix)]
    return Path(shutil.copy(source, tmp_path / source.name))


def _shown_open_solution(path: Path) -> Path:
    """Open every solution of a notebook copy, as notebooks 12 and 14 were."""
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if sync.is_solution_cell(cell):
            cell.metadata.pop("jupyter", None)
            cell.metadata.pop("cellView", None)
            cell.metadata["tags"] = ["kept"]  # other metadata must survive
    nbformat.write(notebook, path)
    return path


def test_the_script_collapses_solutions_and_changes_nothing_else(tmp_path):
    path = _shown_open_solution(_copy(tmp_path, "13"))
    before = nbformat.read(path, as_version=4)
    assert sync.sync_notebook(path, write=False) is True, "--check reports the open solutions"
    assert nbformat.read(path, as_version=4) == before, "--check writes nothing"
    assert sync.sync_notebook(path) is True
    after = nbformat.read(path, as_version=4)
    assert len(after.cells) == len(before.cells)
    solutions = 0
    for old, new in zip(before.cells, after.cells):
        same = (new.cell_type, new.source, new.get("id"))
        assert same == (old.cell_type, old.source, old.get("id"))
        if old.cell_type == "code":
            assert new.outputs == old.outputs and new.execution_count == old.execution_count
        if sync.is_solution_cell(old):
            solutions += 1
            assert new.metadata == {
                "tags": ["kept"], "jupyter": {"source_hidden": True}, "cellView": "form"
            }  # fmt: skip
        else:
            assert new.metadata == old.metadata
    assert solutions >= 2
    assert sync.sync_notebook(path) is False, "a second run changes nothing"
    assert sync.sync_notebook(path, write=False) is False, "and --check finds nothing to do"


def test_only_cells_that_start_with_the_solution_line_are_collapsed(tmp_path):
    path = tmp_path / "99_probe.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("# 99 · Probe\n\nLearning goal: none."),
        nbformat.v4.new_markdown_cell("# Solution\n\n(markdown, not code: left alone)"),
        nbformat.v4.new_code_cell("x = 1  # Solution later in the line: not one"),
        nbformat.v4.new_code_cell("\n# Solution\nanswer = 42"),
        nbformat.v4.new_code_cell("# Solutions are not this cell"),
    ]
    nbformat.write(notebook, path)
    sync.sync_notebook(path)
    cells = nbformat.read(path, as_version=4).cells
    hidden = {
        "".join(c.source).splitlines()[0] or "".join(c.source).splitlines()[1]
        for c in cells
        if c.metadata.get("jupyter", {}).get("source_hidden")
    }
    # the setup cell of the header (hidden by design) and the one real solution
    assert hidden == {"# Solution", sync.bootstrap_cell_source().splitlines()[0]}, hidden
