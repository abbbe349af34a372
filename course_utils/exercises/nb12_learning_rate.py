"""Checker for notebook 12's exercise on the learning rate at step s: warm-up + cosine.

Written with :func:`course_utils.exercises.judge.judge`; the harness returns the rate at every
step as a tensor over the step axis, so a difference is located by step.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from course_utils.config import TrainConfig
from course_utils.exercises.difference import Tolerance
from course_utils.exercises.judge import Case, Problem, judge
from course_utils.lab.language import N_, tr

# --- the learning rate at step s ------------------------------------------------------------


def _lr(step, config, *, warmup_from=1, end="min_lr", over="decay", start="warmup",
        clamp=True, ahead=0, boundary="<", shape="cosine", half=0.5, swapped=False):  # fmt: skip
    """Linear warm-up (step 0 already learns), cosine from the peak to min_lr, then flat; the
    keywords make the known mistakes."""
    warmup, peak = config.warmup_iters, config.learning_rate
    floor = 0.0 if end == "zero" else config.min_lr
    if step < warmup or (boundary == "<=" and step <= warmup):
        return peak * (step + warmup_from) / warmup
    span = {"decay": config.max_iters - warmup, "max_iters": config.max_iters}[over]
    progress = (step - (warmup if start == "warmup" else 0) + ahead) / span
    progress = min(1.0, progress) if clamp else progress
    if shape == "linear":
        return peak - progress * (peak - floor)
    if shape == "full":  # the mistake: a whole period, down and back up
        return floor + half * (1 + math.cos(2 * math.pi * progress)) * (peak - floor)
    high, low = (floor, peak) if swapped else (peak, floor)
    return low + half * (1 + math.cos(math.pi * progress)) * (high - low)


LEARNING_RATE_MISTAKES = [
    (
        N_(
            "a warm-up that starts at 0 (learning_rate * step / warmup_iters): step 0 should "
            "already learn, learning_rate * (step + 1) / warmup_iters"
        ),
        lambda s, c: _lr(s, c, warmup_from=0),
    ),
    (N_("a decay to 0; the cosine ends at min_lr"), lambda s, c: _lr(s, c, end="zero")),
    (
        N_(
            "a cosine stretched over max_iters steps; it runs over max_iters - warmup_iters steps, "
            "starting after the warm-up"
        ),
        lambda s, c: _lr(s, c, over="max_iters"),
    ),
    (
        N_(
            "a cosine counted from step 0; count from the end of the warm-up: progress = "
            "(step - warmup_iters) / (max_iters - warmup_iters)"
        ),
        lambda s, c: _lr(s, c, over="max_iters", start="zero"),
    ),
    (
        N_(
            "a cosine one step ahead (step - warmup_iters + 1): the first step after the warm-up "
            "is at the peak, progress 0"
        ),
        lambda s, c: _lr(s, c, ahead=1),
    ),
    (
        N_(
            "a rate that rises again after max_iters: clamp the progress at 1, so it stays at "
            "min_lr"
        ),
        lambda s, c: _lr(s, c, clamp=False),
    ),
    (
        N_(
            "step <= warmup_iters for the warm-up: at step warmup_iters the cosine starts, at the "
            "peak; use step < warmup_iters"
        ),
        lambda s, c: _lr(s, c, boundary="<="),
    ),
    (N_("a linear decay; the schedule is a cosine"), lambda s, c: _lr(s, c, shape="linear")),
    (
        N_(
            "a full cosine period, cos(2 pi progress): the rate falls and climbs back to the peak; "
            "the schedule is half a period, cos(pi * progress), from the peak down to min_lr"
        ),
        lambda s, c: _lr(s, c, shape="full"),
    ),
    (
        N_(
            "the factor 0.5 missing: "
            "min_lr + 0.5 * (1 + cos(pi * progress)) * (learning_rate - min_lr)"
        ),
        lambda s, c: _lr(s, c, half=1.0),
    ),
    (
        N_(
            "learning_rate and min_lr swapped in the cosine: it should fall from learning_rate to "
            "min_lr"
        ),
        lambda s, c: _lr(s, c, swapped=True),
    ),
]


def _schedule(learning_rate, config):
    """The rate at every step 0 .. max_iters + 20, as a float64 tensor over the step axis."""
    rates = []
    for step in range(config.max_iters + 21):
        rate = learning_rate(step, config)
        if isinstance(rate, bool) or not isinstance(rate, (int, float)):
            if isinstance(rate, torch.Tensor):
                problem = tr(
                    "learning_rate({step}, config) returned {kind}; return a float (use .item())"
                )
            else:
                problem = tr("learning_rate({step}, config) returned {kind}; return a float")
            return Problem(problem.format(step=step, kind=type(rate).__name__))
        rates.append(float(rate))
    return torch.tensor(rates, dtype=torch.float64)


def check_learning_rate(learning_rate: Callable) -> bool:
    """Check ``learning_rate(step, config) -> float``: the warm-up + cosine schedule.

    Steps ``0 .. warmup_iters - 1``: ``learning_rate * (step + 1) / warmup_iters``; then a
    cosine from ``learning_rate`` down to ``min_lr`` over the remaining
    ``max_iters - warmup_iters`` steps; after ``max_iters``: ``min_lr``. Four configurations
    vary every field (warm-up 0 and 1 included), each at every step to ``max_iters + 20``.
    Names each mistake of :data:`LEARNING_RATE_MISTAKES`.
    """
    configs = [
        TrainConfig(batch_size=1, max_iters=60, warmup_iters=10, learning_rate=1e-3, min_lr=1e-4),
        TrainConfig(batch_size=1, max_iters=35, warmup_iters=5, learning_rate=3e-4, min_lr=3e-5),
        TrainConfig(batch_size=1, max_iters=12, warmup_iters=1, learning_rate=0.5, min_lr=0.0),
        TrainConfig(batch_size=1, max_iters=20, warmup_iters=0, learning_rate=2e-2, min_lr=5e-3),
    ]
    cases = [
        Case(
            c,
            label=f"warmup_iters={c.warmup_iters}, max_iters={c.max_iters}, "
            f"learning_rate={c.learning_rate}, min_lr={c.min_lr}",
        )  # fmt: skip
        for c in configs
    ]
    return judge(
        "learning_rate",
        learning_rate,
        _lr,
        cases,
        LEARNING_RATE_MISTAKES,
        call=_schedule,
        axes="step",
        tolerance=Tolerance(atol=1e-12, rtol=1e-6),
    )
