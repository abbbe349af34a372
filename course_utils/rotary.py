"""Rotary position embedding (RoPE; Su et al. 2021, RoFormer, §3.2): each channel pair of q
and k is rotated by an angle proportional to its position, so that q·k depends on the offset
between the two positions only. Nothing is added to the embeddings."""

from __future__ import annotations

import torch
from torch import nn

from course_utils.checks import check_int, check_tensor
from course_utils.positional import check_base


def apply_rotary_embedding(
    x: torch.Tensor, positions: torch.Tensor | None = None, base: float = 10000.0
) -> torch.Tensor:
    """Rotary position embedding (RoPE): rotate each channel pair by its position's angle.

    Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding", §3.2
    (Eq. 34): instead of *adding* a position vector to the token, RoPE *rotates* the
    queries and keys. Channels ``(2i, 2i+1)`` of the vector at position ``m`` are rotated by
    the angle ``m * theta_i`` with ``theta_i = base^(-2i/d)``::

        y[2i]   = x[2i] * cos(m theta_i) - x[2i+1] * sin(m theta_i)
        y[2i+1] = x[2i] * sin(m theta_i) + x[2i+1] * cos(m theta_i)

    i.e. the complex number ``x[2i] + j x[2i+1]`` times ``exp(j m theta_i)``. Because
    ``R(m)^T R(n) = R(n - m)``, the score ``<R(m) q, R(n) k>`` depends on q, k and the offset
    ``n - m`` only: attention sees *relative* positions. Rotations keep norms. Apply it to q
    and k after splitting heads and before the scores; never to v, and nothing is added to x.

    Pairs are interleaved (channels 0-1, 2-3, ...) as in the paper. Some libraries (GPT-NeoX,
    Hugging Face's LLaMA) pair channel ``i`` with ``i + d/2`` instead ("rotate_half"); that is
    the same rotation up to a fixed permutation of the channels, but the two layouts do not
    give the same numbers on the same weights.

    Args:
        x: float tensor ``(..., T, d)``, e.g. ``(B, h, T, d_k)`` or ``(T, d)``; ``d`` even.
        positions: the position of each of the T vectors; default ``0 .. T-1``. An integer
            or float tensor of shape ``(T,)``, or with exactly ``x.ndim - 1`` dims that
            broadcast to ``x.shape[:-1]``, e.g. ``(B, 1, T)`` for ``x`` ``(B, h, T, d)``
            (a list or numpy array is converted). A ``(B, T)`` tensor for a 4-D ``x`` is
            refused: it would line up with ``(h, T)``; pass ``positions[:, None, :]``.
        base: 10000 in the paper; must be > 1 (the wavelengths grow from 2*pi to
            base*2*pi positions; base = 1 would rotate every pair by the same angle).

    Returns:
        Tensor of the same shape and dtype as ``x``. (Angles are computed in float64, in
        float32 on Apple's MPS, which has no float64.)

    Raises:
        TypeError: ``x`` is not a float tensor, ``positions`` is not a real-number tensor
            (or convertible to one), ``base`` is not a number.
        ValueError: ``x`` has fewer than 2 dimensions, ``d`` is odd, ``positions`` is neither
            1-D nor ``x.ndim - 1``-D or does not broadcast to ``x.shape[:-1]``, or ``base <= 1``.
    """
    _check_rotary_input(x)
    base = check_base(base)
    d = x.shape[-1]
    compute = torch.float32 if x.device.type == "mps" else torch.float64  # MPS: no float64
    positions = _rotary_positions(positions, x, compute)  # broadcasts to (..., T)
    pair = torch.arange(d // 2, device=x.device, dtype=compute)
    theta = base ** (-2.0 * pair / d)  # (d/2,)
    angle = positions[..., None] * theta  # (..., T, d/2)
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, d) -> two (..., T, d/2)
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return rotated.flatten(-2)  # (..., T, d/2, 2) -> (..., T, d), pairs interleaved again


