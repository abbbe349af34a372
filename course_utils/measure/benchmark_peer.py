"""The benchmark's peer: a decoder of the course's shape built from PyTorch's own layers.

:class:`PeerDecoder` stacks ``nn.TransformerEncoderLayer(norm_first=True, batch_first=True)``
(pre-LN, GELU, dropout where PyTorch puts it) under a causal mask, between the course's token
embedding and a tied LM head, so ``make bench`` can say how fast the course's fast path is
next to what PyTorch ships. Differences from :class:`course_utils.model.TinyDecoder`, stated
so the comparison is honest:

- positions: ``nn.TransformerEncoderLayer`` has no rotary hook, so a preset with
  ``positional="rope"`` gets a learned position table added to the embeddings (GPT-2's
  choice); ``"sinusoidal"`` and ``"learned"`` get the course's own modules;
- initialisation: PyTorch's defaults (Xavier for the attention projections), not the course's
  N(0, 0.02): the first losses differ, the work per step does not;
- the same parameter count outside the embedding tables (biases everywhere, d_ff), so the
  FLOPs per token of :func:`course_utils.measure.benchmark.flops_per_token` apply to both.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.config import ModelConfig
from course_utils.embedding import TokenEmbedding
from course_utils.positional import additive_positions


class PeerDecoder(nn.Module):
    """Token embedding -> positions -> ``nn.TransformerEncoder`` (pre-LN, causal) ->
    ``nn.LayerNorm`` -> tied LM head. Same call as :class:`TinyDecoder` in training:
    ``model(ids, targets) -> (logits, loss)``.

    Args:
        config: a :class:`course_utils.config.ModelConfig`.

    Shapes:
        ids ``(B, T)`` int64, ``T <= block_size`` -> logits ``(B, T, vocab_size)``.

    Raises:
        ValueError: ``T > block_size`` or ids not ``(B, T)``.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.token_embedding = TokenEmbedding(config.vocab_size, config.d_model)
        # nn.TransformerEncoderLayer has no hook to rotate q and k: rope becomes learned.
        kind = "learned" if config.positional == "rope" else config.positional
        self.position = additive_positions(kind, config.block_size, config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        layer = nn.TransformerEncoderLayer(
            config.d_model,
            config.n_heads,
            config.d_ff,
            config.dropout,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.blocks = nn.TransformerEncoder(layer, config.n_layers, enable_nested_tensor=False)
        self.final_norm = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.lm_head.weight = self.token_embedding.weight  # weight tying, as in TinyDecoder
        causal = nn.Transformer.generate_square_subsequent_mask(config.block_size)
        self.register_buffer("causal", causal, persistent=False)  # (T, T): 0 or -inf

    def num_parameters(self) -> int:
        """Number of trainable values (the tied matrix counted once)."""
        return sum(p.numel() for p in self.parameters())

    def forward(
        self, ids: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Logits ``(B, T, V)`` and, given ``(B, T)`` targets, the mean cross-entropy."""
        if ids.ndim != 2 or not 1 <= ids.shape[1] <= self.config.block_size:
            raise ValueError(
                f"ids must be (B, T) with 1 <= T <= block_size={self.config.block_size}, got "
                f"{tuple(ids.shape)}"
            )
        time = ids.shape[1]
        x = self.dropout(self.position(self.token_embedding(ids)))  # (B, T) -> (B, T, C)
        # is_causal=True lets PyTorch call its fused attention with the causal flag; the
        # mask is what it would use otherwise.
        x = self.blocks(x, mask=self.causal[:time, :time], is_causal=True)  # (B, T, C)
        logits = self.lm_head(self.final_norm(x))  # (B, T, C) -> (B, T, V)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())  # (B*T, V) vs (B*T,)
        return logits, loss
