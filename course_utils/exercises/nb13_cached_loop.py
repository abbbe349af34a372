"""Checker for notebook 13's generation loop with the KV cache, ``generate_cached``: the crop
at ``block_size``.

``generate_cached(model, ids, max_new_tokens, block_size, generator=None)`` samples as
notebook 12's loop does but feeds the model through the learner's ``forward_cached`` (the
notebook's global, checked by :mod:`.nb13_kv_cache`; the course's answer to it is in
:mod:`.nb13_cache_reference`): the prompt's last block_size tokens once, then one token per
step; when the cache holds block_size tokens the window slides, every token moves to a new
row of the sinusoidal table, and the cache is rebuilt from the last block_size tokens (the
crop). The harness counts the positions each call feeds (a hook on ``token_embedding``): a
loop feeding the whole context at every step gets the tokens right and saves nothing.

Sources: the KV cache as in GPT-2's ``past`` (Radford et al. 2019) and Pope et al. 2022,
"Efficiently Scaling Transformer Inference", §2.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch

import course_utils.exercises.solution_model as solution
from course_utils.exercises.cases import Problem
from course_utils.exercises.judge import Case, judge
from course_utils.exercises.module_judge import random_weights
from course_utils.exercises.nb13_cache_reference import forward_cached_reference
from course_utils.lab.language import N_, tr

__all__ = ["GENERATE_CACHED_MISTAKES", "check_generate_cached", "generate_cached_reference"]


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
