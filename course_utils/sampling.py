"""Choosing the next token from the logits: greedy, temperature, top-k, top-p, and a seeded draw.

Every function takes the logits of the *last* position only, shape ``(B, V)`` (one row of
unnormalised scores per sequence), and never changes its input. Filters return logits with
the removed entries set to ``-inf``, so that a softmax gives them probability exactly 0.

Sources: Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration", §3 (decoding
strategies: sampling with temperature, top-k, and their nucleus (top-p) sampling, §3.1);
top-k sampling as used by Fan et al. 2018, "Hierarchical Neural Story Generation".
"""

from __future__ import annotations

import math

import torch

from course_utils.checks import as_device, as_number, check_bool, check_instance, check_int


def check_logits(logits: torch.Tensor, name: str = "logits") -> None:
    """Raise a clear error unless ``logits`` is a float tensor of shape ``(B, V)``.

    Raises:
        TypeError: not a tensor, or not a float dtype.
        ValueError: not 2-D, or an axis of size 0.
    """
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor (B, V), got {type(logits).__name__}")
    if not logits.dtype.is_floating_point:
        raise TypeError(
            f"{name} must be a float tensor (B, V) of scores, got dtype {logits.dtype}; "
            "token ids go through the model first"
        )
    if logits.ndim != 2 or 0 in logits.shape:
        raise ValueError(
            f"{name} must have shape (B, V) with B, V >= 1, got {tuple(logits.shape)}; for the "
            "model's (B, T, V) output take the last position: logits[:, -1, :]"
        )


def greedy_token(logits: torch.Tensor) -> torch.Tensor:
    """The most likely next token of each row: ``argmax`` over the vocabulary.

    Args:
        logits: float ``(B, V)``.

    Returns:
        int64 ``(B, 1)``, ready for ``torch.cat([ids, next_id], dim=1)``. Ties go to the
        smallest id (``torch.argmax``).

    Raises:
        TypeError, ValueError: see :func:`check_logits`.
    """
    check_logits(logits)
    return logits.argmax(dim=-1, keepdim=True)  # (B, V) -> (B, 1)


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Divide the logits by ``temperature``: below 1 sharpens the softmax, above 1 flattens it.

    ``softmax(z / T)``: as T -> 0 it tends to greedy (all mass on the argmax), as T -> inf to
    the uniform distribution.

    Args:
        logits: float ``(B, V)``.
        temperature: a finite number > 0.

    Returns:
        float ``(B, V)``, same dtype.

    Raises:
        TypeError: ``temperature`` is not a number (``"0.8"``, a bool).
        ValueError: ``temperature`` is not a finite number > 0 (use :func:`greedy_token` for T = 0).
        TypeError, ValueError: see :func:`check_logits`.
    """
    check_logits(logits)
    temperature = _check_temperature(temperature)
    return logits / temperature


def _check_temperature(temperature: object) -> float:
    """``temperature`` as a float if it is a finite number > 0."""
    temperature = as_number(temperature, "temperature")
    if not 0 < temperature < math.inf:  # also rejects NaN
        raise ValueError(
            f"temperature must be a finite number > 0, got {temperature}; "
            "for the most likely token (the limit T -> 0) use greedy instead"
        )
    return temperature


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the ``k`` largest logits of each row; set the others to ``-inf``.

    Ties: entries tied with the k-th largest are all kept (so a row may keep more than k
    when values tie): the rule compares values, not ranks, and never depends on token ids.
    :func:`top_p_filter` differs: it can keep one of two equal tokens and drop the other.

    Args:
        logits: float ``(B, V)``.
        k: an int in ``[1, V]``; ``k = V`` keeps everything, ``k = 1`` is greedy.

    Returns:
        float ``(B, V)``: the kept logits unchanged, the rest ``-inf``.

    Raises:
        TypeError: ``k`` is not an int (``2.0``, ``"2"``, None).
        ValueError: ``k`` is not in ``[1, V]``.
        TypeError, ValueError: see :func:`check_logits`.
    """
    check_logits(logits)
    k = _check_k(k, logits.shape[-1])
    kth_largest = torch.topk(logits, k, dim=-1).values[:, -1:]  # (B, 1)
    return logits.masked_fill(logits < kth_largest, float("-inf"))


