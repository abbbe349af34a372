"""`make lab EDITION=zh` and `make translations` (issue 44), as dry runs: nothing is started."""

from __future__ import annotations

from pathlib import Path

import nbformat
from makefile_env import run_make, venv_as_is

ROOT = Path(__file__).resolve().parents[1]


def test_make_lab_edition_zh_says_in_one_line_when_the_edition_is_not_built(tmp_path):
    result = run_make("lab", "EDITION=zh", f"ZH_NOTEBOOKS={tmp_path}", *venv_as_is())
    assert result.returncode != 0 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert "the Chinese edition is not built yet" in line and str(tmp_path) in line


def test_make_lab_edition_zh_opens_a_copy_of_the_chinese_notebooks(tmp_path):
    zh = tmp_path / "zh"
    zh.mkdir()
    nbformat.write(nbformat.v4.new_notebook(), zh / "00_overview.ipynb")
    args = ["EDITION=zh", f"ZH_NOTEBOOKS={zh}", f"WORK={tmp_path / 'work'}", *venv_as_is()]
    dry = run_make("-n", "lab", *args)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.rstrip().endswith(f'"{tmp_path / "work"}/zh/"')
    copied = run_make("work", *args)
    assert copied.returncode == 0, copied.stderr
    assert (tmp_path / "work" / "zh" / "00_overview.ipynb").is_file()
    english = run_make("-n", "lab", f"WORK={tmp_path / 'work'}", *venv_as_is())
    assert english.stdout.rstrip().endswith(f'"{tmp_path / "work"}/"')


def test_make_refuses_an_unknown_edition():
    result = run_make("-n", "lab", "EDITION=fr")
    assert result.returncode != 0
    assert "EDITION=fr: expected EDITION=en (the default) or EDITION=zh" in result.stderr


def test_make_translations_updates_builds_and_checks():
    result = run_make("-n", "translations", *venv_as_is())
    assert result.returncode == 0, result.stderr
    steps = [
        line.split("scripts/translations.py ")[1]
        for line in result.stdout.splitlines()
        if "scripts/translations.py" in line
    ]
    assert steps == ["update", "build", "check"]
