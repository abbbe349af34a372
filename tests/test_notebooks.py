"""Static checks of the committed notebooks (nbval executes them separately, in `make test`)."""

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
CJK = re.compile(r"[\u4e00-\u9fff]")


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _output_text(output: dict) -> str:
    parts = [output.get("text", "")]
    parts += [output.get("data", {}).get("text/plain", "")]
    return "".join("".join(p) if isinstance(p, list) else p for p in parts)


def test_the_foundation_notebooks_exist():
    names = {p.name for p in NOTEBOOKS}
    assert {"00_overview.ipynb", "12_training_tiny_decoder.ipynb"} <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_with_outputs_in_order_and_without_errors(path):
    code = [c for c in _cells(path) if c["cell_type"] == "code"]
    counts = [c["execution_count"] for c in code]
    assert counts == list(range(1, len(code) + 1)), (
        f"{path.name}: execution counts {counts}; run `make course` to execute top to bottom"
    )
    for cell in code:
        for output in cell["outputs"]:
            assert output["output_type"] != "error", f"{path.name}: committed error output"
            text = _output_text(output)
            assert not re.search(r"Glyph \d+ .*missing from", text), f"{path.name}: {text[:200]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_uses_course_utils_and_has_a_bilingual_glossary(path):
    cells = _cells(path)
    code = "\n".join(_source(c) for c in cells if c["cell_type"] == "code")
    assert "course_utils" in code
    glossary = [c for c in cells if c["cell_type"] == "markdown" and "Glossary" in _source(c)]
    assert glossary and CJK.search(_source(glossary[0])), f"{path.name}: no English/中文 glossary"


IGNORE_TAG = "nbval-ignore-output"  # nbval's cell tag: the output is not compared
REASON = "nbval_ignore_reason"  # beside the tag in the cell's metadata: why the output varies


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_ignored_output_is_a_tag_nbval_sees_with_its_reason_beside_it(path):
    """Outputs that honestly vary are left out of nbval's comparison by the cell tag, and the
    reason sits beside the tag in the cell's metadata: both are the course's machinery, so
    neither is in the code the learner reads (notebook 00 says once that timings and last
    digits may differ)."""
    for cell in _cells(path):
        lines = _source(cell).splitlines()
        metadata = cell.get("metadata", {})
        tagged = IGNORE_TAG in metadata.get("tags", [])
        reason = metadata.get(REASON, "")
        assert tagged == bool(reason), (
            f"{path.name}: a cell tagged {IGNORE_TAG!r} has metadata {REASON!r} (why its output "
            f"varies), and only such a cell: tagged {tagged}, reason {reason!r}, "
            f"first line {lines[:1]}"
        )
        assert not tagged or len(reason) > 20, f"{path.name}: say why in {REASON!r}: {reason!r}"
        assert not any(line.startswith("# Your output may differ") for line in lines), (
            f"{path.name}: {lines[0]!r}: the reason goes in the metadata {REASON!r}, not the code"
        )
        for line in lines:
            assert "NBVAL_IGNORE_OUTPUT" not in line, (
                f"{path.name}: `{line}`: tag the cell {IGNORE_TAG!r} instead of the comment"
            )
            assert "NBVAL_RAISES_EXCEPTION" not in line, (
                f"{path.name}: the raises marker passes even when nothing raises; "
                "assert the exception in the cell instead"
            )
