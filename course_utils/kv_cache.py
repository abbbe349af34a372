"""The KV cache: compute each token's keys and values once, then reuse them.

Without a cache, every new token runs the model on the whole context again, although the
keys and values of the earlier tokens have not changed (causal attention: a token never
sees later ones). A KV cache keeps, for every layer, the keys and values of the tokens seen
so far, shape ``(B, n_kv_heads, T_cached, d_k)``; each step feeds only the newest token, appends its
key and value, and attends over the cache. Per step the work drops from a pass over T
tokens to a pass over one token (plus one dot product with each of the T cached keys).

Why it is exact: causal masking (Vaswani et al. 2017, §3.2.3) means a token's keys and values
depend only on the tokens up to it. Caching them is the standard inference technique of
decoder-only models (see e.g. Pope et al. 2022, "Efficiently Scaling Transformer Inference").

The cached forward below reuses the model's own modules and weights
(:class:`course_utils.model.TinyDecoder`'s or
:class:`~course_utils.modern_model.ModernDecoder`'s), step by step as its ``forward`` does;
nothing is copied or retrained.

**Grouped-query attention.** A :class:`~course_utils.modern_model.ModernDecoder` whose
attention has ``n_kv_heads < n_heads`` (Ainslie et al. 2023, §2.2) caches only its
``n_kv_heads`` key and value heads: the cache holds ``2 * n_layers * B * T * n_kv_heads *
d_k`` numbers (:func:`cache_bytes`), ``n_heads / n_kv_heads`` times fewer than multi-head
attention; the query heads of a group share their key head at attention time. For the
course's TinyDecoder ``n_kv_heads = n_heads``.

**Positions.** The newest token's position is the cache length: RoPE rotates its query and
key by that position (``RotaryEmbedding(x, offset=...)``), and added sinusoidal or learned
positions use that row of the table. Forgetting the offset gives every new token position 0.

**Past block_size.** The model was trained on at most ``block_size`` positions, so the cache
may not grow beyond that: :mod:`course_utils.generation` crops the context and recomputes
its cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from course_utils.attention import merge_heads, split_heads
from course_utils.checks import (
    as_id_tensor,
    check_float_dtype,
    check_instance,
    check_int,
    check_tensor,
)
from course_utils.config import ModelConfig
from course_utils.embedding import check_token_ids
from course_utils.gqa import GroupedQueryAttention
from course_utils.layers import DecoderBlock
from course_utils.model import TinyDecoder
from course_utils.modern_model import ModernBlock, ModernConfig, ModernDecoder

#: The models the cache runs: the course's decoder and today's decoder (grouped-query heads).
DECODERS = (TinyDecoder, ModernDecoder)
#: Either of them, for type hints.
Decoder = TinyDecoder | ModernDecoder


@dataclass
class KVCache:
    """Per layer, the keys and values of every token seen so far.

    Attributes:
        keys: one tensor per layer, ``(B, h, T_cached, d_k)`` (``h`` = ``n_kv_heads`` with
            grouped-query attention).
        values: one tensor per layer, ``(B, h, T_cached, d_k)``.

    Raises:
        TypeError: ``keys`` or ``values`` is not a list of tensors.
        ValueError: they do not hold one tensor per layer each.
    """

    keys: list[torch.Tensor] = field(default_factory=list)
    values: list[torch.Tensor] = field(default_factory=list)

    def __post_init__(self):
        """Check ``keys`` and ``values`` (usually both empty: ``KVCache()``)."""
        for name in ("keys", "values"):
            tensors = check_instance(getattr(self, name), name, list, "start with KVCache()")
            for i, tensor in enumerate(tensors):
                check_tensor(tensor, f"{name}[{i}]", "(B, h, T_cached, d_k)")
        self._check_one_per_layer()

    def _check_one_per_layer(self) -> None:
        """ValueError unless ``keys`` and ``values`` hold as many layers each."""
        if len(self.keys) != len(self.values):
            raise ValueError(
                f"keys and values must hold one tensor per layer each, got {len(self.keys)} "
                f"and {len(self.values)}; start with KVCache()"
            )

    def _check_still_paired(self) -> None:
        """ValueError when keys and values no longer match layer by layer (one list was
        reset or edited alone): the other would hold stale tokens."""
        self._check_one_per_layer()
        for layer, (k, v) in enumerate(zip(self.keys, self.values)):
            if k.shape[2] != v.shape[2]:
                raise ValueError(
                    f"layer {layer} caches {k.shape[2]} keys but {v.shape[2]} values: keys "
                    "and values were changed apart; reset both (or start a new KVCache())"
                )

    def __len__(self) -> int:
        """T_cached: the number of tokens whose keys and values are stored."""
        return self.keys[0].shape[2] if self.keys else 0

    def append(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the new tokens' keys and values of ``layer``; return all of them.

        Args:
            layer: block index; layers are filled in order 0, 1, ... at every step.
            k, v: ``(B, h, T_new, d_k)``, already projected (and, with RoPE, rotated).

        Returns:
            ``(keys, values)`` of that layer, ``(B, h, T_cached + T_new, d_k)`` each.

        Raises:
            TypeError: ``layer`` is not an int, ``k`` or ``v`` is not a tensor.
            ValueError: ``layer`` skips a layer, the shapes do not match the cache, ``k``
                and ``v`` differ from each other or from the cache in dtype or device, or
                the cache's keys and values no longer pair up (one list reset alone).
        """
        layer = check_int(layer, "layer", minimum=0, why="the block index")
        self._check_still_paired()
        self._check_new(layer, check_tensor(k, "k"), check_tensor(v, "v"))
        self._check_in_order(layer)
        if layer == len(self.keys):  # the first step of this layer
            self.keys.append(k)
            self.values.append(v)
        else:
            cached = self.keys[layer]
            # Append along the time axis: (B, h, T_cached, d_k) -> (B, h, T_cached + T_new, d_k)
            self.keys[layer] = torch.cat([cached, k], dim=2)
            self.values[layer] = torch.cat([self.values[layer], v], dim=2)
        return self.keys[layer], self.values[layer]

    def _check_in_order(self, layer: int) -> None:
        """ValueError when ``layer`` skips a layer: layers are filled 0, 1, ... in order."""
        if layer > len(self.keys):
            raise ValueError(
                f"layer {layer} out of order: the cache holds {len(self.keys)} layers; "
                "fill layers 0, 1, ... in order"
            )

    def _check_new(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """ValueError unless ``k`` and ``v`` are alike ``(B, h, T_new, d_k)`` tensors that
        fit the cache of ``layer`` (same B, h, d_k, dtype and device)."""
        if k.ndim != 4 or k.shape != v.shape:
            raise ValueError(
                f"k and v must both be (B, h, T_new, d_k), got {tuple(k.shape)} and "
                f"{tuple(v.shape)}; split the heads first"
            )
        if (k.dtype, k.device) != (v.dtype, v.device):
            raise ValueError(
                f"k and v must have one dtype and device, got k {k.dtype} on {k.device} and "
                f"v {v.dtype} on {v.device}"
            )
        if not layer < len(self.keys):
            return
        cached = self.keys[layer]
        if cached.shape[:2] != k.shape[:2] or cached.shape[3] != k.shape[3]:
            raise ValueError(
                f"layer {layer} caches (B, h, T, d_k) = {tuple(cached.shape)}; the new "
                f"keys {tuple(k.shape)} differ in B, h or d_k"
            )
        if (cached.dtype, cached.device) != (k.dtype, k.device):
            raise ValueError(
                f"layer {layer} caches {cached.dtype} on {cached.device}, the new keys are "
                f"{k.dtype} on {k.device}; run every step with the same model (or start a new "
                "KVCache())"
            )

    def nbytes(self) -> int:
        """Bytes held by all cached tensors, measured from the tensors themselves; equal to
        ``2 * n_layers * B * T * n_kv_heads * d_k * bytes`` (:func:`cache_bytes`)."""
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)


