"""Grouped-query attention: fewer key/value heads than query heads (Llama 2/3, Qwen3).

Ainslie et al. (2023), "GQA: Training Generalized Multi-Query Transformer Models from
Multi-Head Checkpoints", §2.2: the ``n_heads`` query heads are split into ``n_kv_heads``
groups; the heads of one group share one key head and one value head. ``n_kv_heads =
n_heads`` is multi-head attention (Vaswani et al. 2017, §3.2.2); ``n_kv_heads = 1`` is
multi-query attention (Shazeer 2019). The point is the KV cache: it stores ``n_kv_heads``
heads per layer instead of ``n_heads``, so generation reads ``n_heads / n_kv_heads`` times
fewer bytes per token (:mod:`course_utils.kv_cache`).

Which key head does query head ``i`` use? Head ``i // group`` with ``group = n_heads /
n_kv_heads``: consecutive query heads share a key head. Expanding the key heads for an
ordinary attention therefore repeats each one ``group`` times *in place*
(``repeat_interleave``), not the whole stack ``group`` times (``repeat``): the wrong one
pairs query head 1 with key head 1 instead of key head 0 (:func:`expand_kv_heads`).

The module also carries the other attention changes of today's decoders: projections
without biases (Touvron et al. 2023, §2; Chowdhery et al. 2022, §2 "No biases"), QK-norm
(an RMSNorm over each head's query and key before RoPE, Qwen3; Dehghani et al. 2023,
"QK normalization"),
RoPE (Su et al. 2021, §3.4), and a head width ``d_k`` that need not be ``d_model /
n_heads``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.attention import (
    causal_mask,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from course_utils.checks import (
    check_bool,
    check_dropout_p,
    check_float,
    check_input_dtype,
    check_int,
    check_tensor,
)
from course_utils.rmsnorm import RMSNorm
from course_utils.rotary import RotaryEmbedding, check_angle_dtype


def expand_kv_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Repeat each of the ``n_kv_heads`` key (or value) heads for the query heads of its group.

    Output head ``i`` is input head ``i // (n_heads / n_kv_heads)`` (``repeat_interleave``
    on the head axis; Ainslie et al. 2023, §2.2). Same result as ``transformers``'
    ``repeat_kv``.

    Shapes: ``(B, n_kv_heads, T, d_k)`` -> ``(B, n_heads, T, d_k)``.

    Raises:
        TypeError: ``x`` not a tensor, ``n_heads`` not an int.
        ValueError: ``x`` not 4-D, ``x`` with no key/value head (``x.shape[1] == 0``), or
            ``n_heads`` not a multiple of ``n_kv_heads``.
    """
    n_heads = _check_expand(x, n_heads)
    # (B, g, T, d_k) -> (B, g * group, T, d_k): k0 k0 k1 k1, not k0 k1 k0 k1
    return x.repeat_interleave(n_heads // x.shape[1], dim=1)


def _check_scale(scale: object, d_k: int) -> float:
    """``scale`` as a float > 0 (None: ``1 / sqrt(d_k)``, Vaswani et al. 2017, Eq. 1)."""
    if scale is None:
        return 1 / math.sqrt(d_k)
    why = "the factor on q . k; None: 1 / sqrt(d_k); GPT-2's scale_attn_weights=False: 1.0"
    return check_float(scale, "scale", 0.0, math.inf, low_open=True, high_open=True, why=why)


def _check_expand(x: object, n_heads: object) -> int:
    """``n_heads`` as an int, if ``x`` is ``(B, n_kv_heads, T, d_k)`` and n_kv_heads divides it."""
    check_tensor(x, "x", "(B, n_kv_heads, T, d_k)")
    if x.ndim != 4:
        raise ValueError(f"expected x of shape (B, n_kv_heads, T, d_k), got {tuple(x.shape)}")
    n_heads = check_int(n_heads, "n_heads", minimum=1)
    n_kv_heads = x.shape[1]
    if n_kv_heads == 0:
        raise ValueError(
            f"x has 0 key/value heads (x.shape[1] = 0 in shape {tuple(x.shape)}): there is no "
            f"head to share among the n_heads={n_heads} query heads; pass x of shape "
            "(B, n_kv_heads, T, d_k) with n_kv_heads >= 1, e.g. the keys split into heads"
        )
    if n_heads % n_kv_heads:
        raise ValueError(
            f"n_heads={n_heads} must be a multiple of n_kv_heads={n_kv_heads} (x.shape[1]): "
            "each key/value head serves a whole group of query heads"
        )
    return n_heads


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with ``n_kv_heads`` key/value heads shared by ``n_heads`` queries.

    Two paths compute the same function (tested against each other and, with copied
    weights, against ``transformers``' Llama and Qwen3 attention):

    * the teaching path (``need_weights=True``): :func:`expand_kv_heads` then the course's
      explicit :func:`~course_utils.attention.scaled_dot_product_attention`; the weights
      ``(B, h, T, T)`` are kept in ``self.attention_weights``;
    * the fast path (default): ``F.scaled_dot_product_attention(..., enable_gqa=True)``,
      which shares the key heads without copying them.

    Args:
        d_model: C.
        n_heads: h, query heads.
        n_kv_heads: key/value heads, dividing ``n_heads`` (None: ``n_heads``, i.e. MHA).
        d_k: head width (None: ``d_model // n_heads``).
        bias: biases in the four projections (GPT-2: yes; Llama, Qwen3: no).
        qk_norm: RMSNorm over each query and key head before RoPE (Qwen3).
        rotary_max_len: rotate q and k with RoPE for sequences up to this length (None: no
            RoPE, e.g. GPT-2's added positions).
        rope_base: RoPE's base (Su et al. 2021: 10000; Qwen3: 1000000).
        norm_eps: eps of the QK-norm.
        dropout: dropout on the attention weights and on the output (training only).
        scale: the factor on the scores ``q . k`` (None: ``1 / sqrt(d_k)``; GPT-2 can
            switch it off, ``1.0``, or divide it by the layer's number).
        rope_angle_dtype: the precision of RoPE's angles: ``torch.float64`` (exact) or
            ``torch.float32`` (``transformers``' arithmetic, see
            :func:`~course_utils.rotary.rotary_angles`).

    Shapes: x ``(B, T, C)`` -> q ``(B, h, T, d_k)``, k and v ``(B, n_kv_heads, T, d_k)`` ->
    ``(B, T, C)``.

    Raises:
        TypeError: a size that is not an int, a flag that is not a bool; x not a float tensor
            of the weights' dtype.
        ValueError: a size below 1, ``n_heads`` not a multiple of ``n_kv_heads``, odd ``d_k``
            with RoPE, dropout outside ``[0, 1)``, ``norm_eps`` or ``scale`` not > 0,
            ``rope_base <= 1``; x not ``(B, T, d_model)`` (any B, 0 included), or longer than
            ``rotary_max_len``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int | None = None,
        d_k: int | None = None,
        *,
        bias: bool = False,
        qk_norm: bool = False,
        rotary_max_len: int | None = None,
        rope_base: float = 10000.0,
        norm_eps: float = 1e-6,
        dropout: float = 0.0,
        scale: float | None = None,
        rope_angle_dtype: torch.dtype = torch.float64,
    ):
        super().__init__()
        d_model, n_heads = check_int(d_model, "d_model", minimum=1), check_int(n_heads, "n_heads")
        n_kv_heads = n_heads if n_kv_heads is None else check_int(n_kv_heads, "n_kv_heads")
        self._check_heads(d_model, n_heads, n_kv_heads, d_k)
        d_k_given = d_k is not None
        d_k = d_model // n_heads if d_k is None else check_int(d_k, "d_k", minimum=1)
        bias, qk_norm = check_bool(bias, "bias"), check_bool(qk_norm, "qk_norm")
        self.d_model, self.n_heads, self.n_kv_heads, self.d_k = d_model, n_heads, n_kv_heads, d_k
        self.dropout = check_dropout_p(dropout, "dropout")
        self.scale = _check_scale(scale, d_k)
        norm_eps = check_float(norm_eps, "norm_eps", 0.0, math.inf, low_open=True, high_open=True)
        self.w_q = nn.Linear(d_model, n_heads * d_k, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * d_k, bias=bias)  # fewer heads: smaller
        self.w_v = nn.Linear(d_model, n_kv_heads * d_k, bias=bias)
        self.w_o = nn.Linear(n_heads * d_k, d_model, bias=bias)
        self.q_norm = RMSNorm(d_k, norm_eps) if qk_norm else None
        self.k_norm = RMSNorm(d_k, norm_eps) if qk_norm else None
        self.rotary = self._make_rotary(rotary_max_len, rope_base, rope_angle_dtype, d_k_given)
        self.output_dropout = nn.Dropout(self.dropout)
        self.attention_weights: torch.Tensor | None = None

    def _make_rotary(
        self, max_len: object, base: object, angle_dtype: object, d_k_given: bool
    ) -> RotaryEmbedding | None:
        """RoPE for ``rotary_max_len`` positions (None: no RoPE)."""
        if max_len is None:
            return None
        max_len, base, angle_dtype = self._check_rotary(max_len, base, angle_dtype, d_k_given)
        return RotaryEmbedding(self.d_k, max_len, base=base, angle_dtype=angle_dtype)

    def _check_rotary(self, max_len: object, base: object, angle_dtype: object, d_k_given: bool):
        """RoPE's arguments under the names this class takes (``rotary_max_len``,
        ``rope_base``, ``rope_angle_dtype``), and an even ``d_k``, with the arithmetic that
        gave it."""
        why = "the longest sequence, in tokens (None: no RoPE)"
        max_len = check_int(max_len, "rotary_max_len", minimum=1, why=why)
        why = "the longest wavelength is rope_base * 2*pi positions; Llama: 10000"
        base = check_float(base, "rope_base", 1.0, math.inf, low_open=True, high_open=True, why=why)
        angle_dtype = check_angle_dtype(angle_dtype, "rope_angle_dtype")
        if self.d_k % 2 and d_k_given:
            raise ValueError(
                f"RoPE rotates channel pairs: d_k must be even, got d_k={self.d_k}; pass an "
                f"even d_k (e.g. {self.d_k + 1})"
            )
        if self.d_k % 2:
            raise ValueError(
                f"RoPE rotates channel pairs: d_k must be even, got d_k = d_model / n_heads = "
                f"{self.d_model} / {self.n_heads} = {self.d_k}; change n_heads or d_model, or "
                "pass an even d_k"
            )
        return max_len, base, angle_dtype

    @staticmethod
    def _check_heads(d_model: int, n_heads: int, n_kv_heads: int, d_k: object) -> None:
        """ValueError unless n_kv_heads divides n_heads, and n_heads divides d_model (no d_k)."""
        if n_heads < 1 or n_kv_heads < 1 or n_heads % n_kv_heads:
            divisors = [g for g in range(1, max(n_heads, 1) + 1) if n_heads % g == 0]
            raise ValueError(
                f"n_kv_heads={n_kv_heads} must divide n_heads={n_heads} (both >= 1): each "
                f"key/value head serves a group of query heads; valid n_kv_heads: {divisors}"
            )
        if d_k is None and d_model % n_heads:
            raise ValueError(
                f"d_model={d_model} is not divisible by n_heads={n_heads}; pass d_k explicitly"
            )

    def project(self, x: torch.Tensor, offset: int = 0):
        """Queries, keys and values, normed (QK-norm) and rotated (RoPE) as attention uses them.

        Args:
            x: ``(B, T, C)``, already normalised by the block.
            offset: the position of the first token (the KV cache's length).

        Returns:
            ``(q, k, v)``: ``(B, h, T, d_k)``, ``(B, n_kv_heads, T, d_k)`` twice. With a
            ``scale`` other than ``1/sqrt(d_k)``, q comes multiplied by ``scale * sqrt(d_k)``,
            so that every consumer's ``q k^T / sqrt(d_k)`` (this class, the KV cache) gives
            ``scale * q k^T``.

        Raises:
            TypeError, ValueError: ``x`` as in :meth:`forward`; ``offset`` not an int >= 0, or
                ``offset + T > rotary_max_len``.
        """
        offset = self._check_project(x, offset)
        q = split_heads(self.w_q(x), self.n_heads)  # (B, T, h*d_k) -> (B, h, T, d_k)
        k = split_heads(self.w_k(x), self.n_kv_heads)  # (B, T, g*d_k) -> (B, g, T, d_k)
        v = split_heads(self.w_v(x), self.n_kv_heads)  # (B, T, g*d_k) -> (B, g, T, d_k)
        if self.q_norm is not None:  # each head's vector on its own, before the rotation
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rotary is not None:
            q, k = self.rotary(q, offset=offset), self.rotary(k, offset=offset)
        if self.scale != 1 / math.sqrt(self.d_k):  # consumers divide by sqrt(d_k): undo it
            q = q * (self.scale * math.sqrt(self.d_k))
        return q, k, v

    def _check_project(self, x: object, offset: object) -> int:
        """``offset`` as an int, if ``x`` is float ``(B, T, d_model)`` of the weights' dtype and
        positions ``offset .. offset + T - 1`` fit RoPE's ``rotary_max_len``."""
        check_tensor(x, "x", f"float (B, T, d_model={self.d_model})")
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"expected x of shape (B, T, d_model={self.d_model}), got {tuple(x.shape)}"
            )
        check_input_dtype(x, self.w_q.weight)
        offset = check_int(offset, "offset", minimum=0, why="the number of earlier tokens")
        if self.rotary is not None and offset + x.shape[1] > self.rotary.max_len:
            raise ValueError(
                f"T={x.shape[1]} tokens at offset={offset} exceed rotary_max_len="
                f"{self.rotary.max_len}; crop the context to rotary_max_len tokens"
            )
        return offset

    def forward(self, x: torch.Tensor, need_weights: bool = False) -> torch.Tensor:
        """Causal self-attention ``(B, T, C)`` -> ``(B, T, C)``.

        Args:
            x: float ``(B, T, d_model)``.
            need_weights: the teaching path; keep ``self.attention_weights`` ``(B, h, T, T)``.

        Raises:
            TypeError, ValueError: see the class.
        """
        need_weights = check_bool(need_weights, "need_weights")
        q, k, v = self.project(x)
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            out = self._teaching_path(q, k, v, dropout_p)
        else:  # the kernel shares each key head with its group: no copy
            out = F.scaled_dot_product_attention(
                q, k, v, dropout_p=dropout_p, is_causal=True, enable_gqa=True
            )
        return self.output_dropout(self.w_o(merge_heads(out)))  # (B, h, T, d_k) -> (B, T, C)

    def _teaching_path(self, q, k, v, dropout_p: float) -> torch.Tensor:
        """Expanded key and value heads, then the course's explicit attention; keeps the
        weights ``(B, h, T, T)``. Returns ``(B, h, T, d_k)``."""
        k = expand_kv_heads(k, self.n_heads)  # (B, g, T, d_k) -> (B, h, T, d_k)
        v = expand_kv_heads(v, self.n_heads)  # (B, g, T, d_k) -> (B, h, T, d_k)
        length = q.shape[2]
        if q.shape[0] == 0:  # an empty batch: nothing to attend (the mask checks need a row)
            self.attention_weights = q.new_zeros(0, self.n_heads, length, length)
            return q.new_zeros(q.shape)
        mask = causal_mask(length, q.device)  # (T, T), True = may attend
        out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p)
        self.attention_weights = weights.detach()
        return out

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, n_kv_heads={self.n_kv_heads}, "
            f"d_k={self.d_k}"
        )
