"""Checkers for notebook 12: one training step, the learning rate at a step, and estimating
the loss without gradients.

Written with :func:`course_utils.exercises.judge.judge`. These exercises act on a model and
an optimizer, so each checker runs the answer in a harness (judge's ``call``) that builds
them, runs the answer and returns what it observed: the weight update, the losses, the
model's modes, the schedule over every step. Every catalogued mistake is a wrong version of
the learner's function, run through the same harness.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.config import ModelConfig
from course_utils.exercises.difference import Tolerance
from course_utils.exercises.judge import Case, Problem, judge
from course_utils.exercises.nb12_learning_rate import LEARNING_RATE_MISTAKES, check_learning_rate
from course_utils.lab.language import N_, tr
from course_utils.model import TinyDecoder

__all__ = [
    "ESTIMATE_LOSS_MISTAKES",
    "LEARNING_RATE_MISTAKES",
    "TRAINING_STEP_MISTAKES",
    "check_estimate_loss",
    "check_learning_rate",
    "check_training_step",
]

_VOCAB, _BLOCK = 11, 8


def _tiny_decoder(dropout: float = 0.0, seed: int = 0, d_model: int = 16) -> TinyDecoder:
    with torch.random.fork_rng(devices=[]):  # leave the notebook's random state alone
        torch.manual_seed(seed)
        config = ModelConfig(
            vocab_size=_VOCAB, block_size=_BLOCK, d_model=d_model, n_heads=2, n_layers=1,
            dropout=dropout,
        )  # fmt: skip
        return TinyDecoder(config)


def _batches(count: int, seed: int, batch: int = 3, t: int = _BLOCK) -> list[tuple]:
    generator = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        ids = torch.randint(_VOCAB, (batch, t + 1), generator=generator)
        out.append((ids[:, :-1], ids[:, 1:]))  # (B, T) inputs, (B, T) next-token targets
    return out


# --- one training step ------------------------------------------------------------------------


def _step(model, optimizer, x, y, lr, grad_clip, *, zero="start", clip="norm", set_lr="all",
          step_first=False):  # fmt: skip
    """One step written out; the keywords make the known mistakes."""
    groups = {"all": optimizer.param_groups, "first": optimizer.param_groups[:1]}
    for group in groups.get(set_lr, []):
        group["lr"] = lr
    if zero == "start":
        optimizer.zero_grad(set_to_none=True)
    _, loss = model(x, y)
    if step_first:  # the mistake: the update uses the gradients that are not there yet
        optimizer.step()
    loss.backward()
    if zero == "before step":
        optimizer.zero_grad()
    if clip == "norm":
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    elif clip == "value":
        torch.nn.utils.clip_grad_value_(model.parameters(), grad_clip)
    elif clip == "fixed":
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    elif clip == "each":
        for parameter in model.parameters():
            torch.nn.utils.clip_grad_norm_(parameter, grad_clip)
    if not step_first:
        optimizer.step()
    if clip == "after step":
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    if set_lr == "after step":
        for group in optimizer.param_groups:
            group["lr"] = lr
    if zero == "end":
        optimizer.zero_grad()
    return loss.item()


TRAINING_STEP_MISTAKES = [
    (
        N_(
            "optimizer.step() before loss.backward() (or no step at all): the weights never "
            "change; the order is zero_grad, forward, backward, clip, step"
        ),
        lambda *a: _step(*a, step_first=True),
    ),
    (
        N_(
            "zero_grad between backward and step: the gradient just computed is wiped before the "
            "update; call optimizer.zero_grad() before the forward pass"
        ),
        lambda *a: _step(*a, zero="before step"),
    ),
    (
        N_(
            "no zero_grad: the gradients of earlier steps were added to this one; call "
            "optimizer.zero_grad() before loss.backward()"
        ),
        lambda *a: _step(*a, zero="none"),
    ),
    (
        N_(
            "zero_grad at the end of the step: the gradients left before the call were added to "
            "the first update; clear them at the start"
        ),
        lambda *a: _step(*a, zero="end"),
    ),
    (
        N_(
            "no gradient clipping: call torch.nn.utils.clip_grad_norm_(model.parameters(), "
            "grad_clip) after loss.backward() and before optimizer.step()"
        ),
        lambda *a: _step(*a, clip="none"),
    ),
    (
        N_(
            "the clip after optimizer.step(): the update used the unclipped gradient; clip between "
            "backward and step"
        ),
        lambda *a: _step(*a, clip="after step"),
    ),
    (
        N_(
            "clip_grad_value_: it clips each entry; the exercise clips the global norm with "
            "clip_grad_norm_"
        ),
        lambda *a: _step(*a, clip="value"),
    ),
    (
        N_("a clip to norm 1.0; clip to the argument grad_clip"),
        lambda *a: _step(*a, clip="fixed"),
    ),
    (
        N_(
            "each parameter's gradient clipped on its own (clip_grad_norm_ called per parameter): "
            "the clip bounds the norm of all gradients together, so pass them all at once: "
            "clip_grad_norm_(model.parameters(), grad_clip)"
        ),
        lambda *a: _step(*a, clip="each"),
    ),
    (
        N_(
            "the optimizer's old learning rate: set group['lr'] = lr for every group in "
            "optimizer.param_groups before optimizer.step()"
        ),
        lambda *a: _step(*a, set_lr="none"),
    ),
    (
        N_(
            "only the first parameter group got the new learning rate: the course's optimizer "
            "has two groups (weights with decay; biases and norms without), so loop over every "
            "group in optimizer.param_groups"
        ),
        lambda *a: _step(*a, set_lr="first"),
    ),
    (
        N_(
            "the learning rate set after optimizer.step(): each step used the previous rate; set "
            "it first"
        ),
        lambda *a: _step(*a, set_lr="after step"),
    ),
]


def _steps(training_step, d_model, batch_shape, momentum, lr_values, grad_clip):
    """Run ``training_step`` once per rate in ``lr_values`` on a fresh 1-layer decoder whose
    gradients hold stale values from an earlier backward, with two parameter groups (as
    make_optimizer builds) and plain SGD (Adam would hide a uniform rescale). Returns
    (the weight update, the losses, the gradient norm left after the last call)."""
    model = _tiny_decoder(d_model=d_model)
    matrices = [p for p in model.parameters() if p.ndim >= 2]
    vectors = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": matrices}, {"params": vectors}]
    optimizer = torch.optim.SGD(groups, lr=0.1, momentum=momentum)
    batches = _batches(
        len(lr_values) + 1, seed=120 + d_model, batch=batch_shape[0], t=batch_shape[1]
    )
    model(*batches[0])[1].backward()  # stale gradients: what a forgotten zero_grad would add
    before = torch.cat([p.detach().flatten() for p in model.parameters()]).double()
    losses = []
    for (x, y), lr in zip(batches[1:], lr_values):
        loss = training_step(model, optimizer, x, y, lr, grad_clip)
        if isinstance(loss, bool) or not isinstance(loss, (int, float)):
            return Problem(
                tr("training_step returned {kind}; return the loss as a float: loss.item()").format(
                    kind=_returned_kind(loss)
                )
            )
        losses.append(float(loss))
    after = torch.cat([p.detach().flatten() for p in model.parameters()]).double()
    grads = [p.grad.detach().double().norm() for p in model.parameters() if p.grad is not None]
    grad_norm = float(torch.stack(grads).norm()) if grads else 0.0
    return after - before, torch.tensor(losses, dtype=torch.float64), grad_norm


def _returned_kind(value) -> str:
    """What the answer returned instead of a float, in a few words: "a tensor that requires
    grad", "a tensor", "a list"..."""
    if not isinstance(value, torch.Tensor):
        return tr("a {kind}").format(kind=type(value).__name__)
    return tr("a tensor that requires grad") if value.requires_grad else tr("a tensor")


