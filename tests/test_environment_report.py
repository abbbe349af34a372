"""course_utils.lab.environment: versions compared with the pins of constraints.txt
(notebook 00)."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from course_utils.lab import environment
from course_utils.lab.environment import (
    check_versions,
    environment_report,
    installed_versions,
    parse_constraints,
    release,
    version_warning,
)

ROOT = Path(__file__).resolve().parents[1]


def test_parse_constraints_reads_pins_and_the_tested_python():
    text = "# Tested versions (Python 3.11, CPU).\n\ntorch==2.13.0\nPyYAML == 6.0.3  # yaml\n"
    assert parse_constraints(text) == {"python": "3.11", "torch": "2.13.0", "pyyaml": "6.0.3"}


def test_parse_constraints_reads_several_tested_pythons():
    text = "# Tested versions (Python 3.11,3.12, 3.13; CPU).\ntorch==2.13.0\n"
    assert parse_constraints(text) == {"python": "3.11, 3.12, 3.13", "torch": "2.13.0"}


def test_parse_constraints_names_the_bad_line():
    with pytest.raises(ValueError, match=r"line 2: expected 'name==version', got 'numpy>=2'"):
        parse_constraints("torch==2.13.0\nnumpy>=2\n")


def test_the_repository_constraints_cover_every_reported_package():
    tested = environment.tested_versions()
    assert tested == parse_constraints((ROOT / "constraints.txt").read_text())
    assert tested["python"] == "3.11, 3.12, 3.13" and tested["torch"] == "2.13.0"
    assert set(environment.REPORTED) <= set(tested)


def test_without_constraints_txt_the_packaged_copy_is_used(monkeypatch, tmp_path):
    from course_utils.lab._tested_versions import TESTED_VERSIONS

    monkeypatch.setattr(environment, "CONSTRAINTS", tmp_path / "absent.txt")
    assert environment.tested_versions() == TESTED_VERSIONS
    assert TESTED_VERSIONS == parse_constraints((ROOT / "constraints.txt").read_text())


@pytest.mark.parametrize(
    "version, numbers",
    [("2.13.0+cpu", (2, 13)), ("2.13", (2, 13)), ("3.11.7", (3, 11, 7)), ("0.42.1", (0, 42, 1))],
)
def test_release_ignores_the_local_tag_and_trailing_zeros(version, numbers):
    assert release(version) == numbers


def test_release_rejects_a_non_version():
    with pytest.raises(ValueError, match=r"from 'unknown'; expected e\.g\. '2\.13\.0'"):
        release("unknown")


@pytest.mark.parametrize(
    "name, installed, tested, warns",
    [
        ("torch", "2.13.0+cpu", "2.13.0", False),  # the CPU build of the pinned version
        ("torch", "2.13.0+cu126", "2.13.0", False),
        ("torch", "2.13.1", "2.13.0", True),  # a patch release is outside the pin
        ("torch", "2.12.0", "2.13.0", True),
        ("numpy", "2.4.6", "2.4.6", False),
        ("python", "3.11.7", "3.11", False),  # any 3.11.x
        ("python", "3.12.1", "3.11", True),
        ("python", "3.12.1", "3.11, 3.12, 3.13", False),  # one of several tested versions
        ("python", "3.13.0", "3.11, 3.12, 3.13", False),
        ("python", "3.10.4", "3.11, 3.12, 3.13", True),
        ("python", "3.1.2", "3.11, 3.12", True),  # 3.1 is not a prefix of 3.11
        ("jieba", None, "0.42.1", True),  # missing
        ("somepackage", "1.0", None, False),  # not pinned: not judged
    ],
)
def test_version_warning(name, installed, tested, warns):
    warning = version_warning(name, installed, tested)
    assert (warning is not None) is warns
    if warns:
        assert name in warning and tested in warning
        assert (installed or "not installed") in warning


def test_check_versions_lists_only_what_differs():
    tested = {"python": "3.11", "torch": "2.13.0", "numpy": "2.4.6"}
    installed = {"python": "3.11.9", "torch": "2.5.1+cu121", "numpy": "2.4.6"}
    assert check_versions(installed, tested) == [
        "torch 2.5.1+cu121 is not the tested version 2.13.0 (constraints.txt)"
    ]


def test_this_environment_is_the_tested_one():
    """The venv `make setup` builds matches constraints.txt: notebook 00 shows no warning.

    A venv made by `make setup TORCH=system` keeps the system's torch (and whatever else it
    has): there the differences are reported (in the skip reason, which `-ra` prints) and the
    suite goes on, so that the notebooks still run under nbval on that machine's GPU."""
    installed = installed_versions()
    assert installed["python"] == platform.python_version()
    kept = environment.kept_from_system()
    assert set(installed) == {"python", *environment.REPORTED, *kept}
    differing = check_versions()
    if kept and differing:
        pytest.skip("not the tested environment (make setup TORCH=system kept the system's "
                    f"packages): {'; '.join(differing)}")  # fmt: skip
    assert differing == [], "run `make setup` to install the tested versions"


def test_packages_kept_from_the_system_are_reported_with_their_tested_versions(
    tmp_path, monkeypatch
):
    (tmp_path / environment.KEPT_FILE).write_text("torch==2.11.0+cu128\ntransformers==5.17.0\n")
    assert environment.kept_from_system(tmp_path) == {
        "torch": "2.11.0+cu128", "transformers": "5.17.0"
    }  # fmt: skip
    assert environment.kept_from_system(tmp_path / "elsewhere") == {}
    monkeypatch.setattr(environment.sys, "prefix", str(tmp_path))
    assert "transformers" in installed_versions()  # reported although not in REPORTED
    tested = {"python": "3.11", "torch": "2.13.0", "transformers": "5.24.0"}
    report = environment_report(
        {"python": "3.11.7", "torch": "2.11.0+cu128", "transformers": "5.17.0"}, tested
    )
    lines = report.splitlines()
    assert lines[1] == "torch       2.11.0+cu128  ⚠ tested: 2.13.0"
    assert lines[2] == "transformers 5.17.0  ⚠ tested: 5.24.0"
    assert "`make setup TORCH=system` kept the system's packages" in lines[3]


def test_report_marks_the_differing_version_and_advises():
    tested = {"python": "3.11", "torch": "2.13.0"}
    report = environment_report({"python": "3.11.7", "torch": "2.5.1"}, tested)
    lines = report.splitlines()
    assert lines[0] == "python      3.11.7"
    assert lines[1] == "torch       2.5.1  ⚠ tested: 2.13.0"
    assert "make setup" in lines[2]
    assert environment_report({"python": "3.11.7"}, tested) == "python      3.11.7"
