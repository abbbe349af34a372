"""RMSNorm (Zhang & Sennrich 2019) against torch.nn.RMSNorm, and the mean-subtracted mistake."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from course_utils.rmsnorm import RMSNorm


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("explicit", [True, False], ids=["formula", "fused"])
@pytest.mark.parametrize("eps", [1e-6, 1e-2])
def test_rms_norm_matches_torch_rms_norm(explicit, eps):
    ours, reference = RMSNorm(24, eps=eps, explicit=explicit), nn.RMSNorm(24, eps=eps)
    with torch.no_grad():
        ours.weight.copy_(randn(24, seed=1) + 1.0)
        reference.weight.copy_(ours.weight)
    x = randn(2, 6, 24) * 3 + 1  # a mean far from 0: RMSNorm must not remove it
    torch.testing.assert_close(ours(x), reference(x), atol=1e-6, rtol=1e-5)


def test_rms_norm_is_not_layer_norm_when_the_mean_is_not_zero():
    x = randn(2, 6, 24) + 2.0
    ours = RMSNorm(24, explicit=True)
    mean_subtracted = nn.functional.layer_norm(x, (24,), eps=1e-6)  # the mistake: x - mean
    assert (ours(x) - mean_subtracted).abs().max() > 0.5
    centred = x - x.mean(dim=-1, keepdim=True)  # with zero mean both agree
    torch.testing.assert_close(ours(centred), nn.functional.layer_norm(centred, (24,), eps=1e-6))


def test_rms_norm_output_has_unit_root_mean_square():
    y = RMSNorm(24, eps=1e-12)(randn(3, 5, 24) * 7)
    torch.testing.assert_close(y.pow(2).mean(-1), torch.ones(3, 5), atol=1e-5, rtol=0)


def test_rms_norm_errors_name_the_argument():
    with pytest.raises(ValueError, match="last axis of size 24"):
        RMSNorm(24)(torch.zeros(2, 3, 8))
    with pytest.raises(TypeError, match="normalized_shape"):
        RMSNorm(24.0)
    with pytest.raises(ValueError, match="eps"):
        RMSNorm(24, eps=0.0)
    with pytest.raises(TypeError, match="dtype"):
        RMSNorm(24)(torch.zeros(2, 24, dtype=torch.float64))