def check_training_step(training_step: Callable) -> bool:
    """Check ``training_step(model, optimizer, x, y, lr, grad_clip) -> float``.

    One optimizer step: set the learning rate ``lr`` in every parameter group, clear the
    old gradients, forward ``model(x, y)`` (which returns ``(logits, loss)``), backward,
    clip the global gradient norm to ``grad_clip``, step; return the loss as a Python float.
    Three cases vary the model (d_model 16, 8), x and y ((3, 8), (2, 5), (1, 1)), the optimizer
    (SGD with and without momentum), lr and grad_clip (binding and not). Names each mistake of
    :data:`TRAINING_STEP_MISTAKES` and a loss returned as a tensor.
    """
    cases = [  # the first has a gradient norm above 1, so a clip to 1.0 shows
        Case(16, (1, 1), 0.0, (0.7,), 0.02, label=tr("one step on B = 1, T = 1, grad_clip 0.02")),
        Case(16, (3, 8), 0.0, (0.5, 0.3), 0.05,
             label=tr("two steps, lr 0.5 then 0.3, grad_clip 0.05")),
        Case(8, (2, 5), 0.9, (0.2, 0.4, 0.1), 0.5,
             label=tr("three steps with momentum, grad_clip 0.5")),
    ]  # fmt: skip
    return judge(
        "training_step",
        training_step,
        _step,
        cases,
        TRAINING_STEP_MISTAKES,
        call=_steps,
        axes=(tr("weight update"), tr("losses"), tr("gradient norm left after the step")),
        tolerance=Tolerance(atol=1e-8, rtol=1e-3),
    )


