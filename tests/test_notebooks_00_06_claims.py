"""Notebooks 00-06: the claims in their prose match their committed outputs, and no checker
cell echoes True/False (static checks of the committed files; nbval re-executes them)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parents[1] / "notebooks"
STAGES = sorted(FOLDER.glob("0[0-6]_*.ipynb"))


def _cells(name: str) -> list[dict]:
    return json.loads((FOLDER / name).read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _outputs(cell: dict) -> str:
    parts = []
    for output in cell.get("outputs", []):
        parts.append("".join(output.get("text", "")))
        parts.append("".join(output.get("data", {}).get("text/plain", "")))
    return "".join(parts)


def _cell_after(cells: list[dict], needle: str) -> dict:
    """The first code cell whose source contains ``needle``."""
    return next(c for c in cells if c["cell_type"] == "code" and needle in _source(c))


@pytest.mark.parametrize("path", STAGES, ids=lambda p: p.name)
def test_no_checker_cell_echoes_true_or_false(path):
    # nbval's kernel ignores a trailing ';', so a checker call must be assigned.
    for cell in _cells(path.name):
        if cell["cell_type"] != "code":
            continue
        last = _source(cell).rstrip().splitlines()[-1:] or [""]
        assert not re.match(r"check_\w+\(.*\);?$", last[0]), f"{path.name}: {last[0]}"
        for output in cell["outputs"]:
            shown = "".join(output.get("data", {}).get("text/plain", ""))
            assert shown not in ("True", "False"), f"{path.name}: a cell echoes {shown}"


def test_01_word_counts_leave_out_the_spaces():
    out = _outputs(_cell_after(_cells("01_tokenization.ipynb"), "parallel = ["))
    jieba_english = int(re.search(r"words \(jieba\)\s+(\d+)", out).group(1))
    split_at_spaces = int(re.search(r"split at spaces: (\d+)", out).group(1))
    # words plus punctuation marks, never the spaces between them
    assert split_at_spaces <= jieba_english < 1.5 * split_at_spaces


def test_03_the_channel_index_bug_alone_fails_the_check():
    out = _outputs(_cell_after(_cells("03_positional_encoding.ipynb"), "def pe_loop_channel_index"))
    differences = [float(d) for d in re.findall(r"by up to (\d+\.\d+)", out)]
    assert len(differences) == 2 and all(d > 1.5 for d in differences)


def test_06_mask_conventions_and_the_nan_query():
    cells = _cells("06_masking.ipynb")
    out = _outputs(_cell_after(cells, "torch_mha = nn.MultiheadAttention"))
    assert "with ~causal equal: True" in out and "(not negated) equal: False" in out
    assert "[nan, nan, nan, nan]" in out  # the prose: "its output is NaN"
    inverted = _outputs(_cell_after(cells, "inverted = torch.ones(T, T"))
    assert "ValueError raised, as expected" in inverted and "inverted" in inverted
