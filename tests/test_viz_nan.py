"""plot_attention does not draw NaN weights as blank cells without a word: a fully masked row
(softmax 0/0) is hatched and labelled, a stray NaN cell gets an ×, the title counts them and
says why (issue 23). The figure is rendered, so a glyph or layout problem shows up too."""

import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from course_utils.lab import viz  # noqa: E402


def _weights_with_a_fully_masked_row() -> torch.Tensor:
    """Softmax over scores where query 2 may see no key at all: its row is NaN."""
    scores = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    allowed = torch.ones(4, 4, dtype=torch.bool).tril()
    allowed[2] = False  # every key of query 2 masked
    return torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)


def _texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def _render(fig) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a missing glyph (×) would warn
        fig.canvas.draw()


def test_a_fully_masked_row_is_marked_and_explained():
    weights = _weights_with_a_fully_masked_row()
    assert torch.isnan(weights[2]).all() and not torch.isnan(weights[[0, 1, 3]]).any()
    ax = viz.plot_attention(weights, list("abcd"), title="causal")
    _render(ax.figure)
    assert ax.get_title() == "causal\n1 NaN row (fully masked: softmax 0/0)"
    assert _texts(ax) == ["NaN: all keys masked"]
    (text,) = ax.texts
    assert text.get_position()[1] == 2, "written across row 2, the masked query"
    (band,) = [p for p in ax.patches if p.get_hatch()]
    assert band.get_y() == 1.5 and band.get_width() == 4, "the whole row is hatched"
    plt.close("all")


def test_stray_nan_cells_get_a_cross_in_every_head():
    weights = torch.full((2, 3, 3), 1 / 3)
    weights[1, 0, 2] = float("nan")  # one NaN cell, not a whole row
    fig = viz.plot_attention_heads(weights, list("abc"))
    _render(fig)
    clean, marked = fig.axes[:2]
    assert _texts(clean) == [] and clean.get_title() == "head 0"
    assert _texts(marked) == ["×"] and marked.texts[0].get_position() == (2, 0)
    assert marked.get_title() == "head 1\n1 NaN cell (×)"
    plt.close("all")


def test_weights_without_nan_are_drawn_as_before():
    ax = viz.plot_attention(torch.nan_to_num(_weights_with_a_fully_masked_row()), list("abcd"))
    assert _texts(ax) == [] and ax.get_title() == "Attention weights"
    assert not [p for p in ax.patches if p.get_hatch()]
    plt.close("all")
