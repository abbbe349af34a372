"""Generating token by token, without and with a KV cache, with the same crop rule.

:func:`generate` runs the model on the whole context at every step; :func:`generate_with_cache`
runs the prompt once, then one token per step through
:func:`course_utils.kv_cache.forward_with_cache`. Both draw the next token with
:func:`course_utils.sampling.sample_next` and give, up to float rounding, the same logits, so
the two can be compared token by token.

**Past block_size: crop and recompute.** The model was trained on at most ``block_size``
positions, so the cache may not grow beyond that. When the next token would not fit, the
context is cropped to its last ``crop_to`` tokens and their cache is recomputed from
scratch (one forward pass over ``crop_to`` tokens), then generation continues one token at a
time. A *rolling* cache (drop the oldest key, keep the rest) would be cheaper but not exact:
in layers after the first, each cached key was computed while the dropped token was still
in the context, and with added positions every cached token would also have to change
position. Crop-and-recompute gives exactly the logits of the uncached model on the same
context, which :func:`generate` (same crop rule, no cache) lets us check.
``crop_to = block_size`` recomputes at every step once the window is full: the sliding
window of ``TinyDecoder.generate`` (and ``ModernDecoder.generate``, the same method).

Both take either decoder: :class:`course_utils.model.TinyDecoder` or
:class:`course_utils.modern_model.ModernDecoder` (whose cache holds its ``n_kv_heads`` heads,
rotated at their absolute positions, after QK-norm).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from course_utils.checks import check_bool, check_instance, check_int
from course_utils.kv_cache import DECODERS, Decoder, KVCache, _as_ids, forward_with_cache
from course_utils.sampling import sample_next

#: The keyword arguments of :func:`course_utils.sampling.sample_next`.
SAMPLING_OPTIONS = ("temperature", "top_k", "top_p", "greedy", "generator")


def _check_generate_args(
    model: Decoder, ids, max_new_tokens, crop_to, return_logits, sampling: dict
) -> tuple[torch.Tensor, int, int]:
    """Validate the arguments of both generators; return ``(ids, max_new_tokens, crop_to)``
    with ids converted and ``crop_to`` filled in (default block_size // 2)."""
    check_instance(model, "model", DECODERS, "e.g. TinyDecoder(config) or ModernDecoder(config)")
    ids = _as_ids(model, ids, "(B, T0)")
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=0)
    block_size = model.config.block_size
    crop_to = block_size // 2 if crop_to is None else check_int(crop_to, "crop_to")
    if not 1 <= crop_to <= block_size:
        raise ValueError(
            f"crop_to must be an int in [1, block_size={block_size}], got {crop_to!r}; it is "
            "how many recent tokens are kept when the context window is full"
        )
    check_bool(return_logits, "return_logits")
    unknown = [name for name in sampling if name not in SAMPLING_OPTIONS]
    if unknown:
        raise TypeError(
            f"unknown sampling option(s) {unknown}; the options are {', '.join(SAMPLING_OPTIONS)}"
            " (see course_utils.sampling.sample_next)"
        )
    return ids, max_new_tokens, crop_to


@contextmanager
def _generating(
    model: Decoder, ids, max_new_tokens, crop_to, return_logits, sampling: dict
) -> Iterator[tuple[torch.Tensor, int, int, int]]:
    """The setup both generators share: check the arguments, then run the ``with`` block
    in eval mode (the model's own mode comes back afterwards, even after an error).

    Yields:
        ``(ids, max_new_tokens, crop_to, start)``: the checked arguments (ids as an int64
        tensor on the model's device, ``crop_to`` with its default filled in), and where the
        first context starts in ``ids`` (the prompt's last ``block_size`` tokens).
    """
    checked = _check_generate_args(model, ids, max_new_tokens, crop_to, return_logits, sampling)
    ids, max_new_tokens, crop_to = checked
    was_training = model.training
    model.eval()
    try:
        yield ids, max_new_tokens, crop_to, max(0, ids.shape[1] - model.config.block_size)
    finally:
        model.train(was_training)


