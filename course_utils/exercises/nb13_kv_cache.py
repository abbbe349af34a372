"""Checkers for notebook 13's KV cache on the learner's own decoder: ``forward_cached``, and
the generation loop that uses it, ``generate_cached`` (the crop at ``block_size``).

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

import math
import warnings
from collections.abc import Callable

import torch

import course_utils.exercises.solution_model as solution
from course_utils.exercises.cases import Problem
from course_utils.exercises.judge import Case, judge
from course_utils.exercises.module_judge import random_weights
from course_utils.lab.language import N_, tr

__all__ = [
    "FORWARD_CACHED_MISTAKES",
    "GENERATE_CACHED_MISTAKES",
    "check_forward_cached",
    "check_generate_cached",
    "forward_cached_reference",
    "generate_cached_reference",
]


def _forward(model, ids, cache, *, offset=True, dim=2, order="old-new", step_mask=False):
    """The course's ``forward_cached``; the keywords make the catalogued mistakes."""
    _, T_new = ids.shape
    start = 0 if cache is None else cache[0][0].shape[2]  # the first new token's position
    at = start if offset else 0
    x = model.token_embedding(ids) * math.sqrt(model.d_model) + model.pe[at : at + T_new]
    new_cache = []
    for i, block in enumerate(model.blocks):
        mha = block.attention
        a = block.ln_1(x)
        q, k, v = (solution.split_heads(w(a), mha.n_heads) for w in (mha.w_q, mha.w_k, mha.w_v))
        if cache is not None:
            k, v = _joined(cache[i], k, v, dim, order)
        new_cache.append((k, v))
        heads = solution.attention(q, k, v, causal=cache is None or step_mask)
        x = x + mha.w_o(solution.merge_heads(heads))
        x = x + block.feed_forward(block.ln_2(x))
    return model.lm_head(model.final_norm(x)), new_cache


def _joined(cached, k, v, dim, order):
    cached_k, cached_v = cached
    if order == "only-new":
        return k, v
    if order == "only-old":
        return cached_k, cached_v
    if order == "new-old":
        return torch.cat([k, cached_k], dim=dim), torch.cat([v, cached_v], dim=dim)
    return torch.cat([cached_k, k], dim=dim), torch.cat([cached_v, v], dim=dim)


def forward_cached_reference(model, ids, cache):
    """The right answer: logits ``(B, T_new, V)`` and one ``(k, v)`` per block, each
    ``(B, h, T_cached + T_new, d_k)``; ``cache`` None for the prompt."""
    return _forward(model, ids, cache)


