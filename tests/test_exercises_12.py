"""Checkers of notebook 12 (training): each accepts the right answer and rejects each
plausible wrong one for its own reason."""

from __future__ import annotations

import math

import pytest
import torch

from course_utils.exercises import check_estimate_loss, check_learning_rate, check_training_step
from course_utils.training import learning_rate_at


def verdict(checker, function, capsys) -> tuple[bool, str]:
    result = checker(function)
    return result, capsys.readouterr().out


# --- one training step ----------------------------------------------------------------------


def make_step(
    zero=True, clip=True, set_lr=True, step=True, item=True, zero_late=False, first_group=False
):
    def training_step(model, optimizer, x, y, lr, grad_clip):
        if first_group:
            optimizer.param_groups[0]["lr"] = lr  # the second (no-decay) group keeps its rate
        elif set_lr:
            for group in optimizer.param_groups:
                group["lr"] = lr
        if zero:
            optimizer.zero_grad()
        _, loss = model(x, y)
        loss.backward()
        if zero_late:
            optimizer.zero_grad()  # wipes the gradient just computed
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        if step:
            optimizer.step()
        return loss.item() if item else loss

    return training_step


def test_training_step_accepts_the_loop_body(capsys):
    assert verdict(check_training_step, make_step(), capsys) == (
        True,
        "✅ training_step: correct\n",
    )


def test_training_step_accepts_zero_grad_set_to_none_false(capsys):
    def training_step(model, optimizer, x, y, lr, grad_clip):
        for group in optimizer.param_groups:
            group["lr"] = lr
        model.zero_grad(set_to_none=False)
        loss = model(x, y)[1]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        return float(loss.detach())

    assert verdict(check_training_step, training_step, capsys)[0]


@pytest.mark.parametrize(
    "mistake, reason",
    [
        (dict(zero=False), "call optimizer.zero_grad() before loss.backward()"),
        (dict(clip=False), "the gradient was not clipped"),
        (dict(set_lr=False), "the optimizer's old learning rate"),
        (dict(step=False), "the weights did not change: call optimizer.step()"),
        (dict(item=False), "should return the loss as a float (loss.item())"),
        (dict(zero_late=True), "the weights did not change"),
        (dict(first_group=True), "only the first parameter group got the new learning rate"),
    ],
)
def test_training_step_names_each_mistake(mistake, reason, capsys):
    ok, out = verdict(check_training_step, make_step(**mistake), capsys)
    assert not ok and out.startswith("❌ training_step") and reason in out, out


def test_training_step_checker_has_two_parameter_groups_as_make_optimizer(capsys):
    # The first-group-only mistake can only show with a second group; make_optimizer has two.
    from course_utils.config import TrainConfig
    from course_utils.exercises.nb12_training import _tiny_decoder
    from course_utils.training import make_optimizer

    seen = []

    def spy(model, optimizer, x, y, lr, grad_clip):
        seen.append(len(optimizer.param_groups))
        return make_step()(model, optimizer, x, y, lr, grad_clip)

    assert verdict(check_training_step, spy, capsys)[0]
    groups = make_optimizer(_tiny_decoder(), TrainConfig(batch_size=1, max_iters=10)).param_groups
    assert set(seen) == {len(groups)} == {2}


def test_training_step_accepts_a_learning_rate_set_through_a_comprehension(capsys):
    def training_step(model, optimizer, x, y, lr, grad_clip):
        [group.update(lr=lr) for group in optimizer.param_groups]
        optimizer.zero_grad()
        loss = model(x, y)[1]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(model.parameters()), max_norm=grad_clip)
        optimizer.step()
        return loss.item()

    assert verdict(check_training_step, training_step, capsys)[0]


def test_training_step_reports_an_unfinished_exercise(capsys):
    def unfinished(*args):
        raise NotImplementedError

    assert verdict(check_training_step, unfinished, capsys) == (
        False,
        "❌ training_step: not implemented yet\n",
    )


