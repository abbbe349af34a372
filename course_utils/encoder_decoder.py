"""The paper's encoder–decoder Transformer (Vaswani et al. 2017, §3.1, §3.2.3).

The encoder reads the whole source with bidirectional self-attention (padding hidden); the
decoder writes the target with masked (causal) self-attention, then *cross-attention*: its
queries come from the decoder, its keys and values from the encoder's output ("memory"), so
the weights have shape ``(B, h, T_tgt, T_src)``. Built from the pieces of
:mod:`course_utils.attention` and :mod:`course_utils.layers`, in either layout:
``norm_first=False`` is the paper's post-LN (and ``nn.Transformer``'s default),
``norm_first=True`` pre-LN. The tests check both against
``torch.nn.Transformer(norm_first=..., batch_first=True)`` with the same weights.

Masks follow the course convention: bool, True = may attend. Padding masks are ``(B, T)``
with True = a real token. The blocks (cross-attention, encoder block, decoder block) live in
:mod:`course_utils.encoder_decoder_blocks` and are importable from here too.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.checks import (
    as_id_tensor,
    check_bool,
    check_choice,
    check_dropout_p,
    check_float,
    check_instance,
    check_int,
)
from course_utils.embedding import TokenEmbedding, as_token_ids, check_token_ids
from course_utils.encoder_decoder_blocks import (
    ACTIVATIONS,
    CrossAttention,
    CrossDecoderBlock,
    EncoderBlock,
)
from course_utils.layers import LayerNorm
from course_utils.positional import SinusoidalPositionalEncoding

IGNORE_INDEX = -100  # F.cross_entropy's default ignore_index, accepted in targets like pad_id

__all__ = [
    "ACTIVATIONS",
    "CrossAttention",
    "CrossDecoderBlock",
    "EncoderBlock",
    "EncoderDecoder",
    "EncoderDecoderConfig",
]


@dataclass
class EncoderDecoderConfig:
    """Hyper-parameters of :class:`EncoderDecoder`.

    Attributes:
        src_vocab_size, tgt_vocab_size: vocabulary sizes of the two sides.
        d_model, n_heads, d_ff: widths (d_k = d_model / n_heads).
        n_encoder_layers, n_decoder_layers: stack depths (6 and 6 in the paper).
        max_len: the longest source or target, in tokens (rows of the sinusoidal table).
        dropout: dropout probability in training.
        activation: ``"relu"`` (the paper, and ``nn.Transformer``'s default) or ``"gelu"``.
        shared_embeddings: one table for source and target (needs one vocabulary, §3.4).
        pad_id: the padding id of both sides.
        norm_first: True (the default here) = pre-LN, ``x + Sublayer(LN(x))``, with a final
            LayerNorm after each stack; False = the paper's post-LN, ``LN(x + Sublayer(x))``
            (§3.1), with no final LayerNorm: every block already ends in one.

    Raises:
        TypeError: a size or ``pad_id`` that is not an int (``24.0``, ``1e3``), a dropout
            that is not a number, a ``shared_embeddings`` or ``norm_first`` that is not a
            bool.
        ValueError: a size is not positive, d_model not divisible by n_heads or odd,
            dropout outside ``[0, 1)``, unknown activation, ``pad_id`` not an id of both
            vocabularies, or shared embeddings with two vocabulary sizes.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int
    n_heads: int
    d_ff: int
    n_encoder_layers: int
    n_decoder_layers: int
    max_len: int
    dropout: float = 0.0
    activation: str = "relu"
    shared_embeddings: bool = False
    pad_id: int = 0
    norm_first: bool = True

    def __post_init__(self) -> None:
        sizes = ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff", "max_len")
        for name in (*sizes, "n_encoder_layers", "n_decoder_layers"):
            setattr(self, name, check_int(getattr(self, name), name, minimum=1))
        self.dropout = check_dropout_p(self.dropout, "dropout")
        check_choice(self.activation, "activation", ACTIVATIONS)
        self.shared_embeddings = check_bool(self.shared_embeddings, "shared_embeddings")
        self.norm_first = check_bool(self.norm_first, "norm_first")
        smallest = min(self.src_vocab_size, self.tgt_vocab_size)
        self.pad_id = check_int(
            self.pad_id, "pad_id", minimum=0, maximum=smallest - 1, why="an id of both vocabularies"
        )
        self._check_sizes_agree()

    def _check_sizes_agree(self) -> None:
        """ValueError unless d_model fits n_heads and sin/cos pairs, and shared tables one vocab."""
        if self.d_model % self.n_heads or self.d_model % 2:
            raise ValueError(
                f"d_model={self.d_model} must be even (sin/cos pairs) and divisible by "
                f"n_heads={self.n_heads}"
            )
        if self.shared_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                f"shared_embeddings needs one vocabulary, got src_vocab_size="
                f"{self.src_vocab_size} and tgt_vocab_size={self.tgt_vocab_size}; "
                "use shared_embeddings=False or a joint vocabulary"
            )