@torch.no_grad()
def generate(
    model: Decoder,
    ids: torch.Tensor,
    max_new_tokens: int,
    *,
    crop_to: int | None = None,
    return_logits: bool = False,
    **sampling,
):
    """Generate without a cache: run the model on the whole context at every step.

    The context starts at the prompt's last ``block_size`` tokens; when a new token would
    make it longer than ``block_size``, it is cropped to its last ``crop_to`` tokens (the
    same rule as :func:`generate_with_cache`, so the two can be compared token by token).

    Args:
        model: a :class:`TinyDecoder` or ModernDecoder; put in eval mode for the call.
        ids: ``(B, T0)`` prompt of token ids (any integer dtype; a numpy array or nested list
            of ints is converted, as by ``TinyDecoder.generate``); moved to the model's device.
        max_new_tokens: tokens to add, >= 0.
        crop_to: tokens kept when the window is full, in ``[1, block_size]``; default
            ``block_size // 2``. ``block_size`` gives ``TinyDecoder.generate``'s sliding window.
        return_logits: also return each step's logits.
        **sampling: ``temperature``, ``top_k``, ``top_p``, ``greedy``, ``generator`` for
            :func:`course_utils.sampling.sample_next`.

    Returns:
        ids ``(B, T0 + max_new_tokens)``; with ``return_logits`` also logits
        ``(B, max_new_tokens, V)`` float32.

    Raises:
        TypeError: a model that is neither a :class:`TinyDecoder` nor a ModernDecoder; a
            float ``max_new_tokens`` or ``crop_to``; float ids or text; a ``return_logits``
            that is not a bool; an unknown sampling option (the sampling options' own types:
            see ``sample_next``).
        ValueError: a prompt that is not ``(B, T0)`` with ``T0 >= 1`` or has ids outside
            ``[0, vocab_size)``; ``max_new_tokens < 0``; ``crop_to`` outside
            ``[1, block_size]``; bad sampling values (see ``sample_next``).
    """
    steps: list[torch.Tensor] = []  # each step's (B, V) logits
    with _generating(model, ids, max_new_tokens, crop_to, return_logits, sampling) as checked:
        ids, max_new_tokens, crop_to, start = checked
        block_size = model.config.block_size
        for _ in range(max_new_tokens):
            logits = model(ids[:, start:])[0][:, -1, :].float()  # (B, T, V) -> (B, V)
            steps.append(logits)
            ids = torch.cat([ids, sample_next(logits, **sampling)], dim=1)  # (B, T) -> (B, T+1)
            if ids.shape[1] - start > block_size:
                start = ids.shape[1] - crop_to
    return (ids, _stack(steps, ids, model)) if return_logits else ids


@torch.no_grad()
def generate_with_cache(
    model: Decoder,
    ids: torch.Tensor,
    max_new_tokens: int,
    *,
    crop_to: int | None = None,
    return_logits: bool = False,
    **sampling,
):
    """Generate with a KV cache: the prompt once, then one token per step.

    Same arguments, same crop rule and, up to float rounding, the same logits as
    :func:`generate`: when a new token does not fit in ``block_size``, the context is
    cropped to its last ``crop_to`` tokens and their cache is recomputed.

    Returns:
        ids ``(B, T0 + max_new_tokens)``; with ``return_logits`` also logits
        ``(B, max_new_tokens, V)`` float32.

    Raises:
        TypeError: a model that is neither a :class:`TinyDecoder` nor a ModernDecoder; a
            float ``max_new_tokens`` or ``crop_to``; float ids or text; a ``return_logits``
            that is not a bool; an unknown sampling option (the sampling options' own types:
            see ``sample_next``).
        ValueError: a prompt that is not ``(B, T0)`` with ``T0 >= 1`` or has ids outside
            ``[0, vocab_size)``; ``max_new_tokens < 0``; ``crop_to`` outside
            ``[1, block_size]``; bad sampling values (see ``sample_next``).
    """
    steps, cache = [], KVCache()  # each step's (B, V) logits; the keys and values so far
    with _generating(model, ids, max_new_tokens, crop_to, return_logits, sampling) as checked:
        ids, max_new_tokens, crop_to, start = checked
        block_size = model.config.block_size
        logits = forward_with_cache(model, ids[:, start:], cache)[:, -1, :].float()  # prefill
        for step in range(max_new_tokens):
            steps.append(logits)
            next_id = sample_next(logits, **sampling)  # (B, 1)
            ids = torch.cat([ids, next_id], dim=1)  # (B, T) -> (B, T + 1)
            if step == max_new_tokens - 1:
                break  # the last token needs no logits
            if len(cache) + 1 > block_size:  # the window is full: crop and recompute
                start, cache = ids.shape[1] - crop_to, KVCache()
                logits = forward_with_cache(model, ids[:, start:], cache)[:, -1, :].float()
            else:  # (B, 1) -> (B, 1, V) -> (B, V)
                logits = forward_with_cache(model, next_id, cache)[:, -1, :].float()
    return (ids, _stack(steps, ids, model)) if return_logits else ids


def _stack(steps: list[torch.Tensor], ids: torch.Tensor, model: Decoder) -> torch.Tensor:
    """Each step's ``(B, V)`` logits as one ``(B, n_steps, V)`` tensor (empty when no step)."""
    if not steps:
        return torch.empty(ids.shape[0], 0, model.config.vocab_size, device=ids.device)
    return torch.stack(steps, dim=1)  # n_steps x (B, V) -> (B, n_steps, V)
