"""Checkers for notebook 13: generating text, and the KV cache.

Written with :func:`course_utils.exercises.judge.judge`: each checker varies every argument,
and names the mistake of its catalogue that the answer makes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.difference import Tolerance
from course_utils.exercises.judge import Case, judge
from course_utils.lab.language import N_, tr

# --- appending to the KV cache ---------------------------------------------------------------


def _cache_cases() -> list[Case]:
    """B, h, T_cached (0: the prompt), T_new and d_k all varied; one head; T_new = 1."""
    generator = torch.Generator().manual_seed(1)
    cases = []
    for b, h, cached, new, d_k in (
        (2, 3, 5, 1, 8),
        (1, 2, 0, 4, 6),
        (3, 1, 9, 2, 4),
        (2, 4, 1, 1, 2),
    ):
        draw = [torch.randn(b, h, t, d_k, generator=generator) for t in (cached, cached, new, new)]
        cases.append(Case(*draw))
    return cases


def _append(cached_k, cached_v, k_new, v_new):
    # (B, h, T_cached, d_k) + (B, h, T_new, d_k) -> (B, h, T_cached + T_new, d_k)
    return torch.cat([cached_k, k_new], dim=2), torch.cat([cached_v, v_new], dim=2)


APPEND_TO_CACHE_MISTAKES = [
    (
        N_(
            "the new keys and values put first; the newest position goes last: "
            "torch.cat([cached, new], dim=2)"
        ),
        lambda ck, cv, k, v: (torch.cat([k, ck], dim=2), torch.cat([v, cv], dim=2)),
    ),
    (
        N_(
            "a cache that forgets the earlier tokens: keep the cached keys and values, then the new"
        ),
        lambda ck, cv, k, v: (k, v),
    ),
    (
        N_("the old cache returned unchanged: append the new keys and values"),
        lambda ck, cv, k, v: (ck, cv),
    ),
    (
        N_("the new values appended to the keys (and the keys to the values)"),
        lambda ck, cv, k, v: (torch.cat([ck, v], dim=2), torch.cat([cv, k], dim=2)),
    ),
    (
        N_(
            "a join on the head axis (dim=1); the cache grows on the time axis, dim=2 of "
            "(B, h, T, d_k)"
        ),
        lambda ck, cv, k, v: (torch.cat([ck, k], dim=1), torch.cat([cv, v], dim=1)),
    ),
    (
        N_(
            "a join on the last axis (d_k); the cache grows on the time axis, dim=2 of (B, h, T, "
            "d_k)"
        ),
        lambda ck, cv, k, v: (torch.cat([ck, k], dim=-1), torch.cat([cv, v], dim=-1)),
    ),
]


def check_append_to_cache(append_to_cache: Callable) -> bool:
    """Check ``append_to_cache(cached_k, cached_v, k_new, v_new) -> (k, v)``: the new keys and
    values go *after* the cached ones on the time axis, ``(B, h, T_cached + T_new, d_k)``.

    Four cases vary B, h (one head included), T_cached (0, the prompt, to 9), T_new and d_k.
    A list ``[k, v]`` is accepted (the text says "the keys and values"). Names each mistake of
    :data:`APPEND_TO_CACHE_MISTAKES` and keys and values swapped.
    """
    return judge(
        "append_to_cache",
        append_to_cache,
        _append,
        _cache_cases(),
        APPEND_TO_CACHE_MISTAKES,
        axes=(tr("keys"), tr("values")),
        errors=[
            (
                RuntimeError,
                "[Ss]izes of tensors must match|stack expects",
                tr(
                    "the cached and new keys differ only in the time axis: torch.cat on dim=2 of "
                    "(B, h, T, d_k)"
                ),
            )
        ],
    )


# --- the positions of the new tokens ----------------------------------------------------------


def _new_positions(cache_length, n_new):
    return torch.arange(cache_length, cache_length + n_new)


NEW_POSITIONS_MISTAKES = [
    (
        N_(
            "counting from 0 again, so the new tokens sit where the first ones were: add the cache "
            "length, the new tokens come after the cached ones"
        ),
        lambda c, n: torch.arange(n),
    ),
    (
        N_("one too far: positions count from 0, so after c cached tokens the next is at c"),
        lambda c, n: torch.arange(c + 1, c + n + 1),
    ),
    (
        N_("one too early: after c cached tokens the next is at c"),
        lambda c, n: torch.arange(c - 1, c + n - 1),
    ),
    (
        N_(
            "torch.arange(cache_length, n_new): the end is cache_length + n_new (arange's end is "
            "exclusive)"
        ),
        lambda c, n: torch.arange(c, n),
    ),
    (
        N_("every position from 0; only the n_new new tokens are fed: arange(c, c + n_new)"),
        lambda c, n: torch.arange(c + n),
    ),
    (
        N_("the last position only; one position per new token"),
        lambda c, n: torch.tensor([c + n - 1]),
    ),
    (
        N_(
            "int32 positions; positions are int64 (torch.long), the dtype of token ids and of "
            "torch.arange's default"
        ),
        lambda c, n: torch.arange(c, c + n, dtype=torch.int32),
    ),
    (
        N_(
            "float positions; positions are int64 (torch.long), the dtype of torch.arange(c, c + n)"
        ),
        lambda c, n: torch.arange(c, c + n, dtype=torch.float32),
    ),
]


def check_new_positions(new_positions: Callable) -> bool:
    """Check ``new_positions(cache_length, n_new)``: the positions of the tokens fed to a
    cached forward, an int64 tensor ``cache_length, ..., cache_length + n_new - 1``. Five
    cases vary both arguments (an empty cache, one new token). Names each mistake of
    :data:`NEW_POSITIONS_MISTAKES`."""
    cases = [Case(0, 5), Case(7, 1), Case(63, 1), Case(12, 3), Case(1, 2)]
    return judge(
        "new_positions",
        new_positions,
        _new_positions,
        cases,
        NEW_POSITIONS_MISTAKES,
        axes="T_new",
        tolerance=Tolerance(exact_dtype=True),
    )


# --- top-p (nucleus) filtering ------------------------------------------------------------------


def _removed(logits, p, *, descending=True, strict=False, inclusive=False, dim=-1):
    """The sorted-order mask of the tokens top-p removes, and the sort order; the keywords
    make the known mistakes (ascending sort, ``>`` for ``>=``, the crossing token dropped)."""
    probabilities, order = torch.softmax(logits, dim=dim).sort(dim=-1, descending=descending)
    mass = probabilities.cumsum(-1) if inclusive else probabilities.cumsum(-1) - probabilities
    return (mass > p if strict else mass >= p), order


def _top_p(logits, p, *, back="scatter", fill=float("-inf"), **mistake):
    remove_sorted, order = _removed(logits, p, **mistake)  # (B, V) in sorted order
    if back == "sorted":  # the mistake: the result left in sorted order
        return logits.sort(dim=-1, descending=True).values.masked_fill(remove_sorted, fill)
    if back == "gather":  # the mistake: gather where scatter puts each token back
        return logits.masked_fill(remove_sorted.gather(-1, order), fill)
    if back == "none":  # the mistake: the sorted-order mask used in vocabulary order
        return logits.masked_fill(remove_sorted, fill)
    return logits.masked_fill(remove_sorted.scatter(-1, order, remove_sorted), fill)


def _vocabulary_order(logits, p):
    probabilities = torch.softmax(logits, dim=-1)  # (B, V), never sorted: the mistake
    return logits.masked_fill(probabilities.cumsum(-1) - probabilities >= p, float("-inf"))


def _remove_mask(logits, p):
    return _top_p(logits, p) == float("-inf")


TOP_P_MISTAKES = [
    (
        N_("an ascending sort: top-p keeps the most likely tokens, sort(descending=True)"),
        lambda x, p: _top_p(x, p, descending=False),
    ),
    (
        N_(
            "the boolean mask of the removed tokens returned; return the logits with those set to "
            "-inf: logits.masked_fill(remove, float('-inf'))"
        ),
        _remove_mask,
    ),
    (
        N_("the boolean mask of the kept tokens returned; return the filtered logits"),
        lambda x, p: ~_remove_mask(x, p),
    ),
    (
        N_(
            "removed logits set to 0; use -inf, so their probability is exactly 0 (a logit of 0 "
            "is still a likely token)"
        ),
        lambda x, p: _top_p(x, p, fill=0.0),
    ),
    (
        N_("removed logits set to -1e9 (or similar); the exercise asks for -inf"),
        lambda x, p: _top_p(x, p, fill=-1e9),
    ),
    (
        N_("probabilities returned; return the filtered logits"),
        lambda x, p: torch.softmax(_top_p(x, p), dim=-1),
    ),
    (
        N_(
            "the probabilities of the kept tokens returned (zero elsewhere); return the filtered "
            "logits, -inf where removed"
        ),
        lambda x, p: torch.softmax(x, dim=-1).masked_fill(_remove_mask(x, p), 0.0),
    ),
    (
        N_("the result left in sorted order; put each logit back at its token's index (scatter)"),
        lambda x, p: _top_p(x, p, back="sorted"),
    ),
    (
        N_("the sorted-order mask put back with gather; scatter(-1, order, mask) undoes the sort"),
        lambda x, p: _top_p(x, p, back="gather"),
    ),
    (
        N_("the sorted-order mask applied in vocabulary order; scatter it back first"),
        lambda x, p: _top_p(x, p, back="none"),
    ),
    (
        N_(
            "the cumulative sum taken in vocabulary order; sort the probabilities in decreasing "
            "order first, so the most likely tokens are counted first"
        ),
        _vocabulary_order,
    ),
    (
        N_(
            "the token that makes the mass reach p dropped (a cumsum > p or >= p that counts the "
            "token itself): remove a token only when the mass *before* it is already >= p "
            "(cumsum - probabilities)"
        ),
        lambda x, p: _top_p(x, p, inclusive=True),
    ),
    (
        N_(
            "a strict '>' that keeps one token too many when the mass lands exactly on p: the set "
            "is complete when the mass before a token is >= p"
        ),
        lambda x, p: _top_p(x, p, strict=True),
    ),
    (
        N_(
            "a softmax over the batch axis (dim=0); the probabilities are over the vocabulary, the "
            "last axis"
        ),
        lambda x, p: _top_p(x, p, dim=0),
    ),
]


def _top_p_cases() -> list[Case]:
    """Different logits for each p; B and V varied (B = 1, V = 2); p from 0.05 to 1.0; a case
    where the mass lands exactly on p (probabilities 1/2, 1/4, 1/8, 1/8 are exact in float32,
    so a strict '>' keeps three tokens where two reach p = 0.75)."""
    generator = torch.Generator().manual_seed(13)
    cases = [
        Case(torch.randn(b, v, generator=generator) * 2.0, p)
        for b, v, p in ((4, 17, 0.9), (3, 11, 0.5), (2, 9, 0.05), (1, 13, 1.0), (2, 2, 0.6))
    ]
    exact = torch.tensor([[0.125, 0.5, 0.125, 0.25], [0.25, 0.125, 0.5, 0.125]]).log()
    return [*cases, Case(exact, 0.75)]


def check_top_p_filter(top_p_filter_answer: Callable) -> bool:
    """Check ``top_p_filter(logits, p)``: logits ``(B, V)``; keep the smallest set of most
    likely tokens whose probability reaches ``p`` (always at least one), the rest ``-inf``,
    every logit at its token's index (Holtzman et al. 2020, §3.1).

    Six cases vary B, V, the logits and p (0.05 to 1.0, and a mass exactly at p). Names each
    mistake of :data:`TOP_P_MISTAKES` (an ascending sort, a boolean mask returned, ...) and a
    p that is ignored.
    """
    return judge(
        "top_p_filter",
        top_p_filter_answer,
        _top_p,
        _top_p_cases(),
        TOP_P_MISTAKES,
        axes="B V",
    )
