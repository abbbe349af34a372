"""Argument checks shared by the measurement commands: a mistake is found before any
training starts, printed in one line, and the command exits with status 2 (as argparse)."""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
from pathlib import Path

from course_utils.lab.rehearsal import rehearsal_mode


def check_out_path(
    parser: argparse.ArgumentParser, path: Path | None, option: str = "--out"
) -> None:
    """Exit 2 with one line unless ``path`` (None: the command's default) can be written: not
    a folder, no file where a parent folder must go, and a folder that can be made and
    written. Checked by doing it: the missing folders are made and a temporary file written
    there, then both removed (permission bits say nothing to root, nor of a read-only
    file system)."""
    if path is None:
        return
    problem = _why_not_writable(Path(path))
    if problem:
        parser.exit(2, f"{parser.prog}: error: {option} {path}: {problem}\n")


def _why_not_writable(path: Path) -> str | None:
    if path.is_dir():
        return "is a folder; name the JSON file to write, e.g. " + str(path / "record.json")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                return f"{parent} is a file, so no folder can be made under it; choose another path"
            if not os.access(parent, os.W_OK | os.X_OK):
                return f"the folder {parent} is not writable; choose another path"
            break
    return _try_writing_in(path.parent)


_CHOOSE = "choose a path in a folder you can write"


def _try_writing_in(folder: Path) -> str | None:
    """None if ``folder`` (made if missing) takes a new file; else why not. Leaves nothing."""
    made: list[Path] = []
    try:
        for missing in [p for p in (*reversed(folder.parents), folder) if not p.exists()]:
            try:
                missing.mkdir()
            except OSError as error:
                return f"cannot make the folder {missing} ({error.strerror or error}); {_CHOOSE}"
            made.append(missing)
        try:
            handle, probe = tempfile.mkstemp(dir=folder, prefix=".write-check-")
        except OSError as error:
            return f"cannot write a file in {folder} ({error.strerror or error}); {_CHOOSE}"
        os.close(handle)
        os.remove(probe)
    finally:
        for missing in reversed(made):
            with contextlib.suppress(OSError):
                missing.rmdir()
    return None


def check_non_negative(
    parser: argparse.ArgumentParser, args: argparse.Namespace, *names: str
) -> None:
    """Exit 2 with one line when one of the integer options ``names`` is negative."""
    for name in names:
        value = getattr(args, name, None)
        if value is not None and value < 0:
            option = "--" + name.replace("_", "-")
            parser.exit(2, f"{parser.prog}: error: {option} must be 0 or more, got {value}\n")


def check_rehearsal_switch(parser: argparse.ArgumentParser) -> None:
    """Exit 2 with one line when ``COURSE_REHEARSE`` holds an unknown value."""
    try:
        rehearsal_mode()
    except ValueError as error:
        parser.exit(2, f"{parser.prog}: error: {' '.join(str(error).split())}\n")
