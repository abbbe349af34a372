"""Time per generated token, with and without the KV cache (notebook 13's plot).

One step without the cache is a forward pass over the whole context (its cost grows with the
context length T); with the cache it feeds one token and attends over the T cached keys. This
module times both on the real model, so the difference is measured rather than asserted, and
measures how much of a forward pass the attention itself (the T x T part) takes: by counting
its floating-point operations, and by timing it inside the real forward with torch.profiler.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from course_utils.checks import check_bool, check_instance, check_int
from course_utils.kv_cache import KVCache, forward_with_cache
from course_utils.model import TinyDecoder


@torch.no_grad()
def time_per_token(
    model: TinyDecoder, context_lengths: list[int], use_cache: bool, repeats: int = 3
) -> list[float]:
    """Seconds to produce the logits of one new token, at each context length, median of
    ``repeats`` (wall clock; noisy on a shared machine).

    Without the cache, one step is a forward pass over the whole context of length T. With
    it, the cache first holds ``T - 1`` tokens (not timed) and one step feeds one token.
    Token ids are random: the time does not depend on the weights' values or the text.

    Args:
        model: a :class:`TinyDecoder` in eval mode, on its device (CUDA is synchronised).
        context_lengths: a list (or tuple, range) of ints, each T in
            ``[1, block_size - repeats + 1]``.
        use_cache: time :func:`forward_with_cache` instead of ``model(ids)``.
        repeats: steps timed per length (with the cache: consecutive steps T, T+1, ...).

    Returns:
        One float per context length, in seconds.

    Raises:
        TypeError: a model that is not a :class:`TinyDecoder`, ``context_lengths`` that is
            not a list of ints (one int: pass ``[T]``), a ``use_cache`` that is not a bool,
            a float ``repeats``.
        ValueError: a length outside that range, ``repeats`` outside ``[1, block_size]``, or
            a model in training mode.
    """
    context_lengths, repeats = _check_timing_args(model, context_lengths, use_cache, repeats)
    block_size, device = model.config.block_size, next(model.parameters()).device
    ids = torch.randint(model.config.vocab_size, (1, block_size), device=device)

    def timed(function, *args) -> float:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        begin = time.perf_counter()
        function(*args)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - begin

    medians = []
    for length in context_lengths:
        if use_cache:
            cache = KVCache()
            if length > 1:
                forward_with_cache(model, ids[:, : length - 1], cache)  # prefill, not timed
            steps = [
                timed(forward_with_cache, model, ids[:, t : t + 1], cache)
                for t in range(length - 1, length - 1 + repeats)
            ]
        else:
            steps = [timed(model, ids[:, :length]) for _ in range(repeats)]
        medians.append(sorted(steps)[len(steps) // 2])
    return medians


def _check_timing_args(model, context_lengths, use_cache, repeats) -> tuple[list[int], int]:
    """The checks of :func:`time_per_token`; return the lengths as ints, and ``repeats``."""
    check_instance(model, "model", TinyDecoder, "e.g. load_baby()[0] or TinyDecoder(config)")
    check_bool(use_cache, "use_cache")
    block_size = model.config.block_size
    repeats = check_int(repeats, "repeats", minimum=1, maximum=block_size, why="steps per length")
    if isinstance(context_lengths, str | bytes):
        raise TypeError(f"context_lengths must be a list of ints, got {context_lengths!r}")
    try:
        lengths = list(context_lengths)
    except TypeError:
        raise TypeError(
            f"context_lengths must be a list of ints, got {context_lengths!r} "
            f"({type(context_lengths).__name__}); for one length pass [{context_lengths!r}]"
        ) from None
    lengths = [check_int(t, f"context_lengths[{i}]") for i, t in enumerate(lengths)]
    longest = block_size - repeats + 1
    if any(not 1 <= t <= longest for t in lengths):
        raise ValueError(
            f"need every context length in [1, block_size - repeats + 1 = {longest}], got "
            f"lengths={lengths} with repeats={repeats}; with the cache, step T + repeats - 1 "
            "must still fit in block_size"
        )
    if model.training:
        raise ValueError("call model.eval() first: timings should not include dropout")
    return lengths, repeats


def attention_flop_share(model: TinyDecoder, context_length: int) -> float:
    """Share of a forward pass's multiply-adds that the attention core does, at length T.

    Per layer the core (``Q K^T`` and ``weights @ V``, the part that grows like T²) costs
    ``2 · 2 · T² · d_model`` operations, computed over the full T x T square as a fused
    kernel does; the projections and the FFN cost ``2 · T · (4 · d_model² + 2 · d_model ·
    d_ff)``, the LM head ``2 · T · d_model · vocab_size`` (Kaplan et al. 2020, §2.1, counts
    the same terms). Embeddings, norms and softmax are left out (a few percent).

    Returns:
        A float in ``(0, 1)``.

    Raises:
        TypeError: a model that is not a :class:`TinyDecoder`; a length that is not an int.
        ValueError: a length outside ``[1, block_size]``.
    """
    check_instance(model, "model", TinyDecoder, "e.g. load_baby()[0] or TinyDecoder(config)")
    c = model.config
    t = check_int(context_length, "context_length", minimum=1, maximum=c.block_size)
    core = c.n_layers * 4 * t * t * c.d_model
    dense = c.n_layers * 2 * t * (4 * c.d_model**2 + 2 * c.d_model * c.d_ff)
    head = 2 * t * c.d_model * c.vocab_size
    return core / (core + dense + head)


@torch.no_grad()
def attention_time_share(model: TinyDecoder, context_length: int, repeats: int = 3) -> float:
    """Measured share of a forward pass's time spent in the attention core, at length T.

    Runs ``repeats`` forward passes over ``(1, T)`` random ids while
    ``torch.nn.functional.scaled_dot_product_attention`` (the fused
    ``softmax(Q K^T / sqrt(d_k)) V`` that every layer's attention calls) is wrapped in a
    timer, and divides the time inside it by the time of the whole forward passes. The
    projections, FFN, norms and head are the rest. The wrapper is removed afterwards.

    Returns:
        A float in ``[0, 1]`` (wall clock; noisy on a shared machine).

    Raises:
        TypeError: a model that is not a :class:`TinyDecoder`; a length or ``repeats`` that
            is not an int.
        ValueError: a length outside ``[1, block_size]``, ``repeats < 1``, a model in
            training mode, or a model whose forward never called the fused attention.
    """
    check_instance(model, "model", TinyDecoder, "e.g. load_baby()[0] or TinyDecoder(config)")
    t = check_int(context_length, "context_length", minimum=1, maximum=model.config.block_size)
    repeats = check_int(repeats, "repeats", minimum=1)
    if model.training:
        raise ValueError("call model.eval() first: timings should not include dropout")
    device = next(model.parameters()).device
    ids = torch.randint(model.config.vocab_size, (1, t), device=device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    fused, inside = F.scaled_dot_product_attention, []

    def timed_attention(*args, **kwargs):
        sync()
        begin = time.perf_counter()
        out = fused(*args, **kwargs)
        sync()
        inside.append(time.perf_counter() - begin)
        return out

    model(ids)  # warm-up, not timed
    F.scaled_dot_product_attention = timed_attention
    try:
        sync()
        begin = time.perf_counter()
        for _ in range(repeats):
            model(ids)
        sync()
        total = time.perf_counter() - begin
    finally:
        F.scaled_dot_product_attention = fused
    if not inside:
        raise ValueError(
            "the forward pass never called F.scaled_dot_product_attention, so the attention's "
            "share cannot be timed this way"
        )
    return min(1.0, sum(inside) / total)
