"""Checkers for notebook 09: residual and LayerNorm."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.core import compare, run_check


def _nb09_layer_norm_mistakes() -> dict[str, Callable]:
    """The classic hand-written LayerNorms, by the hint that names each."""

    def centred(x):
        return x - x.mean(dim=-1, keepdim=True)

    def biased_var(x):
        return x.var(dim=-1, keepdim=True, unbiased=False)

    def unbiased_var(x):
        return x.var(dim=-1, keepdim=True, unbiased=True)

    def std_eps_outside(x, w, b, e):
        return centred(x) / (unbiased_var(x).sqrt() + e) * w + b

    def unbiased(x, w, b, e):
        return centred(x) / torch.sqrt(unbiased_var(x) + e) * w + b

    def eps_outside(x, w, b, e):
        return centred(x) / (biased_var(x).sqrt() + e) * w + b

    def no_affine(x, w, b, e):
        return centred(x) / torch.sqrt(biased_var(x) + e)

    return {
        "x.std() with eps outside the square root: x.std() is the unbiased estimate "
        "(divides by C - 1; LayerNorm divides by C) and eps belongs inside: "
        "sqrt(var + eps)": std_eps_outside,
        "the unbiased variance (divide by C - 1); LayerNorm divides by C: "
        "use x.var(dim=-1, unbiased=False)": unbiased,
        "eps added outside the square root; it belongs inside: sqrt(var + eps)": eps_outside,
        "a right normalisation, but weight and bias were not applied": no_affine,
    }


def check_layer_norm(layer_norm: Callable) -> bool:
    """Check ``layer_norm(x, weight, bias, eps)``: LayerNorm over the last axis, by hand.

    Compared with ``torch.nn.functional.layer_norm`` on a ``(B, T, C) = (2, 6, 24)`` batch
    with a scale and shift, on ``C = 4`` (where the unbiased variance is far off), and on
    nearly constant token vectors (where the place of eps matters). When the answer matches
    a classic mistake on every case (unbiased variance, eps outside the square root), the
    message says which.
    """
    generator = torch.Generator().manual_seed(9)
    cases = []
    for width in (24, 4):
        x = torch.randn(2, 6, width, generator=generator) * 3.0 + 1.5
        weight = torch.randn(width, generator=generator) * 0.5 + 1.0
        bias = torch.randn(width, generator=generator) * 0.5
        cases.append((x, weight, bias, 1e-5))
    flat = 1e-3 * torch.randn(1, 3, 24, generator=generator)  # variance 1e-6, below eps
    cases.append((flat, torch.ones(24), torch.zeros(24), 1e-5))

    def attempt() -> str | None:
        answers = [layer_norm(x.clone(), w.clone(), b.clone(), eps) for x, w, b, eps in cases]
        for answer, (x, weight, bias, eps) in zip(answers, cases):
            expected = torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)
            problem = compare(answer, expected, name=f"layer_norm(x of shape {tuple(x.shape)})")
            if problem is not None:
                break
        else:
            return None
        for description, mistake in _nb09_layer_norm_mistakes().items():
            if all(
                isinstance(a, torch.Tensor)
                and a.shape == c[0].shape
                and torch.allclose(a.detach().double(), mistake(*c).double(), atol=1e-5)
                for a, c in zip(answers, cases)
            ):
                return f"{problem}; it matches {description}"
        return problem

    return run_check("layer_norm", attempt)


def check_pre_ln_residual(pre_ln_residual: Callable) -> bool:
    """Check ``pre_ln_residual(x, norm, sublayer)`` returns ``x + sublayer(norm(x))``.

    Uses a ``(2, 6, 24)`` input, an ``nn.LayerNorm(24)`` with a non-trivial scale and shift,
    and a linear sublayer. Names the post-LN ordering and a missing residual when seen.
    """
    generator = torch.Generator().manual_seed(10)
    x = torch.randn(2, 6, 24, generator=generator) * 2.0 + 0.5
    norm = torch.nn.LayerNorm(24)
    sublayer = torch.nn.Linear(24, 24)
    with torch.no_grad():
        for parameter in (*norm.parameters(), *sublayer.parameters()):
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3 + 0.1)

    def attempt() -> str | None:
        with torch.no_grad():
            answer = pre_ln_residual(x.clone(), norm, sublayer)
            expected = x + sublayer(norm(x))
            problem = compare(answer, expected, name="pre_ln_residual(x)")
            if problem is None or not isinstance(answer, torch.Tensor):
                return problem
            mistakes = {
                "norm(x + sublayer(x)), the post-LN order of the paper": norm(x + sublayer(x)),
                "sublayer(norm(x)) without the residual: add x back": sublayer(norm(x)),
                "norm(x) + sublayer(norm(x)): the residual must carry x itself, "
                "not its normalised copy": norm(x) + sublayer(norm(x)),
            }
            for description, wrong in mistakes.items():
                if answer.shape == wrong.shape and torch.allclose(answer, wrong, atol=1e-5):
                    return f"{problem}; you computed {description}"
            return problem

    return run_check("pre_ln_residual", attempt)
