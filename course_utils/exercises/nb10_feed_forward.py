"""Checkers for notebook 10: the learner's ``FeedForward`` (a part of their decoder) and the
parameter count of an FFN."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from course_utils.exercises import solution_model as solution
from course_utils.exercises.core import run_check
from course_utils.exercises.difference import difference
from course_utils.exercises.judge import Case
from course_utils.exercises.nb08_module_judge import build, judge_module


class _Reference(solution.FeedForward):
    """Linear, exact GELU, linear, through torch.nn.functional."""

    def forward(self, x):
        hidden = F.linear(x, self.up.weight, self.up.bias)  # (..., C) -> (..., d_ff)
        return F.linear(F.gelu(hidden), self.down.weight, self.down.bias)  # -> (..., C)


def _mistake(activation=F.gelu, after=None, residual=False) -> type:
    class Mistake(solution.FeedForward):
        def forward(self, x):
            out = self.down(activation(self.up(x)))
            out = after(out) if after is not None else out
            return x + out if residual else out

    return Mistake


class _TanhGelu(solution.FeedForward):
    def forward(self, x):
        return self.down(F.gelu(self.up(x), approximate="tanh"))


_FEED_FORWARD_MISTAKES = [
    ("ReLU instead of GELU (the paper's FFN; the course's, as GPT-2's, uses F.gelu)",
     _mistake(activation=F.relu)),
    ("no nonlinearity between the two layers: two linear maps are one linear map; "
     "put F.gelu between them", _mistake(activation=lambda h: h)),
    ("SiLU (x * sigmoid(x)) instead of GELU: use F.gelu", _mistake(activation=F.silu)),
    ("GELU also after the second layer: only between the two", _mistake(after=F.gelu)),
    ("the residual added inside the FFN (x + ...): the block adds it (notebook 11); the FFN "
     "returns down(gelu(up(x)))", _mistake(residual=True)),
]  # fmt: skip

_FEED_FORWARD_ERRORS = [
    (
        RuntimeError,
        "shapes cannot be multiplied",
        "nn.Linear's weight is (out, in): call self.up(x) and self.down(h), or use "
        "x @ self.up.weight.T + self.up.bias; up goes first (C -> d_ff), then down (d_ff -> C)",
    ),
]


def _feed_forward_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(11)
    cases = [
        Case(24, 96, torch.randn(2, 6, 24, generator=generator)),
        Case(10, 40, torch.randn(3, 1, 10, generator=generator)),  # T = 1
        Case(8, 20, torch.randn(4, 8, generator=generator)),  # d_ff != 4 C; (N, C)
    ]
    strided = torch.randn(12, 5, 2, generator=generator).permute(2, 1, 0)  # (2, 5, 12)
    cases.append(Case(12, 30, strided, label="d_model=12, d_ff=30, a non-contiguous x"))
    return cases


def check_feed_forward(FeedForward: type) -> bool:  # noqa: N803
    """Check the class ``FeedForward(d_model, d_ff)`` (``up = nn.Linear(C, d_ff)``,
    ``down = nn.Linear(d_ff, C)``): ``down(GELU(up(x)))``, position-wise (§3.3 of Vaswani et
    al. 2017, with GPT-2's GELU).

    Four cases with random weights: (C, d_ff) = (24, 96), (10, 40) with T = 1, (8, 20) on a
    2-D input, (12, 30) on a non-contiguous input. GPT-2's tanh approximation of GELU is also
    accepted. Names five mistakes: ReLU, no nonlinearity, SiLU, GELU after the second layer,
    the residual added inside; and ``x @ weight`` on nn.Linear's (out, in) weights.
    """
    cases = _feed_forward_cases()
    if _matches_everywhere(FeedForward, _TanhGelu, cases):
        print("✅ FeedForward: correct (with GPT-2's tanh approximation of GELU)")
        from course_utils.lab.parts import save_part

        save_part(FeedForward)
        return True
    return judge_module(
        "FeedForward", FeedForward, _Reference, cases, _FEED_FORWARD_MISTAKES,
        build_args=2, checker="check_feed_forward", axes=None, errors=_FEED_FORWARD_ERRORS,
    )  # fmt: skip


def _matches_everywhere(part: object, other: type, cases: list[Case]) -> bool:
    """Whether ``part`` computes what ``other`` does on every case (quietly; False on any
    failure)."""
    try:
        for case in cases:
            args, _ = case.fresh()
            mine, theirs = build(part, _Reference, args[:2]), build(other, _Reference, args[:2])
            with torch.no_grad():
                got, want = mine(args[2]), theirs(args[2])
            if difference(got, want) is not None:
                return False
    except Exception:  # the answer may fail in any way; judge_module then says how
        return False
    return True


def check_ffn_parameter_count(count_ffn_parameters: Callable) -> bool:
    """Check ``count_ffn_parameters(d_model, d_ff)`` = ``2 * d_model * d_ff + d_ff + d_model``.

    Tried on (24, 96), (512, 2048) (the paper's base model) and (10, 7); the answer must be
    a Python int.
    """

    def attempt() -> str | None:
        for d_model, d_ff in ((24, 96), (512, 2048), (10, 7)):
            answer = count_ffn_parameters(d_model, d_ff)
            expected = 2 * d_model * d_ff + d_ff + d_model
            call = f"count_ffn_parameters({d_model}, {d_ff})"
            if isinstance(answer, bool) or not isinstance(answer, int):
                return f"{call} should return an int, got {type(answer).__name__}"
            if answer == expected:
                continue
            hints = {
                2 * d_model * d_ff: "the two weight matrices without the biases (d_ff + d_model)",
                d_model * d_ff + d_ff: "only the first layer",
                d_model * d_ff + d_model: "only the second layer",
                2 * d_model * d_ff + 2 * d_model: "a bias of size d_model on both layers; the "
                "first layer's bias has d_ff entries",
            }
            hint = f"; that is {hints[answer]}" if answer in hints else ""
            return f"{call} returned {answer:,}, expected {expected:,}{hint}"
        return None

    return run_check("count_ffn_parameters", attempt)
