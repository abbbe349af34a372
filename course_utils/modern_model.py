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
ANGLE_DTYPES = ("float64", "float32")
FEED_FORWARDS = ("swiglu", "gelu", "gelu_tanh")


@dataclass
class ModernConfig(ModelConfig):
    """:class:`~course_utils.config.ModelConfig` plus the switches of today's decoders.

    Attributes (besides ModelConfig's; ``positional`` defaults to ``"rope"``, ``bias`` and
    ``embedding_scale`` to False here):
        n_kv_heads: key/value heads, dividing ``n_heads`` (None: ``n_heads``, plain MHA).
        head_dim: d_k, when it is not ``d_model // n_heads`` (Qwen3 sets it; None: derived).
        norm: ``"rmsnorm"`` (Llama, Qwen3) or ``"layernorm"`` (GPT-2).
        feed_forward: ``"swiglu"`` (Llama, Qwen3), ``"gelu_tanh"`` (GPT-2) or ``"gelu"``.
            With ``d_ff=None``, SwiGLU gets ``swiglu_hidden_width(4 * d_model)``.
        bias: biases in the attention projections, and in the MLP unless ``mlp_bias`` says
            otherwise (GPT-2: True; Llama, Qwen3: False; ``attention_bias`` in transformers).
        mlp_bias: biases in the feed-forward projections (None: as ``bias``; Llama's
            ``mlp_bias``). GPT-2's MLP (``feed_forward="gelu"`` or ``"gelu_tanh"``) always has them.
        qk_norm: RMSNorm on each query and key head (Qwen3).
        tie_embeddings: the LM head shares the embedding matrix (GPT-2) or has its own.
        norm_eps: eps of every norm (Llama, Qwen3: 1e-6; GPT-2: 1e-5).
        rope_base: RoPE's base (10000; Qwen3 uses 1000000).
        rope_angle_dtype: ``"float64"`` (RoPE's angles exact, then rounded once) or
            ``"float32"`` (``transformers``' arithmetic, used by models converted from it:
            :func:`course_utils.rotary.rotary_angles`).
        scale_scores: divide the scores by ``sqrt(d_k)`` (GPT-2's ``scale_attn_weights``).
        scale_by_layer: also divide the scores of block ``l`` (from 0) by ``l + 1`` (GPT-2's
            ``scale_attn_by_inverse_layer_idx``).
        padding_idx: a token id whose embedding row receives no gradient from the embedding
            lookup, as ``nn.Embedding(padding_idx=...)`` in Llama and Qwen3 (None: every row
            trains). The LM head, when tied, still trains it, as in transformers.

    Raises:
        TypeError, ValueError: as ModelConfig; also an unknown ``norm``, ``feed_forward`` or
            ``rope_angle_dtype``, ``n_heads`` not a multiple of ``n_kv_heads``, non-bool
            flags, ``norm_eps`` or ``rope_base`` out of range, ``mlp_bias=False`` with GPT-2's
            MLP, ``padding_idx`` outside ``[0, vocab_size)``, an odd ``head_dim`` with RoPE.
    """

    positional: str = "rope"
    n_kv_heads: int | None = None
    head_dim: int | None = None
    norm: str = "rmsnorm"
    feed_forward: str = "swiglu"
    bias: bool = False
    embedding_scale: bool = False
    mlp_bias: bool | None = None
    qk_norm: bool = False
    tie_embeddings: bool = False
    norm_eps: float = 1e-6
    rope_base: float = 10000.0
    rope_angle_dtype: str = "float64"
    scale_scores: bool = True
    scale_by_layer: bool = False
    padding_idx: int | None = None

    def __post_init__(self) -> None:
        check_choice(self.feed_forward, "feed_forward", FEED_FORWARDS)
        check_choice(self.norm, "norm", NORMS)
        check_choice(self.rope_angle_dtype, "rope_angle_dtype", ANGLE_DTYPES)
        if self.d_ff is None and self.feed_forward == "swiglu":
            self.d_ff = swiglu_hidden_width(4 * check_int(self.d_model, "d_model", minimum=1))
        if self.head_dim is not None:
            self.head_dim = check_int(self.head_dim, "head_dim", minimum=1, why="None: C / h")
        super().__post_init__()
        self.n_kv_heads = self._check_n_kv_heads()
        self.mlp_bias = self.bias if self.mlp_bias is None else self.mlp_bias
        for name in ("bias", "mlp_bias", "qk_norm", "tie_embeddings"):
            setattr(self, name, check_bool(getattr(self, name), name))
        for name in ("scale_scores", "scale_by_layer"):
            setattr(self, name, check_bool(getattr(self, name), name))
        self._check_mlp_bias()
        self.norm_eps = check_float(self.norm_eps, "norm_eps", 0.0, 1.0, low_open=True)
        self.rope_base = check_float(
            self.rope_base, "rope_base", 1.0, math.inf, low_open=True, high_open=True
        )
        if self.padding_idx is not None:
            why = f"a token id in [0, vocab_size={self.vocab_size}); None: no padding row"
            self.padding_idx = check_int(
                self.padding_idx, "padding_idx", 0, self.vocab_size - 1, why=why
            )

    def _check_mlp_bias(self) -> None:
        """ValueError for ``mlp_bias=False`` with GPT-2's MLP, which always has biases."""
        if self.feed_forward != "swiglu" and not self.mlp_bias:
            raise ValueError(
                f"feed_forward={self.feed_forward!r} (GPT-2's MLP, the course's FeedForward) "
                f"always has biases, got mlp_bias=False (bias={self.bias}); pass mlp_bias=True, "
                "or feed_forward='swiglu' for an MLP without biases"
            )

    def _check_heads_divide_d_model(self) -> None:
        """With ``head_dim`` given, n_heads need not divide d_model (Qwen3: 16 heads of 128
        over 1024 channels is fine, and so is 5 heads of 8 over 24)."""
        if self.head_dim is None:
            super()._check_heads_divide_d_model()

    def _check_positional_fits(self) -> None:
        """As ModelConfig, with the arithmetic of ``head_dim`` when it is given."""
        if self.head_dim is not None and self.positional == "rope" and self.head_dim % 2:
            raise ValueError(
                f"rope rotates channel pairs: head_dim (d_k) must be even, got head_dim="
                f"{self.head_dim}; pass an even head_dim (or None: d_model / n_heads)"
            )
        super()._check_positional_fits()

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


