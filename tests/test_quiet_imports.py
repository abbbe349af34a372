"""Known third-party warnings are filtered narrowly where the course imports the library.

The warning is made to happen: a fake ``pkg_resources`` on ``sys.path`` warns on import exactly
as setuptools 80.9 to 81.x does. Each case runs in a fresh interpreter, because an imported
module is not imported (nor warns) twice.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MESSAGE = (
    "pkg_resources is deprecated as an API. See the setuptools documentation. The pkg_resources "
    "package is slated for removal as early as 2025-11-30. Refrain from using this package or "
    "pin to Setuptools<81."
)
FAKE_PKG_RESOURCES = f'''
"""Stands in for setuptools 80.9-81.x's pkg_resources: it warns on import."""
import importlib
import os
import warnings

warnings.warn({MESSAGE!r}, UserWarning, stacklevel=2)


def resource_stream(package, resource):
    folder = os.path.dirname(importlib.import_module(package).__file__)
    return open(os.path.join(folder, resource), "rb")
'''


@pytest.fixture
def fake_setuptools(tmp_path):
    (tmp_path / "pkg_resources.py").write_text(FAKE_PKG_RESOURCES)
    return tmp_path


def _run(code: str, path: Path, *flags: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter, ``path`` first on sys.path, default warning filters."""
    pythonpath = os.pathsep.join([str(path), str(ROOT / "tests" / "offline"), str(ROOT)])
    env = {**os.environ, "PYTHONPATH": pythonpath}
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run(
        [sys.executable, *flags, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.tooling  # a fresh process: make test-tooling (CI)
def test_the_fake_makes_a_plain_jieba_import_warn(fake_setuptools):
    """Without the course's filter the warning reaches stderr: the tests below can fail."""
    result = _run("import jieba; print(jieba.lcut('我爱北京'))", fake_setuptools)
    assert result.returncode == 0, result.stderr
    assert "pkg_resources is deprecated" in result.stderr
    assert "jieba" in result.stderr  # attributed to jieba's import of pkg_resources


@pytest.mark.tooling  # a fresh process: make test-tooling (CI)
def test_the_course_imports_jieba_silently(fake_setuptools):
    code = """
        from course_utils.tokenization import split_words
        print(split_words("我爱北京天安门"))
        import pkg_resources, sys
        assert "pkg_resources" in sys.modules  # the fake was imported, and warned
    """
    result = _run(code, fake_setuptools)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['我', '爱', '北京', '天安门']"
    assert "pkg_resources" not in result.stderr and "Warning" not in result.stderr, result.stderr


@pytest.mark.tooling  # a fresh process: make test-tooling (CI)
def test_import_jieba_returns_the_module_and_filters_only_the_known_warning(fake_setuptools):
    code = """
        import warnings
        from course_utils.lab.quiet_imports import import_jieba

        jieba = import_jieba()
        assert jieba.lcut("北京") == ["北京"] and import_jieba() is jieba
        warnings.warn("another warning still shows", UserWarning)
    """
    result = _run(code, fake_setuptools)
    assert result.returncode == 0, result.stderr
    assert "pkg_resources" not in result.stderr
    assert "another warning still shows" in result.stderr  # the filter did not leak


@pytest.mark.tooling  # a fresh process: make test-tooling (CI)
def test_the_filter_is_narrow_other_warnings_during_the_import_show(tmp_path):
    """A different warning raised while jieba imports is not swallowed."""
    (tmp_path / "pkg_resources.py").write_text(
        FAKE_PKG_RESOURCES.replace(repr(MESSAGE), repr("something else went wrong"))
    )
    result = _run(
        "from course_utils.lab.quiet_imports import import_jieba; import_jieba()", tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "something else went wrong" in result.stderr


def test_a_missing_library_still_raises(monkeypatch):
    from course_utils.lab import quiet_imports

    with pytest.raises(ModuleNotFoundError, match="no_such_library_xyz"):
        quiet_imports.import_quietly("no_such_library_xyz", quiet_imports.JIEBA_WARNINGS)


@pytest.mark.tooling  # a fresh process: make test-tooling (CI)
def test_every_course_module_imports_without_any_warning(fake_setuptools):
    """Warnings as errors, setuptools 80.9-81.x's warning present: every module of the course
    still imports (and jieba loads), so no known third-party warning reaches a notebook."""
    code = """
        import importlib, pkgutil
        import course_utils
        from course_utils.tokenization import split_words

        names = [m.name for m in pkgutil.walk_packages(course_utils.__path__, "course_utils.")]
        for name in names:
            if not name.endswith("__main__"):
                importlib.import_module(name)
        assert split_words("北京") == ["北京"]
        print(len(names))
    """
    result = _run(code, fake_setuptools, "-W", "error")
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stdout) > 20
