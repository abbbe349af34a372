"""Checkers for notebook 06: masking."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.core import compare, run_check


def check_causal_mask(causal_mask: Callable) -> bool:
    """Exercise 06.1: ``causal_mask(T)`` is a ``(T, T)`` torch.bool mask, True where query t
    may attend to key s, i.e. ``s <= t`` (itself included; §3.2.3)."""

    def attempt() -> str | None:
        for size in (4, 6, 1):
            positions = torch.arange(size)
            expected = positions[None, :] <= positions[:, None]
            answer = causal_mask(size)
            name = f"causal_mask({size})"
            if isinstance(answer, torch.Tensor) and answer.shape == expected.shape:
                if torch.equal(answer, expected.T) and not torch.equal(answer, expected):
                    return f"{name} is the upper triangle: query t would see the future"
            problem = compare(answer, expected, name)
            if problem:
                return problem
        return None

    return run_check("causal_mask", attempt)


def check_padding_mask(padding_mask: Callable) -> bool:
    """Exercise 06.2: ``padding_mask(lengths, T)`` is a ``(B, 1, 1, T)`` torch.bool key mask,
    True at the real tokens ``j < lengths[b]`` of right-padded sequences."""

    def attempt() -> str | None:
        for lengths, size in (([6, 4], 6), ([3, 1, 4, 0], 4)):
            expected = (torch.arange(size)[None, :] < torch.tensor(lengths)[:, None])[
                :, None, None, :
            ]
            answer = padding_mask(list(lengths), size)
            name = f"padding_mask({lengths}, {size})"
            if isinstance(answer, torch.Tensor) and answer.shape == expected.shape[::3]:
                return (
                    f"{name} has shape {tuple(answer.shape)} (B, T); add two singleton axes "
                    "for heads and queries: (B, 1, 1, T)"
                )
            problem = compare(answer, expected, name)
            if problem:
                return problem
        return None

    return run_check("padding_mask", attempt)


def check_masked_softmax(masked_softmax: Callable) -> bool:
    """Exercise 06.3: ``masked_softmax(scores, mask)`` is the softmax over the last axis (key
    positions) with hidden keys (``mask == False``) getting weight 0, and a query whose keys
    are all hidden getting an all-zero row, never NaN or a uniform row.

    Shapes: scores ``(B, h, T_q, T_k)`` float, mask bool broadcastable to it.
    """

    def attempt() -> str | None:
        scores = torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(60))
        keep = (torch.arange(6)[None, :] >= torch.tensor([0, 2])[:, None])[:, None, None, :]
        mask = torch.ones(6, 6, dtype=torch.bool).tril() & keep  # rows 0, 1 of item 1: empty
        expected = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        expected = expected.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        answer = masked_softmax(scores.clone(), mask.clone())
        name = "masked_softmax(scores (2, 3, 6, 6), causal & left-padding mask)"
        if isinstance(answer, torch.Tensor) and answer.shape == expected.shape:
            if torch.isnan(answer).any():
                return (
                    f"{name} has NaN in the fully masked rows (softmax of all -inf); "
                    "set the rows with no visible key to 0"
                )
            if torch.allclose(answer[1, :, 0], torch.full((3, 6), 1 / 6), atol=1e-4):
                return (
                    f"{name}: a fully masked row is uniform (1/T on hidden keys), as with a "
                    "large negative fill; it must be all zeros"
                )
        return compare(answer, expected, name)

    return run_check("masked_softmax", attempt)
