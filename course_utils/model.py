"""TinyDecoder: a decoder-only Transformer language model (GPT-style, pre-LN)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.checks import as_id_tensor, as_number, check_bool, check_instance, check_int
from course_utils.config import ModelConfig
from course_utils.embedding import (
    TokenEmbedding,
    as_token_ids,
    check_token_ids,
    token_ids_trusted,
)
from course_utils.layers import DecoderBlock, LayerNorm
from course_utils.positional import additive_positions
from course_utils.sampling import _draw

#: Target id left out of the loss (F.cross_entropy's default ignore_index), e.g. padding.
IGNORE_INDEX = -100


def _check_plain_config(config: ModelConfig) -> None:
    """TypeError for a subclass of ModelConfig (ModernConfig): its switches (n_kv_heads,
    qk_norm, norm, ...) would be ignored by TinyDecoder without a word."""
    if type(config) is not ModelConfig:
        raise TypeError(
            f"TinyDecoder takes a plain ModelConfig, got {type(config).__name__}, whose "
            "switches (n_kv_heads, qk_norm, norm, feed_forward, ...) TinyDecoder does not "
            f"implement; build ModernDecoder(config) for a {type(config).__name__}"
        )


class TinyDecoder(nn.Module):
    """Token embedding -> positions -> n_layers pre-LN blocks -> final LayerNorm -> LM head.

    Positions are added to the embeddings (sinusoidal or learned), or, with
    ``positional="rope"``, applied as rotations of the queries and keys in every block.

    The LM head shares its matrix with the token embedding (weight tying, §3.4), so
    ``logits = h @ W_embed^T``. Weights start from N(0, 0.02) (the tied table from
    N(0, min(0.02, 2.5 / d_model))), so the initial logits are small and the loss at
    initialisation is near ln(vocab_size), but not every token is equally likely: the
    untrained model prefers to repeat the current token, because its final hidden vector is
    still mostly that token's own (tied) embedding, whose dot product with itself is the
    largest logit. Measured on the ``baby`` preset (RoPE, Shakespeare characters,
    V = 84; seeds 0-2, 32 windows of 64): the current character gets p = 10.2 / V on
    average, and the loss on uniformly random targets is ln V + 0.11 (ln V + 0.08 on the real
    next characters); with the paper's additive sinusoidal table, ln V + 0.03 (p = 2.4 / V).
    ``tests/test_model.py`` re-measures these numbers. The projections that write into the
    residual stream start smaller, by 1/sqrt(2 * n_layers), so the stream's variance does
    not grow with depth (GPT-2, §2.3).

    Args:
        config: a :class:`course_utils.config.ModelConfig`.

    Shapes:
        ids ``(B, T)`` int64 with ``T <= block_size`` -> logits ``(B, T, vocab_size)``.

    Raises:
        TypeError: ``config`` is not a ModelConfig (a dict: ``ModelConfig(**d)``), or is a
            ModernConfig (build :class:`~course_utils.modern_model.ModernDecoder`).
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = check_instance(
            config, "config", ModelConfig, "build it with ModelConfig(**settings)"
        )
        _check_plain_config(config)
        self.token_embedding = TokenEmbedding(
            config.vocab_size, config.d_model, scale=config.embedding_scale
        )
        # sinusoidal or learned: a table added to the embeddings; rope: nn.Identity (nothing is
        # added; attention rotates q and k)
        self.position = additive_positions(config.positional, config.block_size, config.d_model)
        rotary_max_len = config.block_size if config.positional == "rope" else None
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            DecoderBlock(
                config.d_model,
                config.n_heads,
                config.d_ff,
                config.dropout,
                bias=config.bias,
                rotary_max_len=rotary_max_len,
            )
            for _ in range(config.n_layers)
        )
        self.final_norm = LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.lm_head.weight = self.token_embedding.weight  # weight tying
        self.apply(self._init_weights)
        # With tied weights an untrained model's logit for repeating the current token is
        # about d_model * std of the table; capping it keeps the initial loss near ln V.
        nn.init.normal_(self.token_embedding.weight, mean=0.0, std=min(0.02, 2.5 / config.d_model))
        residual_std = 0.02 / math.sqrt(2 * config.n_layers)
        for block in self.blocks:
            nn.init.normal_(block.attention.w_o.weight, mean=0.0, std=residual_std)
            nn.init.normal_(block.feed_forward.down.weight, mean=0.0, std=residual_std)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)

    def num_parameters(self) -> int:
        """Number of trainable values (the tied matrix counted once)."""
        return sum(p.numel() for p in self.parameters())

    def forward(
        self,
        ids: torch.Tensor,
        targets: torch.Tensor | None = None,
        need_weights: bool = False,
        *,
        key_padding_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Compute next-token logits and, given targets, the mean cross-entropy loss.

        Args:
            ids: ``(B, T)`` token ids, ``T <= block_size``; any integer dtype, a numpy
                array or a nested list (converted to int64).
            targets: optional ``(B, T)`` integer ids, the next token at each position;
                ``-100`` marks a position left out of the loss (``F.cross_entropy``'s
                ``ignore_index``, e.g. padding).
            need_weights: use the explicit attention path and keep each block's weights
                in ``block.attention.attention_weights`` ``(B, h, T, T)``.
            key_padding_mask: optional bool ``(B, T)``, True = a real token (keyword only);
                with right padding the causal mask already hides the padding from every
                real position, so it only matters for other layouts.

        Returns:
            ``(logits, loss)``: logits ``(B, T, V)`` (unnormalised scores, not
            probabilities); loss is a scalar in nats, or None without targets.

        Raises:
            ValueError: ids not 2-D or empty, ``T > block_size``, ids outside ``[0, V)``,
                targets of a different shape, outside ``[0, V)`` (other than -100), or all -100.
            TypeError: non-integer ids or targets (floats, bools); a non-bool need_weights.
        """
        need_weights = check_bool(need_weights, "need_weights")
        ids = self._check_ids(ids)
        if targets is not None:
            targets = self._check_targets(targets, ids)
        x = self.dropout(self.position(self.token_embedding(ids)))  # (B, T) -> (B, T, C)
        for block in self.blocks:
            x = block(x, need_weights=need_weights, key_padding_mask=key_padding_mask)
        logits = self.lm_head(self.final_norm(x))  # (B, T, C) -> (B, T, V)
        if targets is None:
            return logits, None
        # -100 (F.cross_entropy's ignore_index) marks positions left out of the mean
        loss = F.cross_entropy(
            logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE_INDEX
        )  # mean over the B*T tokens that are not ignored
        return logits, loss

    def _check_ids(self, ids: object) -> torch.Tensor:
        """ids as a checked (B, T) int64 tensor (any integer dtype, numpy or list accepted)."""
        ids = as_token_ids(ids, self.config.vocab_size, "ids")
        if ids.ndim != 2:
            fix = "add a batch axis with ids[None]" if ids.ndim == 1 else "pass one (B, T) batch"
            raise ValueError(f"ids must be a (B, T) tensor, got {tuple(ids.shape)}; {fix}")
        if ids.numel() == 0:
            raise ValueError(
                f"ids is empty, shape {tuple(ids.shape)}: an empty batch has no loss (the mean "
                "of nothing is NaN); pass at least one sequence of at least one token"
            )
        if ids.shape[1] > self.config.block_size:
            raise ValueError(
                f"input length T={ids.shape[1]} exceeds block_size={self.config.block_size}; "
                f"keep only the last {self.config.block_size} tokens: ids[:, -block_size:]"
            )
        return ids

    def _check_targets(self, targets: object, ids: torch.Tensor) -> torch.Tensor:
        """targets as int64 (B, T) in [0, V) or -100 (ignored); at least one not ignored."""
        targets = as_id_tensor(targets, "targets")
        if targets.shape != ids.shape:
            raise ValueError(
                f"targets must have the shape of ids {tuple(ids.shape)}, got "
                f"{tuple(targets.shape)}; targets are ids shifted by one token (get_batch)"
            )
        if token_ids_trusted():  # train() checked its data once: no read-back per step
            return targets
        kept = targets != IGNORE_INDEX
        if not kept.any():
            raise ValueError(
                f"every target is {IGNORE_INDEX} (ignore_index, padding): the loss would be the "
                "mean of nothing (NaN); pass at least one real target"
            )
        check_token_ids(targets[kept], self.config.vocab_size, "targets")
        return targets.to(ids.device)

    def _check_sampling(self, temperature: object, top_k: object) -> tuple[float, int | None]:
        """temperature as a float > 0 (numpy and 0-D tensors too); top_k in [1, V] or None."""
        temperature = as_number(temperature, "temperature")
        if not 0 < temperature < math.inf:  # also catches NaN
            raise ValueError(
                f"temperature must be > 0, got {temperature}; temperature 0 is the limit of "
                "always taking the most likely token: pass greedy=True for that"
            )
        if top_k is not None:
            vocab_size = self.config.vocab_size
            top_k = check_int(top_k, "top_k")
            if not 1 <= top_k <= vocab_size:
                raise ValueError(
                    f"top_k must be in [1, vocab_size={vocab_size}], got {top_k}; "
                    "None samples from every token"
                )
        return temperature, top_k

    def _check_prompt(self, ids: object) -> torch.Tensor:
        """The prompt as a (B, T0) int64 tensor on the model's device, B, T0 >= 1."""
        ids = as_token_ids(ids, self.config.vocab_size, "ids")
        if ids.ndim != 2 or ids.shape[1] == 0 or ids.shape[0] == 0:
            raise ValueError(
                f"the prompt must be (B, T0) token ids with at least one token per sequence, "
                f"got {tuple(ids.shape)}; add a batch axis with ids[None]"
            )
        return ids.to(self.lm_head.weight.device)

    @torch.no_grad()
    def generate(
        self,
        ids: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        greedy: bool = False,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Append ``max_new_tokens`` tokens, one at a time, feeding each back in.

        Args:
            ids: ``(B, T0)`` int64 prompt.
            max_new_tokens: number of tokens to add.
            temperature: divide logits by this before softmax; > 0 (lower = safer picks).
            top_k: sample only among the k most likely tokens, ``1 <= k <= vocab_size``.
            greedy: always take the most likely token (ignores temperature and top_k).
            generator: random generator for sampling (on the model's device).

        Returns:
            ``(B, T0 + max_new_tokens)`` int64. Only the last ``block_size`` tokens are
            used as context at each step.

        Raises:
            ValueError: non-positive or infinite temperature (not checked with greedy=True,
                which ignores it), top_k outside ``[1, vocab_size]``, negative
                max_new_tokens, bad ids, a generator on another device than the model, or
                logits with NaN or inf (weights that diverged).
            TypeError: a float max_new_tokens or top_k, a non-bool greedy, a temperature that
                is not a number, a generator that is not a torch.Generator, float ids.
        """
        ids, max_new_tokens, temperature, top_k, greedy = self._check_generate(
            ids, max_new_tokens, temperature, top_k, greedy, generator
        )
        was_training = self.training
        self.eval()
        for _ in range(max_new_tokens):
            context = ids[:, -self.config.block_size :]  # crop to the context length
            logits, _ = self(context)
            logits = logits[:, -1, :].float()  # (B, V): scores for the next token only
            if greedy:
                next_id = logits.argmax(dim=-1, keepdim=True)
            else:
                logits = logits / temperature
                if top_k is not None:
                    kth_largest = torch.topk(logits, top_k, dim=-1).values[:, -1:]
                    logits = logits.masked_fill(logits < kth_largest, float("-inf"))
                probabilities = torch.softmax(logits, dim=-1)
                next_id = _draw(probabilities, generator)
            ids = torch.cat([ids, next_id], dim=1)  # (B, T) -> (B, T + 1)
        self.train(was_training)
        return ids

    def _check_generate(self, ids, max_new_tokens, temperature, top_k, greedy, generator):
        """:meth:`generate`'s arguments checked (see its Raises), normalised."""
        max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=0)
        greedy = check_bool(greedy, "greedy")
        if not greedy:  # greedy ignores temperature and top_k
            temperature, top_k = self._check_sampling(temperature, top_k)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(
                f"generator must be a torch.Generator or None, got {type(generator).__name__}; "
                "e.g. torch.Generator().manual_seed(0)"
            )
        ids = self._check_prompt(ids)
        if generator is not None and generator.device.type != ids.device.type:
            raise ValueError(
                f"generator is on {generator.device} but the model on {ids.device}; use "
                f"torch.Generator(device={str(ids.device)!r}).manual_seed(seed)"
            )
        return ids, max_new_tokens, temperature, top_k, greedy
