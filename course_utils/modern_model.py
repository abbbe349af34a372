"""Today's decoder: the course's decoder rebuilt from the parts of Llama and Qwen3.

Compared with :class:`course_utils.model.TinyDecoder` (GPT-2's recipe, Radford et al. 2019,
§2.3, with RoPE), a Llama-style block (Touvron et al. 2023, §2.2) changes four things, each
a flag of :class:`ModernConfig`:

* ``norm="rmsnorm"``: RMSNorm instead of LayerNorm (Zhang & Sennrich 2019);
* ``feed_forward="swiglu"``: a gated MLP (Shazeer 2020) instead of GELU;
* ``n_kv_heads < n_heads``: grouped-query attention (Ainslie et al. 2023);
* ``bias=False``: no biases anywhere; plus ``qk_norm`` (Qwen3) and an untied LM head
  (``tie_embeddings=False``), and no sqrt(d_model) scale on the embedding.

The block ordering is the one the course already uses (pre-norm, Xiong et al. 2020), so
the same class with ``norm="layernorm"``, ``feed_forward="gelu_tanh"``, ``bias=True``,
``positional="learned"``, ``tie_embeddings=True`` is GPT-2 itself, and loads GPT-2's weights
(:mod:`course_utils.hf_weights`). :class:`ModernConfig` extends
:class:`course_utils.config.ModelConfig`, so :func:`course_utils.training.train` and the KV
cache (:mod:`course_utils.kv_cache`) take a :class:`ModernDecoder` as they take a TinyDecoder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.checks import check_bool, check_choice, check_float, check_instance, check_int
from course_utils.config import ModelConfig
from course_utils.embedding import TokenEmbedding
from course_utils.gqa import GroupedQueryAttention
from course_utils.layers import FeedForward, LayerNorm
from course_utils.model import IGNORE_INDEX, TinyDecoder
from course_utils.positional import additive_positions
from course_utils.rmsnorm import RMSNorm
from course_utils.swiglu import SwiGLUFeedForward, swiglu_hidden_width

NORMS = ("rmsnorm", "layernorm")
FEED_FORWARDS = ("swiglu", "gelu", "gelu_tanh")


@dataclass
class ModernConfig(ModelConfig):
    """:class:`~course_utils.config.ModelConfig` plus the switches of today's decoders.

    Attributes (besides ModelConfig's; ``positional`` defaults to ``"rope"`` here):
        n_kv_heads: key/value heads, dividing ``n_heads`` (None: ``n_heads``, plain MHA).
        head_dim: d_k, when it is not ``d_model // n_heads`` (Qwen3 sets it; None: derived).
        norm: ``"rmsnorm"`` (Llama, Qwen3) or ``"layernorm"`` (GPT-2).
        feed_forward: ``"swiglu"`` (Llama, Qwen3), ``"gelu_tanh"`` (GPT-2) or ``"gelu"``.
            With ``d_ff=None``, SwiGLU gets ``swiglu_hidden_width(4 * d_model)``.
        bias: biases in every projection (GPT-2: True; Llama, Qwen3: False).
        qk_norm: RMSNorm on each query and key head (Qwen3).
        tie_embeddings: the LM head shares the embedding matrix (GPT-2) or has its own.
        norm_eps: eps of every norm (Llama, Qwen3: 1e-6; GPT-2: 1e-5).
        rope_base: RoPE's base (10000; Qwen3 uses 1000000).

    Raises:
        TypeError, ValueError: as ModelConfig; also an unknown ``norm`` or ``feed_forward``,
            ``n_heads`` not a multiple of ``n_kv_heads``, non-bool flags, ``norm_eps`` or
            ``rope_base`` out of range.
    """

    positional: str = "rope"
    n_kv_heads: int | None = None
    head_dim: int | None = None
    norm: str = "rmsnorm"
    feed_forward: str = "swiglu"
    bias: bool = False
    qk_norm: bool = False
    tie_embeddings: bool = False
    norm_eps: float = 1e-6
    rope_base: float = 10000.0

    def __post_init__(self) -> None:
        check_choice(self.feed_forward, "feed_forward", FEED_FORWARDS)
        check_choice(self.norm, "norm", NORMS)
        if self.d_ff is None and self.feed_forward == "swiglu":
            self.d_ff = swiglu_hidden_width(4 * check_int(self.d_model, "d_model", minimum=1))
        if self.head_dim is not None:
            self.head_dim = check_int(self.head_dim, "head_dim", minimum=1, why="None: C / h")
        super().__post_init__()
        self.n_kv_heads = self._check_n_kv_heads()
        for name in ("bias", "qk_norm", "tie_embeddings"):
            setattr(self, name, check_bool(getattr(self, name), name))
        self.norm_eps = check_float(self.norm_eps, "norm_eps", 0.0, 1.0, low_open=True)
        self.rope_base = check_float(
            self.rope_base, "rope_base", 1.0, math.inf, low_open=True, high_open=True
        )

    def _check_n_kv_heads(self) -> int:
        """``n_kv_heads`` (None: ``n_heads``) as an int >= 1 that divides ``n_heads``."""
        n_kv = self.n_heads if self.n_kv_heads is None else self.n_kv_heads
        n_kv = check_int(n_kv, "n_kv_heads", minimum=1)
        if self.n_heads % n_kv:
            raise ValueError(
                f"n_kv_heads={n_kv} must divide n_heads={self.n_heads}; valid: "
                f"{[g for g in range(1, self.n_heads + 1) if self.n_heads % g == 0]}"
            )
        return n_kv

    @property
    def d_k(self) -> int:
        """Width of one head: ``head_dim`` if given, else ``d_model // n_heads``."""
        return self.head_dim if self.head_dim is not None else self.d_model // self.n_heads


def make_norm(config: ModernConfig, width: int) -> nn.Module:
    """The config's norm over a last axis of size ``width``."""
    if config.norm == "rmsnorm":
        return RMSNorm(width, config.norm_eps)
    return LayerNorm(width, config.norm_eps)


class ModernBlock(nn.Module):
    """Pre-norm block: ``x + attention(ln_1(x))``, then ``x + feed_forward(ln_2(x))``.

    Same attribute names as :class:`course_utils.layers.DecoderBlock`; ``ln_1`` and ``ln_2``
    are RMSNorm or LayerNorm, ``attention`` a :class:`GroupedQueryAttention`, ``feed_forward``
    a :class:`SwiGLUFeedForward` or the course's :class:`FeedForward`.

    Shapes: ``(B, T, C)`` -> ``(B, T, C)``.
    """

    def __init__(self, config: ModernConfig):
        super().__init__()
        rotary_max_len = config.block_size if config.positional == "rope" else None
        self.ln_1 = make_norm(config, config.d_model)
        self.attention = GroupedQueryAttention(
            config.d_model,
            config.n_heads,
            config.n_kv_heads,
            config.d_k,
            bias=config.bias,
            qk_norm=config.qk_norm,
            rotary_max_len=rotary_max_len,
            rope_base=config.rope_base,
            norm_eps=config.norm_eps,
            dropout=config.dropout,
        )
        self.ln_2 = make_norm(config, config.d_model)
        if config.feed_forward == "swiglu":
            self.feed_forward = SwiGLUFeedForward(
                config.d_model, config.d_ff, bias=config.bias, dropout=config.dropout
            )
        else:  # GPT-2's MLP: always with biases
            self.feed_forward = FeedForward(config.d_model, config.d_ff, config.dropout)
            if config.feed_forward == "gelu_tanh":  # GPT-2's tanh approximation of GELU
                self.feed_forward.activation = nn.GELU(approximate="tanh")

    def forward(self, x: torch.Tensor, need_weights: bool = False) -> torch.Tensor:
        x = x + self.attention(self.ln_1(x), need_weights=need_weights)
        return x + self.feed_forward(self.ln_2(x))


class ModernDecoder(nn.Module):
    """Embedding -> (positions) -> n_layers :class:`ModernBlock` -> final norm -> LM head.

    Args:
        config: a :class:`ModernConfig`.

    Shapes:
        ids ``(B, T)`` int64 with ``T <= block_size`` -> logits ``(B, T, vocab_size)``.

    Raises:
        TypeError: ``config`` is not a ModernConfig.
    """

    # The same input checks as TinyDecoder (ids (B, T) in [0, V), T <= block_size; targets).
    _check_ids = TinyDecoder._check_ids
    _check_targets = TinyDecoder._check_targets

    def __init__(self, config: ModernConfig):
        super().__init__()
        self.config = check_instance(
            config, "config", ModernConfig, "build it with ModernConfig(**settings)"
        )
        self.token_embedding = TokenEmbedding(config.vocab_size, config.d_model, scale=False)
        self.position = additive_positions(config.positional, config.block_size, config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(ModernBlock(config) for _ in range(config.n_layers))
        self.final_norm = make_norm(config, config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.token_embedding.weight
        self._init_weights()

    def _init_weights(self) -> None:
        """N(0, 0.02) matrices, zero biases; the projections into the residual stream
        smaller by 1/sqrt(2 n_layers) (GPT-2, §2.3), as in TinyDecoder."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        std = min(0.02, 2.5 / self.config.d_model) if self.config.tie_embeddings else 0.02
        nn.init.normal_(self.token_embedding.weight, mean=0.0, std=std)
        residual_std = 0.02 / math.sqrt(2 * self.config.n_layers)
        for block in self.blocks:
            nn.init.normal_(block.attention.w_o.weight, mean=0.0, std=residual_std)
            nn.init.normal_(block.feed_forward.down.weight, mean=0.0, std=residual_std)

    def num_parameters(self) -> int:
        """Number of trainable values (a tied matrix counted once)."""
        return sum(p.numel() for p in self.parameters())

    def hidden_states(self, ids: torch.Tensor, need_weights: bool = False) -> list[torch.Tensor]:
        """The residual stream after the embedding and after each block.

        Returns:
            ``n_layers + 1`` tensors ``(B, T, C)``: index 0 is the embedding (plus added
            positions), index ``l`` the output of block ``l`` (before the final norm).
            ``transformers``' ``output_hidden_states`` ends with the final norm of the last
            one instead (:func:`course_utils.hf_weights.hidden_states_like_transformers`).
        """
        ids = self._check_ids(ids)
        x = self.dropout(self.position(self.token_embedding(ids)))  # (B, T) -> (B, T, C)
        states = [x]
        for block in self.blocks:
            x = block(x, need_weights=need_weights)  # (B, T, C)
            states.append(x)
        return states

    def forward(
        self, ids: torch.Tensor, targets: torch.Tensor | None = None, need_weights: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Logits ``(B, T, V)`` and, given ``(B, T)`` targets, the mean cross-entropy (nats).

        Raises:
            ValueError, TypeError: bad ids or targets, as :meth:`TinyDecoder.forward`.
        """
        need_weights = check_bool(need_weights, "need_weights")
        if targets is not None:
            targets = self._check_targets(targets, self._check_ids(ids))
        x = self.hidden_states(ids, need_weights)[-1]
        logits = self.lm_head(self.final_norm(x))  # (B, T, C) -> (B, T, V)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(
            logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE_INDEX
        )  # (B*T, V) against (B*T,)
        return logits, loss
