"""Deterministic notebooks: executed twice, the text outputs nbval compares are byte-identical.

`make determinism` runs the same check on every notebook; here the two fastest ones run, each
twice in fresh kernels (about 15 s). The comparison itself is tested on made-up notebooks.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
FASTEST = ["00_overview.ipynb", "04_qkv_and_heads.ipynb"]


def _load_script():
    path = ROOT / "scripts" / "check_determinism.py"
    spec = importlib.util.spec_from_file_location("check_determinism", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


determinism = _load_script()


@pytest.fixture
def inline_backend(monkeypatch):
    # What `make course` and `make test` give the kernels (the offline guard comes from conftest).
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")


@pytest.mark.parametrize("name", FASTEST)
def test_two_runs_give_identical_text_outputs(name, inline_backend):
    assert determinism.check(ROOT / "notebooks" / name, runs=2) == []


def _notebook(*cells: tuple[str, list]) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    for index, (source, outputs) in enumerate(cells):
        cell = nbformat.v4.new_code_cell(source, id=f"c{index}")
        cell.outputs = [nbformat.from_dict(o) for o in outputs]
        notebook.cells.append(cell)
    return notebook


def _stream(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text}


def test_comparison_finds_a_changed_number():
    patterns = determinism.sanitize_patterns()
    first = _notebook(("print(x)", [_stream("loss 2.3026\n")]))
    second = _notebook(("print(x)", [_stream("loss 2.3027\n")]))
    found = determinism.differences(
        determinism.compared_outputs(first, patterns),
        determinism.compared_outputs(second, patterns),
    )
    assert found == ["c0: 'stream:stdout: loss 2.3026' != 'stream:stdout: loss 2.3027'"]


def test_comparison_sanitises_and_skips_what_nbval_skips():
    patterns = determinism.sanitize_patterns()
    png = {"output_type": "display_data", "metadata": {}, "data": {"image/png": "AAAA"}}
    result = {
        "output_type": "execute_result",
        "execution_count": 1,
        "metadata": {},
        "data": {"text/plain": "<Figure at 0x7f00deadbeef>"},
    }
    first = _notebook(
        ("x", [result, png]),
        ("# NBVAL_IGNORE_OUTPUT\n# Why: timing.\nprint(t)", [_stream("1.2 s\n")]),
        ("print('a'); print('b')", [_stream("a\n"), _stream("b\n")]),
    )
    second = _notebook(
        ("x", [{**result, "data": {"text/plain": "<Figure at 0x7f11cafef00d>"}}, png]),
        ("# NBVAL_IGNORE_OUTPUT\n# Why: timing.\nprint(t)", [_stream("9.9 s\n")]),
        ("print('a'); print('b')", [_stream("a\nb\n")]),  # streams are merged, as nbval does
    )
    second.cells[0].outputs[1]["data"]["image/png"] = "BBBB"  # images are not compared
    a = determinism.compared_outputs(first, patterns)
    b = determinism.compared_outputs(second, patterns)
    assert "c1" not in a, "an ignored cell is not compared"
    assert determinism.differences(a, b) == []
