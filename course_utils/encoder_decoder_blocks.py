"""The blocks of the paper's encoder–decoder (Vaswani et al. 2017, §3.1, §3.2.3), pre-LN.

* :class:`CrossAttention`: queries from the decoder, keys and values from the encoder's
  output, weights of shape ``(B, h, T_tgt, T_src)``.
* :class:`EncoderBlock`: bidirectional self-attention (padding hidden), then the FFN.
* :class:`CrossDecoderBlock`: causal self-attention, cross-attention, then the FFN.

:mod:`course_utils.encoder_decoder` stacks them into the full model. Masks follow the course
convention: bool, True = may attend; padding masks are ``(B, T)`` with True = a real token.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.attention import (
    MultiHeadAttention,
    check_dropout_p,
    check_input_dtype,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from course_utils.checks import check_bool, check_choice, check_int
from course_utils.layers import FeedForward, LayerNorm
from course_utils.masks import check_key_padding_mask

ACTIVATIONS = ("relu", "gelu")


def _key_mask(key_padding_mask: torch.Tensor | None, batch: int, t_k: int) -> torch.Tensor | None:
    """``(B, T_k)`` bool, True = real -> ``(B, 1, 1, T_k)``, broadcast over heads and queries.

    Checked by :func:`course_utils.masks.check_key_padding_mask`: bool, shape ``(B, T_k)``,
    and not inverted (a sequence with no real token, or key 0 hidden everywhere, is refused).
    """
    if key_padding_mask is None:
        return None
    check_key_padding_mask(key_padding_mask, batch, t_k)
    return key_padding_mask[:, None, None, :]  # (B, T_k) -> (B, 1, 1, T_k)


def _check_block_sizes(d_model, n_heads, d_ff, dropout, activation) -> tuple:
    """The arguments of the encoder and decoder blocks, checked with their own names."""
    return (
        check_int(d_model, "d_model", minimum=1),
        check_int(n_heads, "n_heads", minimum=1),
        check_int(d_ff, "d_ff", minimum=1, why="the hidden width, 4 * d_model in the paper"),
        check_dropout_p(dropout, "dropout"),
        check_choice(activation, "activation", ACTIVATIONS),
    )


class CrossAttention(MultiHeadAttention):
    """Multi-head attention whose queries and keys/values come from different sequences (§3.2.3).

    ``Q = x W^Q`` from the decoder, ``K = memory W^K`` and ``V = memory W^V`` from the encoder
    output. No causal mask: every target position may read the whole (real) source, because
    the source is fully known before decoding starts. Same parameters as
    :class:`MultiHeadAttention` (``w_q``, ``w_k``, ``w_v``, ``w_o``).

    Shapes:
        x ``(B, T_tgt, C)``, memory ``(B, T_src, C)`` -> ``(B, T_tgt, C)``; with
        ``need_weights=True`` the weights ``(B, h, T_tgt, T_src)`` are kept in
        ``self.attention_weights``.

    Raises:
        ValueError: x or memory not ``(B, T, d_model)``, different batch sizes, or a bad
            ``memory_key_padding_mask`` (wrong shape, inverted).
        TypeError: x or memory not a float tensor of the weights' dtype; a mask that is not
            bool.
    """

    def forward(  # type: ignore[override]
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        memory_key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> torch.Tensor:
        need_weights = check_bool(need_weights, "need_weights")
        for name, tensor in (("x", x), ("memory", memory)):
            check_input_dtype(tensor, self.w_q.weight, name)
            if tensor.ndim != 3 or tensor.shape[-1] != self.d_model:
                raise ValueError(
                    f"expected {name} of shape (B, T, d_model={self.d_model}), "
                    f"got {tuple(tensor.shape)}"
                )
        if x.shape[0] != memory.shape[0]:
            raise ValueError(
                f"x and memory must have the same batch size, got {x.shape[0]} and "
                f"{memory.shape[0]}; pass the encoder output of the same source batch"
            )
        mask = _key_mask(memory_key_padding_mask, memory.shape[0], memory.shape[1])
        q = split_heads(self.w_q(x), self.n_heads)  # (B, T_tgt, C) -> (B, h, T_tgt, d_k)
        k = split_heads(self.w_k(memory), self.n_heads)  # (B, T_src, C) -> (B, h, T_src, d_k)
        v = split_heads(self.w_v(memory), self.n_heads)  # (B, T_src, C) -> (B, h, T_src, d_k)
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p)
            self.attention_weights = weights.detach()  # (B, h, T_tgt, T_src)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        return self.output_dropout(self.w_o(merge_heads(out)))  # (B,h,T_tgt,d_k)->(B,T_tgt,C)


class EncoderBlock(nn.Module):
    """Pre-LN encoder block: bidirectional self-attention, then the FFN (§3.1).

    ``x = x + attention(ln_1(x))`` with only a key-padding mask (every real token sees every
    real token, left and right), then ``x = x + ffn(ln_2(x))``.

    Shapes: ``(B, T_src, C)`` -> ``(B, T_src, C)``; ``key_padding_mask`` ``(B, T_src)`` bool.

    Raises:
        TypeError: a size that is not an int, a dropout that is not a number; a mask that
            is not bool.
        ValueError: a size below 1, dropout outside ``[0, 1)``, unknown activation; bad x,
            or a bad or inverted ``key_padding_mask``.
    """

    def __init__(
        self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, activation="relu"
    ):
        super().__init__()
        d_model, n_heads, d_ff, dropout, activation = _check_block_sizes(
            d_model, n_heads, d_ff, dropout, activation
        )
        self.ln_1 = LayerNorm(d_model)
        self.attention = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ln_2 = LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, d_ff, dropout=dropout, activation=activation)

    def forward(
        self,
        x: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> torch.Tensor:
        check_input_dtype(x, self.ln_1.weight)
        mask = _key_mask(key_padding_mask, x.shape[0], x.shape[1])
        x = x + self.attention(self.ln_1(x), mask=mask, need_weights=need_weights)
        return x + self.feed_forward(self.ln_2(x))


class CrossDecoderBlock(nn.Module):
    """Pre-LN decoder block of the encoder–decoder: three sub-layers (§3.1).

    ``y = y + self_attention(ln_1(y))`` with a causal mask; ``y = y +
    cross_attention(ln_2(y), memory)`` (queries from y, keys/values from the encoder);
    ``y = y + ffn(ln_3(y))``. The target needs no padding mask: padding sits at the right
    end, and the causal mask already hides it from every real position.

    Shapes: y ``(B, T_tgt, C)``, memory ``(B, T_src, C)`` -> ``(B, T_tgt, C)``.

    Raises:
        TypeError, ValueError: bad sizes, as :class:`EncoderBlock`; bad shapes or masks, from
            the attention modules.
    """

    def __init__(
        self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, activation="relu"
    ):
        super().__init__()
        d_model, n_heads, d_ff, dropout, activation = _check_block_sizes(
            d_model, n_heads, d_ff, dropout, activation
        )
        self.ln_1 = LayerNorm(d_model)
        self.self_attention = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ln_2 = LayerNorm(d_model)
        self.cross_attention = CrossAttention(d_model, n_heads, dropout=dropout)
        self.ln_3 = LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, d_ff, dropout=dropout, activation=activation)

    def forward(
        self,
        y: torch.Tensor,
        memory: torch.Tensor,
        memory_key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> torch.Tensor:
        y = y + self.self_attention(self.ln_1(y), is_causal=True, need_weights=need_weights)
        y = y + self.cross_attention(
            self.ln_2(y), memory, memory_key_padding_mask, need_weights=need_weights
        )
        return y + self.feed_forward(self.ln_3(y))
