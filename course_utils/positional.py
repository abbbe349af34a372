"""Positional information: sinusoidal encoding (Vaswani et al. 2017, §3.5) and a learned table."""

from __future__ import annotations

import torch
from torch import nn


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
        base: 10000 in the paper.
        dtype: float dtype of the result.

    Returns:
        Tensor of shape ``(max_len, d_model)``.

    Raises:
        ValueError: ``d_model`` is odd or a size is not positive.
    """
    if max_len <= 0 or d_model <= 0:
        raise ValueError(f"max_len and d_model must be positive, got {max_len} and {d_model}")
    if d_model % 2:
        raise ValueError(f"d_model must be even for sin/cos pairs, got {d_model}")
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    pair = torch.arange(d_model // 2, dtype=torch.float64)  # (C/2,)
    inverse_frequency = base ** (-2.0 * pair / d_model)  # (C/2,)
    angle = position * inverse_frequency  # (max_len, C/2)
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.to(dtype)


def _check_positions(x: torch.Tensor, max_len: int, d_model: int) -> None:
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
        ValueError: wrong shape, or ``T > max_len``.
    """

    def __init__(self, max_len: int, d_model: int, base: float = 10000.0):
        super().__init__()
        self.max_len, self.d_model = max_len, d_model
        # A buffer: moves with .to(device) but is not trained (and not saved, it is recomputed).
        self.register_buffer(
            "pe", sinusoidal_positional_encoding(max_len, d_model, base), persistent=False
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_positions(x, self.max_len, self.d_model)
        return x + self.pe[: x.shape[1]].to(x.dtype)  # (T, C) broadcasts over B


class LearnedPositionalEmbedding(nn.Module):
    """Add a trained vector per position (GPT-2 style) instead of a fixed table.

    Shapes: ``(B, T, d_model)`` -> ``(B, T, d_model)``, with ``T <= max_len``.

    Raises:
        ValueError: wrong shape, or ``T > max_len``.
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len, self.d_model = max_len, d_model
        self.weight = nn.Parameter(torch.empty(max_len, d_model))
        nn.init.normal_(self.weight, mean=0.0, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_positions(x, self.max_len, self.d_model)
        return x + self.weight[: x.shape[1]]
