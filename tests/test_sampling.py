"""Sampling functions against independent references: torch.topk, a per-row loop for top-p,
empirical frequencies of many draws, and limiting cases."""

from __future__ import annotations

import math

import pytest
import torch

from course_utils.sampling import (
    apply_temperature,
    check_logits,
    greedy_token,
    sample_next,
    seeded_generator,
    top_k_filter,
    top_p_filter,
)


def random_logits(b: int = 4, v: int = 13, seed: int = 0, scale: float = 2.0) -> torch.Tensor:
    return torch.randn(b, v, generator=torch.Generator().manual_seed(seed)) * scale


def test_greedy_token_is_the_argmax_with_shape_b_1():
    logits = random_logits()
    ids = greedy_token(logits)
    assert ids.shape == (4, 1) and ids.dtype == torch.int64
    for row, best in zip(logits, ids[:, 0]):
        assert row[best] == row.max()
    assert torch.equal(logits, random_logits())  # input untouched


def test_temperature_divides_and_its_limits_are_greedy_and_uniform():
    logits = random_logits()
    torch.testing.assert_close(apply_temperature(logits, 0.5), logits * 2)
    cold = torch.softmax(apply_temperature(logits, 1e-3), -1)
    torch.testing.assert_close(cold.argmax(-1, keepdim=True), greedy_token(logits))
    assert (cold.max(-1).values > 0.999).all()
    hot = torch.softmax(apply_temperature(logits, 1e4), -1)
    torch.testing.assert_close(hot, torch.full_like(hot, 1 / 13), atol=1e-3, rtol=0)
    # Entropy grows with the temperature.
    entropy = [
        -(p * p.log()).sum(-1)
        for p in (torch.softmax(apply_temperature(logits, t), -1) for t in (0.5, 1.0, 2.0))
    ]
    assert (entropy[0] < entropy[1]).all() and (entropy[1] < entropy[2]).all()


def test_top_k_filter_keeps_what_torch_topk_keeps():
    logits = random_logits(b=5, v=20)
    for k in (1, 3, 7, 20):
        filtered = top_k_filter(logits, k)
        kept = torch.isfinite(filtered)
        reference = torch.zeros_like(kept).scatter(-1, torch.topk(logits, k).indices, True)
        assert torch.equal(kept, reference), k
        assert torch.equal(filtered[kept], logits[kept])  # kept logits unchanged
        assert (filtered[~kept] == float("-inf")).all()
    assert torch.equal(top_k_filter(logits, 1).argmax(-1, keepdim=True), greedy_token(logits))


