"""The SwiGLU feed-forward network: a gated MLP without biases (Llama, Qwen3).

Shazeer (2020), "GLU Variants Improve Transformer", §2, Eq. 6:
``FFN_SwiGLU(x) = (Swish(x W) * (x V)) W2``, with ``Swish = SiLU: z * sigmoid(z)`` and ``*``
elementwise. One projection (the *gate*) decides, channel by channel, how much of the other
(the *up* projection) passes. Three matrices instead of two: to keep the parameter count of
a 4x MLP, the hidden width shrinks to about ``2/3 * 4 * d_model`` (Shazeer 2020, §2;
Touvron et al. 2023, §2.2 "SwiGLU activation function": ``2/3 4d``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.checks import check_bool, check_dropout_p, check_int, check_last_axis


def swiglu_hidden_width(d_ff: int, multiple_of: int = 8) -> int:
    """The SwiGLU width with the parameters of a 2-matrix MLP of width ``d_ff``:
    ``2/3 * d_ff``, rounded to the nearest multiple of ``multiple_of`` (e.g. 512 -> 344).

    Raises:
        TypeError: a width that is not an int.
        ValueError: a width below 1.
    """
    d_ff = check_int(d_ff, "d_ff", minimum=1, why="the width of the 2-matrix MLP, e.g. 4 * d_model")
    multiple_of = check_int(multiple_of, "multiple_of", minimum=1)
    return max(multiple_of, round(2 * d_ff / 3 / multiple_of) * multiple_of)


class SwiGLUFeedForward(nn.Module):
    """``down(silu(gate(x)) * up(x))`` on each token's vector (Shazeer 2020, Eq. 6).

    Parameter names follow the layout of ``nn.Linear`` (``gate.weight`` is ``(d_ff, C)``),
    the same three matrices that Llama and Qwen3 call ``gate_proj``, ``up_proj``,
    ``down_proj``.

    Args:
        d_model: C.
        d_ff: hidden width (Llama: about ``2/3 * 4 * C``, see :func:`swiglu_hidden_width`).
        bias: biases in the three projections (Llama and Qwen3: none).
        dropout: dropout on the output (training only).

    Shapes: ``(B, T, C)`` -> two ``(B, T, d_ff)`` -> ``(B, T, C)``.

    Raises:
        TypeError: a width that is not an int, a ``bias`` that is not a bool, a dropout that
            is not a number; x not a float tensor of the weights' dtype.
        ValueError: a width below 1, dropout outside ``[0, 1)``; the last axis of x is not C.
    """

    def __init__(self, d_model: int, d_ff: int, bias: bool = False, dropout: float = 0.0):
        super().__init__()
        d_model = check_int(d_model, "d_model", minimum=1)
        d_ff = check_int(d_ff, "d_ff", minimum=1, why="the hidden width, about 8/3 * d_model")
        bias = check_bool(bias, "bias")
        dropout = check_dropout_p(dropout, "dropout")
        self.gate = nn.Linear(d_model, d_ff, bias=bias)
        self.up = nn.Linear(d_model, d_ff, bias=bias)
        self.down = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_last_axis(x, self.up.in_features, self.up.weight, "SwiGLUFeedForward", "d_model")
        gated = F.silu(self.gate(x)) * self.up(x)  # (B, T, C) -> (B, T, d_ff), elementwise gate
        return self.dropout(self.down(gated))  # (B, T, d_ff) -> (B, T, C)
