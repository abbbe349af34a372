"""The learner's path, checked against the notebooks themselves: notebook 00's map says what
each notebook has the learner write, notebook 12's first training loop stays short, and each
rung of the loss ladder trains the learner's saved parts, not the solution cells' definitions."""

import json
import re
from pathlib import Path

import pytest

from course_utils.lab.parts import PARTS

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def cells(number: str) -> list[dict]:
    (path,) = NOTEBOOKS.glob(f"{number}_*.ipynb")
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def exercises(number: str) -> list[str]:
    """The functions and classes the learner writes: the defs of the cells left to fill in."""
    found = []
    for cell in cells(number):
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and "your code here" in source:
            found += re.findall(r"^(?:def|class) (\w+)", source, re.M)
    return found


def map_rows() -> dict[str, str]:
    """Notebook number -> the map's "you write" column."""
    (text,) = [
        "".join(c["source"])
        for c in cells("00")
        if "## The map of the course" in "".join(c["source"])
    ]
    rows = {}
    for line in text.splitlines():
        columns = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(columns) == 4 and re.fullmatch(r"\d\d .+", columns[0]):
            rows[columns[0][:2]] = columns[2]
    return rows


LESSON_NUMBERS = sorted(p.name[:2] for p in NOTEBOOKS.glob("*.ipynb") if "01" <= p.name[:2] <= "15")


def test_the_map_has_a_row_for_every_lesson():
    assert sorted(map_rows()) == LESSON_NUMBERS


@pytest.mark.parametrize("number", LESSON_NUMBERS)
def test_the_map_names_what_each_notebook_has_you_write(number):
    written = map_rows()[number]
    assert bool(written) == bool(exercises(number)), (number, written, exercises(number))
    for part in (name for name, home in PARTS.items() if home == number):
        assert part in exercises(number), f"{part} is not an exercise of notebook {number}"
        assert f"`{part}`" in written, f"the map's row {number} does not name your `{part}`"


def test_the_checker_of_the_map_finds_a_missing_part():
    """Control: a row that forgot a part, or a notebook without exercises, is told apart."""
    assert "`merge_heads`" in map_rows()["08"] and "`MultiHeadAttention`" in map_rows()["08"]
    assert exercises("08") == ["merge_heads", "MultiHeadAttention"]
    assert exercises("00") == []


def test_notebook_12_s_first_loop_has_at_most_15_lines_of_code():
    marker = "for step in range(train_config.max_iters):"
    sources = ["".join(c["source"]) for c in cells("12") if c["cell_type"] == "code"]
    (loop,) = [source for source in sources if marker in source]
    code = [
        line for line in loop.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    assert len(code) <= 15, "\n".join(code)
    for step in ("learning_rate_at(", "get_batch(", "model(x, y)", "zero_grad", "backward()",
                 "clip_grad_norm_", "optimizer.step()"):  # fmt: skip
        assert step in loop, step


RUNG_NOTEBOOKS = ["07", "08", "09", "10", "11"]


def rung_cell(number: str) -> str:
    (source,) = [
        "".join(c["source"]) for c in cells(number)
        if c["cell_type"] == "code" and "show_ladder(" in "".join(c["source"])
    ]  # fmt: skip
    return source


def unloaded_parts(source: str) -> tuple[list[str], list[str]]:
    """The parts a rung cell calls, and those of them it does not load through my_parts."""
    code = re.sub(r"#.*", "", source)  # calls, not comments
    used = [name for name in PARTS if re.search(rf"(?<![.\w]){name}\(", code)]
    lines = re.findall(r"^([\w, ]+) = my_parts\(", source, re.M)
    loaded = {name.strip() for line in lines for name in line.split(",")}
    return used, sorted(set(used) - loaded)


@pytest.mark.parametrize("number", RUNG_NOTEBOOKS)
def test_a_rung_trains_the_learner_s_saved_parts(number):
    """Run All runs the solution cells too, and they redefine the notebook's parts: a rung that
    used the kernel's names would train the solution. It loads the parts it uses through
    my_parts (or my_model), which return the learner's saved part when there is one."""
    source = rung_cell(number)
    if "my_model()" in source or re.search(r"(?<![.\w])m\.\w+\(", source):
        return  # notebook 11: the assembled file's parts (m = my_model()), every part through it
    used, missing = unloaded_parts(source)
    assert used, f"notebook {number}'s rung uses none of the parts"
    assert not missing, f"notebook {number}'s rung uses {missing} without my_parts"


def test_the_rung_check_finds_a_part_taken_from_the_kernel():
    """Control: notebook 10's rung without its my_parts line uses its three parts unloaded; a
    comment that names a part, or a method call such as self.attention(...), is not a use."""
    source = rung_cell("10")
    stripped = "\n".join(line for line in source.splitlines() if "my_parts(" not in line)
    used, missing = unloaded_parts(stripped)
    expected = ["MultiHeadAttention", "LayerNorm", "FeedForward", "sinusoidal_table"]
    assert missing == sorted(used) == sorted(expected)
    assert unloaded_parts("x = self.attention(x)  # attention(q, k, v)\n") == ([], [])