def _top_p_by_loop(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Reference: walk each row from the most likely token, in float64, until the mass >= p."""
    keep = torch.zeros_like(logits, dtype=torch.bool)
    for b, row in enumerate(logits.double()):
        probabilities = torch.softmax(row, -1).tolist()
        mass = 0.0
        for index in sorted(range(len(probabilities)), key=lambda i: -probabilities[i]):
            keep[b, index] = True
            mass += probabilities[index]
            if mass >= p:
                break
    return keep


@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.8, 0.95, 0.999])
def test_top_p_filter_matches_a_per_row_loop(p):
    logits = random_logits(b=6, v=30, seed=3)
    filtered = top_p_filter(logits, p)
    kept = torch.isfinite(filtered)
    assert torch.equal(kept, _top_p_by_loop(logits, p))
    assert torch.equal(filtered[kept], logits[kept])
    kept_mass = (torch.softmax(logits, -1) * kept).sum(-1)
    assert (kept_mass >= p - 1e-6).all()


def test_top_p_keeps_the_best_token_always_and_everything_at_one():
    logits = random_logits(b=3, v=9, seed=5)
    tiny = top_p_filter(logits, 1e-6)
    assert torch.equal(torch.isfinite(tiny).sum(-1), torch.ones(3, dtype=torch.int64))
    assert torch.equal(tiny.argmax(-1, keepdim=True), greedy_token(logits))
    assert torch.equal(top_p_filter(logits, 1.0), logits)


def test_top_p_adapts_to_the_model_s_confidence_unlike_top_k():
    confident = torch.tensor([[8.0, 1.0, 0.5, 0.0, -1.0, -2.0]])
    unsure = torch.zeros(1, 6)
    assert torch.isfinite(top_p_filter(confident, 0.9)).sum() == 1
    assert torch.isfinite(top_p_filter(unsure, 0.9)).sum() == 6


def test_sample_next_frequencies_follow_the_filtered_softmax():
    """Chi-square-like check: 40 000 draws per setting, each frequency within 5 sigma."""
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0]])
    draws = 40_000
    settings = [
        (dict(temperature=1.0), torch.softmax(logits, -1)),
        (dict(temperature=0.5), torch.softmax(logits / 0.5, -1)),
        (dict(top_k=3), torch.softmax(top_k_filter(logits, 3), -1)),
        (dict(top_p=0.8), torch.softmax(top_p_filter(logits, 0.8), -1)),
    ]
    for options, expected in settings:
        ids = sample_next(logits.expand(draws, -1), generator=seeded_generator(1), **options)
        frequency = torch.bincount(ids[:, 0], minlength=6) / draws
        sigma = (expected[0] * (1 - expected[0]) / draws).sqrt()
        assert ((frequency - expected[0]).abs() <= 5 * sigma + 1e-12).all(), options
        assert (frequency[expected[0] == 0] == 0).all(), options  # filtered tokens never drawn


def test_same_seed_same_samples_other_seed_other_samples():
    logits = random_logits(b=64, v=50, seed=7, scale=0.5)
    first = sample_next(logits, generator=seeded_generator(42))
    again = sample_next(logits, generator=seeded_generator(42))
    other = sample_next(logits, generator=seeded_generator(43))
    assert first.shape == (64, 1) and first.dtype == torch.int64
    assert torch.equal(first, again) and not torch.equal(first, other)


def test_sample_next_greedy_and_top_k_1_agree():
    logits = random_logits(b=8, v=11, seed=9)
    assert torch.equal(sample_next(logits, greedy=True), greedy_token(logits))
    sampled = sample_next(logits, top_k=1, generator=seeded_generator(0))
    assert torch.equal(sampled, greedy_token(logits))


@pytest.mark.parametrize("temperature", [0, -1.0, float("nan"), float("inf")])
def test_bad_temperature_is_rejected(temperature):
    with pytest.raises(ValueError, match="temperature must be"):
        apply_temperature(random_logits(), temperature)


@pytest.mark.parametrize("k", [0, 14, -1])
def test_bad_k_is_rejected_with_the_range(k):
    with pytest.raises(ValueError, match=r"k must be an int in \[1, V=13\]"):
        top_k_filter(random_logits(), k)


@pytest.mark.parametrize("p", [0, 1.5, -0.1, float("nan")])
def test_bad_p_is_rejected(p):
    with pytest.raises(ValueError, match=r"p must be a number in \(0, 1\]"):
        top_p_filter(random_logits(), p)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: apply_temperature(random_logits(), "hot"), "temperature must be a number"),
        (lambda: apply_temperature(random_logits(), True), "temperature must be a number"),
        (lambda: top_k_filter(random_logits(), 2.0), r"k must be an int, got 2.0"),
        (lambda: top_k_filter(random_logits(), None), r"k must be an int, got None"),
        (lambda: top_k_filter(random_logits(), True), r"k must be an int, got True"),
        (lambda: top_p_filter(random_logits(), "all"), "p must be a number"),
        (lambda: top_p_filter(random_logits(), True), "p must be a number"),
    ],
)
def test_options_of_the_wrong_type_raise_type_error(call, message):
    with pytest.raises(TypeError, match=message):
        call()


def test_bad_logits_are_rejected_with_the_fix():
    with pytest.raises(ValueError, match=r"logits\[:, -1, :\]"):
        greedy_token(torch.randn(2, 3, 5))
    with pytest.raises(ValueError, match=r"\(B, V\)"):
        check_logits(torch.randn(5))
    with pytest.raises(ValueError, match=r"\(B, V\)"):
        check_logits(torch.randn(2, 0))
    with pytest.raises(TypeError, match="float tensor"):
        sample_next(torch.ones(2, 5, dtype=torch.int64))
    with pytest.raises(TypeError, match="torch.Tensor"):
        top_k_filter([[1.0, 2.0]], 1)


def test_bad_seed_and_a_generator_on_another_device():
    with pytest.raises(ValueError, match="seed must be"):
        seeded_generator(-1)
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="generator is on"):
            sample_next(random_logits(), generator=seeded_generator(0, "cuda"))
    else:  # the same check on a CPU-only machine: a "meta" generator is not on the CPU
        with pytest.raises(ValueError, match="generator is on"):
            sample_next(random_logits().to("meta"), generator=seeded_generator(0))


def test_filters_never_modify_their_input_and_keep_dtype():
    logits = random_logits().to(torch.float64)
    before = logits.clone()
    for out in (top_k_filter(logits, 3), top_p_filter(logits, 0.5), apply_temperature(logits, 2)):
        assert out.dtype == torch.float64
    assert torch.equal(logits, before)
    assert math.isclose(torch.softmax(top_p_filter(logits, 0.5), -1).sum().item(), 4.0)


def test_ties_top_k_keeps_every_tied_token_top_p_cuts_between_them_by_id():
    # Four equally likely tokens (0.25 each) and a clear favourite in a second row.
    logits = torch.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 3.0, 0.0]])
    kept_k = top_k_filter(logits, 2) > -math.inf
    kept_p = top_p_filter(logits, 0.5) > -math.inf
    # top-k compares values: every token tied with the 2nd largest stays
    assert kept_k.tolist() == [[True] * 4, [True] * 4]
    # top-p ranks tied tokens by id (stable sort) and stops once the mass reaches p
    assert kept_p.tolist() == [[True, True, False, False], [False, False, True, False]]
    # the same on reversed ids: it is the id order, not the position of the values
    flipped = top_p_filter(logits.flip(-1), 0.5) > -math.inf
    assert flipped[0].tolist() == [True, True, False, False]
    # ties inside the nucleus change nothing: all tied tokens kept when p needs them all
    assert (top_p_filter(logits[:1], 0.9) > -math.inf).all()
