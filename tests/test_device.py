"""Device choice and seeding."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
import torch

from course_utils.lab.device import describe_device, device_config, get_device, seed_everything


def test_auto_picks_an_available_device():
    """Reference: torch.cuda.is_available(); CUDA wins whenever it is present."""
    device = get_device("auto")
    assert device.type in ("cpu", "cuda", "mps")
    if torch.cuda.is_available():
        assert device.type == "cuda"
    torch.zeros(1, device=device)  # the chosen device really works


def test_cpu_is_always_available():
    assert get_device("cpu") == torch.device("cpu")
    assert describe_device(torch.device("cpu")).startswith("cpu: ")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_requesting_missing_cuda_is_a_clear_error():
    with pytest.raises(RuntimeError, match=r"device 'cuda' was requested but is not available"):
        get_device("cuda")


def test_unknown_device_name():
    with pytest.raises(ValueError, match=r"unknown device 'tpu'; expected one of \('auto', 'cpu'"):
        get_device("tpu")


def test_seed_everything_makes_random_draws_reproducible():
    """Reference: the same seed twice gives identical draws from torch, NumPy and random."""
    generator = seed_everything(123)
    first = (torch.randn(5), np.random.rand(3), random.random(), torch.rand(2, generator=generator))
    generator = seed_everything(123)
    second = (
        torch.randn(5),
        np.random.rand(3),
        random.random(),
        torch.rand(2, generator=generator),
    )
    assert torch.equal(first[0], second[0])
    assert np.array_equal(first[1], second[1])
    assert first[2] == second[2]
    assert torch.equal(first[3], second[3])
    seed_everything(124)
    assert not torch.equal(torch.randn(5), first[0])


def test_seed_must_be_a_non_negative_int():
    with pytest.raises(ValueError, match=r"seed must be a non-negative int, got -1"):
        seed_everything(-1)


@pytest.mark.parametrize("seed", [1.5, "7", True])
def test_seed_of_another_type_raises_type_error(seed):
    with pytest.raises(TypeError, match=rf"seed must be an int, got {re.escape(repr(seed))}"):
        seed_everything(seed)


def test_device_config_sizes_the_run_by_device(monkeypatch):
    monkeypatch.delenv("COURSE_REHEARSE", raising=False)
    preset, model, train = device_config("cpu", 84, positional="learned", dropout=0.0)
    assert preset == "cpu" and model.positional == "learned" and model.dropout == 0.0
    assert (model.d_model, model.n_layers, train.max_iters) == (96, 3, 1200)
    monkeypatch.setenv("COURSE_REHEARSE", "cuda-bf16")  # the tests' stand-in for a GPU
    preset, model, train = device_config("cpu", 84, positional="learned")
    assert preset == "gpu" and model.positional == "learned" and train.max_iters <= 20
    monkeypatch.setenv("COURSE_REHEARSE", "tpu")
    with pytest.raises(ValueError, match="COURSE_REHEARSE"):
        device_config("cpu", 84)


def test_device_config_takes_each_sizes_recipe(monkeypatch):
    monkeypatch.delenv("COURSE_REHEARSE", raising=False)
    recipes = dict(cpu=dict(learning_rate=6e-3, max_iters=2000), gpu=dict(max_iters=2500))
    preset, _, train = device_config("cpu", 84, **recipes)
    assert preset == "cpu" and (train.learning_rate, train.max_iters) == (6e-3, 2000)
    monkeypatch.setenv("COURSE_REHEARSE", "cuda-bf16")  # the gpu recipe, then the shrink on top
    preset, _, train = device_config("cpu", 84, **recipes)
    assert preset == "gpu" and train.learning_rate == 1e-3 and train.max_iters <= 20
    with pytest.raises(
        TypeError, match=r"device_config\(gpu=\.\.\.\) takes a dict .* got int 2500"
    ):
        device_config("cpu", 84, gpu=2500)