def cache_bytes(config, batch: int, length: int, dtype: torch.dtype = torch.float32) -> int:
    """``2 * n_layers * B * T * n_kv_heads * d_k * bytes``: what a full cache should hold.

    Keys and values (2), for every layer, batch row, cached token, key/value head and
    channel. ``n_kv_heads`` is the config's (a ModelConfig without it: ``n_heads``).

    Args:
        config: a :class:`~course_utils.config.ModelConfig` or ModernConfig.
        batch, length: B and T_cached, ints >= 0.
        dtype: the cache's float dtype (float32: 4 bytes).

    Raises:
        TypeError: ``config`` that is not a ModelConfig or ModernConfig (a model: pass its
            ``.config``), a size that is not an int, a dtype that is not a float
            ``torch.dtype``.
    """
    _check_config(config)
    batch = check_int(batch, "batch", minimum=0)
    length = check_int(length, "length", minimum=0)
    check_float_dtype(dtype)
    n_kv_heads = getattr(config, "n_kv_heads", None) or config.n_heads
    bytes_per_number = torch.empty(0, dtype=dtype).element_size()
    return 2 * config.n_layers * batch * length * n_kv_heads * config.d_k * bytes_per_number


def _check_config(config: object) -> None:
    """TypeError unless ``config`` is a ModelConfig or ModernConfig; a model passed instead
    is named, with its ``.config`` as the fix."""
    fix = "e.g. ModelConfig(...), ModernConfig(...) or load_baby()[0].config"
    if isinstance(getattr(config, "config", None), ModelConfig):
        fix = "that is a model, not its config: pass cache_bytes(model.config, batch, length)"
    check_instance(config, "config", (ModelConfig, ModernConfig), fix)


