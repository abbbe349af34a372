"""scripts/reading_time.py: the rule it measures by, the README table it writes, and that the
README's syllabus shows the times of the committed notebooks (issue 30, "Measured")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from script_loader import load_script

ROOT = Path(__file__).resolve().parents[1]
rt = load_script("scripts/reading_time.py", "reading_time_under_test", register=True)


def _notebook(folder: Path, name: str, cells: list[dict]) -> Path:
    path = folder / name
    path.write_text(
        json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    return path


def md(text: str) -> dict:
    return {"cell_type": "markdown", "source": text, "metadata": {}}


def code(text: str, tags: tuple[str, ...] = ()) -> dict:
    return {"cell_type": "code", "source": text, "metadata": {"tags": list(tags)}, "outputs": []}


def test_prose_counts_latin_words_and_half_a_word_per_cjk_character():
    assert rt.prose_words("The model predicts the next token.") == 6
    assert rt.prose_words("d_model don't 42") == 4  # d, model; don't; 42
    assert rt.prose_words("| embedding | 嵌入 |") == 2  # one word + two characters
    assert rt.prose_words("[a link](https://example.com/very/long/path)") == 2


def test_setup_solutions_and_exercises_are_not_counted_as_code():
    assert rt.cell_reading(code("# @title Setup\nimport os\nsetup()")) == rt.NOTHING
    assert rt.cell_reading(code("# Solution\ndef f():\n    return 1")) == rt.NOTHING
    exercise = "def f():\n    raise NotImplementedError  # your code here\n\n\npassed = check_f(f)"
    assert rt.cell_reading(code(exercise)) == rt.Reading(0, 0, 1)
    assert rt.cell_reading(code("x = 1\n\n# why\ny = 2\n")) == rt.Reading(0, 3, 0)


def test_minutes_follow_the_three_rates(tmp_path):
    path = _notebook(
        tmp_path,
        "07_x.ipynb",
        [
            md(" ".join(["word"] * 340)),  # 2 minutes
            code("\n".join(f"x{i} = {i}" for i in range(30))),  # 3 minutes
            code("def f():\n    raise NotImplementedError  # your code here"),  # 6 minutes
            code("# Solution\n" + "y = 1\n" * 50),  # not read
        ],
    )
    reading = rt.notebook_reading(path)
    assert (reading.words, reading.code_lines, reading.exercises) == (340, 30, 1)
    assert reading.minutes == pytest.approx(11.0)


def test_minutes_to_first_text_stop_at_the_tagged_cell(tmp_path):
    cells = [
        md(" ".join(["w"] * 170)),
        code("a = 1\n" * 10, tags=("first-text",)),
        code("b\n" * 100),
    ]
    path = _notebook(tmp_path, "00_x.ipynb", cells)
    assert rt.minutes_to_first_text(path) == pytest.approx(2.0)
    untagged = _notebook(tmp_path, "01_x.ipynb", [md("w")])
    assert rt.minutes_to_first_text(untagged) is None


def test_the_table_gets_a_reading_column_new_notebooks_and_the_appendix(tmp_path):
    first = _notebook(tmp_path, "00_overview.ipynb", [md("# 00 · Overview\n" + "w " * 170)])
    second = _notebook(tmp_path, "01_tok.ipynb", [md("# 01 · Tokens"), code("x = 1\n" * 100)])
    appendix = _notebook(tmp_path, "16_appendix.ipynb", [md("# 16 · How the course knows")])
    readme = "\n".join(
        [
            "intro",
            "## Syllabus",
            "",
            "| # | notebook | what you see |",
            "|---|---|---|",
            "| 00 | [overview](notebooks/00_overview.ipynb) | the goal first |",
            "| 01 | [tokens](notebooks/01_tok.ipynb) | ids |",
            "| 09 | [gone](notebooks/09_gone.ipynb) | removed |",
            "",
            "after the table",
        ]
    )
    out = rt.rewrite_syllabus(readme, [first, second, appendix])
    lines = out.split("\n")
    assert lines[:3] == ["intro", "## Syllabus", ""] and lines[-2:] == ["", "after the table"]
    assert lines[3] == "| # | notebook | reading | what you see |"
    assert lines[4] == "|---|---|---|---|"
    assert lines[5] == "| 00 | [overview](notebooks/00_overview.ipynb) | ~5 min | the goal first |"
    assert lines[6] == "| 01 | [tokens](notebooks/01_tok.ipynb) | ~10 min | ids |"
    assert lines[7].startswith(
        "| 16 | [appendix: How the course knows](notebooks/16_appendix.ipynb) |"
    )
    assert "09_gone" not in out
    assert rt.rewrite_syllabus(out, [first, second, appendix]) == out  # idempotent


def test_a_readme_without_a_syllabus_table_is_refused():
    with pytest.raises(ValueError, match="Syllabus"):
        rt.rewrite_syllabus("# Title\n\nno table", [])


def test_a_bad_argument_gets_one_line_and_exit_status_2(capsys):
    with pytest.raises(SystemExit) as stop:
        rt.main(["--bogus"])
    assert stop.value.code == 2
    printed = capsys.readouterr().out
    assert printed.count("\n") == 1 and "--bogus" in printed and "--check" in printed


def test_the_readme_shows_the_reading_times_of_the_committed_notebooks():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    expected = rt.rewrite_syllabus(readme, rt.course_notebooks())
    assert readme == expected, "README.md's syllabus is out of date: run `make reading-time`"


def test_notebook_00_has_the_reader_s_model_writing_within_20_minutes():
    (overview,) = [p for p in rt.course_notebooks() if p.name.startswith("00_")]
    minutes = rt.minutes_to_first_text(overview)
    assert minutes is not None, "no cell of notebook 00 is tagged first-text"
    assert minutes < 20, (
        f"notebook 00's first text from the reader's model comes after {minutes:.1f} min"
    )


def test_the_deeper_part_starts_at_its_heading_and_the_table_shows_both(tmp_path):
    path = _notebook(
        tmp_path,
        "05_x.ipynb",
        [
            md(" ".join(["word"] * 340)),  # core: 2 minutes
            md("## Going deeper (optional)\n\n" + " ".join(["word"] * 167)),  # 170 words: 1 min
            code("\n".join(f"x{i} = {i}" for i in range(40))),  # deeper: 4 minutes
        ],
    )
    core, deeper = rt.core_and_deeper(path)
    assert core.minutes == pytest.approx(2.0) and deeper.minutes == pytest.approx(5.0)
    assert rt.notebook_reading(path).minutes == pytest.approx(7.0)
    assert rt.reading_cell(path) == "~5 min core + ~5 deeper"
    # a heading that merely mentions the words, or a deeper heading in a code cell, opens nothing
    other = _notebook(tmp_path, "06_x.ipynb", [md("## Not going deeper\n\nword"), code("x = 1")])
    assert rt.core_and_deeper(other)[1] == rt.NOTHING
    assert rt.reading_cell(other) == "~5 min"
