"""Checkers for notebook 09: the learner's ``LayerNorm`` (a part of their decoder) and one
pre-LN residual step."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

import course_utils.exercises.solution_model as solution
from course_utils.exercises.judge import Case, judge
from course_utils.exercises.module_judge import judge_module
from course_utils.exercises.runner import Runner
from course_utils.lab.language import N_, tr


class _Reference(solution.LayerNorm):
    """PyTorch's own LayerNorm with the module's weight, bias and eps."""

    def forward(self, x):
        return F.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)


def _normalise(module, x, *, dim=-1, unbiased=False, eps_inside=True, eps=None, centre=True):
    """LayerNorm with one thing changed (the mistakes below)."""
    eps = module.eps if eps is None else eps
    if dim is None:  # the whole tensor
        dim = tuple(range(x.dim()))
    mean = x.mean(dim=dim, keepdim=True) if centre else 0.0
    if not centre:  # RMSNorm: the root of the mean square, no centring
        spread = x.pow(2).mean(dim=dim, keepdim=True)
    else:
        spread = x.var(dim=dim, keepdim=True, unbiased=unbiased)
    scale = torch.sqrt(spread + eps) if eps_inside else spread.sqrt() + eps
    return (x - mean) / scale


def _mistake(affine=True, **change) -> type:
    class Mistake(solution.LayerNorm):
        def forward(self, x):
            normalised = _normalise(self, x, **change)
            return self.weight * normalised + self.bias if affine else normalised

    return Mistake


class _ScaledFirst(solution.LayerNorm):
    """weight * x first, then centred and divided: the scale is normalised away."""

    def forward(self, x):
        return _normalise(self, self.weight * x) + self.bias


class _ShiftedFirst(solution.LayerNorm):
    def forward(self, x):
        return self.weight * _normalise(self, x + self.bias)


class _BiasTimes(solution.LayerNorm):
    def forward(self, x):
        return (self.weight + self.bias) * _normalise(self, x)


_LAYER_NORM_MISTAKES = [
    (
        N_("x.std() with eps outside the square root, the popular one-liner: x.std() is the "
           "unbiased estimate (divides by C - 1; LayerNorm divides by C) and eps belongs inside: "
           "sqrt(var + eps)"),
        _mistake(unbiased=True, eps_inside=False),
    ),
    (
        N_("the unbiased variance (divides by C - 1); LayerNorm divides by C: "
           "x.var(dim=-1, keepdim=True, unbiased=False)"),
        _mistake(unbiased=True),
    ),
    (N_("eps added outside the square root; it belongs inside: sqrt(var + eps)"),
     _mistake(eps_inside=False)),
    (N_("eps fixed at 1e-5; use self.eps, the eps the layer was built with"), _mistake(eps=1e-5)),
    (N_("eps fixed at 1e-6; use self.eps, the eps the layer was built with"), _mistake(eps=1e-6)),
    (N_("weight and bias not applied: return self.weight * x_hat + self.bias"),
     _mistake(affine=False)),
    (N_("statistics over the time axis (dim=1); LayerNorm normalises each token over its C "
        "channels, the last axis (dim=-1)"), _mistake(dim=1)),
    (N_("statistics over the batch axis (dim=0), as BatchNorm; LayerNorm uses each token's own C "
        "channels (dim=-1)"), _mistake(dim=0)),
    (N_("statistics over (T, C) together; each token is normalised on its own (dim=-1)"),
     _mistake(dim=(-2, -1))),
    (N_("no mean subtracted (that is RMSNorm, notebook 15): x - mean, then divide"),
     _mistake(centre=False)),
    (N_("one mean and variance over the whole tensor; each token has its own, over its C "
        "channels: mean(dim=-1, keepdim=True)"), _mistake(dim=None)),
    (N_("the weight applied before centring (LayerNorm(weight * x)): normalising then removes "
        "it; normalise x first, then self.weight * x_hat + self.bias"), _ScaledFirst),
    (N_("the bias added before normalising (it is then centred away): self.weight * x_hat + "
        "self.bias"), _ShiftedFirst),
    (N_("(weight + bias) * x_hat: the weight scales, the bias is added after: "
        "self.weight * x_hat + self.bias"), _BiasTimes),
]  # fmt: skip


def _layer_norm_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(9)
    cases = [
        # first C = 4 and eps = 0.01, where each classic mistake shows on its own; T = 1
        Case(4, 1e-2, torch.randn(3, 1, 4, generator=generator) * 2.0),
        Case(24, 1e-5, torch.randn(2, 6, 24, generator=generator) * 3.0 + 1.5),
        Case(24, 1e-5, 1e-3 * torch.randn(1, 3, 24, generator=generator),
             label=tr("d_model=24, eps=1e-05, nearly constant tokens x (1, 3, 24)")),
        Case(7, 0.5, torch.randn(5, 7, generator=generator)),  # (N, C): any leading axes
    ]  # fmt: skip
    strided = torch.randn(16, 4, 2, generator=generator).permute(2, 1, 0)  # (2, 4, 16)
    cases.append(Case(16, 1e-3, strided, label=tr("d_model=16, eps=0.001, a non-contiguous x")))
    return cases


def check_layer_norm(LayerNorm: type) -> bool:  # noqa: N803
    """Check the class ``LayerNorm(d_model, eps=1e-5)`` (parameters ``weight``, ``bias``):
    each token normalised over its C channels, biased variance, eps inside the square root
    (Ba et al. 2016; ``nn.LayerNorm``).

    Five cases against ``F.layer_norm`` with random weight and bias: C = 24, 4, 7 and 16,
    eps = 1e-5, 1e-2, 0.5 and 1e-3 (so a fixed 1e-5 fails), T = 1, a 2-D input, nearly
    constant tokens (where eps's place matters) and a non-contiguous input. Names fourteen
    mistakes: x.std() + eps, the unbiased variance, eps outside the root, eps fixed at 1e-5
    or 1e-6, no weight and bias, statistics over time, batch, (T, C) or the whole tensor, no
    mean subtracted, the weight applied before centring, the bias before normalising,
    (weight + bias) * x_hat. Then the module runs as training does: detached statistics,
    an in-place centring or randomness in train mode are named.
    """
    return judge_module(
        "LayerNorm", LayerNorm, _Reference, _layer_norm_cases(), _LAYER_NORM_MISTAKES,
        build_args=2, checker="check_layer_norm", axes=None,
    )  # fmt: skip


def _pre_ln_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(10)
    cases = []
    for width, shape in ((24, (2, 6, 24)), (10, (3, 1, 10))):
        norm, sublayer = nn.LayerNorm(width), nn.Linear(width, width)
        with torch.no_grad():
            for parameter in (*norm.parameters(), *sublayer.parameters()):
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3 + 0.1)
        x = torch.randn(*shape, generator=generator) * 2.0 + 0.5
        cases.append(Case(x, norm, sublayer))
    x = torch.randn(2, 5, 8, generator=generator)
    cases.append(
        Case(x, torch.tanh, lambda h: 2.0 * h, label="x (2, 5, 8), norm=tanh, sublayer=2h")
    )
    return cases


def _reference_pre_ln(x, norm, sublayer):
    return x + sublayer(norm(x))


_PRE_LN_MISTAKES = [
    (N_("norm(x + sublayer(x)), the post-LN order of the paper; pre-LN is x + sublayer(norm(x))"),
     lambda x, norm, sublayer: norm(x + sublayer(x))),
    (N_("sublayer(norm(x)) without the residual: add x back"),
     lambda x, norm, sublayer: sublayer(norm(x))),
    (N_("norm(x) + sublayer(norm(x)): the residual must carry x itself, not its normalised copy"),
     lambda x, norm, sublayer: norm(x) + sublayer(norm(x))),
    (N_("x + sublayer(x): the sublayer reads norm(x)"), lambda x, norm, sublayer: x + sublayer(x)),
]  # fmt: skip


def check_pre_ln_residual(pre_ln_residual: Callable) -> bool:
    """Check ``pre_ln_residual(x, norm, sublayer)`` returns ``x + sublayer(norm(x))``.

    Three cases: widths 24 and 10 (T = 1) with an ``nn.LayerNorm`` and an ``nn.Linear``
    holding random weights, and plain functions (tanh, doubling) as norm and sublayer. Names
    the post-LN order, a missing residual, the normalised copy carried, the norm skipped.
    """

    def call(function, x, norm, sublayer):
        with torch.no_grad():
            return function(x, norm, sublayer)

    return judge(
        "pre_ln_residual", pre_ln_residual, _reference_pre_ln, _pre_ln_cases(), _PRE_LN_MISTAKES,
        call=call, axes="B T C", trains=True, runner=Runner(["x", "norm", "sublayer"]),
    )  # fmt: skip