def _add_positions(model: Decoder, x: torch.Tensor, start: int) -> torch.Tensor:
    """Add rows ``start .. start + T - 1`` of the model's position table (nothing for RoPE)."""
    kind, end = model.config.positional, start + x.shape[1]
    if kind == "sinusoidal":
        return x + model.position.pe[start:end].to(x.dtype)  # (T, C) broadcasts over B
    if kind == "learned":
        return x + model.position.weight[start:end]
    return x  # rope: positions enter as rotations of q and k


def _attention_step(block: DecoderBlock, x: torch.Tensor, cache: KVCache, layer: int, start: int):
    """Causal self-attention of the new tokens over the cached ones plus themselves.

    ``x``: ``(B, T_new, C)`` after ``ln_1``; the new tokens sit at positions
    ``start .. start + T_new - 1``. Returns ``(B, T_new, C)``.
    """
    attention = block.attention
    if isinstance(attention, GroupedQueryAttention):
        return _grouped_attention_step(attention, x, cache, layer, start)
    q = split_heads(attention.w_q(x), attention.n_heads)  # (B, T_new, C) -> (B, h, T_new, d_k)
    k = split_heads(attention.w_k(x), attention.n_heads)  # (B, T_new, C) -> (B, h, T_new, d_k)
    v = split_heads(attention.w_v(x), attention.n_heads)  # (B, T_new, C) -> (B, h, T_new, d_k)
    if attention.rotary is not None:  # rotate by the absolute positions, not 0 .. T_new - 1
        q, k = attention.rotary(q, offset=start), attention.rotary(k, offset=start)
    k, v = cache.append(layer, k, v)  # (B, h, start + T_new, d_k): the whole context so far
    new = q.shape[2]
    if new == 1:  # one query may see every cached key: no mask needed
        out = F.scaled_dot_product_attention(q, k, v)
    elif start == 0:  # the prompt: the usual causal mask
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:  # query i sits at position start + i and sees keys 0 .. start + i
        # (is_causal=True would align the triangle to the top left, which is wrong here)
        mask = torch.ones(new, start + new, dtype=torch.bool, device=x.device).tril(start)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return attention.w_o(merge_heads(out))  # (B, h, T_new, d_k) -> (B, T_new, C)


def _grouped_attention_step(
    attention: GroupedQueryAttention, x: torch.Tensor, cache: KVCache, layer: int, start: int
) -> torch.Tensor:
    """:func:`_attention_step` for grouped-query attention: the cache stores the
    ``n_kv_heads`` key/value heads; the kernel shares each one with its group of queries."""
    q, k, v = attention.project(x, offset=start)  # (B, h, T_new, d_k), 2 x (B, g, T_new, d_k)
    k, v = cache.append(layer, k, v)  # (B, g, start + T_new, d_k): only g heads are stored
    new = q.shape[2]
    mask = None
    if new > 1:  # query i sits at position start + i and sees keys 0 .. start + i
        mask = torch.ones(new, start + new, dtype=torch.bool, device=x.device).tril(start)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    return attention.w_o(merge_heads(out))  # (B, h, T_new, d_k) -> (B, T_new, C)


