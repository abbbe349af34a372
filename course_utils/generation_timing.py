"""Time per generated token, with and without the KV cache (notebook 13's plot).

One step without the cache is a forward pass over the whole context (its cost grows with the
context length T); with the cache it feeds one token and attends over the T cached keys. This
module times both on the real model, so the difference is measured rather than asserted.
"""

from __future__ import annotations

import time

import torch

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
