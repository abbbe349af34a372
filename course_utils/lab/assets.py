"""Where the course's shipped files live: the top-level ``assets/`` folder.

``assets/`` holds what the notebooks show but do not compute: diagrams drawn by
``scripts/``, recorded training runs (``assets/runs/*.json``) and a small trained checkpoint
(``assets/checkpoints/``). Every file there is written by a course command, never by hand.
"""

from __future__ import annotations

from pathlib import Path, PurePath

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
ASSETS_DIR = REPOSITORY_ROOT / "assets"


def asset_path(relative: str | Path) -> Path:
    """The path of ``assets/<relative>``.

    Args:
        relative: a path inside ``assets/``, e.g. ``"runs/cpu-cpu.json"``.

    Returns:
        The absolute path of an existing file or folder.

    Raises:
        TypeError: ``relative`` is not a str or Path.
        FileNotFoundError: the file is not there; the message names the path looked at and
            the command that writes it.
    """
    if not isinstance(relative, str | PurePath):
        raise TypeError(
            f"relative must be a path inside assets/ as a str or Path, got "
            f'{type(relative).__name__}; e.g. asset_path("runs/cpu-cpu.json")'
        )
    path = ASSETS_DIR / relative
    if not path.exists():
        raise FileNotFoundError(
            f"course asset {str(relative)!r} not found at {path}; the assets come with the "
            "course's repository (git clone it), and `make assets` rewrites the ones it generates"
        )
    return path
