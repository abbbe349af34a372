"""Every notebook opens with its title and learning goal, then a Colab badge and the setup cell,
both from one template (`make headers` writes them).

The setup cell is also run here, outside a notebook: silent in the project's .venv, a one-line
fix when the kernel is wrong, and in a (simulated) Colab a one-line message when the clone
fails. The real Colab path, end to end, is tests/test_colab_install.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest
from script_loader import load_script

from course_utils.lab import bootstrap

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SCRIPT = ROOT / "scripts" / "sync_notebook_headers.py"


sync = load_script(SCRIPT)
REPOSITORY = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
BOOTSTRAP_SOURCE = sync.bootstrap_cell_source()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_opens_with_its_title_then_the_badge_and_the_setup_cell(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    title, badge, bootstrap = cells[0], cells[1], cells[2]
    hint = "run `make headers` (or `make course`)"
    assert title["cell_type"] == "markdown" and "".join(title["source"]).startswith("# "), (
        f"{path.name}: the first cell must be the notebook's title and learning goal; {hint}"
    )
    assert "Learning goal" in "".join(title["source"]), f"{path.name}: no learning goal up top"
    assert badge["cell_type"] == "markdown" and badge.get("id") == "colab-badge", hint
    assert "".join(badge["source"]) == sync.colab_badge(path.name, REPOSITORY)
    assert bootstrap["cell_type"] == "code" and bootstrap.get("id") == "course-bootstrap", hint
    assert "".join(bootstrap["source"]) == BOOTSTRAP_SOURCE, (
        f"{path.name}: the setup cell differs from scripts/templates/bootstrap_cell.py.in; {hint}"
    )
    assert bootstrap["metadata"].get("jupyter", {}).get("source_hidden") is True
    assert bootstrap["metadata"].get("cellView") == "form"
    assert bootstrap["outputs"] == [], f"{path.name}: the setup cell must print nothing locally"
    assert sum("".join(c["source"]) == BOOTSTRAP_SOURCE for c in cells) == 1


def test_the_setup_cell_is_short_and_titled_for_colabs_form_view():
    lines = BOOTSTRAP_SOURCE.splitlines()
    assert lines[0].startswith("# @title Setup") and 'display-mode: "form"' in lines[0]
    assert len(lines) <= 40, "keep the setup cell short: move work into course_utils.lab.bootstrap"
    assert max(map(len, lines)) <= 100


def test_badge_opens_this_notebook_from_the_repository_in_pyproject():
    badge = sync.colab_badge("04_qkv_and_heads.ipynb", REPOSITORY)
    owner_and_name = REPOSITORY.removeprefix("https://github.com/")
    assert badge == (
        "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
        f"(https://colab.research.google.com/github/{owner_and_name}/blob/main/notebooks/"
        "04_qkv_and_heads.ipynb)"
    )


def test_the_repository_url_is_written_in_one_place_only():
    """pyproject.toml holds the address; the script, template and package only read it."""
    places = [ROOT / "README.md", ROOT / "Makefile", *ROOT.glob("scripts/**/*.py")]
    places += [*ROOT.glob("scripts/templates/*"), *ROOT.glob("course_utils/**/*.py")]
    places += [*ROOT.glob("tests/**/*.py")]
    assert REPOSITORY in (ROOT / "pyproject.toml").read_text()
    for place in places:
        assert REPOSITORY not in place.read_text(encoding="utf-8"), place
    assert f'REPOSITORY = "{REPOSITORY}"' in BOOTSTRAP_SOURCE
    assert BOOTSTRAP_SOURCE.count(REPOSITORY) == 1


def test_a_different_url_in_pyproject_changes_every_header(tmp_path):
    """The test above can fail: the rendered cells follow pyproject.toml."""
    for name in ("constraints.txt", "requirements-data.txt"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    other = "https://github.com/someone-else/fork"
    text = (ROOT / "pyproject.toml").read_text().replace(REPOSITORY, other)
    (tmp_path / "pyproject.toml").write_text(text)
    badge, bootstrap = sync.header_cells("00_overview.ipynb", tmp_path)
    assert "github/someone-else/fork/blob/main/notebooks/00_overview.ipynb" in badge.source
    assert f'REPOSITORY = "{other}"' in bootstrap.source and REPOSITORY not in bootstrap.source


def test_script_check_mode_passes_now():
    assert sync.main(["--check", *map(str, NOTEBOOKS)]) == 0, "run `make headers`"


def test_script_repairs_an_edited_or_misplaced_header_on_a_copy(tmp_path):
    copy = tmp_path / NOTEBOOKS[0].name
    copy.write_bytes(NOTEBOOKS[0].read_bytes())
    sync.sync_notebook(copy)  # the committed copy may predate the current template
    assert sync.main(["--check", str(copy)]) == 0
    notebook = nbformat.read(copy, as_version=4)
    assert notebook.cells[0].source.startswith("# ") and notebook.cells[2].id == "course-bootstrap"
    notebook.cells[2].source += "\nprint('edited by hand')"
    notebook.cells.insert(0, notebook.cells.pop(1))  # and the badge moved above the title
    nbformat.write(notebook, copy)
    assert sync.main(["--check", str(copy)]) == 1
    assert sync.sync_notebook(copy) is True  # repairs it...
    repaired = nbformat.read(copy, as_version=4)
    assert repaired.cells[0].source.startswith("# ")
    assert [c.get("id") for c in repaired.cells[1:3]] == ["colab-badge", "course-bootstrap"]
    assert repaired.cells[2].source == BOOTSTRAP_SOURCE
    assert sum(c.get("id") == "course-bootstrap" for c in repaired.cells) == 1
    assert len(repaired.cells) == len(notebook.cells)
    assert sync.sync_notebook(copy) is False  # ...and is then a no-op


def test_sync_puts_the_header_after_the_title_of_a_new_notebook(tmp_path):
    path = tmp_path / "13_new.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("# 13 · New\n\n**Learning goal.** ..."),
        nbformat.v4.new_code_cell("1"),
    ]
    nbformat.write(notebook, path)
    assert sync.sync_notebook(path)
    cells = nbformat.read(path, as_version=4).cells
    assert [c.get("id") for c in cells[1:3]] == ["colab-badge", "course-bootstrap"]
    assert [c.source for c in cells[::3]] == ["# 13 · New\n\n**Learning goal.** ...", "1"]
    assert cells[2].metadata["jupyter"] == {"source_hidden": True}


def test_sync_puts_the_header_first_in_a_notebook_without_a_title(tmp_path):
    path = tmp_path / "scratch.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("1")]
    nbformat.write(notebook, path)
    assert sync.sync_notebook(path)
    cells = nbformat.read(path, as_version=4).cells
    assert [c.get("id") for c in cells[:2]] == ["colab-badge", "course-bootstrap"]


def test_an_unchanged_setup_cell_keeps_its_outputs(tmp_path):
    path = tmp_path / "13_new.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# 13 · New"), nbformat.v4.new_code_cell("1")]
    nbformat.write(notebook, path)
    sync.sync_notebook(path)
    notebook = nbformat.read(path, as_version=4)
    notebook.cells[2].outputs = [nbformat.v4.new_output("stream", name="stdout", text="x\n")]
    notebook.cells.insert(0, notebook.cells.pop(1))  # misplaced badge: the header is rewritten
    nbformat.write(notebook, path)
    assert sync.sync_notebook(path)
    assert nbformat.read(path, as_version=4).cells[2].outputs[0].text == "x\n"


def test_tested_versions_copy_agrees_with_constraints():
    from course_utils.lab._tested_versions import TESTED_VERSIONS
    from course_utils.lab.environment import parse_constraints

    assert TESTED_VERSIONS == parse_constraints((ROOT / "constraints.txt").read_text())
    assert (ROOT / "course_utils" / "lab" / "_tested_versions.py").read_text() == (
        sync.tested_versions_source()
    )


# --- the cell's behaviour --------------------------------------------------------------------


def _run_cell(python: str, cwd: Path, env: dict | None = None, flags=()):
    return subprocess.run(
        [python, *flags, "-c", BOOTSTRAP_SOURCE],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _exec_cell():
    exec(compile(BOOTSTRAP_SOURCE, "setup-cell", "exec"), {"__name__": "__main__"})


@pytest.mark.tooling  # a fresh process: make test-tooling (CI)
def test_cell_prints_nothing_in_the_projects_venv():
    venv_python = ROOT / ".venv" / "bin" / "python"
    python = str(venv_python) if venv_python.exists() else sys.executable
    result = _run_cell(python, ROOT / "notebooks")
    assert result.returncode == 0, result.stderr
    assert (result.stdout, result.stderr) == ("", "")


def test_cell_stops_with_a_fix_when_the_kernel_lacks_course_utils():
    # -S: no site-packages, so neither the editable course_utils nor anything else imports.
    result = _run_cell(sys.executable, ROOT / "notebooks", flags=["-S"])
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("SetupError: this kernel") and "cannot import course_utils" in last
    assert "make lab" in last and sys.executable in last


def test_cell_names_the_wrong_interpreter_and_the_projects_venv(tmp_path):
    """A kernel that can import course_utils but is not the project's .venv."""
    project = tmp_path / "course"
    for folder in ("notebooks", ".venv", "course_utils/lab"):
        (project / folder).mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    (project / "course_utils" / "__init__.py").write_text("")
    # The setup cell's module and the one it imports (both standard library only).
    for name in ("__init__.py", "bootstrap.py", "cache_dirs.py", "language.py"):
        source = (ROOT / "course_utils" / "lab" / name).read_text()
        (project / "course_utils" / "lab" / name).write_text(source)
    env = {"PYTHONPATH": f"{project}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = _run_cell(sys.executable, project / "notebooks", env=env)
    assert result.returncode == 0, result.stderr
    assert f"not the project's environment {project / '.venv'}" in result.stdout
    assert sys.executable in result.stdout and "make lab" in result.stdout


@pytest.fixture
def colab(monkeypatch, tmp_path):
    """Colab as the cell sees it: COLAB_RELEASE_TAG, a fresh working folder, a fake subprocess.run
    that records every command (git clone "succeeds" by creating the folder)."""
    import course_utils.lab.viz

    calls = []

    def fake_run(command, **kwargs):
        calls.append(command)
        if command[:2] == ["git", "clone"]:
            Path(command[-1]).mkdir()
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab-test")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr(bootstrap, "_installed", lambda requirement: False)
    monkeypatch.setattr(course_utils.lab.viz, "use_course_style", lambda: calls.append("font"))
    return calls


def test_cell_in_colab_clones_the_repository_then_installs_the_pins_silently(colab, capsys):
    _exec_cell()
    clone, *pip, font = colab
    course = str(Path.cwd() / "transformer-course")
    assert clone == ["git", "clone", "--quiet", "--depth=1", REPOSITORY, course]
    assert sys.path[0] == course
    assert all(
        c[:6] == [sys.executable, "-m", "pip", "install", "--quiet", "--no-color"] for c in pip
    )
    assert [c[6:] for c in pip] == bootstrap.colab_requirements()
    assert font == "font", "the CJK font is registered after the installs"
    assert capsys.readouterr() == ("", "")
    colab.clear()
    _exec_cell()  # run again: the clone is there, nothing is cloned twice
    assert not any(c[:2] == ["git", "clone"] for c in colab if c != "font")
    assert sys.path.count(course) == 1


def test_cell_in_colab_says_in_one_line_that_the_clone_failed_and_what_to_do(colab, monkeypatch):
    said = "fatal: unable to access the repository: Could not resolve host"
    monkeypatch.setattr(
        subprocess, "run", lambda c, **k: subprocess.CompletedProcess(c, 128, "", f"x\n{said}\n")
    )
    with pytest.raises(Exception) as caught:
        _exec_cell()
    assert type(caught.value).__name__ == "SetupError"
    (line,) = caught.value._render_traceback_()  # what Jupyter shows: one line
    assert line.startswith("⚠ Setup failed: `git clone ") and REPOSITORY in line
    assert said in line and "run this cell again" in line
