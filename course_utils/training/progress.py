"""The training progress bar: tqdm in a terminal, one throttled text display in Jupyter.

Why not tqdm's notebook widget: every refresh of ``tqdm.notebook`` sends about two widget
messages on the kernel's IOPub channel (ten refreshes a second, four messages per step when
the postfix changes). A test runner that reads IOPub only after the cell has finished
(nbval 0.11 waits for the shell reply first, ``plugin.py`` ``run_cell``) leaves them queued in
ZeroMQ, whose IOPub socket holds 1,000 messages per peer by default and then silently drops
new ones, the final ``status: idle`` included; nbval then fails with "Timeout of 5 seconds
exceeded waiting for output". On this machine 20,000 tqdm refreshes in one cell reproduce it
with the widget and with a plain display handle alike: the cause is the number of messages,
not widgets. A saved notebook also kept only the widget's first frame (a frozen 0% bar).

In a Jupyter kernel, :func:`progress_bar` therefore shows one text line (tqdm's own format)
through an IPython display handle and updates it in place, at most every
``max(min_interval, elapsed * growth)`` seconds: about 2 a second at first, then ever rarer,
so a cell of any length sends a few hundred messages at most (~140 for 150 s). ``close()``
writes the final state, which ``jupyter nbconvert --execute`` saves (``1200/1200``, the
elapsed time, the last losses): no widget, no ANSI escapes.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

from tqdm import tqdm

from course_utils.lab.language import N_, translated

MIN_INTERVAL_S = 0.5  # the fastest refresh in a notebook
GROWTH = 0.02  # later, one refresh per 2 % of the time elapsed so far


def in_jupyter_kernel() -> bool:
    """True inside an IPython kernel (JupyterLab, Colab, nbconvert, nbval), False in a
    terminal, a plain Python process or an IPython terminal shell."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


class NotebookProgress:
    """A text progress line in a Jupyter output, updated in place through a display handle.

    It behaves like the part of ``tqdm`` the training loop uses: iterate over it, call
    :meth:`set_postfix` and :meth:`close`. Refreshes are throttled (see the module
    docstring) so the number of IOPub messages stays bounded whatever the run's length.

    Args:
        steps: the iterable; its ``len()`` (if any) is the total.
        description: the text before the bar.
        unit: what one item is called.
        min_interval, growth: throttle: refresh at most every
            ``max(min_interval, elapsed * growth)`` seconds.
        clock: a function returning seconds (tests pass a fake clock).

    Raises:
        ValueError: ``min_interval`` or ``growth`` is negative.
    """

    def __init__(
        self,
        steps: Iterable,
        description: str = N_("training"),
        unit: str = "step",
        min_interval: float = MIN_INTERVAL_S,
        growth: float = GROWTH,
        clock=time.perf_counter,
    ) -> None:
        self._check_intervals(min_interval, growth)
        from IPython.display import display

        self.steps, self.description, self.unit = steps, description, unit
        self.total = len(steps) if hasattr(steps, "__len__") else None
        self.min_interval, self.growth, self.clock = min_interval, growth, clock
        self.n, self.postfix, self.refreshes, self.closed = 0, "", 0, False
        self.started = self.last_refresh = clock()
        self.handle = display({"text/plain": self.text()}, raw=True, display_id=True)

    @staticmethod
    def _check_intervals(min_interval: float, growth: float) -> None:
        """ValueError when ``min_interval`` or ``growth`` is negative."""
        if min_interval < 0 or growth < 0:
            raise ValueError(
                f"min_interval and growth must be >= 0, got {min_interval} and {growth}"
            )

    def text(self) -> str:
        """The line as tqdm formats it, e.g. ``training: 100%|██████████| 1200/1200
        [00:43<00:00, 27.33step/s, train=1.873, val=1.884]``."""
        return tqdm.format_meter(
            self.n,
            self.total,
            self.clock() - self.started,
            prefix=translated(self.description),
            unit=self.unit,
            postfix=self.postfix or None,
        )

    def refresh(self) -> None:
        """Show the current state now (one IOPub message)."""
        self.handle.update({"text/plain": self.text()}, raw=True)
        self.refreshes += 1
        self.last_refresh = self.clock()

    def _maybe_refresh(self) -> None:
        now = self.clock()
        interval = max(self.min_interval, (now - self.started) * self.growth)
        if now - self.last_refresh >= interval:
            self.refresh()

    def __iter__(self) -> Iterator:
        for item in self.steps:
            yield item
            self.n += 1
            self._maybe_refresh()

    def set_postfix(self, **values) -> None:
        """Show ``key=value`` pairs after the rate (shown at the next refresh)."""
        self.postfix = ", ".join(f"{key}={value}" for key, value in values.items())

    def close(self) -> None:
        """Write the final state (what a saved notebook keeps). Calling it again does nothing."""
        if not self.closed:
            self.refresh()
            self.closed = True


def progress_bar(steps: Iterable[int], enabled: bool = True, description: str = N_("training")):
    """A progress bar over ``steps``: tqdm's text bar in a terminal; in a Jupyter kernel a
    :class:`NotebookProgress` line (throttled; see the module docstring for why).

    Returns:
        An iterable with ``set_postfix(**values)`` and ``close()``. With ``enabled=False``
        it shows nothing (a disabled tqdm).
    """
    if enabled and in_jupyter_kernel():
        return NotebookProgress(steps, description)
    return tqdm(steps, desc=translated(description), unit="step", disable=not enabled)
