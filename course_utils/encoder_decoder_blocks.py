"""The blocks of the paper's encoder–decoder (Vaswani et al. 2017, §3.1, §3.2.3).

* :class:`CrossAttention`: queries from the decoder, keys and values from the encoder's
  output, weights of shape ``(B, h, T_tgt, T_src)``.
* :class:`EncoderBlock`: bidirectional self-attention (padding hidden), then the FFN.
* :class:`CrossDecoderBlock`: causal self-attention, cross-attention, then the FFN.

Both blocks come in the two layouts of ``nn.Transformer``'s ``norm_first`` flag:
``norm_first=False`` is the paper's post-LN, ``LayerNorm(x + Sublayer(x))`` (§3.1, and
``nn.Transformer``'s default); ``norm_first=True`` is pre-LN, ``x + Sublayer(LayerNorm(x))``
(Xiong et al. 2020), which trains stably without a learning-rate warm-up and is what
notebooks 09–12 and today's decoders use.

:mod:`course_utils.encoder_decoder` stacks them into the full model. Masks follow the course
convention: bool, True = may attend; padding masks are ``(B, T)`` with True = a real token.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.attention import (
    MultiHeadAttention,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from course_utils.checks import (
    check_bool,
    check_choice,
    check_dropout_p,
    check_input_dtype,
    check_int,
)
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


def residual(x: torch.Tensor, norm: nn.Module, sublayer, norm_first: bool) -> torch.Tensor:
    """One residual sub-layer in either layout: pre-LN ``x + sublayer(norm(x))`` or the
    paper's post-LN ``norm(x + sublayer(x))`` (§3.1: "LayerNorm(x + Sublayer(x))").

    Shapes: ``(B, T, C)`` -> ``(B, T, C)``; ``sublayer`` maps ``(B, T, C)`` to ``(B, T, C)``.
    """
    if norm_first:
        return x + sublayer(norm(x))
    return norm(x + sublayer(x))


class CrossAttention(MultiHeadAttention):
    """Multi-head attention whose queries and keys/values come from different sequences (§3.2.3).

    ``Q = x W^Q`` from the decoder, ``K = memory W^K`` and ``V = memory W^V`` from the encoder
    output. No causal mask: every target position may read the whole (real) source, because
    the source is fully known before decoding starts. Same parameters as
    :class:`MultiHeadAttention` (``w_q``, ``w_k``, ``w_v``, ``w_o``).

    The source does not change while the decoder writes, so neither do ``K`` and ``V``:
    :meth:`keys_values` computes them once and ``forward(..., memory_kv=...)`` reuses them
    at every decoding step (the cross-attention counterpart of notebook 13's KV cache, with
    nothing to append).

    Shapes:
        x ``(B, T_tgt, C)``, memory ``(B, T_src, C)`` -> ``(B, T_tgt, C)``; with
        ``need_weights=True`` the weights ``(B, h, T_tgt, T_src)`` are kept in
        ``self.attention_weights``.

    Raises:
        ValueError: x or memory not ``(B, T, d_model)``, different batch sizes, or a bad
            ``memory_key_padding_mask`` (wrong shape, inverted); ``memory_kv`` not two
            ``(B, h, T_src, d_k)`` tensors.
        TypeError: x or memory not a float tensor of the weights' dtype; a mask that is not
            bool.
    """

    def keys_values(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(K, V)`` of the encoder output, each ``(B, h, T_src, d_k)``, to pass as
        ``memory_kv`` at every decoding step instead of projecting ``memory`` again.

        Raises:
            ValueError, TypeError: memory not a float ``(B, T_src, d_model)`` tensor.
        """
        self._check_sequence(memory, "memory")
        k = split_heads(self.w_k(memory), self.n_heads)  # (B, T_src, C) -> (B, h, T_src, d_k)
        v = split_heads(self.w_v(memory), self.n_heads)  # (B, T_src, C) -> (B, h, T_src, d_k)
        return k, v

    def _check_sequence(self, tensor: torch.Tensor, name: str) -> None:
        check_input_dtype(tensor, self.w_q.weight, name)
        if tensor.ndim != 3 or tensor.shape[-1] != self.d_model:
            raise ValueError(
                f"expected {name} of shape (B, T, d_model={self.d_model}), "
                f"got {tuple(tensor.shape)}"
            )

    def _check_memory_kv(self, memory_kv, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        d_k = self.d_model // self.n_heads
        ok = isinstance(memory_kv, tuple | list) and len(memory_kv) == 2
        ok = ok and all(isinstance(t, torch.Tensor) and t.ndim == 4 for t in memory_kv)
        if not ok or memory_kv[0].shape != memory_kv[1].shape:
            items = memory_kv if isinstance(memory_kv, tuple | list) else [memory_kv]
            found = [
                tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__ for t in items
            ]
            raise ValueError(
                f"memory_kv must be the pair (K, V) of keys_values(memory), each (B, h, T_src, "
                f"d_k), got {type(memory_kv).__name__} of {found}"
            )
        k, v = memory_kv
        if k.shape[0] != x.shape[0] or k.shape[1] != self.n_heads or k.shape[3] != d_k:
            raise ValueError(
                f"memory_kv tensors must be (B={x.shape[0]}, h={self.n_heads}, T_src, "
                f"d_k={d_k}), got {tuple(k.shape)}; compute them with keys_values(memory)"
            )
        return k, v

    def forward(  # type: ignore[override]
        self,
        x: torch.Tensor,
        memory: torch.Tensor | None,
        memory_key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = False,
        *,
        memory_kv: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """``memory_kv`` (from :meth:`keys_values`) replaces projecting ``memory``, which may
        then be None."""
        need_weights = check_bool(need_weights, "need_weights")
        self._check_sequence(x, "x")
        if memory_kv is not None:
            k, v = self._check_memory_kv(memory_kv, x)
            mask = _key_mask(memory_key_padding_mask, k.shape[0], k.shape[2])
            return self._attend(split_heads(self.w_q(x), self.n_heads), k, v, mask, need_weights)
        self._check_memory(memory, x)
        mask = _key_mask(memory_key_padding_mask, memory.shape[0], memory.shape[1])
        q = split_heads(self.w_q(x), self.n_heads)  # (B, T_tgt, C) -> (B, h, T_tgt, d_k)
        k, v = self.keys_values(memory)  # (B, h, T_src, d_k) each
        return self._attend(q, k, v, mask, need_weights)

    def _check_memory(self, memory: object, x: torch.Tensor) -> None:
        """Raise unless ``memory`` is float ``(B, T_src, d_model)`` with ``x``'s batch size."""
        self._check_sequence(memory, "memory")
        if x.shape[0] != memory.shape[0]:
            raise ValueError(
                f"x and memory must have the same batch size, got {x.shape[0]} and "
                f"{memory.shape[0]}; pass the encoder output of the same source batch"
            )

    def _attend(self, q, k, v, mask, need_weights: bool) -> torch.Tensor:
        """Heads ``q`` ``(B, h, T_tgt, d_k)`` over ``k``, ``v`` ``(B, h, T_src, d_k)``."""
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p)
            self.attention_weights = weights.detach()  # (B, h, T_tgt, T_src)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        return self.output_dropout(self.w_o(merge_heads(out)))  # (B,h,T_tgt,d_k)->(B,T_tgt,C)


class EncoderBlock(nn.Module):
    """Encoder block: bidirectional self-attention, then the FFN (§3.1), in either layout.

    Pre-LN (``norm_first=True``): ``x = x + attention(ln_1(x))``, ``x = x + ffn(ln_2(x))``.
    Post-LN, the paper's (``norm_first=False``): ``x = ln_1(x + attention(x))``,
    ``x = ln_2(x + ffn(x))``. Only a key-padding mask: every real token sees every real
    token, left and right. The parameters are the same in both layouts, so
    ``load_state_dict`` moves weights between them.

    Shapes: ``(B, T_src, C)`` -> ``(B, T_src, C)``; ``key_padding_mask`` ``(B, T_src)`` bool.

    Raises:
        TypeError: a size that is not an int, a dropout that is not a number, a
            ``norm_first`` that is not a bool; a mask that is not bool.
        ValueError: a size below 1, dropout outside ``[0, 1)``, unknown activation; bad x,
            or a bad or inverted ``key_padding_mask``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        activation="relu",
        norm_first: bool = True,
    ):
        super().__init__()
        d_model, n_heads, d_ff, dropout, activation = _check_block_sizes(
            d_model, n_heads, d_ff, dropout, activation
        )
        self.norm_first = check_bool(norm_first, "norm_first")
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

        def attend(h: torch.Tensor) -> torch.Tensor:
            return self.attention(h, mask=mask, need_weights=need_weights)

        x = residual(x, self.ln_1, attend, self.norm_first)
        return residual(x, self.ln_2, self.feed_forward, self.norm_first)


class CrossDecoderBlock(nn.Module):
    """Decoder block of the encoder–decoder: three sub-layers (§3.1), in either layout.

    Causal self-attention (``ln_1``), cross-attention with queries from ``y`` and
    keys/values from the encoder (``ln_2``), then the FFN (``ln_3``); each sub-layer is
    ``y + f(ln(y))`` (pre-LN, ``norm_first=True``) or ``ln(y + f(y))`` (the paper's post-LN,
    ``norm_first=False``). The target needs no padding mask: padding sits at the right end,
    and the causal mask already hides it from every real position.

    Shapes: y ``(B, T_tgt, C)``, memory ``(B, T_src, C)`` -> ``(B, T_tgt, C)``;
    ``memory_kv`` (optional) the cross-attention's ``(K, V)``, each ``(B, h, T_src, d_k)``,
    from ``cross_attention.keys_values(memory)``.

    Raises:
        TypeError, ValueError: bad sizes, as :class:`EncoderBlock`; bad shapes or masks, from
            the attention modules.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        activation="relu",
        norm_first: bool = True,
    ):
        super().__init__()
        d_model, n_heads, d_ff, dropout, activation = _check_block_sizes(
            d_model, n_heads, d_ff, dropout, activation
        )
        self.norm_first = check_bool(norm_first, "norm_first")
        self.ln_1 = LayerNorm(d_model)
        self.self_attention = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ln_2 = LayerNorm(d_model)
        self.cross_attention = CrossAttention(d_model, n_heads, dropout=dropout)
        self.ln_3 = LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, d_ff, dropout=dropout, activation=activation)

    def forward(
        self,
        y: torch.Tensor,
        memory: torch.Tensor | None,
        memory_key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = False,
        *,
        memory_kv: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        def attend_self(h: torch.Tensor) -> torch.Tensor:
            return self.self_attention(h, is_causal=True, need_weights=need_weights)

        def attend_source(h: torch.Tensor) -> torch.Tensor:
            # memory_kv only when given: a replacement cross-attention (notebook 14's buggy
            # one) may take the four arguments of MultiHeadAttention-style forward only
            extra = {} if memory_kv is None else {"memory_kv": memory_kv}
            return self.cross_attention(h, memory, memory_key_padding_mask, need_weights, **extra)

        y = residual(y, self.ln_1, attend_self, self.norm_first)
        y = residual(y, self.ln_2, attend_source, self.norm_first)
        return residual(y, self.ln_3, self.feed_forward, self.norm_first)
