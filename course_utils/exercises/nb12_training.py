"""Checkers for notebook 12: one training step, the learning rate at a step, and estimating
the loss without gradients.

Each checker compares the student's function with the same computation written out here,
and when the answer matches a known wrong variant (no ``zero_grad``, no clipping, a warm-up
that starts at 0, dropout left on, ...) it names that mistake.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from course_utils.config import ModelConfig, TrainConfig
from course_utils.exercises.core import run_check
from course_utils.model import TinyDecoder

_VOCAB, _BLOCK = 11, 8


def _tiny_decoder(dropout: float = 0.0, seed: int = 0) -> TinyDecoder:
    torch.manual_seed(seed)
    config = ModelConfig(
        vocab_size=_VOCAB, block_size=_BLOCK, d_model=16, n_heads=2, n_layers=1, dropout=dropout
    )
    return TinyDecoder(config)


def _batches(count: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        ids = torch.randint(_VOCAB, (3, _BLOCK + 1), generator=generator)
        out.append((ids[:, :-1], ids[:, 1:]))  # (B, T) inputs, (B, T) next-token targets
    return out


# --- one training step --------------------------------------------------------------------


def _reference_step(
    model, optimizer, x, y, lr, grad_clip, *, zero=True, clip=True, set_lr=True, all_groups=True
):
    """One step written out; the keyword switches leave one part out (the known mistakes)."""
    if set_lr:
        for group in optimizer.param_groups if all_groups else optimizer.param_groups[:1]:
            group["lr"] = lr
    if zero:
        optimizer.zero_grad(set_to_none=True)
    _, loss = model(x, y)
    loss.backward()
    if clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss.item()


_STEP_MISTAKES = {
    "zero": "the gradients of the previous step were added to this one: call "
    "optimizer.zero_grad() before loss.backward()",
    "clip": "the gradient was not clipped: call torch.nn.utils.clip_grad_norm_(model.parameters(), "
    "grad_clip) after loss.backward() and before optimizer.step()",
    "set_lr": "the step used the optimizer's old learning rate: set group['lr'] = lr for every "
    "group in optimizer.param_groups before optimizer.step()",
    "all_groups": "only the first parameter group got the new learning rate: the course's "
    "make_optimizer has two groups (weights with decay, biases and norms without), so set "
    "group['lr'] = lr in a loop over every group in optimizer.param_groups",
}


def _run_steps(step_function, batches, lr_values, grad_clip, **switches):
    """Two steps from the same start, with stale gradients left from an earlier backward."""
    model = _tiny_decoder()
    # Two groups, as make_optimizer builds (matrices; biases and norm weights), so a rate set
    # in the first group only shows. Plain SGD: every mistake changes the weights visibly
    # (Adam hides a uniform rescale).
    matrices = [p for p in model.parameters() if p.ndim >= 2]
    vectors = [p for p in model.parameters() if p.ndim < 2]
    optimizer = torch.optim.SGD([{"params": matrices}, {"params": vectors}], lr=0.5)
    x0, y0 = batches[0]
    model(x0, y0)[1].backward()  # stale gradients: what a forgotten zero_grad would add
    losses = [
        step_function(model, optimizer, x, y, lr, grad_clip, **switches)
        for (x, y), lr in zip(batches[1:], lr_values)
    ]
    return model, losses


def check_training_step(training_step: Callable) -> bool:
    """Check ``training_step(model, optimizer, x, y, lr, grad_clip) -> float``.

    One optimizer step: set the learning rate ``lr`` in every parameter group, clear the
    old gradients, forward ``model(x, y)`` (which returns ``(logits, loss)``), backward,
    clip the global gradient norm to ``grad_clip``, step; return the loss as a Python float.

    Tried for two steps on a 1-layer decoder whose gradients hold stale values from an
    earlier backward, with a clip that binds, a learning rate unlike the optimizer's, and two
    parameter groups (as :func:`course_utils.training.make_optimizer` builds). Names a missing
    ``zero_grad``, a missing clip, an unchanged learning rate, a rate set in the first group
    only, a loss returned as a tensor, and a step that changes nothing.
    """
    batches, lr_values, grad_clip = _batches(3, seed=120), [3e-3, 1e-3], 0.05
    expected_model, expected_losses = _run_steps(_reference_step, batches, lr_values, grad_clip)

    def attempt() -> str | None:
        model, losses = _run_steps(training_step, batches, lr_values, grad_clip)
        if not all(isinstance(loss, float) for loss in losses):
            kinds = sorted({type(loss).__name__ for loss in losses})
            return f"training_step should return the loss as a float (loss.item()), got {kinds}"
        if _same_weights(model, expected_model):
            if all(math.isclose(a, b, rel_tol=1e-5) for a, b in zip(losses, expected_losses)):
                return None
            return (
                f"returned losses {[round(v, 5) for v in losses]}, expected "
                f"{[round(v, 5) for v in expected_losses]} (the loss of the forward pass "
                "before the update)"
            )
        if _same_weights(model, _tiny_decoder()):
            return "the weights did not change: call optimizer.step()"
        for switch, reason in _STEP_MISTAKES.items():
            variant, _ = _run_steps(
                _reference_step, batches, lr_values, grad_clip, **{switch: False}
            )
            if _same_weights(model, variant):
                return reason
        return (
            "the weights after two steps differ from zero_grad -> forward -> backward -> "
            "clip -> step with the given lr"
        )

    return run_check("training_step", attempt)


def _same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(
        torch.allclose(p, q, rtol=1e-5, atol=1e-7) for p, q in zip(a.parameters(), b.parameters())
    )


# --- the learning rate at step s ------------------------------------------------------------


def _reference_lr(step: int, config: TrainConfig) -> float:
    """Linear warm-up (step 0 already learns), cosine from the peak to min_lr, then flat."""
    if step < config.warmup_iters:
        return config.learning_rate * (step + 1) / config.warmup_iters
    progress = min(1.0, (step - config.warmup_iters) / (config.max_iters - config.warmup_iters))
    return config.min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (
        config.learning_rate - config.min_lr
    )


def check_learning_rate(learning_rate: Callable) -> bool:
    """Check ``learning_rate(step, config) -> float``: the warm-up + cosine schedule.

    Steps ``0 .. warmup_iters - 1``: ``learning_rate * (step + 1) / warmup_iters``; then a
    cosine from ``learning_rate`` down to ``min_lr`` over the remaining
    ``max_iters - warmup_iters`` steps; after ``max_iters``: ``min_lr``.

    Tried on two configurations at every step from 0 to ``max_iters + 20``. Names a warm-up
    that starts at 0, a decay that ends at 0 instead of ``min_lr``, a cosine stretched over
    ``max_iters`` steps, and a rate that rises again after ``max_iters``.
    """
    configs = [
        TrainConfig(batch_size=1, max_iters=60, warmup_iters=10, learning_rate=1e-3, min_lr=1e-4),
        TrainConfig(batch_size=1, max_iters=35, warmup_iters=5, learning_rate=3e-4, min_lr=3e-5),
    ]

    def attempt() -> str | None:
        for config in configs:
            steps = range(config.max_iters + 21)
            answers = [learning_rate(step, config) for step in steps]
            for answer in answers:
                if not isinstance(answer, (int, float)) or isinstance(answer, bool):
                    return f"learning_rate should return a float, got {type(answer).__name__}"
            expected = [_reference_lr(step, config) for step in steps]
            wrong = [s for s in steps if not _close(answers[s], expected[s], 1e-6)]
            if wrong:
                return _lr_mistake(wrong[0], config, answers, expected)
        return None

    return run_check("learning_rate", attempt)


def _lr_mistake(step: int, config: TrainConfig, answers: list, expected: list) -> str:
    """Name the mistake behind a wrong curve; ``step`` is the first wrong step."""
    warmup, end = config.warmup_iters, config.max_iters
    where = f"at step {step} (warmup_iters={warmup}, max_iters={end})"
    head = f"{where} got {float(answers[step]):.6g}, expected {expected[step]:.6g}"
    if answers[0] == 0.0:
        return (
            f"{head}: the warm-up should start at learning_rate * (step + 1) / warmup_iters, "
            "so that step 0 already learns a little"
        )
    if math.isclose(answers[end], 0.0, abs_tol=1e-12):
        return f"{head}: the cosine should decay to min_lr, not to 0"
    stretched = [_cosine((s - warmup) / end, config) for s in range(warmup, end)]
    if all(_close(a, b, 1e-6) for a, b in zip(answers[warmup:end], stretched)):
        return (
            f"{head}: the cosine runs over max_iters - warmup_iters steps, starting after "
            "the warm-up"
        )
    if step > end:
        return f"{head}: after max_iters the rate stays at min_lr (clamp the progress at 1)"
    phase = "in the warm-up" if step < warmup else "in the cosine decay"
    return f"{head} ({phase})"


def _cosine(progress: float, config: TrainConfig) -> float:
    return config.min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (
        config.learning_rate - config.min_lr
    )


# --- estimating the loss without gradients ---------------------------------------------------


class _Probe(torch.nn.Module):
    """A decoder with dropout that records, at each call, its mode and whether autograd ran."""

    def __init__(self):
        super().__init__()
        self.decoder = _tiny_decoder(dropout=0.3, seed=3)
        self.config = self.decoder.config
        self.calls: list[tuple[bool, bool]] = []  # (training, grad enabled)

    def forward(self, x, targets=None):
        self.calls.append((self.training, torch.is_grad_enabled()))
        return self.decoder(x, targets)


def check_estimate_loss(estimate_loss: Callable) -> bool:
    """Check ``estimate_loss(model, batches) -> float``: the mean loss over a list of
    ``(x, y)`` batches, in eval mode (dropout off), without building a graph
    (``torch.no_grad()``), leaving the model in the mode it was in.

    Tried on a 1-layer decoder with dropout 0.3 and 4 batches, once from training mode and
    once from eval mode. Names dropout left on, autograd left on, a mode not restored, a
    tensor returned instead of a float, and a mean over fewer batches.
    """
    batches = _batches(4, seed=121)

    def attempt() -> str | None:
        for start_training in (True, False):
            probe = _Probe().train(start_training)
            answer = estimate_loss(probe, batches)
            if isinstance(answer, torch.Tensor):
                grad = " that requires grad" if answer.requires_grad else ""
                return f"returned a tensor{grad}; return a Python float (.item())"
            if not probe.calls:
                return "the model was never called"
            if any(training for training, _ in probe.calls):
                return "the model ran in training mode (dropout on): call model.eval() first"
            if any(grad for _, grad in probe.calls):
                return (
                    "the forward passes ran with autograd on, building graphs nobody uses: "
                    "wrap them in torch.no_grad()"
                )
            if probe.training != start_training:
                mode = "training" if start_training else "eval"
                return f"the model was in {mode} mode before and not after: restore its mode"
            expected = _mean_loss(probe.decoder, batches)
            if not isinstance(answer, (int, float)) or not math.isclose(
                answer, expected, rel_tol=1e-5
            ):
                first = _mean_loss(probe.decoder, batches[:1])
                hint = " (only the first batch?)" if _close(answer, first) else ""
                return (
                    f"returned {answer!r}, expected the mean over all batches {expected:.6f}{hint}"
                )
        return None

    return run_check("estimate_loss", attempt)


def _mean_loss(model: TinyDecoder, batches) -> float:
    was_training = model.training
    model.eval()
    with torch.no_grad():
        losses = [model(x, y)[1].item() for x, y in batches]
    model.train(was_training)
    return sum(losses) / len(losses)


def _close(a, b: float, rel_tol: float = 1e-5) -> bool:
    """``a`` is a number (not a bool) within ``rel_tol`` of ``b``."""
    return (
        isinstance(a, (int, float))
        and not isinstance(a, bool)
        and math.isclose(a, b, rel_tol=rel_tol, abs_tol=1e-12)
    )