def attention_scale(config: ModernConfig, layer: int) -> float:
    """The factor on the scores of block ``layer`` (from 0): ``1/sqrt(d_k)`` (Vaswani et al.
    2017, Eq. 1), or 1 without ``scale_scores``; divided by ``layer + 1`` with
    ``scale_by_layer`` (GPT-2's ``scale_attn_by_inverse_layer_idx``)."""
    scale = 1 / math.sqrt(config.d_k) if config.scale_scores else 1.0
    return scale / (layer + 1) if config.scale_by_layer else scale


class ModernBlock(nn.Module):
    """Pre-norm block: ``x + attention(ln_1(x))``, then ``x + feed_forward(ln_2(x))``.

    Same attribute names as :class:`course_utils.layers.DecoderBlock`; ``ln_1`` and ``ln_2``
    are RMSNorm or LayerNorm, ``attention`` a :class:`GroupedQueryAttention`, ``feed_forward``
    a :class:`SwiGLUFeedForward` or the course's :class:`FeedForward`.

    Shapes: ``(B, T, C)`` -> ``(B, T, C)``.
    """

    def __init__(self, config: ModernConfig, layer: int = 0):
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
            scale=attention_scale(config, layer),
            rope_angle_dtype=getattr(torch, config.rope_angle_dtype),
        )
        self.ln_2 = make_norm(config, config.d_model)
        if config.feed_forward == "swiglu":
            self.feed_forward = SwiGLUFeedForward(
                config.d_model, config.d_ff, bias=config.mlp_bias, dropout=config.dropout
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
        TypeError: ``config`` is not a ModernConfig (a plain ModelConfig included: it is
            :class:`~course_utils.model.TinyDecoder`'s).
    """

    # The same input checks as TinyDecoder (ids (B, T) in [0, V), T <= block_size; targets).
    _check_ids = TinyDecoder._check_ids
    _check_targets = TinyDecoder._check_targets
    # The same generate(ids, max_new_tokens, temperature, top_k, greedy, generator) as
    # TinyDecoder, with its checks: one token at a time, the context cropped to block_size.
    # With a KV cache: course_utils.generation.generate_with_cache(model, ...).
    generate = TinyDecoder.generate
    _check_generate = TinyDecoder._check_generate
    _check_sampling = TinyDecoder._check_sampling
    _check_prompt = TinyDecoder._check_prompt

    def __init__(self, config: ModernConfig):
        super().__init__()
        fix = "build it with ModernConfig(**settings); a ModelConfig is TinyDecoder's"
        self.config = check_instance(config, "config", ModernConfig, fix)
        self.token_embedding = TokenEmbedding(
            config.vocab_size, config.d_model, scale=config.embedding_scale
        )
        self.position = additive_positions(config.positional, config.block_size, config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(ModernBlock(config, i) for i in range(config.n_layers))
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
        if self.config.padding_idx is not None:  # as nn.Embedding: the padding row starts at 0
            nn.init.zeros_(self.token_embedding.weight[self.config.padding_idx])
        residual_std = 0.02 / math.sqrt(2 * self.config.n_layers)
        for block in self.blocks:
            nn.init.normal_(block.attention.w_o.weight, mean=0.0, std=residual_std)
            nn.init.normal_(block.feed_forward.down.weight, mean=0.0, std=residual_std)

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        """Token vectors ``(B, T) -> (B, T, C)``; with ``padding_idx``, that row gets no
        gradient from the lookup (``nn.Embedding(padding_idx=...)``, as in Llama and Qwen3)."""
        if self.config.padding_idx is None:
            return self.token_embedding(ids)
        weight = self.token_embedding.weight
        return F.embedding(ids, weight, padding_idx=self.config.padding_idx)  # (B, T, C)

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
        x = self.dropout(self.position(self._embed(ids)))  # (B, T) -> (B, T, C)
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
