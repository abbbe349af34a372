"""The appendix's speed-up claim check (tests/nb12_claims.py) holds for any timing: it allows
the rounding of the printed times and ratio, and nothing more (issue 43)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nb12_claims  # noqa: E402

SOURCE = "without = time_per_token(net, lengths, use_cache=False)"


def _cells(without: str, with_cache: str, ratio: str) -> list[dict]:
    line = f"random, cpu, T=510: {without} ms without, {with_cache} ms with the cache ({ratio}x)\n"
    return [
        {
            "cell_type": "code",
            "source": [SOURCE],
            "outputs": [{"output_type": "stream", "name": "stdout", "text": [line]}],
        }
    ]


@pytest.mark.parametrize(
    ("without", "with_cache", "ratio"),
    [
        ("1.9", "0.6", "2.9"),  # 1.94 / 0.64: the run that failed the old check, 10 % apart
        ("75.1", "5.0", "14.9"),
        ("5.1", "2.8", "1.9"),  # 5.14 / 2.76 = 1.86
        ("0.3", "0.0", "31.0"),  # a time printed as 0.0 bounds the ratio from below only
    ],
)
def test_ratios_that_the_rounding_allows_pass(without, with_cache, ratio):
    nb12_claims.check_appendix_timing_claims(_cells(without, with_cache, ratio))


@pytest.mark.parametrize(
    ("without", "with_cache", "ratio"),
    [
        ("1.9", "0.6", "2.7"),  # below 1.85 / 0.65 = 2.85, less the ratio's own rounding
        ("1.9", "0.6", "3.7"),  # above 1.95 / 0.55 = 3.55, plus the ratio's own rounding
        ("75.1", "5.0", "1.5"),
        ("0.3", "0.0", "4.9"),  # at least 0.25 / 0.05 = 5
    ],
)
def test_a_ratio_that_no_timing_gives_fails(without, with_cache, ratio):
    with pytest.raises(AssertionError):
        nb12_claims.check_appendix_timing_claims(_cells(without, with_cache, ratio))


def test_the_bounds_are_those_of_the_rounding():
    low, high = nb12_claims.ratio_bounds(1.9, 0.6, half_step=0.05)
    assert low == pytest.approx(1.85 / 0.65) and high == pytest.approx(1.95 / 0.55)
