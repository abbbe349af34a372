"""The rehearsal switch (course_utils.lab.rehearsal): off changes nothing, a bad value is named."""

import pytest
import torch

from course_utils.lab import rehearsal
from course_utils.lab.rehearsal import REHEARSAL_ENV, REHEARSAL_MODES


@pytest.mark.parametrize("value", [None, "", "  "])
def test_switch_off(monkeypatch, value):
    if value is None:
        monkeypatch.delenv(REHEARSAL_ENV, raising=False)
    else:
        monkeypatch.setenv(REHEARSAL_ENV, value)
    assert rehearsal.rehearsal_mode() is None
    assert rehearsal.acting_device_type("cpu") == "cpu"
    assert rehearsal.acting_capability("cpu") is None
    assert rehearsal.rehearsal_overrides() == {}
    assert rehearsal.describe_rehearsal() == ""


@pytest.mark.parametrize("mode", REHEARSAL_MODES)
def test_modes_act_as_cuda_on_cpu(monkeypatch, mode):
    monkeypatch.setenv(REHEARSAL_ENV, mode)
    assert rehearsal.rehearsal_mode() == mode
    assert rehearsal.acting_device_type(torch.device("cpu")) == "cuda"
    assert rehearsal.acting_capability("cpu") == {"cuda-bf16": (9, 0), "cuda-fp16": (7, 5)}[mode]
    assert rehearsal.rehearsal_overrides()["max_iters"] <= 20
    assert mode in rehearsal.describe_rehearsal()


@pytest.mark.parametrize("value", ["cuda", "bf16", "CUDA-BF16", "1"])
def test_unknown_value_is_named(monkeypatch, value):
    monkeypatch.setenv(REHEARSAL_ENV, value)
    with pytest.raises(ValueError) as raised:
        rehearsal.rehearsal_mode()
    message = str(raised.value)
    assert REHEARSAL_ENV in message and repr(value) in message
    assert all(mode in message for mode in REHEARSAL_MODES)


def _gpu_preset():
    from course_utils.config import get_config

    return get_config("gpu", 84, **rehearsal.REHEARSAL_OVERRIDES)


@pytest.mark.parametrize(
    ("mode", "expected"), [(None, "fp32"), ("cuda-bf16", "bf16"), ("cuda-fp16", "fp16")]
)
def test_precision_follows_the_rehearsed_gpu(monkeypatch, mode, expected):
    """The gpu preset asks for "bfloat16": fp32 on a plain CPU (nothing changes with the
    switch off), bf16 as on an H100, fp16 with a GradScaler as on a T4."""
    from course_utils.training.precision import (
        autocast_context,
        device_precision,
        make_grad_scaler,
    )

    if mode is None:
        monkeypatch.delenv(REHEARSAL_ENV, raising=False)
    else:
        monkeypatch.setenv(REHEARSAL_ENV, mode)
    _, train_config = _gpu_preset()
    precision = device_precision("cpu", train_config)
    assert precision == expected
    assert (make_grad_scaler("cpu", precision) is not None) == (expected == "fp16")
    a = torch.randn(4, 4)
    with autocast_context(torch.device("cpu"), train_config, precision):
        product = a @ a
    assert (
        product.dtype
        == {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[expected]
    )


def test_fp16_rehearsal_needs_the_scaler_as_on_a_t4(monkeypatch):
    """The library refuses an fp16 step without a GradScaler: the rehearsal reaches it."""
    from course_utils.model import TinyDecoder
    from course_utils.training import make_optimizer, training_step

    monkeypatch.setenv(REHEARSAL_ENV, "cuda-fp16")
    model_config, train_config = _gpu_preset()
    model = TinyDecoder(model_config)
    x = torch.randint(84, (2, 8))
    with pytest.raises(ValueError, match="needs a GradScaler"):
        training_step(model, make_optimizer(model, train_config), x, x, 1e-3, train_config, "cpu")
