"""LayerNorm, the position-wise feed-forward network, and the pre-LN decoder block."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.attention import MultiHeadAttention
from course_utils.checks import (
    check_bool,
    check_choice,
    check_dropout_p,
    check_float,
    check_int,
    check_last_axis,
)


def check_norm_args(
    normalized_shape: object, eps: object, explicit: object, typical_eps: str
) -> tuple[int, float, bool]:
    """A norm layer's arguments (LayerNorm here, RMSNorm in :mod:`course_utils.rmsnorm`):
    ``normalized_shape`` an int >= 1, ``eps`` a finite number > 0, ``explicit`` a bool.

    Raises:
        TypeError, ValueError: naming the argument, what it must be and what was given.
    """
    normalized_shape = check_int(
        normalized_shape, "normalized_shape", minimum=1, why="C, the size of the last axis"
    )
    eps = check_float(
        eps, "eps", 0.0, math.inf, low_open=True, high_open=True, why=f"typical: {typical_eps}"
    )
    return normalized_shape, eps, check_bool(explicit, "explicit")


class LayerNorm(nn.Module):
    """Normalise each token's vector to zero mean and unit variance, then scale and shift.

    ``y = (x - mean) / sqrt(var + eps) * weight + bias`` over the last axis, with the
    *biased* variance (divide by C, not C - 1) and ``eps`` inside the square root, as
    ``nn.LayerNorm`` does (Ba et al. 2016; used in Vaswani et al. 2017, §3.1).

    Like :class:`course_utils.attention.MultiHeadAttention`, it has two paths that compute
    the same function (the tests check both against ``nn.LayerNorm``): the formula written
    out (``explicit=True``, the teaching path) and, by default, the fused kernel
    ``F.layer_norm``, which makes training on a CPU about 12 % faster.

    Args:
        normalized_shape: C, the size of the last axis.
        eps: added to the variance inside the square root.
        explicit: compute with the formula above instead of ``F.layer_norm``.

    Shapes: ``(..., C)`` -> ``(..., C)``.

    Raises:
        TypeError: ``normalized_shape`` is not an int (``24.0``, a tuple: pass C itself),
            ``eps`` is not a number, ``explicit`` is not a bool; x is not a float tensor.
        ValueError: ``normalized_shape < 1``; ``eps`` not > 0 (it keeps the square root
            away from 0) or infinite; the last axis of x is not ``normalized_shape``.
    """

    def __init__(self, normalized_shape: int, eps: float = 1e-5, explicit: bool = False):
        super().__init__()
        normalized_shape, eps, explicit = check_norm_args(normalized_shape, eps, explicit, "1e-5")
        self.normalized_shape, self.eps, self.explicit = normalized_shape, eps, explicit
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_last_axis(x, self.normalized_shape, self.weight, "LayerNorm")
        if not self.explicit:
            return F.layer_norm(x, (self.normalized_shape,), self.weight, self.bias, self.eps)
        variance, mean = torch.var_mean(x, dim=-1, keepdim=True, unbiased=False)  # biased: / C
        return (x - mean) * torch.rsqrt(variance + self.eps) * self.weight + self.bias

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, explicit={self.explicit}"


class FeedForward(nn.Module):
    """Position-wise feed-forward network (§3.3): ``W2 act(W1 x + b1) + b2``.

    It acts on each token's hidden vector on its own, with the same weights at every
    position; it never sees attention scores or other tokens.

    Args:
        d_model: C.
        d_ff: hidden width, 4 * C in the paper (2048 for C = 512).
        dropout: dropout on the output (training only).
        activation: ``"gelu"`` (GPT) or ``"relu"`` (the paper).
        bias: the two projections have biases (``b1``, ``b2``), as in the paper.

    Shapes: ``(B, T, C)`` -> ``(B, T, d_ff)`` -> ``(B, T, C)``.

    Raises:
        TypeError: a width that is not an int (``96.0``), a dropout that is not a number, an
            activation that is not a name (``nn.GELU()``: pass ``"gelu"``); x is not a float
            tensor.
        ValueError: a width below 1, dropout outside ``[0, 1)``, unknown activation; the
            last axis of x is not ``d_model``.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "gelu",
        bias: bool = True,
    ):
        super().__init__()
        d_model = check_int(d_model, "d_model", minimum=1)
        d_ff = check_int(d_ff, "d_ff", minimum=1, why="the hidden width, 4 * d_model in the paper")
        dropout = check_dropout_p(dropout, "dropout")
        activations = {"gelu": nn.GELU, "relu": nn.ReLU}
        self._check_activation(activation, tuple(activations))
        bias = check_bool(bias, "bias")
        self.up = nn.Linear(d_model, d_ff, bias=bias)
        self.activation = activations[activation]()
        self.down = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    @staticmethod
    def _check_activation(activation: object, names: tuple[str, ...]) -> None:
        """Raise unless ``activation`` is one of ``names`` (a name, not a module: ``nn.GELU()``)."""
        if not isinstance(activation, str):  # a list, an nn.GELU() module: TypeError
            check_choice(activation, "activation", names)
        if activation not in names:
            raise ValueError(f"activation must be one of {sorted(names)}, got {activation!r}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_last_axis(x, self.up.in_features, self.up.weight, "FeedForward", "d_model")
        return self.dropout(self.down(self.activation(self.up(x))))  # (B,T,C)->(B,T,d_ff)->(B,T,C)


class DecoderBlock(nn.Module):
    """A pre-LN decoder block (GPT-2 ordering; Xiong et al. 2020).

    ``x = x + attention(ln_1(x))`` with a causal mask, then ``x = x + ffn(ln_2(x))``.
    The paper (§3.1) normalises *after* each residual addition (post-LN); normalising
    before keeps a clean residual path. Xiong et al. (2020, §3) show why it trains more
    easily: at initialisation post-LN's expected gradients near the output are large,
    while pre-LN's shrink like 1/sqrt(L) with depth L, so pre-LN tolerates a larger learning
    rate and a short warm-up (none in their experiments). The course's presets still warm
    up for 100 steps.

    ``rotary_max_len`` switches on RoPE inside the attention (see :class:`MultiHeadAttention`).

    Shapes: ``(B, T, C)`` -> ``(B, T, C)``.

    Raises:
        TypeError: a size that is not an int (``96.0``), a dropout that is not a number;
            x is not a float tensor.
        ValueError: a size below 1, d_model not divisible by n_heads, dropout outside
            ``[0, 1)``; bad x or masks (from :class:`MultiHeadAttention`).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        bias: bool = True,
        rotary_max_len: int | None = None,
    ):
        super().__init__()
        d_model = check_int(d_model, "d_model", minimum=1)  # named here, not as LayerNorm's
        d_ff = check_int(d_ff, "d_ff", minimum=1, why="the hidden width, 4 * d_model in the paper")
        self.ln_1 = LayerNorm(d_model)
        self.attention = MultiHeadAttention(
            d_model, n_heads, dropout=dropout, bias=bias, rotary_max_len=rotary_max_len
        )
        self.ln_2 = LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, d_ff, dropout=dropout, bias=bias)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
        *,
        key_padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        attended = self.attention(
            self.ln_1(x),
            mask=mask,
            is_causal=True,
            need_weights=need_weights,
            key_padding_mask=key_padding_mask,
        )
        x = x + attended
        return x + self.feed_forward(self.ln_2(x))


class PostLNDecoderBlock(DecoderBlock):
    """The paper's post-LN ordering (§3.1): ``LayerNorm(x + Sublayer(x))``, with a causal mask.

    ``x = ln_1(x + attention(x))``, then ``x = ln_2(x + ffn(x))``. Same submodules and
    parameter names as :class:`DecoderBlock` (so ``load_state_dict`` moves weights between
    the two); only the order differs. Every output token is normalised, so the residual
    stream cannot grow with depth. The price: at initialisation the expected gradients of
    the parameters near the output are large (Xiong et al. 2020, §3), which is why post-LN
    Transformers need a learning-rate warm-up.

    Shapes: ``(B, T, C)`` -> ``(B, T, C)``.

    Raises:
        TypeError, ValueError: as :class:`DecoderBlock`.
    """

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
        *,
        key_padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        attended = self.attention(
            x,
            mask=mask,
            is_causal=True,
            need_weights=need_weights,
            key_padding_mask=key_padding_mask,
        )
        x = self.ln_1(x + attended)  # normalise after the residual addition
        return self.ln_2(x + self.feed_forward(x))
