"""Precision choice (bf16 / fp16 + GradScaler / fp32) and the fp16 training step, on a CPU."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from course_utils.config import ModelConfig, TrainConfig
from course_utils.model import TinyDecoder
from course_utils.training import make_optimizer, train, training_step
from course_utils.training.precision import (
    autocast_context,
    choose_precision,
    describe_precision,
    make_grad_scaler,
)

# (device type, capability, requested) -> precision: every branch of the rule.
CASES = [
    ("cuda", (9, 0), "bfloat16", "bf16"),  # H100
    ("cuda", (8, 0), "bfloat16", "bf16"),  # A100: the first with bf16 tensor cores
    ("cuda", (8, 6), "bfloat16", "bf16"),  # RTX 30xx
    ("cuda", (7, 5), "bfloat16", "fp16"),  # T4 (free Colab): no fast bf16
    ("cuda", (7, 0), "bfloat16", "fp16"),  # V100
    ("cuda", (6, 1), "bfloat16", "fp32"),  # Pascal: no float16 tensor cores
    ("cuda", (9, 0), "float16", "fp16"),  # forced, to test the T4 path on an H100
    ("cuda", (9, 0), "float32", "fp32"),
    ("cuda", (7, 5), "float32", "fp32"),
    ("cpu", None, "bfloat16", "fp32"),  # the gpu preset run on a CPU stays float32
    ("mps", None, "bfloat16", "fp32"),
    ("cpu", None, "float32", "fp32"),
    ("cpu", None, "float16", "fp16"),  # forced (CPU autocast has float16)
    ("cpu", (9, 0), "bfloat16", "fp32"),  # capability is ignored off CUDA
]


@pytest.mark.parametrize("device_type, capability, requested, expected", CASES)
def test_choose_precision(device_type, capability, requested, expected):
    assert choose_precision(device_type, capability, requested) == expected


def test_choose_precision_refuses_bad_input():
    with pytest.raises(
        ValueError, match=r"one of \('float32', 'bfloat16', 'float16'\), got 'fp16'"
    ):
        choose_precision("cuda", (9, 0), "fp16")
    with pytest.raises(ValueError, match="capability must be the CUDA compute capability"):
        choose_precision("cuda", None, "bfloat16")


def test_description_is_printed_text():
    assert describe_precision("fp32", "cpu") == "precision fp32 on cpu: float32, no autocast"
    assert "GradScaler" in describe_precision("fp16", "cpu")


def tiny(dtype: str = "float32", **changes) -> tuple[TinyDecoder, TrainConfig]:
    torch.manual_seed(0)
    model = TinyDecoder(ModelConfig(vocab_size=13, block_size=8, d_model=16, n_heads=2, n_layers=1))
    config = TrainConfig(batch_size=4, max_iters=30, eval_interval=15, eval_iters=2)
    return model, dataclasses.replace(config, autocast_dtype=dtype, **changes)


def test_autocast_follows_the_choice_on_cpu():
    a = torch.randn(4, 4)
    for dtype, expected in [("float16", torch.float16), ("bfloat16", torch.float32)]:
        with autocast_context(torch.device("cpu"), tiny(dtype)[1]):
            assert (a @ a).dtype == expected


def test_make_grad_scaler_only_for_fp16():
    assert make_grad_scaler("cpu", "bf16") is None and make_grad_scaler("cpu", "fp32") is None
    assert isinstance(make_grad_scaler("cpu", "fp16"), torch.amp.GradScaler)


def _one_step(dtype: str, scaler=None) -> tuple[TinyDecoder, torch.Tensor]:
    model, config = tiny(dtype, grad_clip=0.5)
    optimizer = make_optimizer(model, config)
    x = torch.randint(13, (4, 8), generator=torch.Generator().manual_seed(1))
    y = torch.randint(13, (4, 8), generator=torch.Generator().manual_seed(2))
    loss = training_step(model, optimizer, x, y, 1e-3, config, "cpu", scaler=scaler)
    return model, loss


def test_fp16_step_leaves_true_clipped_gradients():
    """After the step the gradients are unscaled and clipped: equal to the float32 step's up
    to float16 rounding. Clipping before unscaling, or never unscaling, would leave them
    scaled by 65,536 (or clipped to the wrong norm)."""
    reference, reference_loss = _one_step("float32")
    scaler = make_grad_scaler("cpu", "fp16")
    model, loss = _one_step("float16", scaler)
    assert loss.dtype == torch.float32 and abs(loss.item() - reference_loss.item()) < 1e-2
    grads = torch.cat([p.grad.flatten() for p in model.parameters()])
    expected = torch.cat([p.grad.flatten() for p in reference.parameters()])
    assert grads.norm().item() == pytest.approx(0.5, rel=1e-3)  # clipped to grad_clip
    assert torch.allclose(grads, expected, atol=2e-3, rtol=5e-2)
    assert scaler.get_scale() == 65536.0  # no overflow: the scale is kept


def test_fp16_overflow_skips_the_step_and_lowers_the_scale():
    model, config = tiny("float16")
    before = [p.detach().clone() for p in model.parameters()]
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**120)  # scaled gradients overflow
    optimizer = make_optimizer(model, config)
    x = torch.randint(13, (4, 8))
    training_step(model, optimizer, x, x, 1e-3, config, "cpu", scaler=scaler)
    assert all(torch.equal(a, p) for a, p in zip(before, model.parameters()))
    assert scaler.get_scale() == 2.0**119  # halved (backoff_factor 0.5)


def test_fp16_without_a_scaler_is_refused():
    model, config = tiny("float16")
    x = torch.randint(13, (4, 8))
    with pytest.raises(ValueError, match="needs a GradScaler, got scaler=None"):
        training_step(model, make_optimizer(model, config), x, x, 1e-3, config, "cpu")


def test_train_runs_fp16_with_its_own_scaler():
    """train() makes the scaler itself: a float16 run learns like the float32 one."""
    data = torch.arange(2000) % 13  # a periodic sequence: easy to learn
    results = {}
    for dtype in ("float32", "float16"):
        model, config = tiny(dtype, warmup_iters=5, learning_rate=1e-2)
        history = train(model, data[:1500], data[1500:], config, progress=False)
        results[dtype] = history.val_loss
    assert results["float16"][-1] < math.log(13) - 0.5
    assert results["float16"][-1] == pytest.approx(results["float32"][-1], abs=0.1)
