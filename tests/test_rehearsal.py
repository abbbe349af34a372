"""The rehearsal switch (course_utils.rehearsal): off changes nothing, a bad value is named."""

import pytest
import torch

from course_utils import rehearsal
from course_utils.rehearsal import REHEARSAL_ENV, REHEARSAL_MODES


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
