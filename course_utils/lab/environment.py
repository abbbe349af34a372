"""The environment report of notebook 00: installed versions against the tested ones.

The tested versions are the pins of ``constraints.txt`` (``name==version``; ``make setup``
installs exactly those) and the Python version named in its header comment. When the
repository is not around (the course installed from its URL, as in Colab), the copy in
``course_utils/lab/_tested_versions.py`` is used; ``scripts/sync_notebook_headers.py`` writes it
and a test checks it agrees with ``constraints.txt``.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import sys
from pathlib import Path

from course_utils.lab.language import tr  # standard library only

# What notebook 00 reports, besides Python.
REPORTED = ("torch", "numpy", "matplotlib", "tiktoken", "jieba")
# Written by `make setup TORCH=system` (scripts/system_constraints.py) into .venv: the packages
# kept from the system's Python, one name==version a line.
KEPT_FILE = "course-system-packages.txt"
CONSTRAINTS = Path(__file__).resolve().parents[2] / "constraints.txt"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;#]+)$")
_TESTED_PYTHON = re.compile(r"\bPython (\d+\.\d+(?:,\s*\d+\.\d+)*)\b")
_RELEASE = re.compile(r"^v?(\d+(?:\.\d+)*)")


def _require_str(value: object, name: str) -> None:
    """TypeError unless ``value`` is a str. (``course_utils.checks.check_text`` would import
    torch, which this module must not need: it reports whether torch is installed.)"""
    if not isinstance(value, str):
        fix = '; decode it first: .decode("utf-8")' if isinstance(value, bytes) else ""
        raise TypeError(f"{name} must be a str, got {value!r} ({type(value).__name__}){fix}")


def normalize_name(name: str) -> str:
    """A distribution name in canonical form: ``Foo_Bar.baz`` -> ``foo-bar-baz`` (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_constraints(text: str) -> dict[str, str]:
    """The pins of a constraints file: ``{"torch": "2.13.0", ...}``, plus ``"python"`` when
    a comment names the tested Pythons (``# Tested versions (Python 3.11, 3.12; CPU)`` gives
    ``"python": "3.11, 3.12"``).

    Blank lines and comments are skipped.

    Raises:
        TypeError: ``text`` is not a str (bytes: decode them first).
        ValueError: a line that is not ``name==version``; the message gives the line number,
            the expected form and the line found.
    """
    _require_str(text, "text")
    pins: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        comment = raw.partition("#")[2]
        if "python" not in pins and (found := _TESTED_PYTHON.search(comment)):
            pins["python"] = ", ".join(re.split(r",\s*", found.group(1)))
        line = raw.partition("#")[0].strip()
        if not line:
            continue
        match = _PIN.match(line)
        if match is None:
            raise ValueError(f"constraints line {number}: expected 'name==version', got {line!r}")
        pins[normalize_name(match.group(1))] = match.group(2)
    return pins


def tested_versions(path: str | Path | None = None) -> dict[str, str]:
    """The tested versions, from ``constraints.txt`` (or the packaged copy when it is absent).

    Args:
        path: a constraints file; default the repository's ``constraints.txt``.

    Raises:
        FileNotFoundError: ``path`` was given and does not exist.
        TypeError: ``path`` is not a str or Path.
        ValueError: from :func:`parse_constraints`.
    """
    if path is not None:
        if not isinstance(path, str | os.PathLike):
            raise TypeError(f"path must be a str or pathlib.Path, got {type(path).__name__}")
        if not Path(path).is_file():
            raise FileNotFoundError(
                f"no constraints file at {path}; pass the path of a constraints.txt "
                "(one name==version per line), or None for the repository's"
            )
        return parse_constraints(Path(path).read_text(encoding="utf-8"))
    if CONSTRAINTS.is_file():
        return parse_constraints(CONSTRAINTS.read_text(encoding="utf-8"))
    from course_utils.lab._tested_versions import TESTED_VERSIONS

    return dict(TESTED_VERSIONS)


def release(version: str) -> tuple[int, ...]:
    """The release numbers of a version string, without trailing zeros:
    ``"2.13.0+cpu"`` -> ``(2, 13)``, ``"3.11.7"`` -> ``(3, 11, 7)``.

    The local tag (``+cpu``, ``+cu121``) names the build, not the version, and is ignored.

    Raises:
        TypeError: ``version`` is not a str (``2.13``: pass ``"2.13"``).
        ValueError: the string does not start with a number.
    """
    _require_str(version, "version")
    match = _RELEASE.match(version.strip())
    if match is None:
        raise ValueError(f"cannot read a version number from {version!r}; expected e.g. '2.13.0'")
    numbers = [int(part) for part in match.group(1).split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


def version_warning(name: str, installed: str | None, tested: str | None) -> str | None:
    """A one-line warning when ``installed`` is outside the tested range, else None.

    The tested range of a pinned package is its pinned release (``2.13.0`` matches
    ``2.13.0+cpu`` but not ``2.13.1``); for Python it is any of the tested minor versions
    (``"3.11, 3.12"`` matches every ``3.11.x`` and ``3.12.x``). A package without a pin is not
    judged.

    Raises:
        ValueError: from :func:`release`, on a version string that is not a version.
    """
    if tested is None:
        return None
    if installed is None:
        return tr("{name} is not installed (tested with {tested}); run `make setup`").format(
            name=name, tested=tested
        )
    if name == "python":  # any of the tested minor versions, e.g. "3.11, 3.12"
        wanted = [release(version) for version in tested.split(",")]
        if any(release(installed)[: len(want)] == want for want in wanted):
            return None
        if len(wanted) > 1:
            message = tr("{name} {installed} is not a tested version {tested} (constraints.txt)")
        else:
            message = tr("{name} {installed} is not the tested version {tested} (constraints.txt)")
        return message.format(name=name, installed=installed, tested=tested)
    if release(installed) != release(tested):
        return tr("{name} {installed} is not the tested version {tested} (constraints.txt)").format(
            name=name, installed=installed, tested=tested
        )
    return None


def kept_from_system(prefix: str | Path | None = None) -> dict[str, str]:
    """``{name: version}`` of the packages ``make setup TORCH=system`` kept from the system's
    Python (read from ``<prefix>/course-system-packages.txt``; ``prefix`` defaults to
    ``sys.prefix``, the running environment); ``{}`` in any other environment."""
    path = Path(sys.prefix if prefix is None else prefix) / KEPT_FILE
    if not path.is_file():
        return {}
    return parse_constraints(path.read_text(encoding="utf-8"))


def installed_versions(names: tuple[str, ...] | None = None) -> dict[str, str | None]:
    """``{"python": "3.11.7", "torch": "2.13.0+cpu", ...}``; None for a missing package.

    ``names`` defaults to :data:`REPORTED` plus every package kept from the system by
    ``make setup TORCH=system`` (:func:`kept_from_system`), so each of those is reported too."""
    if names is None:
        names = tuple(dict.fromkeys([*REPORTED, *kept_from_system()]))
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _versions(installed: object, tested: object) -> tuple[dict, dict]:
    """The two version tables, defaults filled in; TypeError unless each is a dict."""
    installed = installed_versions() if installed is None else installed
    tested = tested_versions() if tested is None else tested
    for name, value in (("installed", installed), ("tested", tested)):
        if not isinstance(value, dict):
            raise TypeError(
                f"{name} must be a dict of package name -> version, got {type(value).__name__}; "
                'e.g. {"torch": "2.13.0"}, or None for the default'
            )
    return installed, tested


def check_versions(
    installed: dict[str, str | None] | None = None, tested: dict[str, str] | None = None
) -> list[str]:
    """Warnings for every installed version outside its tested range (empty when all match).

    Args:
        installed: ``{name: version or None}``; default :func:`installed_versions`.
        tested: ``{name: pinned version}``; default :func:`tested_versions`.

    Raises:
        TypeError: ``installed`` or ``tested`` is not a dict.
    """
    installed, tested = _versions(installed, tested)
    warnings = (
        version_warning(name, version, tested.get(normalize_name(name)))
        for name, version in installed.items()
    )
    return [warning for warning in warnings if warning]


def environment_report(
    installed: dict[str, str | None] | None = None, tested: dict[str, str] | None = None
) -> str:
    """A small table: each package, its version, and ``⚠ tested X`` where it differs,
    followed by one line of advice when anything differs.

    Raises:
        TypeError: ``installed`` or ``tested`` is not a dict.
    """
    installed, tested = _versions(installed, tested)
    lines, warned = [], False
    for name, version in installed.items():
        pin = tested.get(normalize_name(name))
        warning = version_warning(name, version, pin)
        warned |= warning is not None
        note = tr("  ⚠ tested: {pin}").format(pin=pin) if warning else ""
        lines.append(f"{name:<11} {version or tr('not installed')}{note}")
    if warned and kept_from_system():
        lines.append(
            tr(
                "⚠ Versions marked above differ from the tested ones in constraints.txt: "
                "`make setup TORCH=system` kept the system's packages. The course may still "
                "work; if a cell fails, `make setup` without TORCH=system installs the tested "
                "versions."
            )
        )
    elif warned:
        lines.append(
            tr(
                "⚠ Versions marked above differ from the tested ones in constraints.txt. The "
                "course may still work; if a cell fails, `make setup` installs the tested versions."
            )
        )
    return "\n".join(lines)