# --- estimating the loss without gradients ---------------------------------------------------


def _mode(modules) -> str:
    modes = {m.training for m in modules}
    return "mixed" if len(modes) > 1 else ("train" if modes.pop() else "eval")


def _estimate(estimate_loss, dropout, d_model, batch_shape, n_batches, start_training):
    """Run ``estimate_loss`` on a 1-layer decoder with dropout, seeded, and report what it
    did: (the modes during the forward passes, autograd during them, the mode afterwards,
    autograd afterwards, the value; None while dropout was on, as it is then random)."""
    model = _tiny_decoder(dropout=dropout, seed=3, d_model=d_model).train(start_training)
    batches = _batches(n_batches, seed=121, batch=batch_shape[0], t=batch_shape[1])
    seen: list[tuple[str, bool]] = []
    model.register_forward_pre_hook(
        lambda m, a: seen.append((_mode(m.modules()), torch.is_grad_enabled()))
    )
    evals: list[bool] = []  # model.eval() (model.train(False)) after the forward passes?
    train = model.train

    def watched_train(mode=True):
        if not mode:
            evals.append(bool(seen))
        return train(mode)

    model.train = watched_train
    with torch.random.fork_rng(devices=[]), torch.enable_grad():
        torch.manual_seed(0)
        value = estimate_loss(model, batches)
        grad_after = tr("on") if torch.is_grad_enabled() else tr("off (left disabled)")
    modes = {mode for mode, _ in seen} or {tr("never called")}
    during = modes.pop() if len(modes) == 1 else "mixed"
    autograd = tr("on") if any(grad for _, grad in seen) else tr("off")
    value = None if during in ("train", "mixed") else value
    late = tr("after the forward passes") if evals and evals[0] else tr("not after them")
    return during, autograd, _mode(model.modules()), grad_after, value, late


def _by_hand(model, batches, *, mode="eval", grad=False, restore=True, which=slice(None),
             reduce="mean", grad_global=False):  # fmt: skip
    """The exercise written out; the keywords make the known mistakes."""
    was_training = model.training
    if mode == "eval":
        model.eval()
    elif mode == "flag":  # the mistake: only the top module's flag changes
        model.training = False
    if grad_global:
        torch.set_grad_enabled(False)
    with torch.set_grad_enabled(grad and not grad_global):
        losses = [model(x, y)[1].item() for x, y in batches[which]]
    if mode == "after":  # the mistake: eval mode once the losses are computed
        model.eval()
    if restore is True:
        model.train(was_training)
    elif restore == "train":
        model.train()
    return sum(losses) if reduce == "sum" else sum(losses) / len(losses)


