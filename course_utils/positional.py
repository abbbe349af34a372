"""Positions added to the token embeddings: the sinusoidal encoding (Vaswani et al. 2017,
§3.5) and a learned table.

:func:`additive_positions` picks the module that adds positions to the embeddings for a
config's ``positional`` (nothing for RoPE, which rotates q and k inside attention: see
:mod:`course_utils.rotary`)."""

from __future__ import annotations

import math

import torch
from torch import nn

from course_utils.checks import (
    check_choice,
    check_float,
    check_float_dtype,
    check_int,
    check_tensor,
)
from course_utils.config import POSITIONAL_KINDS

_TRUNCATED = "sines and cosines in [-1, 1] would be truncated to integers"


def check_base(base: object) -> float:
    """``base`` as a float > 1: the wavelengths grow geometrically from 2*pi to base*2*pi,
    so base = 1 gives every pair the same frequency and base < 1 reverses the order."""
    why = "the longest wavelength is base * 2*pi positions; 10000 in the paper"
    return check_float(base, "base", 1.0, math.inf, low_open=True, high_open=True, why=why)


def sinusoidal_positional_encoding(
    max_len: int, d_model: int, base: float = 10000.0, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """The sinusoidal table of §3.5, vectorised.

    ``PE[pos, 2i] = sin(pos / base^(2i/d_model))`` and
    ``PE[pos, 2i+1] = cos(pos / base^(2i/d_model))``, where ``i`` is the *pair* index
    ``0 .. d_model/2 - 1``. Wavelengths grow geometrically from 2*pi to base*2*pi.

    Args:
        max_len: number of positions (rows), i.e. the longest sequence, not the vocabulary size.
        d_model: width C; must be even (sin/cos pairs).
        base: 10000 in the paper; must be > 1.
        dtype: float dtype of the result.

    Returns:
        Tensor of shape ``(max_len, d_model)``.

    Raises:
        TypeError: a size that is not an int, a ``base`` that is not a number, a ``dtype``
            that is not a floating ``torch.dtype``.
        ValueError: ``d_model`` is odd, a size is not positive, or ``base <= 1``.
    """
    max_len = check_int(max_len, "max_len", minimum=1, why="the longest sequence, in tokens")
    d_model = check_int(d_model, "d_model", minimum=1)
    base = check_base(base)
    dtype = check_float_dtype(dtype, why=_TRUNCATED)
    _check_sin_cos_pairs(d_model)
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    pair = torch.arange(d_model // 2, dtype=torch.float64)  # (C/2,)
    inverse_frequency = base ** (-2.0 * pair / d_model)  # (C/2,)
    angle = position * inverse_frequency  # (max_len, C/2)
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.to(dtype)


def _check_sin_cos_pairs(d_model: int, must: str = "even") -> None:
    """ValueError unless ``d_model`` is positive and even (``must`` words the message)."""
    if d_model <= 0 or d_model % 2:
        raise ValueError(f"d_model must be {must} for sin/cos pairs, got {d_model}")


def _check_positions(x: torch.Tensor, max_len: int, d_model: int) -> None:
    """Raise unless ``x`` is a float tensor ``(B, T, d_model)`` with ``T <= max_len``."""
    check_tensor(x, "x", f"float (B, T, d_model={d_model})")
    if not x.dtype.is_floating_point:
        raise TypeError(
            f"x must be float embeddings (B, T, d_model={d_model}), got dtype {x.dtype}; "
            "positions are added to the token embeddings, not to the ids"
        )
    if x.ndim != 3 or x.shape[-1] != d_model:
        raise ValueError(f"expected x of shape (B, T, d_model={d_model}), got {tuple(x.shape)}")
    if x.shape[1] > max_len:
        raise ValueError(
            f"sequence length T={x.shape[1]} exceeds max_len={max_len} positions; "
            "crop the input or build the encoding with a larger max_len"
        )


class SinusoidalPositionalEncoding(nn.Module):
    """Add the fixed sinusoidal table to ``x``, sliced to the input length.

    Shapes: ``(B, T, d_model)`` -> ``(B, T, d_model)``, with ``T <= max_len``.

    Raises:
        TypeError: bad sizes or base (see :func:`sinusoidal_positional_encoding`); an ``x``
            that is not a float tensor (a numpy array, a list, token ids).
        ValueError: wrong shape, or ``T > max_len``.
    """

    def __init__(self, max_len: int, d_model: int, base: float = 10000.0):
        super().__init__()
        pe = sinusoidal_positional_encoding(max_len, d_model, base)  # checks the arguments
        self.max_len, self.d_model = pe.shape
        # A buffer: moves with .to(device) but is not trained (and not saved, it is recomputed).
        self.register_buffer("pe", pe, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_positions(x, self.max_len, self.d_model)
        return x + self.pe[: x.shape[1]].to(x.dtype)  # (T, C) broadcasts over B


class LearnedPositionalEmbedding(nn.Module):
    """Add a trained vector per position (GPT-2 style) instead of a fixed table.

    Shapes: ``(B, T, d_model)`` -> ``(B, T, d_model)``, with ``T <= max_len``.

    Raises:
        TypeError: a size that is not an int; an ``x`` that is not a float tensor (a numpy
            array, a list, token ids).
        ValueError: a size below 1, wrong shape, or ``T > max_len``.
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        max_len = check_int(max_len, "max_len", minimum=1, why="the longest sequence, in tokens")
        self.max_len, self.d_model = max_len, check_int(d_model, "d_model", minimum=1)
        self.weight = nn.Parameter(torch.empty(max_len, d_model))
        nn.init.normal_(self.weight, mean=0.0, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_positions(x, self.max_len, self.d_model)
        return x + self.weight[: x.shape[1]]


def additive_positions(kind: str, max_len: int, d_model: int) -> nn.Module:
    """The module that adds positions to the token embeddings, for a config's ``positional``.

    ``"sinusoidal"``: :class:`SinusoidalPositionalEncoding`; ``"learned"``:
    :class:`LearnedPositionalEmbedding`; ``"rope"``: ``nn.Identity()``, since rotary
    positions are rotations of q and k inside attention and nothing is added.

    Shapes: ``(B, T, d_model)`` -> ``(B, T, d_model)``.

    Raises:
        ValueError: an unknown ``kind``, or a size the module rejects.
    """
    check_choice(kind, "kind", POSITIONAL_KINDS)
    if kind == "sinusoidal":
        return SinusoidalPositionalEncoding(max_len, d_model)
    if kind == "learned":
        return LearnedPositionalEmbedding(max_len, d_model)
    return nn.Identity()  # rope: attention rotates q and k


def pe_shift_matrix(
    k: int | float, d_model: int, base: float = 10000.0, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """The matrix ``M(k)`` with ``PE[pos + k] = M(k) @ PE[pos]`` for every ``pos`` (§3.5).

    The paper chose sinusoids because "for any fixed offset k, PE_{pos+k} can be represented
    as a linear function of PE_pos". ``M(k)`` is block-diagonal: one 2x2 rotation per
    (sin, cos) pair ``i``, by the angle ``k * w_i`` with ``w_i = base^(-2i/d_model)``.
    From ``sin(a+b) = sin a cos b + cos a sin b`` and ``cos(a+b) = cos a cos b - sin a sin b``,
    the block is ``[[cos b, sin b], [-sin b, cos b]]``. It depends on ``k`` only, not on ``pos``.

    Args:
        k: the offset (may be negative; an int or a float).
        d_model: width C; must be even.
        base: 10000 in the paper; must be > 1.
        dtype: float dtype of the result.

    Returns:
        Tensor of shape ``(d_model, d_model)``. For row vectors (a table ``(T, C)``), use
        ``table @ M(k).T``.

    Raises:
        TypeError: a ``k`` or ``base`` that is not a number, a ``d_model`` that is not an
            int, a ``dtype`` that is not a floating ``torch.dtype``.
        ValueError: ``d_model`` is odd or not positive, ``k`` is NaN or infinite, ``base <= 1``.
    """
    k = check_float(k, "k", -math.inf, math.inf, low_open=True, high_open=True)
    d_model = check_int(d_model, "d_model")
    base, dtype = check_base(base), check_float_dtype(dtype, why=_TRUNCATED)
    _check_sin_cos_pairs(d_model, must="positive and even")
    pair = torch.arange(d_model // 2, dtype=torch.float64)
    angle = k * base ** (-2.0 * pair / d_model)  # (C/2,)
    cos, sin = torch.cos(angle), torch.sin(angle)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    index = torch.arange(0, d_model, 2)
    m[index, index] = cos
    m[index, index + 1] = sin
    m[index + 1, index] = -sin
    m[index + 1, index + 1] = cos
    return m.to(dtype)
