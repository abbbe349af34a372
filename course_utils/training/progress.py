"""The training progress bar."""

from __future__ import annotations

from collections.abc import Iterable

from tqdm.auto import tqdm


def progress_bar(steps: Iterable[int], enabled: bool = True, description: str = "training"):
    """A tqdm bar over ``steps`` (a widget in Jupyter, text in a terminal)."""
    return tqdm(steps, desc=description, unit="step", disable=not enabled)
