"""course_utils.lab.head_names: the one rule that names trained heads. Checked on synthetic
attention maps whose answer is known by construction (a head that attends only to the
previous character, one only to the last space, one to the last line break, an even spread,
and a near-tie that must come out "mixed"), and on the shipped model across window seeds."""

from __future__ import annotations

import pytest
import torch

from course_utils.lab import head_names
from course_utils.lab.head_names import MIXED, name_heads, pattern_scores

TEXTS = ["to be or\nnot to be: that is\nthe question", "whether tis nobler\nin the mind to"]


def _head(text: str, key_of) -> torch.Tensor:
    """(T, T) causal weights: query i puts all its weight on key_of(i), or spreads evenly
    over keys 0..i where key_of gives None."""
    T = len(text)
    weights = torch.zeros(T, T)
    for i in range(T):
        key = key_of(i)
        if key is None:
            weights[i, : i + 1] = 1 / (i + 1)
        else:
            weights[i, key] = 1.0
    return weights


def _last(text: str, char: str, i: int):
    """The most recent ``char`` at least 2 before i, else None."""
    found = [j for j in range(i - 1) if text[j] == char]
    return found[-1] if found else None


def _maps(text: str) -> torch.Tensor:
    """(1 layer, 5 heads, T, T): previous character; last space; last line break; even spread;
    a near-tie of half itself, half the previous character."""
    previous = _head(text, lambda i: max(i - 1, 0))
    space = _head(text, lambda i: _last(text, " ", i))
    line_break = _head(text, lambda i: _last(text, "\n", i))
    even = _head(text, lambda i: None)
    tie = 0.5 * _head(text, lambda i: i) + 0.5 * previous
    return torch.stack([previous, space, line_break, even, tie])[None]  # (1, 5, T, T)


@pytest.fixture
def measured():
    return pattern_scores([_maps(text) for text in TEXTS], TEXTS)


def test_scores_are_the_mean_weight_on_each_pattern_key(measured):
    scores, baseline = measured
    assert set(scores) == set(head_names.PATTERNS)
    assert scores["previous character"][0, 0].item() == pytest.approx(1.0)
    assert scores["last space"][0, 1].item() == pytest.approx(1.0)
    assert scores["last line break"][0, 2].item() == pytest.approx(1.0)
    assert scores["itself"][0, 4].item() == pytest.approx(0.5)
    # The even spread scores exactly the baseline on every pattern (that is its definition).
    for pattern in head_names.PATTERNS:
        assert scores[pattern][0, 3].item() == pytest.approx(baseline[pattern], rel=1e-5)


def test_known_heads_get_their_names_and_the_near_tie_is_mixed(measured):
    names = name_heads(*measured)
    assert [n.name for n in names] == [
        "previous character",
        "last space",
        "last line break",
        MIXED,  # an even spread: ratio 1 on every pattern, below min_ratio
        MIXED,  # itself vs previous character: margin 1.0
    ]
    tie = names[4]
    assert {tie.best, tie.runner_up} == {"itself", "previous character"}
    assert tie.margin == pytest.approx(1.0, abs=1e-6)
    assert names[3].ratios["itself"] == pytest.approx(1.0, rel=1e-5)
    assert "mixed" in tie.describe() and "layer 0 head 4" in tie.describe()


def test_a_slight_lead_is_mixed_and_a_clear_one_is_named():
    # Two patterns, one head each; ratios 6.0 vs 5.0 (margin 1.2) and 6.0 vs 3.0 (margin 2).
    scores = {"a": torch.tensor([[0.6, 0.6]]), "b": torch.tensor([[0.5, 0.3]])}
    baseline = {"a": 0.1, "b": 0.1}
    slight, clear = name_heads(scores, baseline)
    assert (slight.name, slight.best, round(slight.margin, 6)) == (MIXED, "a", 1.2)
    assert (clear.name, round(clear.margin, 6)) == ("a", 2.0)
    # The thresholds are the caller's to move: at min_margin 1.1 the slight lead is a name.
    assert name_heads(scores, baseline, min_margin=1.1)[0].name == "a"


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="at least 2"):
        name_heads({"a": torch.ones(1, 1)}, {"a": 1.0})
    with pytest.raises(ValueError, match="baseline must be > 0.*'b'"):
        name_heads({"a": torch.ones(1, 1), "b": torch.ones(1, 1)}, {"a": 1.0})
    with pytest.raises(ValueError, match="same 2-D shape"):
        name_heads({"a": torch.ones(1, 2), "b": torch.ones(2, 1)}, {"a": 1.0, "b": 1.0})
    with pytest.raises(ValueError, match="min_ratio and min_margin"):
        name_heads({"a": torch.ones(1, 1), "b": torch.ones(1, 1)}, {"a": 1, "b": 1}, min_margin=0.5)
    with pytest.raises(TypeError, match="baseline must be a dict"):
        name_heads({"a": torch.ones(1, 1), "b": torch.ones(1, 1)}, [1.0, 1.0])
    with pytest.raises(TypeError, match="min_margin must be a number"):
        name_heads({"a": torch.ones(1, 1), "b": torch.ones(1, 1)}, {"a": 1, "b": 1}, min_margin="2")
    with pytest.raises(TypeError, match="list of strings"):
        pattern_scores([_maps(TEXTS[0])], TEXTS[0])
    with pytest.raises(ValueError, match=r"T = len\(text\)"):
        pattern_scores([_maps(TEXTS[0])], [TEXTS[1]])
    with pytest.raises(ValueError, match="2 texts"):
        pattern_scores([_maps(TEXTS[0])], TEXTS)


def test_line_break_pairs_skip_near_breaks():
    assert head_names.line_break_pairs("a\nbcd") == [(3, 1), (4, 1)]
    assert head_names.line_break_pairs("abc") == []


def test_the_shipped_model_gets_the_same_names_at_every_window_seed():
    # What notebook 05 states: over window seeds 0-9 no head's margin crosses MIN_MARGIN, so
    # every name (a pattern or "mixed") is the same at every seed.
    from course_utils.lab.assets import asset_path
    from course_utils.lab.pretrained import BABY_CHECKPOINT, load_baby

    if not asset_path(BABY_CHECKPOINT).exists():
        pytest.skip("no shipped checkpoint (make checkpoint)")
    model, tokenizer = load_baby()
    runs = [
        name_heads(*head_names.measure_heads(model, tokenizer, head_names.course_windows(seed)))
        for seed in range(10)
    ]
    for heads in zip(*runs):  # one head across the ten seeds
        assert len({h.best for h in heads}) == 1, [h.describe() for h in heads]
        above = {h.margin >= head_names.MIN_MARGIN for h in heads}
        assert len(above) == 1, [h.describe() for h in heads]
    names = [h.name for h in runs[0]]
    assert names[1 * 4 + 2] == "last line break" and names.count(MIXED) >= 1