def _check_rotary_input(x: torch.Tensor) -> None:
    """Raise unless ``x`` is a float tensor ``(..., T, d)`` with ``d`` even."""
    check_tensor(x, "x", "float (..., T, d)")
    if not x.dtype.is_floating_point:
        raise TypeError(f"x must be a float tensor (..., T, d), got {x.dtype}")
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., T, d), got {tuple(x.shape)}")
    d = x.shape[-1]
    if d % 2:
        raise ValueError(
            f"the last dimension d must be even (RoPE rotates channel pairs), got d={d} "
            f"in shape {tuple(x.shape)}"
        )


def _rotary_positions(
    positions: torch.Tensor | None, x: torch.Tensor, compute: torch.dtype
) -> torch.Tensor:
    """The position of each vector of ``x`` as a ``compute`` tensor on ``x``'s device:
    ``0 .. T-1`` by default, else ``positions`` once checked against ``x.shape[:-1]``."""
    if positions is None:
        return torch.arange(x.shape[-2], device=x.device, dtype=compute)
    if not isinstance(positions, torch.Tensor):
        try:
            positions = torch.as_tensor(positions)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(
                f"positions must be a tensor of integer or float positions, got "
                f"{type(positions).__name__}; e.g. torch.arange(T)"
            ) from None
    if positions.dtype.is_complex or positions.dtype == torch.bool:
        raise TypeError(f"positions must be integer or float, got dtype {positions.dtype}")
    if positions.ndim not in (1, x.ndim - 1):
        fix = ""
        if positions.ndim == 2 and x.ndim == 4:
            fix = "; for per-sequence positions (B, T) pass positions[:, None, :] (shape (B, 1, T))"
        raise ValueError(
            f"positions of shape {tuple(positions.shape)} do not line up with x.shape[:-1] = "
            f"{tuple(x.shape[:-1])}: positions must be (T,) or have exactly x.ndim - 1 = "
            f"{x.ndim - 1} dims, aligned with x's (..., T) axes (broadcasting from the right "
            f"would pair a (B, T) tensor with x's (h, T) axes){fix}"
        )
    try:
        fits = torch.broadcast_shapes(positions.shape, x.shape[:-1]) == x.shape[:-1]
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"positions of shape {tuple(positions.shape)} do not broadcast to "
            f"x.shape[:-1] = {tuple(x.shape[:-1])}; pass one position per vector, e.g. (T,)"
        )
    return positions.to(device=x.device, dtype=compute)


def check_rotary_width(width: int, name: str) -> None:
    """ValueError unless a head's ``width`` (``name``: ``head_dim``, ``d_k``) is even."""
    if width % 2:
        raise ValueError(f"RoPE rotates channel pairs: {name} must be even, got {width}")


