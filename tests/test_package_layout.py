"""The package's layout: every module imports, no import circle, the README's map in step.

Issue 24: the top level of ``course_utils`` holds the syllabus (one concept per module), the
course's machinery lives in subpackages, and the README's package map has one line per
top-level module and per subpackage.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import course_utils

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "course_utils"


def all_modules() -> list[str]:
    names = ["course_utils"]
    for info in pkgutil.walk_packages(course_utils.__path__, "course_utils."):
        names.append(info.name)
    return sorted(names)


def module_file(name: str) -> Path:
    path = ROOT.joinpath(*name.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def imported_modules(name: str, known: set[str]) -> set[str]:
    """The course_utils modules that ``name`` imports anywhere (top level or in a function)."""
    tree = ast.parse(module_file(name).read_text(encoding="utf-8"))
    package = name if module_file(name).name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            # `from course_utils.lab import viz` imports the submodule viz.
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(target for target in targets if target in known and target != name)
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


@pytest.mark.parametrize("name", all_modules())
def test_every_module_imports(name):
    importlib.import_module(name)


def test_the_package_has_no_import_circle():
    known = set(all_modules())
    graph = {name: imported_modules(name, known) for name in known}
    assert find_cycle(graph) is None, f"import circle: {' -> '.join(find_cycle(graph))}"


def test_the_cycle_finder_finds_a_circle():
    # The check above must be able to fail: a two-module circle and a longer one are found.
    assert find_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def top_level_entries() -> set[str]:
    """Top-level modules (``name``) and subpackages (``name/``) of course_utils."""
    entries = set()
    for path in PACKAGE.iterdir():
        if path.suffix == ".py" and path.name != "__init__.py":
            entries.add(path.stem)
        elif path.is_dir() and (path / "__init__.py").is_file():
            entries.add(path.name + "/")
    return entries


def readme_map() -> list[tuple[str, str]]:
    """The README's package map: ``(entry, description)`` per line, in order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Package map", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^- `course_utils/([\w/]+?)(?:\.py)?` *[:—-] *(.+)$", section, re.M)


def test_the_readme_map_lists_every_top_level_module_and_subpackage_once():
    entries = [entry for entry, _ in readme_map()]
    assert len(entries) == len(set(entries)), "a line of the map is repeated"
    assert set(entries) == top_level_entries(), (
        f"missing from the README map: {sorted(top_level_entries() - set(entries))}; "
        f"in the map but not in the package: {sorted(set(entries) - top_level_entries())}"
    )


def test_every_subpackage_line_names_the_notebooks_that_use_it():
    for entry, description in readme_map():
        if entry.endswith("/"):
            assert re.search(r"notebooks? \d\d|tests|scripts", description), (entry, description)


def test_moved_modules_are_not_also_at_their_old_paths():
    # No shims: what moved into a subpackage is not importable from the top level as well.
    for sub in ("lab", "measure"):
        for path in (PACKAGE / sub).glob("*.py"):
            if path.name != "__init__.py":
                assert not (PACKAGE / path.name).exists(), (
                    f"{path.name} is in {sub}/ and at the top"
                )


@pytest.mark.parametrize(
    ("old", "new", "names"),
    [
        ("kv_cache", "generation", ["generate", "generate_with_cache", "SAMPLING_OPTIONS"]),
        ("positional", "rotary", ["RotaryEmbedding", "apply_rotary_embedding"]),
        ("attention", "checks", ["check_last_axis"]),
    ],
)
def test_names_split_into_their_own_module_live_only_there(old, new, names):
    # A module split by concept leaves no alias behind: one place to read each name.
    old_module = importlib.import_module(f"course_utils.{old}")
    new_module = importlib.import_module(f"course_utils.{new}")
    for name in names:
        assert hasattr(new_module, name), f"course_utils.{new}.{name} is missing"
        assert not hasattr(old_module, name), f"course_utils.{old}.{name} is still there"
