"""The documented initialisation, measured, and AdamW's weight decay on matrices only.

Initialisation (GPT-2, Radford et al. 2019, §2.3; the course's docstrings): every linear
weight and the embedding table start from N(0, 0.02), biases from 0, and the residual
projections (attention's W^O, the FFN's second matrix) from N(0, 0.02 / sqrt(2 n_layers)), so
the residual stream's variance does not grow with depth. The statistics are measured on
thousands of entries, with tolerances a few standard errors wide: a wrong mean (1.0), a
wrong std (0, 1.02, the unscaled 0.02) is many tolerances away.

Weight decay (Loshchilov & Hutter 2019, decoupled): with a zero gradient, one AdamW step
only decays, ``w <- w (1 - lr * wd)``. Biases and norm gains must not be decayed (they would
be pulled towards 0 for no reason), matrices must be.
"""

from __future__ import annotations

import math

import pytest
import torch

from course_utils.config import ModelConfig, TrainConfig
from course_utils.embedding import TokenEmbedding
from course_utils.model import TinyDecoder
from course_utils.training import make_optimizer


def assert_normal(weight: torch.Tensor, std: float, what: str) -> None:
    """Mean within 5 standard errors of 0, std within 5 % of ``std`` (its standard error is
    about std / sqrt(2 n): under 1 % for the n >= 6,000 entries measured here)."""
    values = weight.detach().double().flatten()
    n = values.numel()
    assert n >= 6000, f"{what}: too few entries ({n}) to measure"
    assert abs(float(values.mean())) < 5 * std / math.sqrt(n), f"{what}: mean {values.mean()}"
    assert float(values.std()) == pytest.approx(std, rel=0.05), f"{what}: std {values.std()}"


def test_token_embedding_starts_from_normal_002():
    torch.manual_seed(0)
    table = TokenEmbedding(vocab_size=500, d_model=32).weight  # 16,000 entries
    assert_normal(table, 0.02, "TokenEmbedding.weight")


@pytest.fixture(scope="module")
def model() -> TinyDecoder:
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=300, block_size=16, d_model=64, n_heads=4, n_layers=3)
    return TinyDecoder(config)


def test_residual_projections_start_scaled_by_depth(model):
    """GPT-2's 1/sqrt(2 n_layers): two residual additions (attention, FFN) per block."""
    std = 0.02 / math.sqrt(2 * model.config.n_layers)
    w_o = torch.cat([b.attention.w_o.weight.flatten() for b in model.blocks])
    down = torch.cat([b.feed_forward.down.weight.flatten() for b in model.blocks])
    assert_normal(w_o, std, "attention W^O")
    assert_normal(down, std, "feed-forward down projection")


def test_other_linear_weights_start_from_002_and_biases_from_zero(model):
    blocks = model.blocks
    for name in ("w_q", "w_k", "w_v"):
        weights = torch.cat([getattr(b.attention, name).weight.flatten() for b in blocks])
        assert_normal(weights, 0.02, f"attention {name}")
    up = torch.cat([b.feed_forward.up.weight.flatten() for b in blocks])
    assert_normal(up, 0.02, "feed-forward up projection")
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and module.bias is not None:
            assert torch.all(module.bias == 0), name


def test_tied_embedding_starts_from_the_capped_std(model):
    """The tied table: N(0, min(0.02, 2.5 / d_model)) (0.02 here, d_model = 64)."""
    assert model.lm_head.weight is model.token_embedding.weight
    assert_normal(model.token_embedding.weight, min(0.02, 2.5 / 64), "tied embedding")


def _zero_gradient_step(model: torch.nn.Module, config: TrainConfig) -> dict[str, torch.Tensor]:
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizer = make_optimizer(model, config)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    return before


def test_zero_gradient_step_decays_matrices_only():
    torch.manual_seed(0)
    model = TinyDecoder(ModelConfig(vocab_size=20, block_size=8, d_model=24, n_heads=3, n_layers=2))
    with torch.no_grad():  # norms start at gain 1, bias 0: move them so decay would show
        for p in model.parameters():
            if p.ndim < 2:
                p.add_(0.5)
    config = TrainConfig(
        batch_size=2, max_iters=10, warmup_iters=1, learning_rate=0.01, weight_decay=0.1
    )
    before = _zero_gradient_step(model, config)
    shrink = 1 - config.learning_rate * config.weight_decay  # 0.999
    decayed, kept = 0, 0
    for name, p in model.named_parameters():
        if p.ndim >= 2:  # matrices: embedding, projections
            torch.testing.assert_close(p.detach(), before[name] * shrink, rtol=1e-6, atol=0)
            assert not torch.equal(p.detach(), before[name]), name
            decayed += 1
        else:  # biases and LayerNorm gains/biases: untouched
            assert torch.equal(p.detach(), before[name]), f"{name} was decayed"
            kept += 1
    assert decayed >= 6 and kept >= 6, (decayed, kept)


def test_weight_decay_zero_changes_nothing():
    torch.manual_seed(0)
    model = TinyDecoder(ModelConfig(vocab_size=20, block_size=8, d_model=24, n_heads=3, n_layers=1))
    config = TrainConfig(
        batch_size=2, max_iters=10, warmup_iters=1, learning_rate=0.01, weight_decay=0.0
    )
    before = _zero_gradient_step(model, config)
    for name, p in model.named_parameters():
        assert torch.equal(p.detach(), before[name]), name
