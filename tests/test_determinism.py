"""Deterministic notebooks: executed twice, the text outputs nbval compares are byte-identical.

`make determinism` runs the check on every notebook (and strict nbval compares every notebook's
run with its committed copy). Here the script runs end to end on two small notebooks written
for the test: a seeded one with torch and a figure, whose runs must agree, and one that prints
the clock, whose runs must not. The comparison itself is tested on made-up outputs below.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from script_loader import load_script

ROOT = Path(__file__).resolve().parents[1]


determinism = load_script("scripts/check_determinism.py")

SEEDED = [
    "import matplotlib.pyplot as plt\nimport torch\ntorch.manual_seed(0)\nx = torch.randn(3, 4)",
    "print(x.softmax(dim=-1))",
    "plt.imshow(x.numpy()); plt.title('seeded'); plt.show()",
]
CLOCK = ["import time\nprint(time.perf_counter_ns())"]


@pytest.fixture
def inline_backend(monkeypatch):
    # What `make course` and `make test` give the kernels (the offline guard comes from conftest).
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def _write(path: Path, sources: list[str]) -> Path:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(s, id=f"c{i}") for i, s in enumerate(sources)]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(notebook, path)
    return path


@pytest.mark.tooling  # make test-tooling (CI)
def test_the_script_passes_a_seeded_notebook_and_fails_one_that_prints_the_clock(
    tmp_path, inline_backend, capsys
):
    seeded = _write(tmp_path / "seeded.ipynb", SEEDED)
    clock = _write(tmp_path / "clock.ipynb", CLOCK)
    assert determinism.main([str(seeded), str(clock)]) == 1
    printed = capsys.readouterr().out
    assert f"{seeded}: identical text outputs in 2 runs" in printed
    assert f"{clock}: DIFFERENT text outputs in 2 runs" in printed
    assert "run 1 vs run 2: c0: 'stream:stdout:" in printed


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


def test_a_cell_tagged_nbval_ignore_output_is_left_out_as_nbval_does():
    """The notebooks mark varying outputs with the cell tag, not a comment."""
    patterns = determinism.sanitize_patterns()
    first = _notebook(("print(t)", [_stream("1.2 s\n")]))
    second = _notebook(("print(t)", [_stream("9.9 s\n")]))
    compared = [determinism.compared_outputs(n, patterns) for n in (first, second)]
    assert determinism.differences(*compared), "untagged, the changed time is a difference"
    for notebook in (first, second):
        notebook.cells[0].metadata["tags"] = ["nbval-ignore-output"]
    compared = [determinism.compared_outputs(n, patterns) for n in (first, second)]
    assert "c0" not in compared[0] and determinism.differences(*compared) == []