@torch.no_grad()
def forward_with_cache(model: Decoder, ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Run the new tokens ``ids`` through ``model``, reading and extending ``cache``.

    Equal to ``model(context)[0][:, -T_new:]`` where ``context`` is every token the cache
    has seen followed by ``ids``, but each earlier token's keys and values come from the
    cache instead of being recomputed. Call with the whole prompt first (empty cache), then
    with one token at a time. The model must be in eval mode (no dropout).

    Args:
        model: a :class:`TinyDecoder` (pre-LN blocks) or a
            :class:`~course_utils.modern_model.ModernDecoder` (its cache holds n_kv_heads heads).
        ids: ``(B, T_new)`` token ids, the tokens after the cached ones (any integer dtype;
            a numpy array or nested list too); moved to the model's device.
        cache: a :class:`KVCache`, extended in place by ``T_new`` in every layer.

    Returns:
        logits ``(B, T_new, V)``.

    Raises:
        ValueError: ``len(cache) + T_new > block_size`` (crop first), ids of another shape or
            outside ``[0, vocab_size)``, a batch size that differs from the cache's, or a
            model in training mode.
        TypeError: a model that is neither a :class:`TinyDecoder` nor a ModernDecoder, or whose
            blocks are not pre-LN :class:`DecoderBlock` or ModernBlock, a cache that is not a
            :class:`KVCache`, float ids or text.
    """
    ids = _check_cached_step(model, ids, cache)
    start = len(cache)
    x = _add_positions(model, model.token_embedding(ids), start)  # (B, T_new) -> (B, T_new, C)
    for layer, block in enumerate(model.blocks):
        x = x + _attention_step(block, block.ln_1(x), cache, layer, start)
        x = x + block.feed_forward(block.ln_2(x))  # (B, T_new, C)
    return model.lm_head(model.final_norm(x))  # (B, T_new, C) -> (B, T_new, V)


def _check_cached_step(model: object, ids: object, cache: object) -> torch.Tensor:
    """:func:`forward_with_cache`'s arguments checked (see its Raises); ``ids`` as a tensor."""
    check_instance(model, "model", DECODERS, "e.g. TinyDecoder(config) or ModernDecoder(config)")
    check_instance(cache, "cache", KVCache, "start with cache = KVCache(), then pass it back")
    if model.training:
        raise ValueError("call model.eval() first: dropout would make the cache inconsistent")
    ids = _as_ids(model, ids, "(B, T_new)")
    start, block_size = len(cache), model.config.block_size
    if start + ids.shape[1] > block_size:
        raise ValueError(
            f"{start} cached + {ids.shape[1]} new tokens exceed block_size={block_size}; "
            "crop the context and rebuild the cache (see generate_with_cache)"
        )
    if cache.keys and cache.keys[0].shape[0] != ids.shape[0]:
        raise ValueError(f"the cache holds B={cache.keys[0].shape[0]}, ids have B={ids.shape[0]}")
    for block in model.blocks:
        if type(block) not in (DecoderBlock, ModernBlock):
            raise TypeError(f"expected pre-LN DecoderBlock layers, got {type(block).__name__}")
    return ids


def _as_ids(model: Decoder, ids: object, axes: str) -> torch.Tensor:
    """``ids`` as a checked int64 ``(B, T)`` tensor on the model's device, B, T >= 1 (lists
    and numpy arrays are converted, as ``TinyDecoder.generate`` does)."""
    ids = as_id_tensor(ids, "ids")
    if ids.ndim != 2 or ids.shape[0] == 0 or ids.shape[1] == 0:
        fix = "; add a batch axis with ids[None]" if ids.ndim == 1 else ""
        raise ValueError(
            f"ids must be {axes} token ids with at least one token per row, got shape "
            f"{tuple(ids.shape)}{fix}"
        )
    check_token_ids(ids, model.config.vocab_size, "ids")
    return ids.to(model.lm_head.weight.device)
