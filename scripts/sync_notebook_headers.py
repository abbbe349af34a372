"""Write the header cells into every notebook (after its title), collapse its solutions; versions.

Usage::

    python scripts/sync_notebook_headers.py          # update notebooks/*.ipynb in place
    python scripts/sync_notebook_headers.py --check  # exit 1 if anything is out of date

Every notebook starts with its own title and learning goal (its first markdown cell, ``# NN ·
...``); right after it come

1. a markdown cell with an "Open in Colab" badge for that notebook, and
2. the setup cell rendered from ``scripts/templates/bootstrap_cell.py.in``, its body hidden
   (JupyterLab's ``source_hidden``, Colab's form view). In Colab it clones the repository and
   calls :func:`course_utils.lab.bootstrap.setup`, which installs what Colab lacks; elsewhere that
   call only checks the kernel. It prints nothing when all is well.

Every exercise's solution (a code cell whose source starts with ``# Solution``) is collapsed
the same way in every notebook: ``metadata.jupyter.source_hidden`` in JupyterLab, and Colab's
form view (``cellView: form``, code hidden behind "Show code"). A student sees the exercise,
tries it, and opens the solution with one click.

The repository's address is read from ``pyproject.toml`` ``[project.urls] Repository`` (the
one place it is written). The script also writes ``course_utils/lab/_tested_versions.py``, the
copy of the pins of ``constraints.txt`` that :mod:`course_utils.lab.environment` uses when
``constraints.txt`` is not around.

A cell that already matches keeps its outputs; a changed one loses them, so run
``make course`` afterwards (``make course`` runs this script first).
"""

from __future__ import annotations

import argparse
import copy
import re
import string
import sys
import tomllib
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from course_utils.lab.environment import parse_constraints  # noqa: E402

TEMPLATE = ROOT / "scripts" / "templates" / "bootstrap_cell.py.in"
TESTED_VERSIONS_MODULE = ROOT / "course_utils" / "lab" / "_tested_versions.py"
BADGE_ID, BOOTSTRAP_ID = "colab-badge", "course-bootstrap"
# The setup cell's body is hidden: folded in JupyterLab, a form (title only) in Colab.
BOOTSTRAP_METADATA = {"cellView": "form", "jupyter": {"source_hidden": True}}
BRANCH = "main"
# An exercise's solution cell starts with this line; its source is hidden (one click opens it)
# in JupyterLab and in Colab, as the setup cell's is.
SOLUTION_PREFIX = "# Solution"
SOLUTION_METADATA = BOOTSTRAP_METADATA
_GITHUB = re.compile(r"^https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?$")


def repository_url(root: Path = ROOT) -> str:
    """``[project.urls] Repository`` of ``pyproject.toml``.

    Raises:
        ValueError: it is missing or not a ``https://github.com/OWNER/NAME`` address.
    """
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    url = project.get("urls", {}).get("Repository")
    if not url or not _GITHUB.match(url):
        raise ValueError(
            "pyproject.toml [project.urls] Repository must be https://github.com/OWNER/NAME, "
            f"got {url!r}"
        )
    return url.rstrip("/")


def colab_badge(notebook_name: str, url: str) -> str:
    """Markdown for the badge that opens ``notebooks/<notebook_name>`` of ``url`` in Colab."""
    owner, name = _GITHUB.match(url).groups()
    target = (
        f"https://colab.research.google.com/github/{owner}/{name}/blob/{BRANCH}/notebooks/"
        f"{notebook_name}"
    )
    return f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({target})"


def _pins(path: Path) -> dict[str, str]:
    return parse_constraints(path.read_text(encoding="utf-8"))


def bootstrap_cell_source(root: Path = ROOT) -> str:
    """The setup cell's code: the template with the repository's address filled in."""
    template = string.Template(TEMPLATE.read_text(encoding="utf-8"))
    return template.substitute(repository=repository_url(root)).rstrip("\n")


def header_cells(notebook_name: str, root: Path = ROOT) -> list[nbformat.NotebookNode]:
    """The two cells that follow every notebook's title: the badge and the setup cell."""
    badge = nbformat.v4.new_markdown_cell(
        colab_badge(notebook_name, repository_url(root)), id=BADGE_ID
    )
    bootstrap = nbformat.v4.new_code_cell(
        bootstrap_cell_source(root), id=BOOTSTRAP_ID, metadata=copy.deepcopy(BOOTSTRAP_METADATA)
    )
    return [badge, bootstrap]


def title_position(cells: list) -> int:
    """How many cells come before the header: 1 when the notebook opens with its title (a
    markdown cell starting with ``# ``, which holds the learning goal), else 0. The header's
    own cells are not counted."""
    rest = [c for c in cells if c.get("id") not in (BADGE_ID, BOOTSTRAP_ID)]
    if rest and rest[0].cell_type == "markdown" and "".join(rest[0].source).startswith("# "):
        return 1
    return 0


