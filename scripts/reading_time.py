"""Each notebook's reading time, measured from the notebook, written into the README's syllabus.

Usage::

    python scripts/reading_time.py          # print the times, rewrite the README's table
    python scripts/reading_time.py --check  # exit 1 if the README's times are out of date
    make reading-time

The rule (issue 30, "Measured"), applied to the committed notebook:

* **prose**: the words of every markdown cell at 170 words a minute. A word is a run of
  Latin letters or digits (``d_model`` is two, ``don't`` one); link targets ``](...)`` are not
  read; two CJK characters count as one word (Chinese has no spaces).
* **code**: the non-blank lines of every code cell at 10 lines a minute, except the setup cell
  (collapsed, written by ``scripts/sync_notebook_headers.py``), the exercises and their
  solutions (collapsed cells that start with ``# Solution``).
* **exercises**: 6 minutes each. An exercise is a code cell that holds
  ``raise NotImplementedError  # your code here``: the cell the learner completes.

**Core and deeper.** A notebook's deeper part is every cell from the markdown cell that opens
with the heading ``## Going deeper`` to the end; the cells before it are its core (what a
learner needs to write and train their decoder). The syllabus shows both: "~35 min core +
~25 deeper". A notebook without the heading is all core.

Outputs (printed numbers, figures) are not counted. The syllabus shows each total rounded to
the nearest 5 minutes. Notebook 00 also shows the minutes of reading until the first text
written by a model the reader trained: the cells up to and including the code cell tagged
``first-text`` (cell metadata ``tags``), rounded up.

The table is the first markdown table under ``## Syllabus`` in README.md, with a column named
``reading``. A notebook without a row gets one (its title as the description, to be edited); a
row whose notebook is gone is dropped; the appendix (``NN_appendix*.ipynb``) is listed as such.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
NOTEBOOKS = ROOT / "notebooks"

WORDS_PER_MINUTE = 170
LINES_PER_MINUTE = 10
MINUTES_PER_EXERCISE = 6
EXERCISE_MARKER = "raise NotImplementedError  # your code here"
SOLUTION_PREFIX = "# Solution"
SETUP_PREFIX = "# @title Setup"
FIRST_TEXT_TAG = "first-text"
COLUMN = "reading"
DEEPER_HEADING = "## Going deeper"

_WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)*")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_ROW_NOTEBOOK = re.compile(r"\(notebooks/([^)]+\.ipynb)\)")


@dataclass(frozen=True)
class Reading:
    """What one notebook asks of a reader: words, code lines, exercises, and minutes."""

    words: float
    code_lines: int
    exercises: int

    @property
    def minutes(self) -> float:
        return (
            self.words / WORDS_PER_MINUTE
            + self.code_lines / LINES_PER_MINUTE
            + self.exercises * MINUTES_PER_EXERCISE
        )

    def __add__(self, other: Reading) -> Reading:
        return Reading(
            self.words + other.words,
            self.code_lines + other.code_lines,
            self.exercises + other.exercises,
        )


NOTHING = Reading(0, 0, 0)


def prose_words(markdown: str) -> float:
    """Words of a markdown text: Latin words and numbers, plus half a word per CJK character."""
    text = _LINK_TARGET.sub("]", markdown)
    return len(_WORD.findall(text)) + len(_CJK.findall(text)) / 2


def cell_reading(cell: dict) -> Reading:
    """The reading one cell asks for (see the module's docstring for the rule)."""
    source = "".join(cell.get("source", ""))
    if cell.get("cell_type") == "markdown":
        return Reading(prose_words(source), 0, 0)
    if cell.get("cell_type") != "code":
        return NOTHING
    stripped = source.lstrip()
    if stripped.startswith((SETUP_PREFIX, SOLUTION_PREFIX)):
        return NOTHING
    if EXERCISE_MARKER in source:
        return Reading(0, 0, 1)
    return Reading(0, sum(1 for line in source.splitlines() if line.strip()), 0)


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def notebook_reading(path: Path) -> Reading:
    """The reading of a whole notebook."""
    core, deeper = core_and_deeper(path)
    return core + deeper


def is_deeper_heading(cell: dict) -> bool:
    """Whether ``cell`` is the markdown cell that opens the notebook's "Going deeper" part."""
    source = "".join(cell.get("source", "")).lstrip()
    return cell.get("cell_type") == "markdown" and source.startswith(DEEPER_HEADING)


def deeper_start(cells: list[dict]) -> int:
    """Index of the cell that opens the deeper part; ``len(cells)`` when there is none."""
    return next((i for i, cell in enumerate(cells) if is_deeper_heading(cell)), len(cells))


def core_and_deeper(path: Path) -> tuple[Reading, Reading]:
    """The reading of a notebook's core (before ``## Going deeper``) and of its deeper part."""
    cells = _cells(path)
    split = deeper_start(cells)
    core, deeper = NOTHING, NOTHING
    for cell in cells[:split]:
        core = core + cell_reading(cell)
    for cell in cells[split:]:
        deeper = deeper + cell_reading(cell)
    return core, deeper


def minutes_to_first_text(path: Path) -> float | None:
    """Minutes of reading up to and including the cell tagged ``first-text``; None if no cell
    has the tag."""
    total = NOTHING
    for cell in _cells(path):
        total = total + cell_reading(cell)
        if FIRST_TEXT_TAG in cell.get("metadata", {}).get("tags", []):
            return total.minutes
    return None


def rounded(minutes: float) -> int:
    """A total for the table: the nearest multiple of 5 minutes, at least 5."""
    return max(5, 5 * round(minutes / 5))


def reading_cell(path: Path) -> str:
    """The text of the ``reading`` column for one notebook."""
    core, deeper = core_and_deeper(path)
    text = f"~{rounded(core.minutes)} min"
    if deeper != NOTHING:
        text += f" core + ~{rounded(deeper.minutes)} deeper"
    first = minutes_to_first_text(path)
    if first is not None:
        text += f" (your first model writes at {math.ceil(first)} min)"
    return text


def _split_row(line: str) -> list[str]:
    return [part.strip() for part in line.strip().strip("|").split("|")]


def _join_row(parts: list[str]) -> str:
    return "| " + " | ".join(parts) + " |"


def _title(path: Path) -> str:
    """A notebook's title without its number, from its first markdown heading."""
    for cell in _cells(path):
        if cell.get("cell_type") == "markdown":
            first = "".join(cell["source"]).strip().splitlines()[0]
            return re.sub(r"^#+\s*\d*\s*·?\s*", "", first).strip()
    return path.stem


def _new_row(path: Path, columns: list[str]) -> list[str]:
    """A row for a notebook the table does not list yet: its number, a link named by its
    title, and the title again as the description (the appendix is named as such)."""
    title = _title(path)
    appendix = "appendix" in path.stem and not title.lower().startswith("appendix")
    label = f"appendix: {title}" if appendix else title
    values = {"#": path.name[:2], "notebook": f"[{label}](notebooks/{path.name})", COLUMN: ""}
    return [values.get(column, title) for column in columns]


def _table_span(lines: list[str]) -> tuple[int, int]:
    """First and one-past-last line index of the syllabus table."""
    try:
        heading = next(i for i, line in enumerate(lines) if line.strip() == "## Syllabus")
    except StopIteration:
        raise ValueError("README.md has no '## Syllabus' heading") from None
    start = next((i for i in range(heading + 1, len(lines)) if lines[i].startswith("|")), None)
    if start is None:
        raise ValueError("README.md has no table under '## Syllabus'")
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return start, end


def rewrite_syllabus(readme: str, notebooks: list[Path]) -> str:
    """``readme`` with the syllabus table's ``reading`` column computed from ``notebooks``.

    The column is added after ``notebook`` when the table lacks it. Rows follow the notebooks'
    order; a notebook without a row gets one, a row without a notebook is dropped.

    Raises:
        ValueError: the README has no syllabus table, or a row names no notebook.
    """
    lines = readme.split("\n")
    start, end = _table_span(lines)
    header, rule, rows = _split_row(lines[start]), lines[start + 1], lines[start + 2 : end]
    if COLUMN not in header:
        where = header.index("notebook") + 1 if "notebook" in header else len(header)
        header.insert(where, COLUMN)
        rows = [_join_row(r[:where] + [""] + r[where:]) for r in map(_split_row, rows)]
    rule = "|" + "---|" * len(header)
    by_name = {}
    for row in rows:
        found = _ROW_NOTEBOOK.search(row)
        if not found:
            raise ValueError(f"a syllabus row names no notebooks/*.ipynb link: {row}")
        by_name[found.group(1)] = _split_row(row)
    column = header.index(COLUMN)
    table = [_join_row(header), rule]
    for path in notebooks:
        parts = by_name.get(path.name) or _new_row(path, header)
        parts = parts + [""] * (len(header) - len(parts))
        parts[column] = reading_cell(path)
        table.append(_join_row(parts))
    return "\n".join(lines[:start] + table + lines[end:])


def course_notebooks(folder: Path = NOTEBOOKS) -> list[Path]:
    """The numbered notebooks, in order (``NN_name.ipynb``)."""
    return sorted(p for p in folder.glob("[0-9][0-9]_*.ipynb"))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit status 2
        print(f"reading_time.py: {message}; usage: python scripts/reading_time.py [--check]")
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write; exit 1")
    args = parser.parse_args(argv)
    notebooks = course_notebooks()
    core_path = 0.0
    for path in notebooks:
        core, deeper = core_and_deeper(path)
        first = minutes_to_first_text(path)
        print(
            f"{path.name:<42} core {core.minutes:5.1f} min ({core.words:5.0f} words, "
            f"{core.code_lines:3} code lines, {core.exercises} exercises), "
            f"deeper {deeper.minutes:5.1f} min"
            + (f"; first text from the reader's model after {first:.1f} min" if first else "")
        )
        if path.name[:2] <= "12":
            core_path += core.minutes
    print(f"core path, notebooks 00-12: {core_path:.0f} min")
    current = README.read_text(encoding="utf-8")
    updated = rewrite_syllabus(current, notebooks)
    if updated == current:
        print("README.md's syllabus is up to date")
        return 0
    if args.check:
        print("README.md's reading times are out of date; run `make reading-time`")
        return 1
    README.write_text(updated, encoding="utf-8")
    print("rewrote README.md's syllabus table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