def _check_k(k: object, vocab_size: int, name: str = "k") -> int:
    """``k`` as an int if it is in ``[1, vocab_size]``; messages call it ``name`` (the
    caller's argument: ``top_k`` in :func:`sample_next` and the generators)."""
    k = check_int(k, name)
    if not 1 <= k <= vocab_size:
        raise ValueError(
            f"{name} must be an int in [1, V={vocab_size}], got {k!r}; {name} = 1 is greedy, "
            f"{name} = {vocab_size} keeps every token"
        )
    return k


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filter: keep the smallest set of most likely tokens whose probability sums to
    at least ``p``; set the others to ``-inf`` (Holtzman et al. 2020, §3.1).

    Sort each row's probabilities in decreasing order; a token is kept when the probability
    of the tokens *before* it is still below ``p``. The most likely token is therefore always
    kept, and ``p = 1`` keeps everything. Unlike top-k, the number kept adapts: few tokens
    when the model is sure, many when it is not.

    Ties: the sort is stable, so equally likely tokens are ranked by id (smaller first), and
    the cut can fall *between* them: with four tokens of probability 0.25 and ``p = 0.5``
    ids 0 and 1 are kept and ids 2 and 3 removed, although all four are equally likely.
    (:func:`top_k_filter` with ``k = 2`` keeps all four: it keeps every token tied with the
    k-th.) A stable sort makes that choice reproducible on every device; ties between
    float32 probabilities are rare outside constructed examples.

    Args:
        logits: float ``(B, V)``.
        p: a number in ``(0, 1]``.

    Returns:
        float ``(B, V)``: the kept logits unchanged, the rest ``-inf``.

    Raises:
        TypeError: ``p`` is not a number (``"0.9"``, a bool).
        ValueError: ``p`` is not in ``(0, 1]`` (a percentage such as 90 included).
        TypeError, ValueError: see :func:`check_logits`.
    """
    check_logits(logits)
    p = _check_p(p)
    if p == 1:
        return logits.clone()  # rounding could make a cumulative sum exceed 1
    probabilities = torch.softmax(logits.float(), dim=-1)  # (B, V)
    # stable: tied tokens keep id order, so which of them survives the cut is reproducible
    sorted_probabilities, order = probabilities.sort(dim=-1, descending=True, stable=True)
    mass_before = sorted_probabilities.cumsum(dim=-1) - sorted_probabilities  # exclusive sum
    remove_sorted = mass_before >= p  # (B, V) in sorted order; position 0 is never removed
    remove = remove_sorted.scatter(-1, order, remove_sorted)  # back to vocabulary order
    return logits.masked_fill(remove, float("-inf"))


def _check_p(p: object, name: str = "p") -> float:
    """``p`` as a float if it is in ``(0, 1]``; messages call it ``name`` (``top_p`` in
    :func:`sample_next` and the generators)."""
    p = as_number(p, name)
    if not 0 < p <= 1:  # also rejects NaN
        raise ValueError(
            f"{name} must be a number in (0, 1], got {p!r}; {name} = 1 keeps every token, "
            f"a small {name} keeps only the most likely ones"
        )
    return p


def seeded_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A ``torch.Generator`` started from ``seed``: the same seed gives the same samples.

    A generator of its own (instead of the global seed) keeps a sample reproducible however
    many random numbers other code draws in between.

    Raises:
        TypeError: ``seed`` is not an int (``1.5``, ``"7"``; numpy ints are fine).
        ValueError: ``seed`` is negative or at least ``2**64``; ``device`` is not a device name.
        RuntimeError: a CUDA or MPS device this machine does not have.
    """
    seed = _check_seed(seed)
    return torch.Generator(device=as_device(device)).manual_seed(seed)


def _check_seed(seed: object) -> int:
    """``seed`` as an int if it is in ``[0, 2**64)``, the range ``manual_seed`` accepts."""
    seed = check_int(seed, "seed")
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed must be a non-negative int below 2**64, got {seed!r}")
    return seed


def sample_next(
    logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    greedy: bool = False,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Pick the next token of each row: greedy, or temperature -> top-k -> top-p -> draw.

    The filters run in that order (as in common libraries); the draw is
    ``torch.multinomial(softmax(filtered), 1, generator=generator)``.

    Args:
        logits: float ``(B, V)``, the last position's scores.
        temperature: > 0; ignored when ``greedy``.
        top_k: keep the k most likely tokens, ``1 <= k <= V``; None = no limit.
        top_p: keep the nucleus of mass ``p`` in ``(0, 1]``; None = no limit.
        greedy: take the argmax (all other options ignored).
        generator: random generator on the logits' device (see :func:`seeded_generator`);
            None uses the global one, which other code also advances.

    Returns:
        int64 ``(B, 1)``.

    Raises:
        ValueError: bad temperature, top_k or top_p (see the filters); a generator on
            another device than the logits; logits with NaN or inf (no distribution to draw
            from).
        TypeError: a ``greedy`` that is not a bool, a ``generator`` that is not a
            ``torch.Generator``; see also the filters and :func:`check_logits`.
    """
    if check_bool(greedy, "greedy"):
        return greedy_token(logits)
    logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, _check_k(top_k, logits.shape[-1], "top_k"))
    if top_p is not None:
        logits = top_p_filter(logits, _check_p(top_p, "top_p"))
    _check_generator(generator, logits.device)
    probabilities = torch.softmax(logits.float(), dim=-1)  # (B, V), rows sum to 1
    return _draw(probabilities, generator)  # (B, 1)


def _check_generator(generator: object, device: torch.device) -> None:
    """TypeError or ValueError unless ``generator`` is None or a ``torch.Generator`` on the
    logits' ``device``."""
    if generator is not None:
        check_instance(generator, "generator", torch.Generator, "e.g. seeded_generator(0), or None")
    if generator is not None and generator.device.type != device.type:
        raise ValueError(
            f"the generator is on {generator.device} but the logits on {device}; "
            f"use seeded_generator(seed, device={str(device)!r})"
        )


def _draw(probabilities: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """``torch.multinomial(probabilities, 1)`` ``(B, V) -> (B, 1)``; its error for rows that
    are not distributions re-raised in the course's words."""
    try:
        return torch.multinomial(probabilities, 1, generator=generator)
    except RuntimeError as error:
        raise ValueError(
            f"cannot draw the next token: the probabilities are not a distribution ({error}). "
            "The logits hold NaN or inf (e.g. weights that diverged in training: check "
            "torch.isfinite(logits).all()), or every token of a row was filtered out"
        ) from error
