"""Every committed figure is readable at the width a page shows it (issue 23).

The rule, for each PNG output of each committed notebook:

* A page column is ``PAGE_WIDTH_PX`` = 1000 CSS pixels wide: JupyterLab's notebook column
  on a 1280-pixel laptop screen once the side bar and the prompt gutter are open, and about
  what GitHub's notebook view gives an output.
* A PNG is shown at its own pixel size (1 image pixel = 1 CSS pixel; an output whose metadata
  gives a ``width`` is shown at that width), and scaled down to the column when it is wider.
* Text of ``s`` points drawn at ``dpi`` dots per inch is ``s * dpi / 72`` image pixels tall;
  a CSS point is 96/72 CSS pixels. So on the page it is
  ``s * dpi / 96 * min(1, PAGE_WIDTH_PX / displayed width)`` points, which must be at least
  ``MIN_TEXT_PT`` = 8 points.
* ``dpi`` is read from the PNG itself (matplotlib writes it into the ``pHYs`` chunk; the
  course's figures use 100). ``s`` is the smallest text size the cell asks for: the course's
  base size (``font.size``, 10 pt: tick labels, legends, axis labels) unless the cell's code
  sets a smaller ``fontsize=``/``labelsize=`` (a number or a name such as ``"small"``).
  Text sized inside course_utils' own figure helpers is not seen by this rule.

At 100 dpi with 10 pt text a figure may be up to 1302 pixels wide. The failure lists every
offending notebook and cell with its width and the size its text shrinks to.
"""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import matplotlib
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
PAGE_WIDTH_PX = 1000
MIN_TEXT_PT = 8.0
BASE_FONT_PT = 10.0  # matplotlib's font.size, which course_utils.lab.viz.use_course_style keeps
DEFAULT_DPI = 100.0  # figure.dpi of the course style, when a PNG does not say
# matplotlib's named sizes, as multiples of font.size
NAMED_SIZES = {
    "xx-small": 0.579, "x-small": 0.694, "small": 0.833, "medium": 1.0,
    "large": 1.2, "x-large": 1.44, "xx-large": 1.728, "smaller": 0.833, "larger": 1.2,
}  # fmt: skip
_SIZE = re.compile(
    r"\b(?:fontsize|labelsize|size|title_fontsize)\s*=\s*"
    r"(?:(\d+(?:\.\d+)?)|[\"']([a-z-]+)[\"'])"
)


def smallest_font_pt(source: str) -> float:
    """The smallest text size (points) a cell's code asks for, at least the base size's."""
    sizes = [BASE_FONT_PT]
    for number, name in _SIZE.findall(source):
        if number:
            sizes.append(float(number))
        elif name in NAMED_SIZES:
            sizes.append(NAMED_SIZES[name] * BASE_FONT_PT)
    return min(sizes)


def displayed_text_pt(pixel_width: int, dpi: float, font_pt: float, shown_width=None) -> float:
    """How large ``font_pt`` text drawn at ``dpi`` appears on the page, in points."""
    shown = float(shown_width or pixel_width)
    scale = shown / pixel_width * min(1.0, PAGE_WIDTH_PX / shown)
    return font_pt * dpi / 96 * scale


def figure_problems(notebook: dict, name: str) -> list[str]:
    """One line per PNG output whose smallest text is below MIN_TEXT_PT at page width."""
    problems = []
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        font_pt = smallest_font_pt("".join(cell["source"]))
        figures = [o for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
        for number, output in enumerate(figures, start=1):
            png = output["data"]["image/png"]
            where = f"cell {index}"
            if len(figures) > 1:
                where += f" figure {number}/{len(figures)}"
            image = Image.open(io.BytesIO(base64.b64decode("".join(png))))
            dpi = float(image.info.get("dpi", (DEFAULT_DPI,))[0])
            shown = output.get("metadata", {}).get("image/png", {}).get("width")
            size = displayed_text_pt(image.width, dpi, font_pt, shown)
            if size < MIN_TEXT_PT - 1e-9:
                limit = int(PAGE_WIDTH_PX * font_pt * dpi / 96 / MIN_TEXT_PT)
                problems.append(
                    f"{name} {where}: {image.width} px wide at {dpi:.0f} dpi, so its "
                    f"{font_pt:g} pt text shows at {size:.2f} pt on a {PAGE_WIDTH_PX}-px page "
                    f"(at most {limit} px wide for {MIN_TEXT_PT:g} pt: a smaller figsize, "
                    "fewer panels per row, or larger text)"
                )
    return problems


def test_every_committed_figure_is_readable_at_page_width():
    problems = []
    for path in NOTEBOOKS:
        problems += figure_problems(json.loads(path.read_text(encoding="utf-8")), path.name)
    assert not problems, "figures too wide to read at page width:\n" + "\n".join(problems)


def test_the_figures_are_found():
    """The rule must not pass by finding no figure: the course draws dozens."""
    count = sum(
        "image/png" in output.get("data", {})
        for path in NOTEBOOKS
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]
        for output in cell.get("outputs", [])
    )
    assert count >= 30, count


def _notebook_with_figure(width_in: float, source: str = "plt.plot([1, 2])") -> dict:
    """A notebook whose one cell holds a real matplotlib PNG of the given width."""
    import matplotlib.pyplot as plt

    matplotlib.use("Agg")
    fig = plt.figure(figsize=(width_in, 3), dpi=DEFAULT_DPI)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DEFAULT_DPI)  # the inline backend's dpi
    plt.close(fig)
    png = base64.b64encode(buffer.getvalue()).decode()
    output = {"output_type": "display_data", "data": {"image/png": png}, "metadata": {}}
    return {"cells": [{"cell_type": "code", "source": source, "outputs": [output]}]}


def test_the_rule_refuses_a_wide_figure_and_accepts_a_page_wide_one():
    assert figure_problems(_notebook_with_figure(13.0), "ok.ipynb") == []  # 1300 px
    (problem,) = figure_problems(_notebook_with_figure(18.16), "07.ipynb")
    assert problem.startswith("07.ipynb cell 0: 1816 px wide at 100 dpi")
    assert "10 pt text shows at 5.74 pt" in problem and "at most 1302 px" in problem
    # a cell that asks for 8-pt text may be no wider than the page itself
    small = _notebook_with_figure(11.0, 'ax.legend(fontsize=8)\nax.text(0, 0, "x", size="small")')
    assert "8 pt text shows at 7.58 pt" in figure_problems(small, "small.ipynb")[0]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("plt.plot(x)", 10.0),
        ("ax.annotate('a', (0, 0), fontsize=8)", 8.0),
        ("ax.tick_params(labelsize=7.5)", 7.5),
        ("ax.legend(fontsize='x-small')", 6.94),
        ("ax.set_title('t', fontsize=14)", 10.0),
    ],
)
def test_the_smallest_font_is_read_from_the_cell(source, expected):
    assert smallest_font_pt(source) == pytest.approx(expected)


def test_shrinking_follows_the_displayed_width():
    assert displayed_text_pt(690, 100, 10) == pytest.approx(10 * 100 / 96)  # not shrunk
    assert displayed_text_pt(2000, 100, 10) == pytest.approx(10 * 100 / 96 / 2)
    # a retina PNG (200 dpi) shown at half its pixel width reads like a 100-dpi one
    assert displayed_text_pt(1380, 200, 10, shown_width=690) == pytest.approx(10 * 100 / 96)