class RotaryEmbedding(nn.Module):
    """RoPE as a module with cached angles, for use inside attention on q and k.

    Computes the same rotation as :func:`apply_rotary_embedding` for positions
    ``0 .. T-1``, but builds the cos/sin tables once (Su et al. 2021, §3.2). Applied to the
    queries and keys of every head, it makes each score depend on the *relative* offset
    between the two positions; nothing is added to the token vectors.

    Args:
        head_dim: d_k, the width of one head; must be even.
        max_len: the longest sequence (the model's block_size).
        base: 10000 in the paper; must be > 1 (see :func:`apply_rotary_embedding`).
        angle_dtype: ``torch.float64`` (default: the angles exact to float64, then rounded
            once) or ``torch.float32`` (``transformers``' arithmetic, :func:`rotary_angles`).

    Shapes: ``(..., T, d_k)`` -> ``(..., T, d_k)``, with ``T <= max_len``; any batch size
    (0 included), any strides.

    Raises:
        TypeError: a size that is not an int, a ``base`` that is not a number; an ``x`` that
            is not a float tensor.
        ValueError: odd ``head_dim``, a size below 1, ``base <= 1``, another ``angle_dtype``,
            a last axis other than ``head_dim``, or ``T > max_len``.
    """

    def __init__(
        self,
        head_dim: int,
        max_len: int,
        base: float = 10000.0,
        angle_dtype: torch.dtype = torch.float64,
    ):
        super().__init__()
        head_dim = check_int(head_dim, "head_dim", minimum=1)
        max_len = check_int(max_len, "max_len", minimum=1, why="the longest sequence, in tokens")
        base = check_base(base)
        check_rotary_width(head_dim, "head_dim")
        angle_dtype = check_angle_dtype(angle_dtype, "angle_dtype")
        self.head_dim, self.max_len, self.angle_dtype = head_dim, max_len, angle_dtype
        angle = rotary_angles(max_len, head_dim, base, angle_dtype)  # (max_len, d/2)
        cos, sin = torch.cos(angle), torch.sin(angle)  # in the angles' own precision
        # Buffers: they follow .to(device) and are rebuilt, not saved, with the model.
        self.register_buffer("cos", cos.float(), persistent=False)  # (max_len, d/2)
        self.register_buffer("sin", sin.float(), persistent=False)  # (max_len, d/2)
        # cos and sin in float64, outside the buffers (.half() or .double() never round them):
        # the complex tables of every precision are built from them, so a float64 input is
        # rotated by float64 values, not by float32 ones widened (widening float32 is exact).
        self._cos_sin = (cos.double(), sin.double())  # 2 x (max_len, d/2), CPU
        self._rotations: dict = {}  # (device, dtype) -> complex (max_len, d/2), built once

    def _apply(self, fn, *args, **kwargs):
        self._rotations = {}  # .to(), .cuda(), .double()...: tables built again from cos, sin
        return super()._apply(fn, *args, **kwargs)

    def rotation_table(self, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """``cos + i sin`` as a complex ``(max_len, d_k/2)`` tensor (``dtype`` float32 or
        float64 parts), cached per device and dtype: no table is rebuilt on a training step."""
        key = (torch.device(device), dtype)
        table = self._rotations.get(key)
        if table is None:
            cos, sin = self._cos_sin
            table = torch.complex(cos.to(device, dtype), sin.to(device, dtype))
            self._rotations[key] = table
        return table

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Rotate ``x`` ``(..., T, d_k)`` as positions ``offset .. offset + T - 1``.

        ``offset`` is the number of earlier tokens, e.g. the length of a KV cache
        (:mod:`course_utils.kv_cache`): a new token is rotated by its absolute position.

        Raises:
            TypeError: an ``x`` that is not a float tensor, an ``offset`` that is not an int.
            ValueError: a last axis other than ``head_dim`` (both named), negative offset, or
                ``offset + T > max_len``.
        """
        offset = self._check_forward(x, offset)
        end = offset + x.shape[-2]
        cos, sin = self.cos[offset:end], self.sin[offset:end]  # (T, d/2)
        # MPS has no complex kernels and torch.compile cannot generate code for them:
        # there, the same rotation written out with real numbers.
        if x.device.type == "mps" or torch.compiler.is_compiling():
            even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, d) -> two (..., T, d/2)
            rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
            return rotated.flatten(-2).to(x.dtype)  # (..., T, d/2, 2) -> (..., T, d)
        # A pair (a, b) is the complex number a + ib; rotating it by angle t is multiplying
        # by cos t + i sin t. One complex product is several times faster than the four real
        # ones. Half precision is rotated in float32 (there is no bfloat16 complex type).
        real = torch.float64 if x.dtype == torch.float64 else torch.float32
        pairs = _complex_pairs(x.to(real))  # (..., T, d) -> complex (..., T, d/2)
        rotation = self.rotation_table(x.device, real)[offset:end]  # (T, d/2), |z| = 1
        rotated = torch.view_as_real(pairs * rotation)  # (..., T, d/2, 2)
        return rotated.flatten(-2).to(x.dtype)  # (..., T, d/2, 2) -> (..., T, d)

    def _check_forward(self, x: object, offset: object) -> int:
        """Raise unless ``x`` is float ``(..., T, d_k)`` and ``offset + T <= max_len``."""
        check_tensor(x, "x", f"float (..., T, d_k={self.head_dim})")
        if x.ndim >= 2 and x.shape[-1] != self.head_dim:
            raise ValueError(
                f"this RotaryEmbedding was built for head_dim={self.head_dim} (d_k, the width "
                f"of one head), but x has a last axis of {x.shape[-1]} (shape "
                f"{tuple(x.shape)}); pass q or k split into heads, (..., T, {self.head_dim}), "
                + (
                    f"or build RotaryEmbedding(head_dim={x.shape[-1]}, ...) for that width"
                    if x.shape[-1] % 2 == 0
                    else "(RoPE rotates channel pairs: a head's width is even)"
                )
            )
        _check_rotary_input(x)
        length = x.shape[-2]
        offset = check_int(offset, "offset")
        if offset < 0:
            raise ValueError(f"offset must be >= 0 (the number of earlier tokens), got {offset}")
        if offset + length > self.max_len:
            raise ValueError(
                f"sequence length T={length} at offset={offset} exceeds max_len={self.max_len} "
                "of the rotary tables; crop the context to max_len tokens"
            )
        return offset

    def extra_repr(self) -> str:
        angles = str(self.angle_dtype).removeprefix("torch.")
        return f"head_dim={self.head_dim}, max_len={self.max_len}, angles={angles}"


def _complex_pairs(x: torch.Tensor) -> torch.Tensor:
    """``x`` ``(..., d)`` as complex pairs ``(..., d/2)``. ``view_as_complex`` needs even
    strides and offset: a sliced or empty view is copied first (``reshape`` with ``d // 2``,
    not ``-1``, which is ambiguous for an empty tensor)."""
    pairs = x.reshape(*x.shape[:-1], x.shape[-1] // 2, 2)  # (..., d) -> (..., d/2, 2)
    odd = pairs.storage_offset() % 2 or any(s % 2 for s in pairs.stride()[:-1])
    if pairs.stride(-1) != 1 or odd:  # e.g. x[..., 1:] of a wider tensor
        pairs = pairs.clone(memory_format=torch.contiguous_format)
    return torch.view_as_complex(pairs)


def rotary_angles(
    max_len: int, d: int, base: float, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """The angles ``pos * base^(-2i/d)`` for ``pos < max_len``, ``(max_len, d/2)``, in ``dtype``.

    ``float64``: the exact angles, rounded once. ``float32``: ``transformers``' arithmetic
    (``inv_freq = 1 / base^(arange(0, d, 2) / d)`` and ``pos * inv_freq``, both in float32),
    reproduced operation by operation: at position ``pos`` a float32 angle is off by up to
    about ``pos * 6e-8`` radians, so its rotation differs from the exact one by about
    ``1e-4`` at 2048 positions; a model converted from ``transformers`` uses these angles to
    compute the same numbers as the original.
    """
    if dtype == torch.float32:
        inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float32) / d))  # (d/2,)
        return torch.arange(max_len, dtype=torch.float32)[:, None] * inv_freq  # (max_len, d/2)
    pair = torch.arange(d // 2, dtype=torch.float64)
    return torch.arange(max_len, dtype=torch.float64)[:, None] * base ** (-2.0 * pair / d)


#: The precisions of the rotary angles (``RotaryEmbedding(angle_dtype=...)``).
ANGLE_DTYPES = (torch.float64, torch.float32)


def check_angle_dtype(angle_dtype: object, name: str) -> torch.dtype:
    """``angle_dtype`` if it is torch.float64 or torch.float32."""
    if angle_dtype not in ANGLE_DTYPES:
        raise ValueError(
            f"{name} must be torch.float64 (exact angles) or torch.float32 (transformers' "
            f"arithmetic), got {angle_dtype!r}"
        )
    return angle_dtype
