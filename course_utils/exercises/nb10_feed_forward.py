"""Checkers for notebook 10: feed-forward network."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.core import compare, run_check


def check_feed_forward(feed_forward: Callable) -> bool:
    """Check ``feed_forward(x, w1, b1, w2, b2)`` = ``GELU(x W1^T + b1) W2^T + b2``.

    Weights use ``nn.Linear``'s layout: ``w1`` is ``(d_ff, C)``, ``w2`` is ``(C, d_ff)``.
    Two cases: ``(B, T, C) = (2, 6, 24)`` with ``d_ff = 96``, and ``(3, 5, 10)`` with
    ``d_ff = 40`` (catches hard-coded sizes). Both forms of GELU are accepted: the exact
    ``z * Phi(z)`` (``F.gelu(h)``, the course's ``FeedForward``) and the tanh approximation
    that GPT-2 uses (``F.gelu(h, approximate="tanh")``). Names ReLU and missing biases when
    the answer matches them.
    """
    generator = torch.Generator().manual_seed(11)
    cases = []
    for shape, d_ff in (((2, 6, 24), 96), ((3, 5, 10), 40)):
        d_model = shape[-1]
        x = torch.randn(*shape, generator=generator)
        w1 = torch.randn(d_ff, d_model, generator=generator) / d_model**0.5
        b1 = torch.randn(d_ff, generator=generator) * 0.5
        w2 = torch.randn(d_model, d_ff, generator=generator) / d_ff**0.5
        b2 = torch.randn(d_model, generator=generator) * 0.5
        cases.append((x, w1, b1, w2, b2))

    def attempt() -> str | None:
        functional = torch.nn.functional
        for x, w1, b1, w2, b2 in cases:
            try:
                answer = feed_forward(x.clone(), w1.clone(), b1.clone(), w2.clone(), b2.clone())
            except RuntimeError as error:
                try:
                    x @ w1  # the paper's x @ W1 on nn.Linear's (d_ff, C) weight
                except RuntimeError as same:
                    if str(same) == str(error):
                        return (
                            f"raised RuntimeError: {error}. w1 is ({w1.shape[0]}, "
                            f"{w1.shape[1]}) = (d_ff, C), nn.Linear's layout: use x @ w1.T "
                            "(and h @ w2.T)"
                        )
                raise
            hidden = functional.linear(x, w1, b1)  # (..., C) -> (..., d_ff)
            expected = functional.linear(functional.gelu(hidden), w2, b2)  # -> (..., C)
            problem = compare(answer, expected, name=f"feed_forward(x of shape {tuple(x.shape)})")
            tanh_form = functional.linear(functional.gelu(hidden, approximate="tanh"), w2, b2)
            if problem is not None and compare(answer, tanh_form) is None:
                continue  # GPT-2's tanh approximation of GELU: also right
            if problem is None or not isinstance(answer, torch.Tensor):
                if problem is not None:
                    return problem
                continue
            mistakes = {
                "ReLU instead of GELU": functional.linear(functional.relu(hidden), w2, b2),
                "no biases": functional.linear(functional.gelu(x @ w1.T), w2),
            }
            for description, wrong in mistakes.items():
                if answer.shape == wrong.shape and torch.allclose(answer, wrong, atol=1e-5):
                    return f"{problem}; it matches {description}"
            return problem
        return None

    return run_check("feed_forward", attempt)


def check_ffn_parameter_count(count_ffn_parameters: Callable) -> bool:
    """Check ``count_ffn_parameters(d_model, d_ff)`` = ``2 * d_model * d_ff + d_ff + d_model``.

    Tried on (24, 96), (512, 2048) (the paper's base model) and (10, 7); the answer must be
    a Python int.
    """

    def attempt() -> str | None:
        for d_model, d_ff in ((24, 96), (512, 2048), (10, 7)):
            answer = count_ffn_parameters(d_model, d_ff)
            expected = 2 * d_model * d_ff + d_ff + d_model
            call = f"count_ffn_parameters({d_model}, {d_ff})"
            if isinstance(answer, bool) or not isinstance(answer, int):
                return f"{call} should return an int, got {type(answer).__name__}"
            if answer == expected:
                continue
            hints = {
                2 * d_model * d_ff: "the two weight matrices without the biases (d_ff + d_model)",
                d_model * d_ff + d_ff: "only the first layer",
                d_model * d_ff + d_model: "only the second layer",
                2 * d_model * d_ff + 2 * d_model: "a bias of size d_model on both layers; the "
                "first layer's bias has d_ff entries",
            }
            hint = f"; that is {hints[answer]}" if answer in hints else ""
            return f"{call} returned {answer:,}, expected {expected:,}{hint}"
        return None

    return run_check("count_ffn_parameters", attempt)
