"""The decoder diagram: one box per stage, labelled with its tensor's shape.

Drawn by ``scripts/draw_decoder_diagram.py`` into ``assets/figures/decoder_shapes.svg``.
"""

from __future__ import annotations

from course_utils.lab.cache_dirs import configure_matplotlib_cache

configure_matplotlib_cache()  # before matplotlib is imported (see course_utils.lab.viz)

from collections.abc import Sequence  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402

from course_utils.lab.language import N_, translated  # noqa: E402


def draw_decoder_diagram(
    stages: Sequence[tuple[str, str]],
    title: str = N_("Decoder-only Transformer"),
    repeat_label: str = "× n_layers",
):
    """A top-to-bottom flow chart: one box per stage, labelled with its tensor's shape.

    Args:
        stages: ``(name, shape text)`` pairs in data-flow order. Names starting with ``"  "``
            are drawn indented, inside the repeated block.

    Raises:
        TypeError: ``stages`` is not a list of pairs.
        ValueError: a stage is not a ``(name, shape text)`` pair of str.
    """
    _check_stages(stages)
    height = 0.62 * len(stages) + 0.8
    fig, ax = plt.subplots(figsize=(7.5, height))
    ax.set_xlim(0, 10)
    ax.set_ylim(-len(stages), 1)
    ax.axis("off")
    inner = [i for i, (name, _) in enumerate(stages) if name.startswith("  ")]
    if inner:
        top, bottom = min(inner), max(inner)
        ax.add_patch(
            plt.Rectangle(
                (0.3, -bottom - 0.45),
                9.4,
                bottom - top + 0.9,
                fill=True,
                facecolor="#eef3fb",
                edgecolor="#4a6fa5",
                linestyle="--",
            )
        )
        ax.text(9.6, -top + 0.3, repeat_label, ha="right", va="center", color="#4a6fa5", fontsize=9)
    for i, (name, shape) in enumerate(stages):
        x = 1.2 if name.startswith("  ") else 0.6
        ax.add_patch(plt.Rectangle((x, -i - 0.3), 4.6, 0.6, facecolor="white", edgecolor="0.3"))
        ax.text(x + 0.15, -i, name.strip(), va="center", fontsize=10)
        ax.text(6.2, -i, shape, va="center", fontsize=10, family="monospace")
        if i + 1 < len(stages):
            ax.annotate(
                "",
                xy=(x + 2.3, -i - 0.7),
                xytext=(x + 2.3, -i - 0.3),
                arrowprops=dict(arrowstyle="->", color="0.3"),
            )
    ax.set_title(translated(title))
    fig.tight_layout()
    return fig


def _check_stages(stages: object) -> None:
    """Raise unless ``stages`` is a list of ``(name, shape text)`` pairs of str."""
    if not isinstance(stages, list | tuple):
        raise TypeError(
            f"stages must be a list of (name, shape text) pairs, got {type(stages).__name__}; "
            'e.g. [("ids", "(B, T)"), ("  block", "(B, T, C)")]'
        )
    for stage in stages:
        if not (
            isinstance(stage, list | tuple)
            and len(stage) == 2
            and all(isinstance(part, str) for part in stage)
        ):
            raise ValueError(
                f"every item of stages must be a (name, shape text) pair of str, got "
                f'{stage!r}; e.g. ("ids", "(B, T)")'
            )
