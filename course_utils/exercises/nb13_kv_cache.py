"""Checker for notebook 13's KV cache on the learner's own decoder: ``forward_cached`` (the
generation loop that uses it, ``generate_cached``, is checked by :mod:`.nb13_cached_loop`).

The exercise: ``forward_cached(model, ids, cache) -> (logits, cache)`` runs the learner's
``Decoder`` (notebook 11's attribute names) on new tokens only, with the keys and values of
the tokens before them kept per block. Called with ``cache=None`` and the prompt (the
prefill, causal attention over the prompt), then with the cache it returned and one new
token at a time. The harness runs a prompt and a few steps on the course's ``Decoder``
(:mod:`.solution_model`) with random weights and compares every call's logits and the final
cache with the course's answer; it watches each block's ``w_k`` to see that a step projects
only the new token (a cache that recomputes the keys of past tokens saves nothing).

Sources: the KV cache as in GPT-2's ``past`` (Radford et al. 2019) and Pope et al. 2022,
"Efficiently Scaling Transformer Inference", §2; causal attention, Vaswani et al. 2017, §3.2.3.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

import course_utils.exercises.solution_model as solution
from course_utils.exercises.cases import Problem
from course_utils.exercises.judge import Case, judge
from course_utils.exercises.module_judge import random_weights
from course_utils.exercises.nb13_cache_reference import forward_cached_reference, forward_variant
from course_utils.exercises.nb13_cached_loop import check_generate_cached
from course_utils.lab.language import N_, tr

__all__ = ["FORWARD_CACHED_MISTAKES", "check_forward_cached", "forward_cached_reference"]


FORWARD_CACHED_MISTAKES = [
    (
        N_(
            "the position offset forgotten: the new token was given position 0; it sits at the "
            "cache length, so add model.pe[T_cached : T_cached + T_new]"
        ),
        lambda m, i, c: forward_variant(m, i, c, offset=False),
    ),
    (
        N_(
            "the causal mask kept in a one-token step: its mask (1, T) hides every key but the "
            "first; the new token may see every cached key (causal=False when there is a cache)"
        ),
        lambda m, i, c: forward_variant(m, i, c, step_mask=True),
    ),
    (
        N_(
            "the new keys and values put before the cached ones; the newest position goes last: "
            "torch.cat([cached_k, k], dim=2)"
        ),
        lambda m, i, c: forward_variant(m, i, c, order="new-old"),
    ),
]

ERRORS = [
    (
        RuntimeError,
        "[Ss]izes of tensors must match|must match the size of tensor",
        N_("the cache grows on the time axis: torch.cat([cached_k, k], dim=2) of (B, h, T, d_k)"),
    ),
    (
        RuntimeError,
        "size of tensor [ab] \\(0\\)",
        N_(
            "the positions of the new tokens run past the table: model.pe[T_cached : T_cached + "
            "T_new] must hold T_new rows (the context may not pass block_size)"
        ),
    ),
]


def _harness(forward_cached: Callable, model, prompt, continuation):
    """Prefill ``prompt``, then feed ``continuation`` one token at a time; return every
    call's logits ``(B, T, V)`` and the final keys and values ``(n_layers, B, h, T, d_k)``,
    or a :class:`Problem` naming what the answer returned or recomputed."""
    seen: list[int] = []
    hooks = [
        b.attention.w_k.register_forward_hook(lambda mod, args, out: seen.append(args[0].shape[-2]))
        for b in model.blocks
    ]
    logits_seen, cache, fed = [], None, [prompt] + list(continuation.split(1, dim=1))
    try:
        with torch.no_grad():
            for ids in fed:
                seen.clear()
                cached = 0 if cache is None else cache[0][0].shape[2]  # before a call edits it
                out = forward_cached(model, ids, cache)
                if cache is not None and any(n > ids.shape[1] for n in seen):
                    return Problem(
                        tr(
                            "a one-token step projected {count} positions with w_k: it "
                            "recomputes the keys of past tokens; project only the new token and "
                            "append its key and value to the cache"
                        ).format(count=max(seen))
                    )
                problem = _returned_problem(out, model, ids, cached)
                if problem:
                    return Problem(problem)
                logits, cache = out
                logits_seen.append(logits)
    finally:
        for hook in hooks:
            hook.remove()
    keys = torch.stack([k for k, _ in cache])
    values = torch.stack([v for _, v in cache])
    return torch.cat(logits_seen, dim=1), keys, values


def _returned_problem(out, model, ids, cached: int) -> str | None:
    """What is wrong with the shape of ``(logits, cache)``, in a sentence, or None."""
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        return tr("forward_cached must return (logits, cache), got {kind}").format(
            kind=type(out).__name__
        )
    logits, new_cache = out
    B, T_new = ids.shape
    V = model.lm_head.weight.shape[0]
    if not isinstance(logits, torch.Tensor) or tuple(logits.shape) != (B, T_new, V):
        got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        return tr(
            "the logits must be (B, T_new, V) = {shape}, one row per new token; got {got}"
        ).format(shape=(B, T_new, V), got=got)
    blocks = len(model.blocks)
    if not isinstance(new_cache, (list, tuple)) or len(new_cache) != blocks:
        return tr("the cache must be a list of one (k, v) per block ({blocks} blocks)").format(
            blocks=blocks
        )
    h = model.blocks[0].attention.n_heads
    T = cached + T_new
    want = (B, h, T, model.d_model // h)
    for i, entry in enumerate(new_cache):
        if not (isinstance(entry, (tuple, list)) and len(entry) == 2):
            return tr("block {block}'s cache entry must be a pair (k, v)").format(block=i)
        for name, tensor in zip("kv", entry):
            if not isinstance(tensor, torch.Tensor) or tuple(tensor.shape) != want:
                return _cache_shape_problem(i, name, tensor, want, T - T_new)
    return None


def _cache_shape_problem(block: int, name: str, tensor, want: tuple, cached: int) -> str:
    said = tr("block {block}'s cached {name} must be (B, h, T_cached + T_new, d_k) = {want}")
    said = said.format(block=block, name=name, want=want)
    if not isinstance(tensor, torch.Tensor):
        return tr("{said}, got {got}").format(said=said, got=type(tensor).__name__)
    got = tuple(tensor.shape)
    if cached and got[:2] + got[3:] == want[:2] + want[3:]:
        if got[2] == want[2] - cached:
            why = tr("{said}, got {got}: only the new tokens were kept; append them to the cache")
            return why.format(said=said, got=got)
        if got[2] == cached:
            why = tr("{said}, got {got}: the cache came back unchanged; append the new k and v")
            return why.format(said=said, got=got)
    why = tr("{said}, got {got}: one key and one value per head and token, on the time axis")
    return why.format(said=said, got=got)


def _model(vocab_size, block_size, d_model, n_heads, n_layers, d_ff):
    args = (vocab_size, block_size, d_model, n_heads, n_layers, d_ff)
    with torch.random.fork_rng():
        model = solution.Decoder(*args)
    model.load_state_dict(random_weights(solution.Decoder, args))
    return model.eval()


def _cases() -> list[Case]:
    """B, h (one head included), n_layers, the prompt's length and the number of steps all
    varied; one case fills the context to exactly block_size."""
    generator = torch.Generator().manual_seed(13)
    cases = []
    for b, block_size, d_model, h, layers, t0, steps in (
        (2, 16, 12, 3, 2, 5, 4),
        (1, 8, 8, 1, 1, 2, 3),
        (3, 10, 16, 2, 3, 7, 3),
    ):
        model = _model(11, block_size, d_model, h, layers, 2 * d_model)
        ids = torch.randint(11, (b, t0 + steps), generator=generator)
        label = tr(
            "B={b}, h={h}, {layers} block(s), a prompt of {t0} tokens then {steps} one-token "
            "steps (block_size {block_size})"
        ).format(b=b, h=h, layers=layers, t0=t0, steps=steps, block_size=block_size)
        cases.append(Case(model, ids[:, :t0], ids[:, t0:], label=label))
    return cases


def check_forward_cached(forward_cached: Callable, generate_cached: object = None) -> bool:
    """Check ``forward_cached(model, ids, cache) -> (logits, cache)`` on the course's decoder.

    ``ids`` ``(B, T_new)`` int64: the prompt when ``cache`` is None, then one new token;
    ``cache``: None, or what the previous call returned, one ``(k, v)`` per block, each
    ``(B, h, T_cached, d_k)``. Returns logits ``(B, T_new, V)`` and the cache with the new
    keys and values appended on the time axis (``dim=2``). The new tokens sit at positions
    ``T_cached, ..., T_cached + T_new - 1`` of the sinusoidal table ``model.pe``.

    Three cases vary B, h, the number of blocks, the prompt and the steps (one fills the
    context to ``block_size``). Names each mistake of :data:`FORWARD_CACHED_MISTAKES`, a join
    on the wrong axis, a cache that recomputes past keys, and a result of the wrong shape.

    With ``generate_cached(model, ids, max_new_tokens, block_size, generator=None)``, the
    loop that uses it is checked too (:func:`check_generate_cached`: the
    same tokens as notebook 12's loop from the same generator, the crop at ``block_size``).
    Prints one line per function; returns True when all are right; never raises.
    """
    if generate_cached is not None:
        return check_forward_cached(forward_cached) & check_generate_cached(generate_cached)
    return judge(
        "forward_cached",
        forward_cached,
        forward_cached_reference,
        _cases(),
        FORWARD_CACHED_MISTAKES,
        call=_harness,
        axes=(tr("logits of every call"), tr("cached keys"), tr("cached values")),
        errors=ERRORS,
    )
