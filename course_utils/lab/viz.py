"""Figures: a font with Chinese glyphs, the course style, attention heatmaps.

Loss curves are in :mod:`course_utils.lab.curves`, the decoder diagram in
:mod:`course_utils.lab.diagram`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from course_utils.lab.cache_dirs import configure_matplotlib_cache

# Before matplotlib is imported: on a machine whose home folder is read-only, point its
# config and font cache at a writable per-user folder (it would otherwise warn and rebuild
# the font cache in a new temporary folder in every process).
configure_matplotlib_cache()

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from matplotlib import font_manager  # noqa: E402

from course_utils.checks import check_bool  # noqa: E402
from course_utils.lab.language import N_, tr, translated  # noqa: E402

CJK_FONT_HINT = "pip install pylopdf-fonts-zh-cn"
# System fonts with CJK glyphs, tried when the pip package is missing (macOS, Windows, Debian).
_SYSTEM_CJK_FONTS = (
    "/System/Library/Fonts/PingFang.ttc",
    "C:/Windows/Fonts/msyh.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
)


def find_cjk_font() -> Path:
    """Path of a font file with Chinese glyphs: Noto Sans SC from ``pylopdf-fonts-zh-cn``,
    else a known system font.

    Raises:
        FileNotFoundError: no such font is installed; the message says what to install.
    """
    try:
        path = Path(str(resources.files("pylopdf_fonts_zh_cn") / "NotoSansSC-Regular.otf"))
        if path.is_file():
            return path
    except ModuleNotFoundError:
        pass
    for candidate in _SYSTEM_CJK_FONTS:
        if Path(candidate).is_file():
            return Path(candidate)
    raise FileNotFoundError(
        "no font with Chinese glyphs found (matplotlib's default font has none, so Chinese "
        f"labels would show as boxes); install one with `{CJK_FONT_HINT}` (or run `make setup`)"
    )


class _NoBoldFallbackNotice(logging.Filter):
    """Drop matplotlib's notice that the CJK font has no bold face (it then uses regular,
    which is what we want); every other font message still shows."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Failed to find font weight" not in record.getMessage()


_FONT_FILTER = _NoBoldFallbackNotice()


def use_course_style() -> None:
    """Register the CJK font and set the course's plot defaults. Safe to call repeatedly.

    Latin text keeps matplotlib's DejaVu Sans; glyphs it lacks (Chinese) fall back to the
    CJK font, so labels such as 北京 render instead of "Glyph missing" boxes.

    Raises:
        FileNotFoundError: from :func:`find_cjk_font`.
    """
    path = find_cjk_font()
    font_manager.fontManager.addfont(str(path))
    family = font_manager.FontProperties(fname=str(path)).get_name()
    # Explicit names, not the generic "sans-serif": only a list of named families gives
    # matplotlib a per-glyph fallback chain.
    plt.rcParams["font.family"] = ["DejaVu Sans", family]
    plt.rcParams["figure.dpi"] = 100
    logging.getLogger("matplotlib.font_manager").addFilter(_FONT_FILTER)  # idempotent


#: Whitespace shown as a visible sign: space ␣, line break ↵, tab ⇥. One character each, so a
#: label stays upright and readable (a two-character "\\n" was turned 90 degrees); the three
#: glyphs are in DejaVu Sans, the course's Latin font.
_VISIBLE_WHITESPACE = {" ": "␣", "\n": "↵", "\t": "⇥"}


def visible_labels(tokens: Sequence[str]) -> list[str]:
    """Tick labels with whitespace made visible: ``" "`` -> ␣, ``"\\n"`` -> ↵, ``"\\t"`` -> ⇥.

    A label that is or starts/ends with whitespace, or holds a line break or tab anywhere
    (which would break the label), gets the signs; a space inside a subword ("a b") reads
    fine and stays. The heatmaps of this module label their axes with it.

    Args:
        tokens: a list of str (or one str of characters).

    Returns:
        one str per token.
    """
    return [
        "".join(_VISIBLE_WHITESPACE.get(c, c) for c in t)
        if t.strip() != t or not t or "\n" in t or "\t" in t
        else t
        for t in tokens
    ]


def _check_labels(tokens: object, name: str) -> Sequence[str]:
    """TypeError unless ``tokens`` is a sequence of labels (a list, or a str of characters)."""
    if isinstance(tokens, str) or (
        isinstance(tokens, Sequence) and all(isinstance(t, str) for t in tokens)
    ):
        return tokens
    raise TypeError(
        f"{name} must be a list of str labels, one per position (or one str of characters), "
        f"got {type(tokens).__name__}; e.g. list(text) or [tok.decode([i]) for i in ids]"
    )


def _as_weights(weights: object) -> torch.Tensor:
    """Attention weights as a float CPU tensor (tensors, numpy arrays and lists)."""
    try:
        return torch.as_tensor(weights).detach().float().cpu()
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(
            f"weights must be a tensor (or numpy array) of attention weights, got "
            f"{type(weights).__name__}"
        ) from None


