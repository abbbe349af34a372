"""Scaled dot-product attention and multi-head attention (Vaswani et al. 2017, §3.2).

Masks in this module are boolean and follow ``F.scaled_dot_product_attention``:
``True`` means "this query may attend to this key", ``False`` means "hidden".
(``nn.MultiheadAttention`` uses the opposite convention for boolean masks.)
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.checks import (
    check_bool,
    check_dropout_p,
    check_input_dtype,
    check_int,
    check_tensor,
)
from course_utils.masks import (  # noqa: F401  (re-exported: notebooks import them from here)
    causal_mask,
    check_key_padding_mask,
    check_mask,
    combine_masks,
    padding_mask,
)
from course_utils.rotary import RotaryEmbedding


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Cut the channel axis into heads and move the head axis forward.

    Shapes: ``(B, T, C)`` -> ``(B, T, h, d_k)`` -> ``(B, h, T, d_k)`` with ``d_k = C / h``.
    The transpose matters: viewing ``(B, T, C)`` directly as ``(B, h, T, d_k)`` mixes
    positions and channels (a classic bug).

    Raises:
        TypeError: ``x`` is not a tensor, or ``n_heads`` is not an int.
        ValueError: ``x`` is not 3-D, or ``C`` is not divisible by ``n_heads``.
    """
    _check_rank(x, 3, "(B, T, C)")
    n_heads = check_int(n_heads, "n_heads")
    _check_heads_divide(x.shape[-1], n_heads, "C")
    batch, time, channels = x.shape
    return x.view(batch, time, n_heads, channels // n_heads).transpose(1, 2)  # (B,T,C)->(B,h,T,d_k)


def _check_rank(x: object, ndim: int, shape: str) -> None:
    """Raise unless ``x`` is a tensor with ``ndim`` axes, named by ``shape``."""
    check_tensor(x, "x", shape)
    if x.ndim != ndim:
        raise ValueError(f"expected x of shape {shape}, got {x.ndim}-D shape {tuple(x.shape)}")


def _check_heads_divide(width: int, n_heads: int, name: str) -> None:
    """ValueError unless ``n_heads`` > 0 divides ``width``, named ``"C"`` or ``"d_model"``."""
    if n_heads > 0 and width % n_heads == 0:
        return
    divisors = [h for h in range(1, width + 1) if width % h == 0]
    if name == "C":
        raise ValueError(
            f"C={width} is not divisible by n_heads={n_heads}; choose n_heads among the "
            f"divisors of C, e.g. {divisors[:8]}"
        )
    raise ValueError(
        f"d_model={width} must be divisible by n_heads={n_heads} (d_k = d_model / "
        f"n_heads); valid n_heads: {divisors}"
    )


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`split_heads`: ``(B, h, T, d_k)`` -> ``(B, T, h * d_k)``.

    ``transpose`` makes the tensor non-contiguous, so ``contiguous()`` is needed before ``view``.

    Raises:
        TypeError: ``x`` is not a tensor.
        ValueError: ``x`` is not 4-D.
    """
    _check_rank(x, 4, "(B, h, T, d_k)")
    batch, heads, time, head_dim = x.shape
    return (
        x.transpose(1, 2).contiguous().view(batch, time, heads * head_dim)
    )  # (B,h,T,d_k)->(B,T,C)


def _check_qkv(q: object, k: object, v: object) -> None:
    """TypeError/ValueError unless q, k, v are float tensors of one dtype and matching shapes."""
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(
                f"{name} must be a float torch.Tensor, got {type(tensor).__name__}; "
                "convert with torch.as_tensor(..., dtype=torch.float32)"
            )
        if not tensor.dtype.is_floating_point:
            raise TypeError(f"{name} must be a float tensor, got dtype {tensor.dtype}")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(
            f"q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}; "
            "convert with .to(q.dtype)"
        )
    if not q.ndim == k.ndim == v.ndim or q.ndim < 2:
        raise ValueError(
            f"q, k, v must have the same rank (at least 2), got shapes "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    shapes = f"shapes of q, k, v: got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
    if not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:
        raise ValueError(
            f"q, k, v must agree on the leading (batch, head) dims, got {tuple(q.shape[:-2])}, "
            f"{tuple(k.shape[:-2])}, {tuple(v.shape[:-2])} ({shapes}); q (..., T_q, d_k), "
            "k (..., T_k, d_k) and v (..., T_k, d_v) must come from the same batch, split into "
            "the same heads"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same d_k (last dim), got {q.shape[-1]} and {k.shape[-1]} "
            f"({shapes}); need q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v)"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same T_k (one value per key), got {k.shape[-2]} and "
            f"{v.shape[-2]} ({shapes}); need k (..., T_k, d_k), v (..., T_k, d_v)"
        )


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    *,
    key_padding_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V, returning the attention weights too (§3.2.1, Eq. 1).

    The softmax runs over the last axis of the scores: the *key positions*, not d_k.
    Masked scores are set to ``-inf``; a query whose keys are all masked gets all-zero
    weights (and a zero output) instead of NaN.

    Args:
        q: queries ``(..., T_q, d_k)``, e.g. ``(B, h, T_q, d_k)``.
        k: keys ``(..., T_k, d_k)``.
        v: values ``(..., T_k, d_v)``.
        mask: optional bool, broadcastable to ``(..., T_q, T_k)``; True = may attend
            (``F.scaled_dot_product_attention``'s convention; ``nn.MultiheadAttention``'s
            True = hidden must be inverted with ``~mask``).
        dropout_p: dropout on the weights, a float in ``[0, 1)`` (pass 0.0 at evaluation).
        key_padding_mask: optional bool ``(B, T_k)``, True = a real token (keyword only).

    Returns:
        ``(output, weights)``: ``(..., T_q, d_v)`` and ``(..., T_q, T_k)``; each weight row
        sums to 1 (or 0 when fully masked).

    Raises:
        ValueError: ranks differ, q, k, v disagree on the leading (batch, head) dims, ``d_k``
            of q and k differ, k and v disagree on ``T_k``,
            the mask does not broadcast, a mask looks inverted or ambiguous
            (:func:`course_utils.masks.combine_masks`), or ``dropout_p`` is outside ``[0, 1)``.
        TypeError: a non-tensor or non-float input, or a non-bool mask (uint8 included).
    """
    _check_qkv(q, k, v)
    dropout_p = check_dropout_p(dropout_p)
    mask = combine_masks(mask, key_padding_mask, (*q.shape[:-1], k.shape[-2]))  # (..., T_q, T_k)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # over key positions
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)  # NaN rows -> 0
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ v, weights  # (..., T_q, d_v), (..., T_q, T_k)


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention (§3.2.2): h heads of width d_k = d_model / h, then W^O.

    Two paths compute the same function:

    * the teaching path (``need_weights=True``): explicit :func:`scaled_dot_product_attention`;
      the weights ``(B, h, T, T)`` are kept in ``self.attention_weights`` for plotting;
    * the fast path (default): ``F.scaled_dot_product_attention``, a fused kernel that never
      stores the ``T x T`` matrix.

    Args:
        d_model: C, model width.
        n_heads: h, number of heads; must divide d_model.
        dropout: dropout on the attention weights and the output (training only).
        bias: use biases in the four projections.
        rotary_max_len: if given, rotate queries and keys with RoPE
            (:class:`course_utils.rotary.RotaryEmbedding`) for sequences up to this length.

    Shapes:
        x ``(B, T, C)`` -> ``(B, T, C)``. ``mask``: bool, broadcastable to ``(B, h, T, T)``.

    Raises:
        ValueError: a size below 1, d_model not divisible by n_heads, dropout outside
            ``[0, 1)``; x not ``(B, T, d_model)``; bad mask shape.
        TypeError: a size that is not an int (``24.0``), a dropout that is not a number, a
            non-bool ``bias``; a non-bool mask; x not float, or not the weights' dtype
            (outside autocast).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        rotary_max_len: int | None = None,
    ):
        super().__init__()
        d_model, n_heads = check_int(d_model, "d_model", minimum=1), check_int(n_heads, "n_heads")
        dropout = check_dropout_p(dropout, "dropout")
        bias = check_bool(bias, "bias")
        if rotary_max_len is not None:
            rotary_max_len = check_int(
                rotary_max_len, "rotary_max_len", minimum=1, why="the longest sequence, or None"
            )
        _check_heads_divide(d_model, n_heads, "d_model")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.output_dropout = nn.Dropout(dropout)
        self.rotary = None if rotary_max_len is None else RotaryEmbedding(self.d_k, rotary_max_len)
        self.attention_weights: torch.Tensor | None = None

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        *,
        key_padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Self-attention of ``x`` ``(B, T, C)`` -> ``(B, T, C)``.

        Args:
            x: float ``(B, T, d_model)``.
            mask: optional bool ``(T, T)`` or ``(B, 1, T, T)`` (anything broadcastable to
                ``(B, h, T, T)`` but 3-D, which is ambiguous); True = may attend.
            is_causal: also hide future keys (combined with ``mask`` by AND).
            need_weights: use the explicit path and keep ``self.attention_weights``.
            key_padding_mask: optional bool ``(B, T)``, True = a real token (keyword only;
                ``nn.MultiheadAttention``'s ``key_padding_mask`` means the opposite).

        Raises:
            ValueError: bad shapes, an inverted or ambiguous mask (see :mod:`course_utils.masks`).
            TypeError: a non-bool mask; x not float, or not the weights' dtype; ``is_causal``
                or ``need_weights`` not a bool (``"False"`` would be true).
        """
        is_causal, need_weights = self._check_forward(x, is_causal, need_weights)
        batch, time, _ = x.shape
        mask = combine_masks(mask, key_padding_mask, (batch, self.n_heads, time, time))
        if need_weights:  # the teaching path: three projections, as in the paper
            q = split_heads(self.w_q(x), self.n_heads)  # (B, T, C) -> (B, h, T, d_k)
            k = split_heads(self.w_k(x), self.n_heads)  # (B, T, C) -> (B, h, T, d_k)
            v = split_heads(self.w_v(x), self.n_heads)  # (B, T, C) -> (B, h, T, d_k)
        else:
            q, k, v = self._fused_qkv(x)
        if self.rotary is not None:
            q, k = self.rotary(q), self.rotary(k)  # positions enter the scores only
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            if is_causal:
                causal = causal_mask(time, x.device)
                mask = causal if mask is None else mask & causal
            out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p)
            self.attention_weights = weights.detach()
        elif mask is None:
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=is_causal)
        else:
            if is_causal:
                mask = mask & causal_mask(time, x.device)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        return self.output_dropout(self.w_o(merge_heads(out)))  # (B, h, T, d_k) -> (B, T, C)

    def _check_forward(
        self, x: object, is_causal: object, need_weights: object
    ) -> tuple[bool, bool]:
        """Raise unless ``x`` is float ``(B, T, d_model)`` of the weights' dtype; bool flags."""
        check_tensor(x, "x", f"float (B, T, d_model={self.d_model})")
        is_causal = check_bool(is_causal, "is_causal")
        need_weights = check_bool(need_weights, "need_weights")
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"expected x of shape (B, T, d_model={self.d_model}), got {tuple(x.shape)}"
            )
        check_input_dtype(x, self.w_q.weight)
        return is_causal, need_weights

    def _fused_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Q, K, V ``(B, h, T, d_k)`` each from one matrix product with W^Q, W^K, W^V stacked.

        The same three weight tensors (concatenated on every call, so training, loading and
        tying them stays as on the teaching path): one ``(C, 3C)`` product reads ``x`` once
        and launches one kernel instead of three.
        """
        weight = torch.cat([self.w_q.weight, self.w_k.weight, self.w_v.weight])  # (3C, C)
        bias = None
        if self.w_q.bias is not None:
            bias = torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias])  # (3C,)
        qkv = F.linear(x, weight, bias)  # (B, T, C) -> (B, T, 3C)
        q, k, v = qkv.split(self.d_model, dim=-1)  # 3 x (B, T, C)
        return tuple(split_heads(t, self.n_heads) for t in (q, k, v))  # (B, h, T, d_k)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, d_k={self.d_k}"


def position_influence(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """How strongly each output position depends on each input position, from gradients.

    Entry ``[t, s]`` is ``sum |d out[b, t, ...] / d x[b', s, ...]|`` over the batch and the
    feature axes: zero exactly when no input at position ``s`` can change the output at
    position ``t``. A causal model (§3.2.3: "prevent leftward information flow in the
    decoder") has ``influence[t, s] == 0`` for every ``s > t``.

    Args:
        fn: maps ``x`` to an output whose first two axes are ``(B, T_out)``, e.g. a
            :class:`MultiHeadAttention` or a decoder block ``(B, T, C) -> (B, T, C)``.
            Put the module in ``eval()`` mode first: dropout would make the result random.
        x: float input ``(B, T_in, ...)``.

    Returns:
        ``(T_out, T_in)`` float tensor of non-negative values.

    Raises:
        TypeError: ``fn`` is not callable, or ``x`` is not a float tensor.
        ValueError: ``x`` or the output has fewer than 2 axes, or the output's batch size
            differs from the input's.
    """
    _check_influence_args(fn, x)
    x = x.detach()
    out = fn(x)
    _check_influence_output(out, x)
    jacobian = torch.autograd.functional.jacobian(fn, x)  # out.shape + x.shape
    batch, t_out, t_in = out.shape[0], out.shape[1], x.shape[1]
    jacobian = jacobian.abs().reshape(batch, t_out, out[0, 0].numel(), batch, t_in, x[0, 0].numel())
    return jacobian.sum(dim=(0, 2, 3, 5))  # (B, T_out, ., B, T_in, .) -> (T_out, T_in)


def _check_influence_args(fn: object, x: object) -> None:
    """Raise unless ``fn`` is callable and ``x`` a float tensor ``(B, T, ...)``."""
    if not callable(fn):
        raise TypeError(
            f"fn must be a function or module mapping x to an output, got {type(fn).__name__}; "
            "pass the module itself (e.g. block), not its output block(x)"
        )
    if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point:
        found = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
        raise TypeError(f"x must be a float tensor (B, T, ...), got {found}")
    if x.ndim < 2:
        raise ValueError(f"x must have at least 2 axes (B, T, ...), got shape {tuple(x.shape)}")


def _check_influence_output(out: torch.Tensor, x: torch.Tensor) -> None:
    """ValueError unless ``fn``'s output ``out`` is ``(B, T_out, ...)`` for ``x`` ``(B, ...)``."""
    if out.ndim < 2 or out.shape[0] != x.shape[0]:
        raise ValueError(
            f"fn must return (B={x.shape[0]}, T_out, ...), got shape {tuple(out.shape)} "
            f"for x of shape {tuple(x.shape)}"
        )
