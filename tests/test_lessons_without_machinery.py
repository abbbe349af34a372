"""Lesson notebooks (00-15) import few names from course_utils and hold none of the course's
machinery: records, rehearsal, benchmarks and timing conditions live in the appendix (16)."""

import ast
import json
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
LESSONS = sorted(p for p in NOTEBOOKS.glob("*.ipynb") if int(p.name[:2]) <= 15)
MAX_NAMES = 12
#: What only the appendix reads: the record and benchmark modules and the rehearsal's timing.
MACHINERY = (
    "course_utils.measure",
    "RECORD_MARGIN",
    "own_record",
    "explain_timing_gap",
    "load_average",
    "mfu",
)


def code_cells(path: Path) -> list[str]:
    """Every code cell's source, the setup cell's included: its import counts as a name too."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def course_names(path: Path) -> set[str]:
    names = set()
    for source in code_cells(path):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_utils"):
                names |= {alias.asname or alias.name for alias in node.names}
            if isinstance(node, ast.Import):
                names |= {
                    a.asname or a.name for a in node.names if a.name.startswith("course_utils")
                }
    return names


def test_the_counter_counts_names_the_setup_cell_included(tmp_path):
    setup = ["# @title Setup\n", "from course_utils.lab.bootstrap import setup"]
    lesson = ["from course_utils.a import b, c as d\nimport course_utils.x"]
    notebook = {"cells": [{"cell_type": "code", "source": s} for s in (setup, lesson)]}
    path = tmp_path / "00_x.ipynb"
    path.write_text(json.dumps(notebook))
    assert course_names(path) == {"setup", "b", "d", "course_utils.x"}


@pytest.mark.parametrize("path", LESSONS, ids=[p.name for p in LESSONS])
def test_a_lesson_imports_at_most_twelve_names(path):
    names = course_names(path)
    assert len(names) <= MAX_NAMES, f"{path.name} imports {len(names)}: {sorted(names)}"


@pytest.mark.parametrize("path", LESSONS, ids=[p.name for p in LESSONS])
def test_a_lesson_holds_no_machinery(path):
    found = [word for source in code_cells(path) for word in MACHINERY if word in source]
    assert not found, f"{path.name} uses the appendix's machinery: {sorted(set(found))}"