def _set_key_labels(ax: plt.Axes, labels: Sequence[str]) -> None:
    """x tick labels: one-character labels (Latin or CJK) upright, readable side by side;
    longer labels (subwords, "pad") turned 90 degrees so they do not overlap."""
    ax.set_xticks(range(len(labels)), labels)
    for text, label in zip(ax.get_xticklabels(), labels):
        text.set_rotation(0 if len(label) <= 1 else 90)


#: How far outside [0, 1] a weight may lie (float rounding of a softmax) before it is refused.
_WEIGHT_TOLERANCE = 1e-4


def _check_unit_range(weights: torch.Tensor) -> None:
    """ValueError for values outside [0, 1] (raw scores, logits, -inf of a mask), which the
    0..1 colour scale would clip without saying so. NaN is left alone."""
    finite = weights[~torch.isnan(weights)]
    if finite.numel() == 0:
        return
    low, high = finite.min().item(), finite.max().item()
    if low < -_WEIGHT_TOLERANCE or high > 1 + _WEIGHT_TOLERANCE:
        raise ValueError(
            f"weights must be attention weights in [0, 1] (the colour scale is 0..1), got "
            f"values from {low:.4g} to {high:.4g}; these look like raw scores: plot "
            "torch.softmax(scores, dim=-1) instead (a mask: mask.float())"
        )


#: Colour of NaN cells (imshow would leave them blank) and of the note that explains them.
_NAN_COLOR = "crimson"


def _mark_nan(ax: plt.Axes, weights: torch.Tensor, title: str) -> str:
    """Mark NaN weights in the heatmap and return the title with a line that says why.

    imshow draws NaN as a blank cell, which reads as "no attention". A row of NaN is almost
    always a fully masked row: every key of that query was masked, so the softmax of all
    ``-inf`` scores is 0/0. Such a row gets a hatched band and the words "all keys masked";
    an isolated NaN cell gets an ×.
    """
    nan = torch.isnan(weights)
    if not nan.any():
        return title
    width = weights.shape[1]
    full = nan.all(dim=1)
    for row in full.nonzero().flatten().tolist():
        ax.add_patch(
            plt.Rectangle(
                (-0.5, row - 0.5), width, 1, fill=False, hatch="///", edgecolor=_NAN_COLOR
            )
        )
        ax.text((width - 1) / 2, row, tr("NaN: all keys masked"), ha="center", va="center",
                fontsize=9, color=_NAN_COLOR, backgroundcolor="white")  # fmt: skip
    for row, column in (nan & ~full[:, None]).nonzero().tolist():
        ax.text(column, row, "×", ha="center", va="center", fontsize=11, color=_NAN_COLOR)
    rows = int(full.sum())
    cells = int((nan & ~full[:, None]).sum())
    parts = []
    if rows:
        if rows == 1:
            parts.append(tr("{rows} NaN row (fully masked: softmax 0/0)").format(rows=rows))
        else:
            parts.append(tr("{rows} NaN rows (fully masked: softmax 0/0)").format(rows=rows))
    if cells:
        if cells == 1:
            parts.append(tr("{cells} NaN cell (×)").format(cells=cells))
        else:
            parts.append(tr("{cells} NaN cells (×)").format(cells=cells))
    return f"{title}\n" + ", ".join(parts)


def plot_attention(
    weights: torch.Tensor,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    title: str = N_("Attention weights"),
    ax: plt.Axes | None = None,
    colorbar: bool = True,
) -> plt.Axes:
    """Heatmap of one head's attention weights, both axes labelled with tokens.

    Args:
        weights: ``(T_q, T_k)`` values in [0, 1]; row i is how query i spreads its attention
            over the keys (a softmax output, or a 0/1 mask as floats). Raw scores are refused.
        query_tokens: T_q labels (rows). key_tokens: T_k labels (columns), default the same.

    Raises:
        TypeError: the labels are not a list of str (or one str), ``weights`` is not
            array-like, ``ax`` is not an Axes, ``colorbar`` is not a bool.
        ValueError: ``weights`` is not 2-D, is empty, the label counts do not match its
            shape, or it holds values outside [0, 1] (raw scores: softmax them first).

    NaN weights are not drawn blank without a word: a row of NaN (a fully masked query,
    whose softmax is 0/0) is hatched and labelled "NaN: all keys masked", a single NaN cell
    gets an ×, and the title gets a second line that counts them.
    """
    if ax is not None and not isinstance(ax, plt.Axes):
        raise TypeError(
            f"ax must be a matplotlib Axes or None, got {type(ax).__name__}; e.g. "
            "fig, ax = plt.subplots(), then plot_attention(..., ax=ax)"
        )
    colorbar = check_bool(colorbar, "colorbar")
    query_tokens = _check_labels(query_tokens, "query_tokens")
    key_tokens = query_tokens if key_tokens is None else _check_labels(key_tokens, "key_tokens")
    weights = _as_weights(weights)
    if weights.ndim != 2 or weights.shape != (len(query_tokens), len(key_tokens)):
        raise ValueError(
            f"weights must be (T_q, T_k) = ({len(query_tokens)}, {len(key_tokens)}) to match the "
            f"labels, got {tuple(weights.shape)}"
        )
    if weights.numel() == 0:
        raise ValueError(
            f"weights is empty, shape {tuple(weights.shape)}: there is nothing to plot; pass "
            "the weights of at least one query and one key"
        )
    _check_unit_range(weights)
    ax = ax or plt.subplots(figsize=(4.5, 4))[1]
    image = ax.imshow(weights.numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
    title = _mark_nan(ax, weights, translated(title))
    _set_key_labels(ax, visible_labels(key_tokens))
    ax.set_yticks(range(len(query_tokens)), visible_labels(query_tokens))
    ax.set_xlabel(tr("key position (attended to)"))
    ax.set_ylabel(tr("query position (attending)"))
    ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label=tr("weight"))
    return ax


