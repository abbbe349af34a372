"""``make setup TORCH=system``: the constraints that keep what the system's Python already has.

Usage (the Makefile runs it with the new ``.venv``'s python, which sees the system's packages)::

    python scripts/system_constraints.py constraints.txt OUT_CONSTRAINTS OUT_KEPT

For every pin of ``constraints.txt`` (``name==version``): a package installed outside this
virtual environment (the system's, or the parent environment's that a ``.pth`` file brings in)
is kept at its own version, so pip installs nothing for it and needs no download; every other
package keeps the course's pin. ``OUT_KEPT`` lists the kept packages, one ``name==version`` a
line; :mod:`course_utils.lab.environment` reads it to name, in the environment report, each kept
version that differs from the tested one. A mistake in the arguments prints one line and exits
with status 2.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
from pathlib import Path

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;#]+)$")


def read_pins(text: str) -> dict[str, str]:
    """``{name: version}`` of the ``name==version`` lines (comments and blank lines skipped)."""
    pins = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.partition("#")[0].strip()
        if not line:
            continue
        match = _PIN.match(line)
        if match is None:
            raise ValueError(f"line {number}: expected 'name==version', got {line!r}")
        pins[match.group(1)] = match.group(2)
    return pins


def system_version(name: str, prefix: Path) -> str | None:
    """The version of ``name`` installed outside ``prefix`` (this venv), or None."""
    try:
        distribution = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    location = Path(str(distribution.locate_file(""))).resolve()
    if location == prefix or prefix in location.parents:
        return None  # installed into .venv by an earlier setup: the course's pin rules it
    return distribution.version


def system_constraints(pins: dict[str, str], prefix: Path) -> tuple[list[str], dict[str, str]]:
    """The constraint lines, and ``{name: version}`` of the packages kept from the system."""
    lines, kept = [], {}
    for name, pinned in pins.items():
        found = system_version(name, prefix)
        if found is None:
            lines.append(f"{name}=={pinned}")
        else:
            kept[name] = found
            note = "" if found.split("+")[0] == pinned else f"  # tested: {pinned}"
            lines.append(f"{name}=={found}{note}  # kept from the system")
    return lines, kept


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(
            "usage: system_constraints.py CONSTRAINTS OUT_CONSTRAINTS OUT_KEPT "
            f"(three paths, got {len(argv)} arguments)"
        )
        return 2
    source, out, kept_out = map(Path, argv)
    if not source.is_file():
        print(f"system_constraints.py: no constraints file at {source}; pass constraints.txt")
        return 2
    try:
        pins = read_pins(source.read_text(encoding="utf-8"))
    except ValueError as error:
        print(f"system_constraints.py: {source} {error}")
        return 2
    lines, kept = system_constraints(pins, Path(sys.prefix).resolve())
    header = (
        "# Written by make setup TORCH=system (scripts/system_constraints.py): the course's pins,\n"
        "# except for what the system's Python already has, which is kept as it is.\n"
    )
    out.write_text(header + "\n".join(lines) + "\n", encoding="utf-8")
    kept_out.write_text("".join(f"{k}=={v}\n" for k, v in kept.items()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