FORWARD_CACHED_MISTAKES = [
    (
        N_(
            "the position offset forgotten: the new token was given position 0; it sits at the "
            "cache length, so add model.pe[T_cached : T_cached + T_new]"
        ),
        lambda m, i, c: _forward(m, i, c, offset=False),
    ),
    (
        N_(
            "the causal mask kept in a one-token step: its mask (1, T) hides every key but the "
            "first; the new token may see every cached key (causal=False when there is a cache)"
        ),
        lambda m, i, c: _forward(m, i, c, step_mask=True),
    ),
    (
        N_(
            "the new keys and values put before the cached ones; the newest position goes last: "
            "torch.cat([cached_k, k], dim=2)"
        ),
        lambda m, i, c: _forward(m, i, c, order="new-old"),
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


# --- the generation loop with the cache: the crop at block_size ------------------------------
#
# ``generate_cached(model, ids, max_new_tokens, block_size, generator=None)`` samples as
# notebook 12's loop does but feeds the model through the learner's ``forward_cached`` (the
# notebook's global): the prompt's last block_size tokens once, then one token per step; when
# the cache holds block_size tokens the window slides, every token moves to a new row of the
# sinusoidal table, and the cache is rebuilt from the last block_size tokens (the crop). The
# harness counts the positions each call feeds (a hook on token_embedding): a loop feeding the
# whole context at every step gets the tokens right and saves nothing.


def _sample(logits, generator, greedy=False):
    probs = torch.softmax(logits[:, -1, :], dim=-1)  # (B, V)
    if greedy:
        return probs.argmax(dim=-1, keepdim=True)
    return torch.multinomial(probs, num_samples=1, generator=generator)  # (B, 1)


@torch.no_grad()
def _loop(model, ids, max_new_tokens, block_size, generator=None, *, full="rebuild", **how):
    """The course's loop; ``full`` (what happens when the cache is full) and ``how`` make
    the catalogued mistakes."""
    logits, cache = forward_cached_reference(model, ids[:, -block_size:], None)  # the prefill
    for _ in range(max_new_tokens):
        next_id = _sample(logits, generator, **how)
        ids = torch.cat([ids, next_id], dim=1)
        if cache[0][0].shape[2] < block_size:
            logits, cache = forward_cached_reference(model, next_id, cache)
        elif full == "roll":  # the mistake: drop the oldest key and value, keep the rest
            cache = [(k[:, :, 1:], v[:, :, 1:]) for k, v in cache]
            logits, cache = forward_cached_reference(model, next_id, cache)
        else:
            logits, cache = forward_cached_reference(model, ids[:, -block_size:], None)
    return ids


def generate_cached_reference(model, ids, max_new_tokens, block_size, generator=None):
    """The right answer: ``(B, T0 + max_new_tokens)`` int64, the tokens of notebook 12's loop."""
    return _loop(model, ids, max_new_tokens, block_size, generator)


GENERATE_CACHED_MISTAKES = [
    (
        N_(
            "a rolling cache (the oldest key and value dropped when it is full): the keys left "
            "were "
            "computed at their old positions, and the new token keeps position block_size - 1; "
            "rebuild the cache from the last block_size tokens instead (the crop)"
        ),
        lambda m, i, n, b, g=None: _loop(m, i, n, b, g, full="roll"),
    ),
    (
        N_(
            "the generator not passed to torch.multinomial: pass generator=generator, so the same "
            "seed gives the same tokens"
        ),
        lambda m, i, n, b, g=None: _loop(m, i, n, b, None),
    ),
    (
        N_(
            "the most likely token taken (argmax); sample as notebook 12's loop: "
            "torch.multinomial(probs, num_samples=1, generator=generator)"
        ),
        lambda m, i, n, b, g=None: _loop(m, i, n, b, g, greedy=True),
    ),
]

LOOP_ERRORS = [
    (
        IndexError,
        "out of bounds for dimension 1 with size 0",
        N_(
            "no logits for the new token: its position is past the table (model.pe[T_cached:] is "
            "empty); when the cache holds block_size tokens, rebuild it from the last block_size "
            "tokens (the crop at block_size)"
        ),
    ),
    (
        RuntimeError,
        r"size of tensor a \(\d+\) must match the size of tensor b \(\d+\)",
        N_(
            "positions past the table: feed at most block_size tokens (the prompt's last "
            "block_size in the prefill) and, when the cache holds block_size tokens, rebuild it "
            "from the last block_size tokens (the crop at block_size)"
        ),
    ),
]


def _loop_harness(generate_cached: Callable, model, ids, max_new_tokens, block_size, seed):
    """The answer's tokens from ``torch.Generator().manual_seed(seed)`` and the logits of the
    last position of its first ``max_new_tokens`` calls (the ones it samples from), or a
    :class:`Problem` when it feeds the model more positions than the cached loop needs. The
    global generator is seeded too, so a loop that ignores ``generator`` is repeatable."""
    fed, last = [], []
    hooks = [
        model.token_embedding.register_forward_hook(lambda m, a, o: fed.append(a[0].shape[-1])),
        model.lm_head.register_forward_hook(lambda m, a, o: last.append(o[:, -1].detach())),
    ]
    try:
        with torch.random.fork_rng(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an empty window's LayerNorm warns; the error says why
            torch.manual_seed(seed + 1000)
            out = generate_cached(model, ids, max_new_tokens, block_size, _generator(seed))
        answer_fed, answer_last = sum(fed), last[:max_new_tokens]
        fed.clear()
        _loop(model, ids, max_new_tokens, block_size, _generator(seed))
    finally:
        for hook in hooks:
            hook.remove()
    if answer_fed > sum(fed):
        return Problem(
            tr(
                "it fed the model {fed} positions where the cached loop feeds {needed}: after "
                "the prefill, feed only the new token while the cache holds fewer than "
                "block_size tokens (the whole context every step is notebook 12's loop)"
            ).format(fed=answer_fed, needed=sum(fed))
        )
    if len(answer_last) < max_new_tokens:
        return Problem(
            tr(
                "it ran the model {count} times for {new} new tokens; each new token is sampled "
                "from the logits of one call"
            ).format(count=len(answer_last), new=max_new_tokens)
        )
    return out, torch.stack(answer_last, dim=1)


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _loop_model(block_size: int, d_model: int, n_heads: int, n_layers: int):
    args = (11, block_size, d_model, n_heads, n_layers, 2 * d_model)
    with torch.random.fork_rng():
        model = solution.Decoder(*args)
    weights = random_weights(solution.Decoder, args)
    weights = {k: v * 3 if k == "token_embedding.weight" else v for k, v in weights.items()}
    model.load_state_dict(weights)  # sharper logits: a wrong loop shows in the tokens
    return model.eval()


def _loop_cases() -> list[Case]:
    """Past the window (the crop runs several times); a prompt longer than block_size; B,
    block_size, the model and the seed varied."""
    generator = torch.Generator().manual_seed(12)
    cases = []
    for b, block_size, t0, n_new, seed in ((2, 8, 3, 14, 0), (1, 6, 9, 7, 1), (3, 5, 2, 9, 2)):
        model = _loop_model(block_size, 12, 3, 2)
        ids = torch.randint(11, (b, t0), generator=generator)
        label = tr(
            "B={b}, a prompt of {t0} tokens, {n_new} new tokens, block_size={block_size}, "
            "generator seeded {seed}"
        ).format(b=b, t0=t0, n_new=n_new, block_size=block_size, seed=seed)
        cases.append(Case(model, ids, n_new, block_size, seed, label=label))
    return cases


def check_generate_cached(generate_cached: Callable) -> bool:
    """Check ``generate_cached(model, ids, max_new_tokens, block_size, generator=None)``:
    ids ``(B, T0)`` int64 in, ``(B, T0 + max_new_tokens)`` out, the same tokens as notebook
    12's loop from the same generator, the model fed through ``forward_cached`` (the global
    of the notebook): the prefill of the last ``block_size`` tokens, one token per step, the
    cache rebuilt from the last ``block_size`` tokens when it holds ``block_size``.

    Three cases run past the window (one prompt is longer than ``block_size``). Names the
    mistakes of :data:`GENERATE_CACHED_MISTAKES`, positions past the table (no crop), and a
    loop that feeds the whole context at every step. Prints one line; never raises.
    """
    return judge(
        "generate_cached",
        generate_cached,
        generate_cached_reference,
        _loop_cases(),
        GENERATE_CACHED_MISTAKES,
        call=_loop_harness,
        axes=(tr("tokens"), tr("logits sampled from")),
        errors=LOOP_ERRORS,
    )
