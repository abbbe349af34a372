"""Checkers for notebook 13: generating text, and the KV cache."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.core import compare, run_check
from course_utils.sampling import top_p_filter


def _cache_case(seed: int, cached: int, new: int = 1):
    generator = torch.Generator().manual_seed(seed)

    def draw(t: int) -> torch.Tensor:
        return torch.randn(2, 3, t, 8, generator=generator)  # (B, h, T, d_k), all sizes differ

    return draw(cached), draw(cached), draw(new), draw(new)


def check_append_to_cache(append_to_cache: Callable) -> bool:
    """Check ``append_to_cache(cached_k, cached_v, k_new, v_new) -> (k, v)``: the new keys and
    values go *after* the cached ones on the time axis, ``(B, h, T_cached + T_new, d_k)``.

    Tried with 5 cached tokens and 1 new one, 0 cached and 4 new (the prompt), and 9 cached
    and 2 new. Names the wrong axis, new entries put first, keys and values swapped, and a
    cache that forgets the earlier tokens.
    """
    cases = [_cache_case(1, 5), _cache_case(2, 0, 4), _cache_case(3, 9, 2)]

    def attempt() -> str | None:
        for cached_k, cached_v, k_new, v_new in cases:
            try:
                answer = append_to_cache(cached_k.clone(), cached_v.clone(), k_new, v_new)
            except NotImplementedError:
                raise  # run_check reports "not implemented yet"
            except RuntimeError as error:  # e.g. torch.cat on an axis where the sizes differ
                return (
                    f"raised RuntimeError: {error} The cached and new keys differ only in the "
                    "time axis: join on the time axis, dim=2 of (B, h, T, d_k)"
                )
            if not isinstance(answer, tuple) or len(answer) != 2:
                return f"return a pair (keys, values), got {type(answer).__name__}"
            keys, values = answer
            expected_k = torch.cat([cached_k, k_new], dim=2)  # (B, h, T_cached + T_new, d_k)
            expected_v = torch.cat([cached_v, v_new], dim=2)
            name = f"keys after {cached_k.shape[2]} cached + {k_new.shape[2]} new"
            if isinstance(keys, torch.Tensor) and keys.shape != expected_k.shape:
                if keys.shape == k_new.shape:
                    return f"{name} have shape {tuple(keys.shape)}: keep the cached keys too"
                return (
                    f"{name} have shape {tuple(keys.shape)}, expected "
                    f"{tuple(expected_k.shape)} (B, h, T, d_k): join on the time axis, dim=2"
                )
            if isinstance(keys, torch.Tensor) and cached_k.shape[2] and k_new.shape[2]:
                if torch.equal(keys, torch.cat([k_new, cached_k], dim=2)):
                    return f"{name} put the new keys first; the newest position goes last"
                if torch.equal(keys, expected_v) and torch.equal(values, expected_k):
                    return "keys and values are swapped"
            problem = compare(keys, expected_k, name=name) or compare(
                values, expected_v, name=name.replace("keys", "values")
            )
            if problem is not None:
                return problem
        return None

    return run_check("append_to_cache", attempt)


def check_new_positions(new_positions: Callable) -> bool:
    """Check ``new_positions(cache_length, n_new)``: the positions of the tokens fed to a
    cached forward, an int64 tensor ``cache_length, ..., cache_length + n_new - 1``.

    Names the classic mistake (counting from 0 again, so every new token sits at position 0),
    the off-by-one (positions are 0-based: after 7 cached tokens the next one is at 7) and
    another integer dtype (int32) than int64.
    """
    cases = [(0, 5), (7, 1), (63, 1), (12, 3)]

    def attempt() -> str | None:
        for cache_length, n_new in cases:
            answer = new_positions(cache_length, n_new)
            expected = torch.arange(cache_length, cache_length + n_new)
            name = f"new_positions({cache_length}, {n_new})"
            if isinstance(answer, torch.Tensor) and answer.shape == expected.shape:
                if cache_length and torch.equal(answer.long(), torch.arange(n_new)):
                    return (
                        f"{name} = {answer.tolist()} starts again at 0: add the cache length, "
                        "the new tokens come after the cached ones"
                    )
                if torch.equal(answer.long(), expected + 1):
                    return (
                        f"{name} = {answer.tolist()} is one too far: positions count from 0, "
                        f"so after {cache_length} cached tokens the next is at {cache_length}"
                    )
            problem = compare(answer, expected, name=name)
            if problem is not None:
                return problem
            if answer.dtype != torch.int64:
                return (
                    f"{name} has dtype {answer.dtype}; positions are int64 (torch.long), the "
                    "dtype of the token ids and of torch.arange's default"
                )
        return None

    return run_check("new_positions", attempt)


def check_top_p_filter(top_p_filter_answer: Callable) -> bool:
    """Check ``top_p_filter(logits, p)``: logits ``(B, V)``; keep the smallest set of most
    likely tokens whose probability reaches ``p`` (always at least one), the rest ``-inf``.

    Names: removed entries set to 0, probabilities returned instead of logits, the result
    left in sorted order, the token that crosses ``p`` dropped (too few kept), a strict ``>``
    that keeps one token too many when the mass lands exactly on ``p`` (a case tests it), and
    a cumulative sum taken in vocabulary order instead of sorted order.
    """
    generator = torch.Generator().manual_seed(13)
    logits = torch.randn(4, 17, generator=generator) * 2.0
    # Probabilities 1/2, 1/4, 1/8, 1/8 are exact in float32, so the mass reaches p = 0.75
    # exactly after two tokens: the smallest set is those two, and a strict ">" keeps three.
    exact = torch.tensor([[0.125, 0.5, 0.125, 0.25]]).log()
    cases = [(logits, 0.9), (logits, 0.5), (logits, 0.05), (logits[:1], 1.0), (exact, 0.75)]

    def attempt() -> str | None:
        for case, p in cases:
            answer = top_p_filter_answer(case.clone(), p)
            expected = top_p_filter(case, p)
            name = f"top_p_filter(logits of shape {tuple(case.shape)}, p={p})"
            if not isinstance(answer, torch.Tensor) or answer.shape != expected.shape:
                return compare(answer, expected, name=name)
            answer = answer.detach()
            removed = expected == float("-inf")
            if (answer >= 0).all() and torch.allclose(answer.sum(-1), torch.ones(len(answer))):
                return f"{name} returned probabilities; return filtered logits"
            if removed.any() and torch.isfinite(answer[removed]).all():
                value = answer[removed][0].item()
                return f"{name} sets removed logits to {value:g}; use -inf (probability exactly 0)"
            if torch.equal(answer, expected.sort(dim=-1, descending=True).values):
                return f"{name} is in sorted order; put each logit back at its token's index"
            problem = compare(answer == float("-inf"), removed, name=f"{name}'s -inf mask")
            if problem is not None:
                kept, expected_kept = (answer != float("-inf")).sum(-1), (~removed).sum(-1)
                if torch.equal(answer == float("-inf"), _strict_mask(case, p)):
                    return (
                        f"{name} keeps {kept.tolist()} tokens per row, expected "
                        f"{expected_kept.tolist()}: when the mass before a token already equals "
                        "p, the set is complete; remove where that mass is >= p, not > p"
                    )
                masks = _crossing_dropped(case, p)
                if any(torch.equal(answer == float("-inf"), m) for m in masks):
                    return (
                        f"{name} keeps {kept.tolist()} tokens per row, expected "
                        f"{expected_kept.tolist()}: keep the token that makes the mass reach p "
                        "(remove a token only when the mass *before* it is already >= p)"
                    )
                return problem + " (sum the probabilities in decreasing order)"
            problem = compare(answer.masked_fill(removed, 0.0), expected.masked_fill(removed, 0.0))
            if problem is not None:
                return f"the kept logits of {name} changed: {problem}"
        return None

    return run_check("top_p_filter", attempt)


def _strict_mask(logits: torch.Tensor, p: float) -> torch.Tensor:
    """The -inf mask of top-p with a strict ``>``: a token is removed only when the mass before
    it exceeds p, so on a mass exactly at p one token too many is kept."""
    probabilities, order = torch.softmax(logits, -1).sort(dim=-1, descending=True)
    before = probabilities.cumsum(-1) - probabilities
    return (before > p).scatter(-1, order, before > p)


def _crossing_dropped(logits: torch.Tensor, p: float) -> list[torch.Tensor]:
    """The -inf masks of the usual wrong top-p: removing where the *inclusive* cumulative
    probability exceeds p (``>`` or ``>=``), which also drops the token that crosses p."""
    probabilities, order = torch.softmax(logits, -1).sort(dim=-1, descending=True)
    mass = probabilities.cumsum(-1)
    return [m.scatter(-1, order, m) for m in (mass > p, mass >= p)]
