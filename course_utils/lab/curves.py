"""Loss curves of a training run (notebook 12): per-step, evaluated train and validation loss."""

from __future__ import annotations

from course_utils.lab.cache_dirs import configure_matplotlib_cache

configure_matplotlib_cache()  # before matplotlib is imported (see course_utils.lab.viz)

import matplotlib.pyplot as plt  # noqa: E402

from course_utils.checks import as_number  # noqa: E402
from course_utils.lab.language import N_, tr, translated  # noqa: E402


def plot_loss_curves(
    history, title: str = N_("Training and validation loss"), bar: float | None = None
):
    """Per-step training loss (faint), evaluated train/val loss (lines), optional target bar.

    Args:
        history: a :class:`course_utils.training.History`.
        bar: draw a horizontal line at this loss (nats per token).

    Raises:
        TypeError: ``history`` is not a History (what ``train`` returns), or ``bar`` is
            neither None nor a number.
    """
    bar = _check_history_and_bar(history, bar)
    fig, ax = plt.subplots(figsize=(7, 4))
    steps = range(1, len(history.batch_loss) + 1)
    ax.plot(steps, history.batch_loss, color="0.75", linewidth=0.8, label=tr("batch loss"))
    ax.plot(history.step, history.train_loss, "o-", label=tr("train (evaluated)"))
    ax.plot(history.step, history.val_loss, "s-", label=tr("validation"))
    if bar is not None:
        target = tr("target {bar}").format(bar=bar)
        ax.axhline(bar, color="crimson", linestyle="--", linewidth=1, label=target)
    ax.set_xlabel(tr("optimizer step"))
    ax.set_ylabel(tr("cross-entropy (nats per token)"))
    ax.set_title(translated(title))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


def _check_history_and_bar(history: object, bar: object) -> float | None:
    """``bar`` as a float (or None); raises if ``history`` is not a History."""
    missing = [
        name
        for name in ("step", "train_loss", "val_loss", "batch_loss")
        if not hasattr(history, name)
    ]
    if missing:
        raise TypeError(
            f"history must be the History that train() returns, got {type(history).__name__} "
            f"(no {missing}); e.g. history = train(model, train_data, val_data, config)"
        )
    if bar is not None:
        bar = as_number(bar, "bar")
    return bar