class EncoderDecoder(nn.Module):
    """Source ids -> encoder -> memory; target ids + memory -> decoder -> logits (§3.1).

    Embeddings are multiplied by sqrt(d_model) and get the sinusoidal positions of §3.5 added.
    With pre-LN each stack ends with a final LayerNorm (``encoder_norm``, ``decoder_norm``):
    the residual stream of a pre-LN stack is a sum that no LayerNorm has touched, so it is
    normalised once at the end; post-LN blocks end in a LayerNorm already, so there these
    two are ``None``, as in the paper. The LM head shares its matrix
    with the target embedding (§3.4); with ``shared_embeddings`` the source uses that same
    table too. Tables start from N(0, 0.02) (:class:`TokenEmbedding`), so the initial logits
    are small and the loss at initialisation is close to ln(tgt_vocab_size).

    Args:
        config: an :class:`EncoderDecoderConfig`.

    Shapes:
        src ``(B, T_src)`` and tgt ``(B, T_tgt)`` int64 -> logits ``(B, T_tgt, tgt_vocab_size)``.
        Ids of any integer dtype, numpy arrays and nested lists are converted to int64.

    Raises:
        TypeError: ``config`` is not an EncoderDecoderConfig.
    """

    def __init__(self, config: EncoderDecoderConfig):
        super().__init__()
        self.config = c = check_instance(
            config, "config", EncoderDecoderConfig, "build it with EncoderDecoderConfig(...)"
        )
        self.tgt_embedding = TokenEmbedding(c.tgt_vocab_size, c.d_model)
        self.src_embedding = (
            self.tgt_embedding
            if c.shared_embeddings
            else TokenEmbedding(c.src_vocab_size, c.d_model)
        )
        self.position = SinusoidalPositionalEncoding(c.max_len, c.d_model)
        self.dropout = nn.Dropout(c.dropout)
        sizes = (c.d_model, c.n_heads, c.d_ff, c.dropout, c.activation, c.norm_first)
        self.encoder_blocks = nn.ModuleList(EncoderBlock(*sizes) for _ in range(c.n_encoder_layers))
        self.encoder_norm = LayerNorm(c.d_model) if c.norm_first else None
        self.decoder_blocks = nn.ModuleList(
            CrossDecoderBlock(*sizes) for _ in range(c.n_decoder_layers)
        )
        self.decoder_norm = LayerNorm(c.d_model) if c.norm_first else None
        self.lm_head = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        self.lm_head.weight = self.tgt_embedding.weight  # weight tying (§3.4)

    def num_parameters(self) -> int:
        """Number of trainable values (shared matrices counted once)."""
        return sum(p.numel() for p in self.parameters())

    def _ids(self, ids: object, name: str) -> torch.Tensor:
        """``src`` or ``tgt`` as checked ``(B, T)`` int64 ids (lists and numpy too)."""
        vocab_size = self.config.src_vocab_size if name == "src" else self.config.tgt_vocab_size
        ids = as_token_ids(ids, vocab_size, name)
        if ids.ndim != 2:
            raise ValueError(
                f"{name} must be (B, T) token ids, got {tuple(ids.shape)}; add a batch axis "
                f"with {name}[None]"
            )
        return ids

    def _embed(self, ids: torch.Tensor, table: TokenEmbedding, name: str) -> torch.Tensor:
        ids = self._ids(ids, name)
        return self.dropout(self.position(table(ids)))  # (B, T) -> (B, T, C)

    def _source_mask(self, src: torch.Tensor) -> torch.Tensor:
        """``src != pad_id`` ``(B, T_src)``; a source row made only of ``pad_id`` is refused
        here, in words about the source (the caller passed no mask to blame)."""
        mask = src != self.config.pad_id
        empty = (~mask.any(dim=1)).nonzero().flatten().tolist()
        if empty:
            rows = empty[0] if len(empty) == 1 else empty
            raise ValueError(
                f"src row {rows} is all padding (every id is pad_id={self.config.pad_id}), so "
                "the encoder has no real token to attend to; every source needs at least one "
                "real token: drop the empty row(s) from the batch"
            )
        return mask

    def encode(
        self,
        src: torch.Tensor,
        src_key_padding_mask: torch.Tensor | None = None,
        *,
        need_weights: bool = False,
    ) -> torch.Tensor:
        """Encoder output ("memory") ``(B, T_src, C)`` of ``src`` ``(B, T_src)``.

        ``src_key_padding_mask`` ``(B, T_src)`` bool (True = real) defaults to
        ``src != pad_id``. ``need_weights=True`` keeps each block's weights.

        Raises:
            ValueError / TypeError: bad ids or mask (an inverted mask included), a source
                row of only ``pad_id`` (no mask given), ``T_src > max_len``.
        """
        src = self._ids(src, "src")
        if src_key_padding_mask is None:
            src_key_padding_mask = self._source_mask(src)
        x = self._embed(src, self.src_embedding, "src")
        for block in self.encoder_blocks:
            x = block(x, src_key_padding_mask, need_weights=need_weights)  # (B, T_src, C)
        return x if self.encoder_norm is None else self.encoder_norm(x)

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src_key_padding_mask: torch.Tensor | None = None,
        *,
        need_weights: bool = False,
        memory_kv: list[tuple[torch.Tensor, torch.Tensor]] | None = None,
    ) -> torch.Tensor:
        """Logits ``(B, T_tgt, tgt_vocab_size)`` of ``tgt`` ``(B, T_tgt)`` reading ``memory``.

        ``memory_kv``: optional, one ``(K, V)`` pair per decoder block (from
        :meth:`cross_keys_values`), used instead of projecting ``memory`` again; ``memory``
        may then be None.

        Raises:
            ValueError / TypeError: bad ids, memory, memory_kv or mask, ``T_tgt > max_len``.
        """
        tgt = self._ids(tgt, "tgt")
        self._check_kv_per_block(memory_kv)
        y = self._embed(tgt, self.tgt_embedding, "tgt")
        if memory_kv is None:
            memory_kv = [None] * len(self.decoder_blocks)
        for block, kv in zip(self.decoder_blocks, memory_kv):
            y = block(y, memory, src_key_padding_mask, need_weights, memory_kv=kv)  # (B, T_tgt, C)
        if self.decoder_norm is not None:
            y = self.decoder_norm(y)
        return self.lm_head(y)  # (B, T_tgt, C) -> (B, T_tgt, V_tgt)

    def _check_kv_per_block(self, memory_kv: object) -> None:
        """ValueError unless ``memory_kv`` is None or one ``(K, V)`` pair per decoder block."""
        if memory_kv is None:
            return
        if not isinstance(memory_kv, list | tuple) or len(memory_kv) != len(self.decoder_blocks):
            raise ValueError(
                f"memory_kv must hold one (K, V) pair per decoder block "
                f"({len(self.decoder_blocks)}); compute it with cross_keys_values(memory)"
            )

    def cross_keys_values(self, memory: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Every decoder block's cross-attention ``(K, V)`` of ``memory`` ``(B, T_src, C)``,
        each ``(B, h, T_src, d_k)``: computed once per source, reused at every decoding step.

        Raises:
            ValueError / TypeError: memory not a float ``(B, T_src, d_model)`` tensor.
        """
        return [block.cross_attention.keys_values(memory) for block in self.decoder_blocks]

    def forward(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        targets: torch.Tensor | None = None,
        need_weights: bool = False,
        label_smoothing: float = 0.0,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Teacher forcing: logits for every target position and, given targets, the loss.

        Args:
            src: ``(B, T_src)`` source ids, right-padded with ``pad_id``.
            tgt: ``(B, T_tgt)`` decoder input ids (start token first).
            targets: optional ``(B, T_tgt)``, the next target token at each position;
                ``pad_id`` positions, and ``-100`` (``F.cross_entropy``'s ``ignore_index``),
                are left out of the loss.
            need_weights: keep the attention weights of every block (teaching path).
            label_smoothing: ε in ``[0, 1)``; the loss's target puts ``1 - ε`` on the right
                token and spreads ε uniformly over all ``V_tgt`` tokens (Vaswani et al. 2017,
                §5.4, ε = 0.1; Szegedy et al. 2016, §7). 0 = the plain cross-entropy.

        Returns:
            ``(logits, loss)``: logits ``(B, T_tgt, V_tgt)``; the mean (label-smoothed)
            cross-entropy in nats over non-pad (and non ``-100``) targets, or None.

        Raises:
            ValueError / TypeError: bad ids, a source row of only ``pad_id``, or targets not
                shaped like ``tgt``, not integer ids, or outside ``[0, tgt_vocab_size)`` (other
                than ``-100``); ``label_smoothing`` outside ``[0, 1)`` or not a number.
        """
        label_smoothing = check_float(
            label_smoothing, "label_smoothing", 0.0, 1.0, high_open=True, why="e.g. 0.1 (§5.4)"
        )
        src, tgt = self._ids(src, "src"), self._ids(tgt, "tgt")
        src_key_padding_mask = self._source_mask(src)
        if targets is not None:
            targets = self._check_targets(targets, tgt)
        memory = self.encode(src, src_key_padding_mask, need_weights=need_weights)
        logits = self.decode(tgt, memory, src_key_padding_mask, need_weights=need_weights)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(
            logits.flatten(0, 1),
            targets.to(logits.device).flatten(),
            ignore_index=self.config.pad_id,
            label_smoothing=label_smoothing,
        )
        return logits, loss

    def _check_targets(self, targets: object, tgt: torch.Tensor) -> torch.Tensor:
        """``targets`` as ids shaped like ``tgt``, ``-100`` replaced by ``pad_id``."""
        targets = as_id_tensor(targets, "targets")
        if targets.shape != tgt.shape:
            raise ValueError(
                f"targets must have the shape of tgt {tuple(tgt.shape)}, got {tuple(targets.shape)}"
            )
        # -100 (F.cross_entropy's ignore_index) is skipped like pad_id, the ignored id here
        targets = targets.masked_fill(targets == IGNORE_INDEX, self.config.pad_id)
        check_token_ids(targets, self.config.tgt_vocab_size, "targets")
        return targets

    @torch.no_grad()
    def greedy_decode(
        self,
        src: torch.Tensor,
        start: torch.Tensor,
        eos_id: int,
        max_new_tokens: int,
        *,
        reuse_cross_kv: bool = True,
    ) -> torch.Tensor:
        """Encode once, then append the most likely token until ``<eos>`` or the budget.

        With ``reuse_cross_kv`` (the default) every cross-attention's keys and values of the
        source are computed once, before the first step (:meth:`cross_keys_values`), since
        the source does not change; False projects ``memory`` again at every step (same
        tokens, more work). The decoder's self-attention still reruns over the whole prefix
        at every step: a KV cache for it is notebook 13's.

        Args:
            src: ``(B, T_src)`` source ids.
            start: ``(B, T0)`` the decoder's first tokens (e.g. a target tag).
            eos_id: end-of-sequence id; after it a row is filled with ``pad_id``.
            max_new_tokens: at most this many tokens are added (``T0 + max_new_tokens`` must
                fit in ``max_len``).
            reuse_cross_kv: compute the source's cross-attention keys/values once (a bool).

        Returns:
            ``(B, T0 + n)`` int64, ``n <= max_new_tokens`` (stops early when every row ended).

        Raises:
            TypeError: ``eos_id`` or ``max_new_tokens`` is not an int, ``reuse_cross_kv`` not
                a bool; bad ids.
            ValueError: ``start`` has another batch size than ``src``, the output would
                exceed ``max_len``, ``max_new_tokens < 0``, or ``eos_id`` is not a target id.
        """
        src, start = self._ids(src, "src"), as_token_ids(start, self.config.tgt_vocab_size, "start")
        eos_id = check_int(eos_id, "eos_id", minimum=0, maximum=self.config.tgt_vocab_size - 1)
        max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=0)
        reuse_cross_kv = check_bool(reuse_cross_kv, "reuse_cross_kv")
        self._check_start(start, src, max_new_tokens)
        was_training = self.training
        self.eval()
        src_key_padding_mask = self._source_mask(src)
        memory = self.encode(src, src_key_padding_mask)  # the source is read once
        memory_kv = self.cross_keys_values(memory) if reuse_cross_kv else None
        ids, done = start, torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
        for _ in range(max_new_tokens):
            logits = self.decode(ids, memory, src_key_padding_mask, memory_kv=memory_kv)
            logits = logits[:, -1]  # (B, T, V_tgt) -> (B, V_tgt): the newest position
            next_id = logits.argmax(dim=-1).masked_fill(done, self.config.pad_id)
            ids = torch.cat([ids, next_id[:, None]], dim=1)  # (B, T) -> (B, T + 1)
            done |= next_id == eos_id
            if done.all():
                break
        self.train(was_training)
        return ids

    def _check_start(self, start: torch.Tensor, src: torch.Tensor, max_new_tokens: int) -> None:
        """ValueError unless ``start`` is ``(B, T0)`` for ``src``'s B and the output fits."""
        if start.ndim != 2 or start.shape[0] != src.shape[0]:
            raise ValueError(
                f"start must be (B={src.shape[0]}, T0) token ids, got {tuple(start.shape)}"
            )
        if start.shape[1] + max_new_tokens > self.config.max_len:
            raise ValueError(
                f"T0={start.shape[1]} + max_new_tokens={max_new_tokens} exceeds max_len="
                f"{self.config.max_len}; ask for fewer tokens"
            )
