"""Figures: Chinese labels render with a real font, and plotting helpers check their inputs."""

import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from course_utils.lab import curves, viz  # noqa: E402
from course_utils.training import History  # noqa: E402


def _draw_with_label(label: str) -> list[str]:
    """Render a figure whose tick label is `label`; return the glyph warnings raised."""
    fig, ax = plt.subplots()
    ax.set_title(label)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.canvas.draw()
    plt.close(fig)
    return [str(w.message) for w in caught if "missing from font" in str(w.message)]


def test_chinese_labels_render_after_use_course_style():
    plt.rcdefaults()
    # Without the course style, the default font has no CJK glyphs: the check can fail.
    assert _draw_with_label("我爱北京天安门"), "expected 'Glyph missing' warnings by default"
    viz.use_course_style()
    assert _draw_with_label("我爱北京天安门") == []
    plt.rcdefaults()


def test_missing_cjk_font_says_what_to_install(monkeypatch, tmp_path):
    def no_package(name):
        raise ModuleNotFoundError(name)

    monkeypatch.setattr(viz.resources, "files", no_package)
    monkeypatch.setattr(viz, "_SYSTEM_CJK_FONTS", (str(tmp_path / "absent.ttc"),))
    with pytest.raises(FileNotFoundError, match="pip install pylopdf-fonts-zh-cn"):
        viz.find_cjk_font()


def test_plot_attention_labels_and_shape_check():
    weights = torch.softmax(torch.randn(3, 4), dim=-1)
    ax = viz.plot_attention(weights, ["我", "爱", "你"], ["a", " ", "\n", "d"])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["我", "爱", "你"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "␣", "↵", "d"]
    plt.close("all")
    with pytest.raises(ValueError, match=r"\(3, 3\).*\(3, 4\)"):
        viz.plot_attention(weights, ["a", "b", "c"])


def test_whitespace_labels_are_one_visible_upright_sign_the_font_has():
    # Issue 23: "\\n" was two characters, so the label turned 90 degrees and was unreadable.
    weights = torch.softmax(torch.randn(2, 6), dim=-1)
    keys = [" ", "\n", "\t", " the", "a\nb", "a b"]
    viz.use_course_style()
    ax = viz.plot_attention(weights, ["q", "r"], keys)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["␣", "↵", "⇥", "␣the", "a↵b", "a b"]
    assert [t.get_rotation() for t in ax.get_xticklabels()][:3] == [0.0, 0.0, 0.0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ax.figure.canvas.draw()
    plt.close("all")
    plt.rcdefaults()
    assert not [w for w in caught if "missing from font" in str(w.message)]


def test_single_character_labels_stay_upright_longer_ones_turn():
    # Chinese characters rotated 90 degrees lie on their side (issue 15); one-character labels
    # fit side by side upright, longer labels (subwords) still turn.
    weights = torch.softmax(torch.randn(4, 4), dim=-1)
    ax = viz.plot_attention(weights, list("我爱自然"))
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {0.0}
    ax = viz.plot_attention(weights, ["the", " cat", "深", "."])
    assert [t.get_rotation() for t in ax.get_xticklabels()] == [90.0, 90.0, 0.0, 0.0]
    plt.close("all")


def test_plot_attention_heads_takes_head_titles():
    weights = torch.softmax(torch.randn(2, 3, 3), -1)
    fig = viz.plot_attention_heads(weights, list("abc"), head_titles=["previous", "itself"])
    assert [ax.get_title() for ax in fig.axes[:2]] == ["previous", "itself"]
    plt.close("all")
    with pytest.raises(ValueError, match="one title per head"):
        viz.plot_attention_heads(weights, list("abc"), head_titles=["only one"])


def test_plot_attention_heads_and_loss_curves_build_figures():
    fig = viz.plot_attention_heads(torch.softmax(torch.randn(2, 3, 3), -1), list("abc"))
    assert [ax.get_title() for ax in fig.axes[:2]] == ["head 0", "head 1"]
    assert fig.axes[2].get_ylabel() == "weight", "one shared colour bar"
    history = History(step=[1, 2], train_loss=[3.0, 2.0], val_loss=[3.1, 2.2], batch_loss=[3, 2])
    fig = curves.plot_loss_curves(history, bar=2.1)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert labels == ["batch loss", "train (evaluated)", "validation", "target 2.1"]
    plt.close("all")
    with pytest.raises(ValueError, match=r"\(h, T, T\)"):
        viz.plot_attention_heads(torch.zeros(3, 3), list("abc"))


def _pixel_width(fig) -> int:
    """Width of the PNG the notebook's inline backend shows (bbox_inches="tight", 100 dpi, the
    default pad): the figure's tight box, laid out without drawing the pixels (the PNG's width,
    to the pixel, at a third less time)."""
    fig.set_dpi(100)
    fig.draw_without_rendering()
    width_in = fig.get_tightbbox().width + 2 * plt.rcParams["savefig.pad_inches"]
    plt.close(fig)
    return int(width_in * 100)


@pytest.mark.tooling  # slow (make test-tooling, CI): keeps make test under 5 minutes
@pytest.mark.parametrize(
    ("heads", "length", "columns"),
    [(3, 6, 3), (4, 6, 2), (8, 6, 3), (4, 27, 2)]
    # the long prompts draw for seconds each: make test-tooling (CI) draws them
    + [
        pytest.param(*case, marks=pytest.mark.tooling)
        for case in [(4, 32, 2), (4, 48, 1), (2, 90, 1)]
    ],
)
def test_plot_attention_heads_fits_a_page_column(heads, length, columns):
    # Issue 23: 10-pt labels must show at 8 pt or more on a 1000-px page, so a figure may be
    # at most 1302 px wide (tests/test_figure_width.py). Four heads of six tokens on one row
    # were 1407 px, two columns of 32 tokens 1307 px.
    weights = torch.softmax(torch.randn(heads, length, length), dim=-1)
    fig = viz.plot_attention_heads(weights, ["x"] * length)
    panels = [ax for ax in fig.axes[:heads]]
    assert len({round(ax.get_position().x0, 3) for ax in panels}) == columns
    assert fig.get_figwidth() <= viz.MAX_FIGURE_WIDTH_IN
    assert _pixel_width(fig) <= 1302
