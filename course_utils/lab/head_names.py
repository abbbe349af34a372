"""Naming trained attention heads by one rule, the same in every notebook.

A head is named after a position it attends to ("previous character", "start of the word",
...) only when the measurements single that position out. The rule, used by notebooks 05,
06, 07 and 12:

1. Measure: :func:`pattern_scores` (or :func:`measure_heads` for a model) averages, over
   many texts, the weight each head puts on the key of each pattern in :data:`PATTERNS`.
2. Compare with chance: a head that spread its weight evenly over the ``i + 1`` keys query
   ``i`` may see would score ``baseline[pattern]``; ``ratio = score / baseline`` says how
   many times the even spread a head scores.
3. Name: per head, the pattern with the largest ratio is ``best`` and the next one is
   ``runner_up``; ``margin = ratio[best] / ratio[runner_up]``. The head is named ``best``
   only when ``ratio[best] >= min_ratio`` (it beats chance clearly) and
   ``margin >= min_margin`` (it beats the other patterns clearly); otherwise ``"mixed"``.
   A near-tie is therefore never a name, so a name does not flip with the sample of texts.

The patterns are those of :func:`course_utils.lab.pretrained.pattern_pairs` plus the last line
break. The idea of reading heads off their attention to named positions follows Clark et al.,
"What Does BERT Look At?" (2019), §3; the margin rule is the course's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from course_utils.checks import check_text
from course_utils.data import load_shakespeare
from course_utils.lab.pretrained import HEAD_PATTERNS, attention_maps, corpus_windows, pattern_pairs
from course_utils.model import TinyDecoder
from course_utils.tokenization import CharTokenizer

#: The patterns a head is measured on, in the order tables print them.
PATTERNS = (*HEAD_PATTERNS, "last line break")

#: The name of a head that no pattern singles out.
MIXED = "mixed"

#: Defaults of :func:`name_heads`: at least twice the even spread, and 1.35 times the runner-up.
#: On the baby model, measured on :func:`course_windows` at seeds 0-9, every head's margin
#: stayed on one side of 1.35 (the nearest: 1.26-1.30 and 1.39-1.47), so no name flips with
#: the seed; at 64 windows the same heads spread over 1.23-1.33 and 1.25-1.57.
MIN_RATIO, MIN_MARGIN = 2.0, 1.35

#: How many windows of how many characters :func:`course_windows` draws.
N_WINDOWS, WINDOW_LENGTH = 256, 64


def course_windows(seed: int = 0) -> list[str]:
    """The texts every notebook measures heads on: :data:`N_WINDOWS` random windows of
    :data:`WINDOW_LENGTH` characters of the Shakespeare corpus (seeded).

    Raises:
        TypeError, ValueError: ``seed`` is not an int >= 0.
    """
    return corpus_windows(load_shakespeare(), n=N_WINDOWS, length=WINDOW_LENGTH, seed=seed)


def line_break_pairs(text: str) -> list[tuple[int, int]]:
    """``(i, b)`` with ``b`` the most recent ``"\\n"`` before query ``i``, when ``b <= i - 2``
    (nearer breaks would be "itself" or "previous character" again).

    Raises:
        TypeError: ``text`` is not a str.
    """
    check_text(text, "text")
    pairs, last_break = [], None
    for i, char in enumerate(text):
        if last_break is not None and i - last_break >= 2:
            pairs.append((i, last_break))
        if char == "\n":
            last_break = i
    return pairs


def all_pattern_pairs(text: str) -> dict[str, list[tuple[int, int]]]:
    """The (query, key) pairs of every pattern in :data:`PATTERNS` in ``text``.

    Raises:
        TypeError: ``text`` is not a str.
    """
    pairs = pattern_pairs(text)
    pairs["last line break"] = line_break_pairs(text)
    return pairs


def pattern_scores(
    maps: Iterable[torch.Tensor], texts: Sequence[str]
) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """Mean attention weight on each pattern's key, per head, from attention maps.

    Args:
        maps: one float tensor ``(n_layers, n_heads, T, T)`` per text (rows are queries,
            columns keys, as :func:`course_utils.lab.pretrained.attention_maps` returns), with
            ``T == len(text)``.
        texts: the texts the maps were computed on, in the same order.

    Returns:
        ``(scores, baseline)``: ``scores[pattern]`` float32 ``(n_layers, n_heads)``, the mean
        weight over every (query, key) pair of the pattern in every text; ``baseline[pattern]``
        the mean of ``1 / (i + 1)`` over the same pairs (what an even spread scores). A
        pattern with no pair in any text is left out of both.

    Raises:
        TypeError: ``texts`` is one str (pass ``[text]``), or a map is not a tensor.
        ValueError: a map is not 4-D with ``T == len(text)``, the numbers of maps and texts
            differ, or no pattern has a pair.
    """
    if isinstance(texts, str | bytes) or not isinstance(texts, list | tuple):
        raise TypeError(
            f"texts must be a list of strings, got {type(texts).__name__}; for one pass [text]"
        )
    totals: dict[str, torch.Tensor] = {}
    uniform = {name: 0.0 for name in PATTERNS}
    counts = {name: 0 for name in PATTERNS}
    n_maps = 0
    for n_maps, (weights, text) in enumerate(zip(maps, texts, strict=False), start=1):
        if not isinstance(weights, torch.Tensor):
            raise TypeError(f"each map must be a torch.Tensor, got {type(weights).__name__}")
        if weights.dim() != 4 or weights.shape[-2:] != (len(text), len(text)):
            raise ValueError(
                f"map {n_maps - 1} has shape {tuple(weights.shape)}, expected (n_layers, n_heads, "
                f"T, T) with T = len(text) = {len(text)}"
            )
        for name, pairs in all_pattern_pairs(text).items():
            if not pairs:
                continue
            queries, keys = torch.tensor(pairs).T  # (n_pairs, 2) -> 2 x (n_pairs,)
            weight = weights[:, :, queries, keys].double().sum(dim=-1)  # (L, h, n_pairs) -> (L, h)
            totals[name] = totals.get(name, 0) + weight
            uniform[name] += (1.0 / (queries + 1).double()).sum().item()
            counts[name] += len(pairs)
    if n_maps != len(texts):
        raise ValueError(f"got {n_maps} maps for {len(texts)} texts; pass one map per text")
    found = [name for name in PATTERNS if counts[name]]
    if not found:
        raise ValueError("no text has a (query, key) pair of any pattern; give longer texts")
    scores = {name: (totals[name] / counts[name]).float() for name in found}
    baseline = {name: uniform[name] / counts[name] for name in found}
    return scores, baseline


def measure_heads(
    model, tokenizer, texts: Sequence[str]
) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """:func:`pattern_scores` of a trained model's heads on ``texts``.

    Args:
        model: a :class:`course_utils.model.TinyDecoder`, in eval mode.
        tokenizer: its tokenizer.
        texts: strings of 1 to ``block_size`` characters, e.g.
            :func:`course_windows`.

    Returns and raises: as :func:`pattern_scores` and
    :func:`course_utils.lab.pretrained.attention_maps`.
    """
    if isinstance(texts, str | bytes) or not isinstance(texts, list | tuple):
        raise TypeError(
            f"texts must be a list of strings, got {type(texts).__name__}; for one pass [text]"
        )
    return pattern_scores((attention_maps(model, tokenizer, text) for text in texts), texts)


@dataclass(frozen=True)
class HeadName:
    """The verdict on one head: ``name`` is ``best`` or :data:`MIXED`; ``ratios`` maps each
    pattern to score / baseline; ``margin = ratios[best] / ratios[runner_up]``."""

    layer: int
    head: int
    name: str
    best: str
    runner_up: str
    margin: float
    ratios: dict[str, float]

    def describe(self) -> str:
        """One line: layer, head, name, the best ratio and the margin to the runner-up, e.g.
        ``layer 2 head 1: last space | best last space (4.1x even), margin 1.39 over previous
        character``."""
        return (
            f"layer {self.layer} head {self.head}: {self.name:<18} | best {self.best} "
            f"({self.ratios[self.best]:.1f}x even), margin {self.margin:.2f} over {self.runner_up}"
        )


def name_heads(
    scores: dict[str, torch.Tensor],
    baseline: dict[str, float],
    min_ratio: float = MIN_RATIO,
    min_margin: float = MIN_MARGIN,
) -> list[HeadName]:
    """Name every head by the module's rule (see the module docstring).

    Args:
        scores: pattern -> float ``(n_layers, n_heads)`` mean weights, as :func:`pattern_scores`,
            :func:`measure_heads` or :func:`head_pattern_scores` return.
        baseline: pattern -> the even-spread score of that pattern (> 0).
        min_ratio: how many times the even spread the best pattern must score (>= 1).
        min_margin: how many times the runner-up's ratio the best's must be (>= 1).

    Returns:
        One :class:`HeadName` per head, layer by layer, head by head.

    Raises:
        TypeError: ``scores`` is not a dict of tensors, ``baseline`` not a dict, or a
            threshold not a number.
        ValueError: fewer than two patterns, tables of different shapes or not 2-D, a
            pattern without a positive baseline, or ``min_ratio`` / ``min_margin`` below 1.
    """
    if not isinstance(scores, dict) or not all(
        isinstance(t, torch.Tensor) for t in scores.values()
    ):
        raise TypeError(
            "scores must be a dict pattern -> (n_layers, n_heads) tensor, as pattern_scores returns"
        )
    if not isinstance(baseline, dict):
        raise TypeError(
            f"baseline must be a dict pattern -> float, got {type(baseline).__name__}; pass the "
            "second value pattern_scores returns: name_heads(*pattern_scores(maps, texts))"
        )
    for name, value in (("min_ratio", min_ratio), ("min_margin", min_margin)):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"{name} must be a number >= 1, got {value!r} ({type(value).__name__})")
    if len(scores) < 2:
        raise ValueError(f"scores has {len(scores)} pattern(s); a margin needs at least 2")
    shapes = {tuple(t.shape) for t in scores.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != 2:
        raise ValueError(
            f"every table must have the same 2-D shape (n_layers, n_heads), got {sorted(shapes)}"
        )
    bad = [p for p in scores if not baseline.get(p, 0) > 0]
    if bad:
        raise ValueError(
            f"baseline must be > 0 for every pattern; missing or not positive for {bad}"
        )
    if min_ratio < 1 or min_margin < 1:
        raise ValueError(f"min_ratio and min_margin must be >= 1, got {min_ratio} and {min_margin}")
    n_layers, n_heads = next(iter(shapes))
    names = []
    for layer in range(n_layers):
        for head in range(n_heads):
            ratios = {p: scores[p][layer, head].item() / baseline[p] for p in scores}
            best, runner_up = sorted(ratios, key=ratios.get, reverse=True)[:2]
            margin = ratios[best] / ratios[runner_up] if ratios[runner_up] > 0 else float("inf")
            clear = ratios[best] >= min_ratio and margin >= min_margin
            names.append(
                HeadName(layer, head, best if clear else MIXED, best, runner_up, margin, ratios)
            )
    return names


def head_pattern_scores(
    model: TinyDecoder, tokenizer: CharTokenizer, texts: list[str]
) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """How much weight each head puts on each named position, averaged over ``texts``.

    The four patterns of :data:`HEAD_PATTERNS`, measured by
    :func:`course_utils.lab.pattern_scores` (which adds the last line break, and names
    heads with :func:`course_utils.lab.head_names.name_heads`).

    Args:
        model, tokenizer: as for :func:`attention_maps`.
        texts: strings of 1 to ``block_size`` characters (e.g. windows of the corpus).

    Returns:
        ``(scores, baseline)``. ``scores[name]`` is float32 ``(n_layers, n_heads)``: the mean
        attention weight on the key of pattern ``name`` (see :func:`pattern_pairs`), over
        every (query, key) pair of every text. ``baseline[name]`` is what a head spreading
        its weight evenly over the ``i + 1`` visible keys would score (mean of ``1/(i+1)``),
        the level a head must clearly beat to be named after the pattern.

    Raises:
        TypeError: ``texts`` is one str instead of a list of them (pass ``[text]``).
        ValueError: ``texts`` is empty, as :func:`attention_maps`, or no text has a pair of
            some pattern.
    """
    if isinstance(texts, str | bytes) or not isinstance(texts, list | tuple):
        raise TypeError(
            f"texts must be a list of strings, got {type(texts).__name__}; for one text pass "
            "[text], for windows of a corpus corpus_windows(text, n, length)"
        )
    if not texts:
        raise ValueError("texts is empty; pass at least one string, e.g. [text]")
    # One measurement for the whole course: pattern_scores, on this module's
    # attention_maps, keeping this function's four patterns.
    scores, baseline = pattern_scores(
        (attention_maps(model, tokenizer, text) for text in texts), texts
    )
    missing = [name for name in HEAD_PATTERNS if name not in scores]
    if missing:
        raise ValueError(f"no text has a (query, key) pair for {missing}; give longer texts")
    return (
        {name: scores[name] for name in HEAD_PATTERNS},
        {name: baseline[name] for name in HEAD_PATTERNS},
    )