#: The widest figure :func:`plot_attention_heads` draws, in inches: 1250 pixels at the course's
#: 100 dpi, so its 10-pt labels still show at 8 pt or more on a 1000-pixel page column
#: (tests/test_figure_width.py: at most 1302 pixels).
MAX_FIGURE_WIDTH_IN = 12.5
#: Room for the shared colour bar beside the panels, in inches.
_COLORBAR_IN = 0.8


def _head_grid(heads: int, length: int) -> tuple[int, int, float]:
    """``(columns, rows, panel size in inches)`` for ``heads`` heatmaps of ``length`` tokens.

    A panel gets 0.15 inch per token plus 1.3 for its tick labels (at least 3.3), and may
    shrink to 0.13 inch per token to fit :data:`MAX_FIGURE_WIDTH_IN`; below that its 10-pt
    labels would overlap, so a row holds fewer panels instead. Short sequences (T <= 12) put
    all heads on one row when they fit, longer ones two columns at most; the rows are then
    balanced (4 heads that do not fit on one row make 2 x 2, not 3 + 1).
    """
    wanted = max(3.3, 0.15 * length + 1.3)
    smallest = max(3.3, 0.13 * length + 1.3)
    columns = heads if length <= 12 else min(heads, 2)
    while columns > 1 and smallest * columns + _COLORBAR_IN > MAX_FIGURE_WIDTH_IN:
        columns -= 1
    rows = -(-heads // columns)
    columns = -(-heads // rows)  # balanced rows
    panel = min(wanted, (MAX_FIGURE_WIDTH_IN - _COLORBAR_IN) / columns)
    return columns, rows, panel


def plot_attention_heads(
    weights: torch.Tensor,
    tokens: Sequence[str],
    title: str = N_("Attention per head"),
    head_titles: Sequence[str] | None = None,
) -> plt.Figure:
    """One heatmap per head with a shared colour scale. ``weights``: ``(h, T, T)``.

    Short sequences get one row of panels; longer ones (T > 12) two columns, with panels
    large enough for one readable label per token; the figure is at most
    :data:`MAX_FIGURE_WIDTH_IN` wide, so a row holds fewer panels when they would not fit
    (see :func:`_head_grid`). ``head_titles`` names the panels
    (default ``head 0``, ``head 1``, ...), e.g. with what a trained head attends to.

    Raises:
        TypeError: ``weights`` is not array-like, ``head_titles`` is not a list; bad labels
            (see :func:`plot_attention`).
        ValueError: ``weights`` is not 3-D or has no head, or ``head_titles`` has not one
            title per head.
    """
    weights = _as_weights(weights)
    if weights.ndim != 3:
        hint = (
            "; for a batch (B, h, T, T) plot one sequence: weights[0]" if weights.ndim == 4 else ""
        )
        raise ValueError(f"weights must be (h, T, T), got shape {tuple(weights.shape)}{hint}")
    heads, length = weights.shape[0], weights.shape[-1]
    if heads == 0:
        raise ValueError(f"weights has no head, shape {tuple(weights.shape)}; pass (h, T, T)")
    if head_titles is None:
        head_titles = [tr("head {head}").format(head=head) for head in range(heads)]
    if isinstance(head_titles, str) or not isinstance(head_titles, Sequence):
        raise TypeError(
            f"head_titles must be a list of str, one per head, got {type(head_titles).__name__}"
        )
    if len(head_titles) != heads:
        raise ValueError(
            f"head_titles must have one title per head ({heads}), got {len(head_titles)}"
        )
    columns, rows, panel = _head_grid(heads, length)
    fig, axes = plt.subplots(
        rows,
        columns,
        figsize=(panel * columns + 0.8, panel * rows + 0.4),
        squeeze=False,
        layout="constrained",
    )
    for head, ax in enumerate(axes.flat):
        if head >= heads:
            ax.axis("off")
            continue
        plot_attention(weights[head], tokens, title=head_titles[head], ax=ax, colorbar=False)
        if head % columns:
            ax.set_ylabel("")
        if head < heads - columns:
            ax.set_xlabel("")
    fig.suptitle(translated(title))
    # One shared scale: every panel uses the same 0..1 colour range.
    fig.colorbar(axes.flat[0].images[0], ax=axes, shrink=0.6, label=tr("weight"))
    return fig