def _same(cell: nbformat.NotebookNode, expected: nbformat.NotebookNode) -> bool:
    metadata = cell.get("metadata", {})
    return (
        cell.get("id") == expected.id
        and cell.cell_type == expected.cell_type
        and "".join(cell.source) == expected.source
        and all(metadata.get(key) == value for key, value in expected.metadata.items())
    )


def header_is_current(notebook: nbformat.NotebookNode, name: str, root: Path = ROOT) -> bool:
    """True if the notebook has exactly the two header cells, once, right after its title."""
    expected = header_cells(name, root)
    cells = notebook.cells
    at = title_position(cells)
    ids = [c.get("id") for c in cells]
    return (
        len(cells) >= at + 2
        and all(_same(c, e) for c, e in zip(cells[at : at + 2], expected))
        and ids.count(BADGE_ID) == 1
        and ids.count(BOOTSTRAP_ID) == 1
    )


def is_solution_cell(cell: nbformat.NotebookNode) -> bool:
    """True for an exercise's solution: a code cell whose source starts with ``# Solution``
    (a whole word: ``# Solutions ...`` is not one)."""
    source = "".join(cell.source).lstrip()
    return cell.cell_type == "code" and re.match(rf"{SOLUTION_PREFIX}\b", source) is not None


def collapse_solutions(notebook: nbformat.NotebookNode) -> bool:
    """Hide the source of every solution cell (JupyterLab's ``source_hidden``, Colab's form
    view); True if any cell changed. Outputs, ids and other metadata are left as they are."""
    changed = False
    for cell in notebook.cells:
        if is_solution_cell(cell) and not solution_is_collapsed(cell):
            cell.metadata["cellView"] = SOLUTION_METADATA["cellView"]
            cell.metadata.setdefault("jupyter", {}).update(SOLUTION_METADATA["jupyter"])
            changed = True
    return changed


def solution_is_collapsed(cell: dict) -> bool:
    """True if a cell's metadata hides its source in JupyterLab and in Colab."""
    metadata = cell.get("metadata", {})
    return metadata.get("cellView") == SOLUTION_METADATA["cellView"] and all(
        metadata.get("jupyter", {}).get(key) == value
        for key, value in SOLUTION_METADATA["jupyter"].items()
    )


def sync_notebook(path: Path, root: Path = ROOT, write: bool = True) -> bool:
    """Put the header cells right after the notebook's title and collapse every solution
    cell; True if the notebook changed.

    Any earlier copy of either header cell, wherever it is, is removed first. A setup cell
    whose source is unchanged keeps its outputs and execution count; solution cells keep
    theirs.
    """
    notebook = nbformat.read(path, as_version=4)
    changed = collapse_solutions(notebook)
    if not header_is_current(notebook, path.name, root):
        _put_header(notebook, path.name, root)
        changed = True
    if changed and write:
        nbformat.validate(notebook)
        nbformat.write(notebook, path)
    return changed


def _put_header(notebook: nbformat.NotebookNode, name: str, root: Path) -> None:
    badge, bootstrap = header_cells(name, root)
    old = {c.get("id"): c for c in notebook.cells if c.get("id") in (BADGE_ID, BOOTSTRAP_ID)}
    if BOOTSTRAP_ID in old and "".join(old[BOOTSTRAP_ID].source) == bootstrap.source:
        bootstrap.outputs = old[BOOTSTRAP_ID].get("outputs", [])
        bootstrap.execution_count = old[BOOTSTRAP_ID].get("execution_count")
    at = title_position(notebook.cells)
    rest = [c for c in notebook.cells if c.get("id") not in (BADGE_ID, BOOTSTRAP_ID)]
    notebook.cells = [*rest[:at], badge, bootstrap, *rest[at:]]


def tested_versions_source(root: Path = ROOT) -> str:
    """The text of ``course_utils/lab/_tested_versions.py``."""
    pins = _pins(root / "constraints.txt")
    if "python" not in pins:
        raise ValueError("constraints.txt must name the tested Python, e.g. '# ... (Python 3.11)'")
    items = "".join(f'    "{name}": "{version}",\n' for name, version in pins.items())
    return (
        '"""The tested versions, copied from constraints.txt by scripts/sync_notebook_headers.py.\n'
        "\n"
        "Do not edit: change constraints.txt and run the script. course_utils.lab.environment\n"
        "uses this copy when constraints.txt is not around (the course installed from its URL,\n"
        'as in Colab); tests/test_notebook_headers.py checks that the two agree.\n"""\n'
        "\n"
        f"TESTED_VERSIONS = {{\n{items}}}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report, do not write; exit 1")
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    stale = [str(p) for p in paths if sync_notebook(p, write=not args.check)]
    module = tested_versions_source()
    current = TESTED_VERSIONS_MODULE.read_text() if TESTED_VERSIONS_MODULE.exists() else ""
    if module != current:
        stale.append(str(TESTED_VERSIONS_MODULE))
        if not args.check:
            TESTED_VERSIONS_MODULE.write_text(module, encoding="utf-8")
    if args.check and stale:
        print(
            "out of date (run `python scripts/sync_notebook_headers.py`):\n  " + "\n  ".join(stale)
        )
        return 1
    for path in stale:
        print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
