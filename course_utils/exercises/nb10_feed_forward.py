"""Checkers for notebook 10: the learner's ``FeedForward`` (a part of their decoder) and the
parameter count of a whole pre-LN block."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

import course_utils.exercises.solution_model as solution
from course_utils.exercises.difference import Tolerance
from course_utils.exercises.judge import Case, judge
from course_utils.exercises.module_judge import judge_module
from course_utils.lab.language import N_, tr


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


class _NoBiases(solution.FeedForward):
    def forward(self, x):
        return F.gelu(x @ self.up.weight.T) @ self.down.weight.T


class _NoUpBias(solution.FeedForward):
    def forward(self, x):
        return self.down(F.gelu(x @ self.up.weight.T))


class _NoDownBias(solution.FeedForward):
    def forward(self, x):
        return F.gelu(self.up(x)) @ self.down.weight.T


_FEED_FORWARD_MISTAKES = [
    (N_("ReLU instead of GELU (the paper's FFN; the course's, as GPT-2's, uses F.gelu)"),
     _mistake(activation=F.relu)),
    (N_("no nonlinearity between the two layers: two linear maps are one linear map; "
        "put F.gelu between them"), _mistake(activation=lambda h: h)),
    (N_("SiLU (x * sigmoid(x)) instead of GELU: use F.gelu"), _mistake(activation=F.silu)),
    (N_("GELU also after the second layer: only between the two"), _mistake(after=F.gelu)),
    (N_("the residual added inside the FFN (x + ...): the block adds it (notebook 11); the FFN "
        "returns down(gelu(up(x)))"), _mistake(residual=True)),
    (N_("GELU's tanh approximation (approximate='tanh', GPT-2's): the course's model and "
        "train() use the exact F.gelu, and notebook 12 compares your model with them; use "
        "F.gelu(h)"), _TanhGelu),
    (N_("both biases skipped (x @ weight.T alone): nn.Linear adds its bias; call self.up(x) and "
        "self.down(h)"), _NoBiases),
    (N_("up's bias skipped (x @ self.up.weight.T): call self.up(x), which adds it"), _NoUpBias),
    (N_("down's bias skipped (h @ self.down.weight.T): call self.down(h), which adds it"),
     _NoDownBias),
]  # fmt: skip

_FEED_FORWARD_ERRORS = [
    (
        RuntimeError,
        "shapes cannot be multiplied",
        N_(
            "nn.Linear's weight is (out, in): call self.up(x) and self.down(h), or use "
            "x @ self.up.weight.T + self.up.bias; up goes first (C -> d_ff), then down "
            "(d_ff -> C)"
        ),
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
    cases.append(Case(12, 30, strided, label=tr("d_model=12, d_ff=30, a non-contiguous x")))
    return cases


def check_feed_forward(FeedForward: type) -> bool:  # noqa: N803
    """Check the class ``FeedForward(d_model, d_ff)`` (``up = nn.Linear(C, d_ff)``,
    ``down = nn.Linear(d_ff, C)``): ``down(GELU(up(x)))``, position-wise (§3.3 of Vaswani et
    al. 2017, with GPT-2's GELU).

    Four cases with random weights: (C, d_ff) = (24, 96), (10, 40) with T = 1, (8, 20) on a
    2-D input, (12, 30) on a non-contiguous input. Names nine mistakes: ReLU, no
    nonlinearity, SiLU, GELU after the second layer, the residual added inside, GELU's tanh
    approximation (rejected here as in :func:`course_utils.lab.parts.my_model`: the course's
    model uses the exact GELU), a bias skipped (either or both); and ``x @ weight`` on
    nn.Linear's (out, in) weights. Then the part is run as training runs it (gradients of
    up and down, train mode, the device).
    """
    return judge_module(
        "FeedForward", FeedForward, _Reference, _feed_forward_cases(), _FEED_FORWARD_MISTAKES,
        build_args=2, checker="check_feed_forward", axes=None, errors=_FEED_FORWARD_ERRORS,
    )  # fmt: skip


# --- the parameter count of a whole block -----------------------------------------------


def _attention(d_model: int) -> int:
    return 4 * (d_model * d_model + d_model)  # w_q, w_k, w_v, w_o: nn.Linear(C, C), with bias


def _ffn(d_model: int, d_ff: int) -> int:
    return (d_model * d_ff + d_ff) + (d_ff * d_model + d_model)  # up (W1, b1), down (W2, b2)


def _block_parameters(d_model, n_heads, d_ff):
    return _attention(d_model) + 2 * (2 * d_model) + _ffn(d_model, d_ff)  # + ln_1, ln_2


_LAYER_NORMS = 4  # times d_model: ln_1 and ln_2, a weight and a bias each

_BLOCK_COUNT_MISTAKES = [
    (
        N_(
            "the attention counted once per head (n_heads x 4(C^2 + C)); the heads share out one "
            "C x C projection, d_k = C / n_heads columns each, so the count does not depend on "
            "n_heads"
        ),
        lambda c, h, f: h * _attention(c) + _LAYER_NORMS * c + _ffn(c, f),
    ),
    (
        N_(
            "one head's projections (C x d_k, or d_k x d_k per head) counted for the whole "
            "attention; the n_heads heads together make each of w_q, w_k, w_v, w_o a C x C matrix"
        ),
        lambda c, h, f: 4 * (c * (c // h) + c) + _LAYER_NORMS * c + _ffn(c, f),
    ),
    (
        N_(
            "4C missing: the attention's biases (w_q, w_k, w_v, w_o are nn.Linear(C, C) with a "
            "bias of C each) or the two LayerNorms (ln_1, ln_2: a weight and a bias of C each)"
        ),
        lambda c, h, f: 4 * c * c + _LAYER_NORMS * c + _ffn(c, f),
    ),
    (
        N_("three projections (q, k, v): the output projection w_o (C^2 + C) is missing"),
        lambda c, h, f: 3 * (c * c + c) + _LAYER_NORMS * c + _ffn(c, f),
    ),
    (
        N_(
            "2C for the LayerNorms; a pre-LN block has two (ln_1, ln_2), each with a weight and a "
            "bias of C entries: 4C in all"
        ),
        lambda c, h, f: _attention(c) + 2 * c + _ffn(c, f),
    ),
    (
        N_("the feed-forward network's biases left out: up has d_ff, down has C"),
        lambda c, h, f: _attention(c) + _LAYER_NORMS * c + 2 * c * f,
    ),
    (
        N_("the first FFN bias counted as C; up = nn.Linear(C, d_ff) has d_ff biases"),
        lambda c, h, f: _attention(c) + _LAYER_NORMS * c + 2 * c * f + 2 * c,
    ),
    (
        N_("one FFN layer; the FFN has two, up (C -> d_ff) and down (d_ff -> C)"),
        lambda c, h, f: _attention(c) + _LAYER_NORMS * c + c * f + f,
    ),
    (
        N_("d_ff taken as 4 * d_model; use the argument d_ff (the checker tries other widths)"),
        lambda c, h, f: _block_parameters(c, h, 4 * c),
    ),
    (
        N_("the feed-forward network alone; the block also holds the attention and two LayerNorms"),
        lambda c, h, f: _ffn(c, f),
    ),
    (
        N_("the attention alone; the block also holds the feed-forward network and two LayerNorms"),
        lambda c, h, f: _attention(c),
    ),
]


def _block_count_cases() -> list[Case]:
    """Every argument varied: d_model 24, 10, 12, 8, 768; n_heads 3, 2, 1 (one head), 8
    (d_k = 1), 12; d_ff 96 = 4C, 7 and 20 (not 4C), 48, 3072 (GPT-2 small's block)."""
    return [Case(24, 3, 96), Case(10, 2, 7), Case(12, 1, 48), Case(8, 8, 20), Case(768, 12, 3072)]


def check_block_parameter_count(count_block_parameters: Callable) -> bool:
    """Check ``count_block_parameters(d_model, n_heads, d_ff)``: the number of parameters of
    the learner's pre-LN ``Block`` (ln_1, attention with w_q, w_k, w_v, w_o = nn.Linear(C, C),
    ln_2, FeedForward up/down), a Python int:
    ``4(C^2 + C) + 4C + 2 C d_ff + d_ff + C``, whatever ``n_heads``.

    Five cases vary every argument (one head, d_k = 1, d_ff != 4C, GPT-2 small's sizes); the
    count must be exact. Names each mistake of :data:`_BLOCK_COUNT_MISTAKES`, a float or a
    tensor returned, and an argument replaced by a constant.
    """
    return judge(
        "count_block_parameters",
        count_block_parameters,
        _block_parameters,
        _block_count_cases(),
        _BLOCK_COUNT_MISTAKES,
        tolerance=Tolerance(atol=0.0, rtol=0.0),
    )
