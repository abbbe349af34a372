"""Checkers of notebook 12 (training): every catalogued mistake is rejected with its own
message, right answers written several ways pass, and no answer makes a checker fail
internally."""

from __future__ import annotations

import math

import pytest
import torch
from checker_verdict import assert_named, assert_unfinished_reported, catalogue_params, verdict

from course_utils.exercises import check_estimate_loss, check_learning_rate, check_training_step
from course_utils.exercises.nb12_training import (
    ESTIMATE_LOSS_MISTAKES,
    LEARNING_RATE_MISTAKES,
    TRAINING_STEP_MISTAKES,
)
from course_utils.training import learning_rate_at

CATALOGUES = [
    (check_training_step, TRAINING_STEP_MISTAKES),
    (check_learning_rate, LEARNING_RATE_MISTAKES),
    (check_estimate_loss, ESTIMATE_LOSS_MISTAKES),
]


@pytest.mark.parametrize(("checker", "message", "wrong"), **catalogue_params(CATALOGUES))
def test_each_catalogued_mistake_is_named(checker, message, wrong, capsys):
    assert_named(checker, wrong, message, capsys)


def test_unfinished_exercises_are_reported_not_raised(capsys):
    assert_unfinished_reported(CATALOGUES, capsys)


# --- one training step ----------------------------------------------------------------------


def _solution(model, optimizer, x, y, lr, grad_clip):
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad(set_to_none=True)
    _, loss = model(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss.item()


def _comprehension_and_model_zero_grad(model, optimizer, x, y, lr, grad_clip):
    [group.update(lr=lr) for group in optimizer.param_groups]
    model.zero_grad(set_to_none=False)
    loss = model(x, y)[1]
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(model.parameters()), max_norm=grad_clip)
    optimizer.step()
    return float(loss.detach())


def _clip_by_hand(model, optimizer, x, y, lr, grad_clip):  # the global norm written out
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad()
    loss = model(x, y)[1]
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads))
    scale = min(1.0, grad_clip / (float(norm) + 1e-6))
    for g in grads:
        g.mul_(scale)
    optimizer.step()
    return loss.item()


STEP_RIGHT = {
    "the solution": _solution,
    "a comprehension and model.zero_grad(set_to_none=False)": _comprehension_and_model_zero_grad,
    "the clip written out": _clip_by_hand,
}


@pytest.mark.parametrize("name", STEP_RIGHT)
def test_training_step_right_answers_pass(name, capsys):
    assert verdict(check_training_step, STEP_RIGHT[name], capsys) == (
        True,
        "✅ training_step: correct\n",
    )


def test_training_step_says_a_loss_returned_as_a_tensor(capsys):
    def as_tensor(model, optimizer, x, y, lr, grad_clip):
        _solution(model, optimizer, x, y, lr, grad_clip)
        return model(x, y)[1]

    passed, out = verdict(check_training_step, as_tensor, capsys)
    assert not passed and "returned a tensor that requires grad" in out and "loss.item()" in out


def test_training_step_names_a_missing_step_like_a_step_before_backward(capsys):
    def no_step(model, optimizer, x, y, lr, grad_clip):
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad()
        loss = model(x, y)[1]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        return loss.item()

    passed, out = verdict(check_training_step, no_step, capsys)
    assert not passed and "optimizer.step() before loss.backward() (or no step at all)" in out


# --- the learning rate at step s ------------------------------------------------------------


def _schedule(step, config):
    if step < config.warmup_iters:
        return config.learning_rate * (step + 1) / config.warmup_iters
    progress = min(1.0, (step - config.warmup_iters) / (config.max_iters - config.warmup_iters))
    return config.min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (
        config.learning_rate - config.min_lr
    )


def _with_torch(step, config):  # another formula: cos^2(pi/2 * progress), in torch float64
    if step < config.warmup_iters:
        return float(torch.tensor(config.learning_rate, dtype=torch.float64) * (step + 1))
        # (divided below)
    progress = torch.tensor(
        (step - config.warmup_iters) / (config.max_iters - config.warmup_iters), dtype=torch.float64
    ).clamp(max=1.0)
    span = config.learning_rate - config.min_lr
    return float(config.min_lr + span * torch.cos(math.pi / 2 * progress) ** 2)


def _cos_squared(step, config):
    if step < config.warmup_iters:
        return _with_torch(step, config) / config.warmup_iters
    return _with_torch(step, config)


LR_RIGHT = {
    "the formula": _schedule,
    "the course's learning_rate_at": learning_rate_at,
    "cos^2 in torch float64": _cos_squared,
}


@pytest.mark.parametrize("name", LR_RIGHT)
def test_learning_rate_right_answers_pass(name, capsys):
    assert verdict(check_learning_rate, LR_RIGHT[name], capsys) == (
        True,
        "✅ learning_rate: correct\n",
    )


@pytest.mark.parametrize(
    ("wrong", "said"),
    [
        (
            lambda s, c: torch.tensor(_schedule(s, c)),
            "returned Tensor; return a float (use .item())",
        ),
        (lambda s, c: _schedule(max(s, c.warmup_iters), c), "differs"),  # no warm-up
        (lambda s, c: None, "returned NoneType"),
    ],
)
def test_learning_rate_says_what_else_is_wrong(wrong, said, capsys):
    passed, out = verdict(check_learning_rate, wrong, capsys)
    assert not passed and said in out, out


# --- estimating the loss without gradients ------------------------------------------------


def _estimate(model, batches):
    was_training = model.training
    model.eval()
    with torch.no_grad():
        losses = [model(x, y)[1] for x, y in batches]
    model.train(was_training)
    return torch.stack(losses).mean().item()


@torch.inference_mode()
def _inference_mode(model, batches):
    was_training = model.training
    model.eval()
    total = sum(model(x, y)[1].item() for x, y in batches)
    model.train(was_training)
    return total / len(batches)


@torch.no_grad()
def _each_module(model, batches):  # modes saved and restored module by module
    modes = {m: m.training for m in model.modules()}
    for m in modes:
        m.training = False
    mean = sum(model(x, y)[1].double() for x, y in batches) / len(batches)
    for m, mode in modes.items():
        m.training = mode
    return float(mean)


ESTIMATE_RIGHT = {
    "no_grad and stack": _estimate,
    "the inference_mode decorator": _inference_mode,
    "every module's flag, float64 sum": _each_module,
}


@pytest.mark.parametrize("name", ESTIMATE_RIGHT)
def test_estimate_loss_right_answers_pass(name, capsys):
    assert verdict(check_estimate_loss, ESTIMATE_RIGHT[name], capsys) == (
        True,
        "✅ estimate_loss: correct\n",
    )


def test_estimate_loss_says_a_tensor_is_returned(capsys):
    def as_tensor(model, batches):
        return torch.tensor(_estimate(model, batches))

    passed, out = verdict(check_estimate_loss, as_tensor, capsys)
    assert not passed and "return a Python float (tensor.item())" in out, out