ESTIMATE_LOSS_MISTAKES = [
    (
        N_("no model.eval(): dropout was on; call model.eval() first"),
        lambda m, b: _by_hand(m, b, mode=None),
    ),
    (
        N_(
            "model.eval() called after the forward passes: dropout was on while they ran; call it "
            "before them (and restore the mode at the end)"
        ),
        lambda m, b: _by_hand(m, b, mode="after"),
    ),
    (
        N_(
            "model.training = False: that changes only the top module's flag, the dropout layers "
            "inside stay in training mode; call model.eval(), which sets every submodule"
        ),
        lambda m, b: _by_hand(m, b, mode="flag"),
    ),
    (
        N_(
            "no torch.no_grad(): the forward passes built graphs nobody uses; wrap them in "
            "torch.no_grad() (or decorate the function with @torch.no_grad())"
        ),
        lambda m, b: _by_hand(m, b, grad=True),
    ),
    (
        N_(
            "the model left in eval mode: remember model.training first and restore it with "
            "model.train(was_training)"
        ),
        lambda m, b: _by_hand(m, b, restore=False),
    ),
    (
        N_(
            "model.train() at the end whatever the mode before: a model that was in eval mode must "
            "stay in it; restore with model.train(was_training)"
        ),
        lambda m, b: _by_hand(m, b, restore="train"),
    ),
    (
        N_(
            "torch.set_grad_enabled(False) left on after the function: autograd stays off for the "
            "rest of the notebook; use the context manager torch.no_grad()"
        ),
        lambda m, b: _by_hand(m, b, grad_global=True),
    ),
    (
        N_("the loss of the first batch only; average over all batches"),
        lambda m, b: _by_hand(m, b, which=slice(1)),
    ),
    (
        N_("the loss of the last batch only; average over all batches"),
        lambda m, b: _by_hand(m, b, which=slice(-1, None)),
    ),
    (N_("the sum of the losses; return their mean"), lambda m, b: _by_hand(m, b, reduce="sum")),
]


def check_estimate_loss(estimate_loss: Callable) -> bool:
    """Check ``estimate_loss(model, batches) -> float``: the mean loss over a list of
    ``(x, y)`` batches, in eval mode (dropout off), without building a graph
    (``torch.no_grad()``), leaving the model in the mode it was in. Four cases vary the model
    (dropout 0.3, 0.5; d_model 16, 8), the batches (4, 1 and 3; T = 1 included) and the mode
    before (train, eval). Names each mistake of :data:`ESTIMATE_LOSS_MISTAKES` (dropout left
    on, ``model.training = False``, ...) and a tensor returned.
    """
    cases = [
        Case(0.3, 16, (3, 8), 4, True,
             label=tr("4 batches (3, 8), dropout 0.3, from training mode")),
        Case(0.3, 16, (3, 8), 4, False, label=tr("4 batches (3, 8), dropout 0.3, from eval mode")),
        Case(0.5, 8, (2, 5), 3, True,
             label=tr("3 batches (2, 5), dropout 0.5, from training mode")),
        Case(0.5, 8, (1, 1), 1, False, label=tr("1 batch (1, 1), dropout 0.5, from eval mode")),
    ]  # fmt: skip
    return judge(
        "estimate_loss",
        estimate_loss,
        _by_hand,
        cases,
        ESTIMATE_LOSS_MISTAKES,
        call=_estimate,
        axes=(
            tr("mode during the forward passes"),
            tr("autograd during them"),
            tr("mode afterwards"),
            tr("autograd afterwards"),
            tr("value"),
            tr("whether model.eval() came after the forward passes"),
        ),  # fmt: skip
    )
