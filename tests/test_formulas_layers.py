"""LayerNorm's two paths: ``explicit=False`` is PyTorch's kernel, ``explicit=True`` the formula
written out (Ba et al. 2016, Eq. 4: biased variance, eps inside the square root).

The two agree to rounding, so a swapped flag would pass every tolerance-based test: these
tests pin each path to what it promises (the kernel bit for bit; the formula without calling
the kernel), the fast path being what training uses and the explicit one what notebook 09 shows.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import course_utils.layers as layers
from course_utils.layers import LayerNorm


def _norm_and_input(explicit: bool) -> tuple[LayerNorm, torch.Tensor]:
    torch.manual_seed(0)
    norm = LayerNorm(24, explicit=explicit)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
    return norm, 3.0 + 2.0 * torch.randn(2, 6, 24)


def test_default_path_is_pytorchs_kernel_bit_for_bit():
    norm, x = _norm_and_input(explicit=False)
    expected = F.layer_norm(x, (24,), norm.weight, norm.bias, norm.eps)
    assert torch.equal(norm(x), expected)


def test_explicit_path_computes_the_formula_without_the_kernel(monkeypatch):
    norm, x = _norm_and_input(explicit=True)

    def no_kernel(*args, **kwargs):
        raise AssertionError("explicit=True must not call F.layer_norm")

    monkeypatch.setattr(layers.F, "layer_norm", no_kernel)
    got = norm(x)
    mean = x.mean(-1, keepdim=True)
    variance = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased: / C
    expected = (x - mean) / torch.sqrt(variance + norm.eps) * norm.weight + norm.bias
    torch.testing.assert_close(got, expected)
    monkeypatch.undo()
    reference = torch.nn.LayerNorm(24)
    reference.load_state_dict(norm.state_dict())
    torch.testing.assert_close(got, reference(x))


@pytest.mark.parametrize("eps", [1e-5, 0.5])
def test_eps_is_inside_the_square_root(eps):
    """A large eps shows where it goes: sqrt(var + eps), not sqrt(var) + eps."""
    norm = LayerNorm(8, eps=eps, explicit=True)
    x = torch.arange(8.0)[None]
    variance = x.var(unbiased=False)
    expected = (x - x.mean()) / torch.sqrt(variance + eps)
    torch.testing.assert_close(norm(x), expected)
    torch.testing.assert_close(LayerNorm(8, eps=eps)(x), expected)