# --- the learning rate at step s ------------------------------------------------------------


def by_hand(step, config, warmup_from_zero=False, to_zero=False, stretched=False, clamp=True):
    if step < config.warmup_iters:
        return config.learning_rate * (step if warmup_from_zero else step + 1) / config.warmup_iters
    length = config.max_iters if stretched else config.max_iters - config.warmup_iters
    progress = (step - config.warmup_iters) / length
    if clamp:
        progress = min(1.0, progress)
    floor = 0.0 if to_zero else config.min_lr
    return floor + 0.5 * (1 + math.cos(math.pi * progress)) * (config.learning_rate - floor)


def test_learning_rate_accepts_the_schedule_and_the_course_function(capsys):
    assert verdict(check_learning_rate, by_hand, capsys) == (True, "✅ learning_rate: correct\n")
    assert verdict(check_learning_rate, learning_rate_at, capsys)[0]


@pytest.mark.parametrize(
    "mistake, reason",
    [
        (dict(warmup_from_zero=True), "so that step 0 already learns a little"),
        (dict(to_zero=True), "the cosine should decay to min_lr, not to 0"),
        (dict(stretched=True), "the cosine runs over max_iters - warmup_iters steps"),
        (dict(clamp=False), "after max_iters the rate stays at min_lr"),
    ],
)
def test_learning_rate_names_each_mistake(mistake, reason, capsys):
    ok, out = verdict(check_learning_rate, lambda s, c: by_hand(s, c, **mistake), capsys)
    assert not ok and out.startswith("❌ learning_rate") and reason in out, out


def test_learning_rate_without_warmup_is_rejected(capsys):
    def no_warmup(step, config):
        return by_hand(max(step, config.warmup_iters), config)

    ok, out = verdict(check_learning_rate, no_warmup, capsys)
    assert not ok and "(in the warm-up)" in out, out


# --- estimating the loss without gradients ------------------------------------------------


def make_estimate(eval_mode=True, no_grad=True, restore=True, item=True, batches_used=None):
    def estimate_loss(model, batches):
        was_training = model.training
        if eval_mode:
            model.eval()
        with torch.no_grad() if no_grad else torch.enable_grad():
            losses = [model(x, y)[1] for x, y in batches[:batches_used]]
        if restore:
            model.train(was_training)
        mean = torch.stack(losses).mean()
        return mean.item() if item else mean

    return estimate_loss


def test_estimate_loss_accepts_the_right_answer(capsys):
    assert verdict(check_estimate_loss, make_estimate(), capsys) == (
        True,
        "✅ estimate_loss: correct\n",
    )


def test_estimate_loss_accepts_the_inference_mode_decorator(capsys):
    @torch.inference_mode()
    def estimate_loss(model, batches):
        was_training = model.training
        model.eval()
        total = sum(model(x, y)[1].item() for x, y in batches)
        model.train(was_training)
        return total / len(batches)

    assert verdict(check_estimate_loss, estimate_loss, capsys)[0]


@pytest.mark.parametrize(
    "mistake, reason",
    [
        (dict(eval_mode=False), "call model.eval() first"),
        (dict(no_grad=False), "wrap them in torch.no_grad()"),
        (dict(restore=False), "restore its mode"),
        (dict(item=False), "return a Python float"),
        (dict(batches_used=1), "(only the first batch?)"),
    ],
)
def test_estimate_loss_names_each_mistake(mistake, reason, capsys):
    ok, out = verdict(check_estimate_loss, make_estimate(**mistake), capsys)
    assert not ok and out.startswith("❌ estimate_loss") and reason in out, out


def test_estimate_loss_rejects_a_tensor_that_requires_grad(capsys):
    ok, out = verdict(check_estimate_loss, make_estimate(no_grad=False, item=False), capsys)
    assert not ok and "tensor that requires grad" in out, out
