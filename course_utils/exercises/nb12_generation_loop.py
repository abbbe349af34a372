"""Checker for notebook 12's generation loop: the learner samples text from the model they trained.

The loop (Karpathy's ``generate`` in "Let's build GPT"; Vaswani et al. 2017 §3 for the
decoder that it calls): for each new token, crop the context to its last ``block_size``
tokens, run the model, keep the logits of the last position, turn them into probabilities
with softmax, draw one token with ``torch.multinomial``, append it.

The checker runs the learner's ``generate`` on a small probe model (``V = 7``,
``block_size = 5``) whose logits depend on every token of the window and on each position, so
each plausible mistake changes what it returns or what the model is shown: no crop, a crop to
the first tokens, only the newest token fed, the first position's logits, greedy choice
instead of a draw, logits drawn from without softmax, softmax over the wrong axis, only the new
tokens returned, the model's ``(logits, loss)`` pair not unpacked. The draws are compared
with the reference's under the same seed; an answer that ignores ``generator`` and draws
from the global random state is accepted too (the checker seeds both the same way).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import nn

from course_utils.exercises.core import run_check
from course_utils.lab.language import N_, tr, translated

_VOCAB, _BLOCK = 7, 5
_B, _T0, _NEW = 2, 3, 6  # 3 + 6 = 9 tokens: past block_size, so the crop matters
_SEEDS = (0, 1, 2)


class _ProbeModel(nn.Module):
    """Logits ``(B, T, V)`` that depend on each position and on every token of the window;
    returns ``(logits, None)`` like the learner's ``Decoder``. Records every input it is
    called with (no error for a long input: the checker names that mistake afterwards)."""

    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(12)
        self.token = nn.Parameter(torch.randn(_VOCAB, _VOCAB, generator=generator))
        self.position = nn.Parameter(torch.randn(_BLOCK, _VOCAB, generator=generator))
        self.calls: list[torch.Tensor] = []

    def forward(self, ids: torch.Tensor, targets=None):
        self.calls.append(ids.detach().clone())
        T = ids.shape[1]
        positions = torch.arange(T).clamp(max=_BLOCK - 1)  # a real model would fail past T = 5
        own = self.token[ids]  # (B, T, V)
        context = own.cumsum(dim=1) / torch.arange(1, T + 1).view(1, T, 1)  # mean of the past
        logits = 1.5 * own + 2.0 * context + self.position[positions]
        return logits, None


def _reference(model, ids, max_new_tokens, block_size, generator=None, *, mistake=None):
    """The loop written out; ``mistake`` makes one known mistake instead (for naming it)."""
    for _ in range(max_new_tokens):
        context = ids[:, :block_size] if mistake == "first window" else ids[:, -block_size:]
        logits, _ = model(context)  # (B, T, V)
        last = logits[:, 0, :] if mistake == "first position" else logits[:, -1, :]  # (B, V)
        if mistake == "greedy":
            next_id = last.argmax(dim=-1, keepdim=True)  # (B, 1)
        else:
            probs = torch.softmax(last, dim=0 if mistake == "softmax over the batch" else -1)
            next_id = torch.multinomial(probs, num_samples=1, generator=generator)  # (B, 1)
        ids = torch.cat([ids, next_id], dim=1)  # (B, T + 1)
    return ids


_MISTAKES = {
    "first position": N_(
        "sampled from the first position's logits; the next token is predicted by the last "
        "position: logits[:, -1, :]"
    ),
    "greedy": N_(
        "always takes the most likely token (argmax): that is greedy decoding; draw one "
        "instead with torch.multinomial(probs, num_samples=1, generator=generator)"
    ),
    "softmax over the batch": N_(
        "softmax ran over the batch axis; it runs over the vocabulary, the last axis: "
        "torch.softmax(logits[:, -1, :], dim=-1)"
    ),
}


def _prompt() -> torch.Tensor:
    return torch.randint(_VOCAB, (_B, _T0), generator=torch.Generator().manual_seed(3))


def _run(generate: Callable, seed: int, **options) -> tuple[object, list[torch.Tensor]]:
    """Call ``generate`` on a fresh probe with ``generator`` and the global state both seeded
    with ``seed`` (the global state is given back afterwards); return what it returned and
    the inputs the model was called with."""
    model = _ProbeModel()
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        generator = torch.Generator().manual_seed(seed)
        out = generate(model, _prompt(), _NEW, _BLOCK, generator=generator, **options)
    return out, model.calls


def _shape_problem(out: object) -> str | None:
    """What is wrong with the returned value's type, dtype or shape (the tokens aside)."""
    if not isinstance(out, torch.Tensor):
        return tr("generate should return a tensor of token ids, got {kind}").format(
            kind=type(out).__name__
        )
    if out.dtype.is_floating_point:
        return tr(
            "returned dtype {dtype}: append the sampled token ids (torch.multinomial gives "
            "int64), not probabilities or logits"
        ).format(dtype=out.dtype)
    expected = (_B, _T0 + _NEW)
    if tuple(out.shape) == (_B, _NEW):
        return tr(
            "returned only the {count} new tokens, shape {shape}: append each to the ids, "
            "ids = torch.cat([ids, next_id], dim=1), and return the whole sequence {expected}"
        ).format(count=_NEW, shape=tuple(out.shape), expected=expected)
    if tuple(out.shape) != expected:
        return tr(
            "returned shape {shape}, expected {expected} = (B, T0 + max_new_tokens) for a "
            "prompt of shape {prompt} and max_new_tokens={new}: one token appended per step, "
            "on the time axis (dim=1)"
        ).format(shape=tuple(out.shape), expected=expected, prompt=(_B, _T0), new=_NEW)
    if not torch.equal(out[:, :_T0], _prompt()):
        return tr("the prompt (the first T0 tokens) changed: append new tokens after it")
    return None


def _context_problem(calls: list[torch.Tensor], out: torch.Tensor) -> str | None:
    """What the model was shown, compared with the last ``block_size`` tokens at each step."""
    if len(calls) != _NEW:
        return tr(
            "called the model {count} times for max_new_tokens={new}: once per new token"
        ).format(count=len(calls), new=_NEW)
    for step, seen in enumerate(calls):
        length = _T0 + step
        expected = out[:, max(0, length - _BLOCK) : length]
        if seen.shape[1] > _BLOCK:
            return tr(
                "at step {step} the model saw {seen} tokens, more than block_size={block} (a "
                "learned position table has no row past it): crop the context to its last "
                "block_size tokens, ids[:, -block_size:]"
            ).format(step=step, seen=seen.shape[1], block=_BLOCK)
        if seen.shape[1] == 1 and expected.shape[1] > 1:
            return tr(
                "at step {step} the model saw only the newest token; give it the whole context "
                "(its last block_size tokens): the model has no memory between calls"
            ).format(step=step)
        if seen.shape == expected.shape and not torch.equal(seen, expected):
            first = out[:, : min(length, _BLOCK)]
            if seen.shape == first.shape and torch.equal(seen, first):
                return tr(
                    "at step {step} the model saw the first block_size tokens; crop to the "
                    "last ones, ids[:, -block_size:]"
                ).format(step=step)
            return tr("at step {step} the model was not shown the tokens generated so far").format(
                step=step
            )
        if seen.shape != expected.shape:
            return tr(
                "at step {step} the model saw {seen} tokens, expected the last {expected} "
                "(min(length, block_size))"
            ).format(step=step, seen=seen.shape[1], expected=expected.shape[1])
    return None


def _draw_problem(out: torch.Tensor, seed: int) -> str | None:
    """None when the tokens are the reference's draws for ``seed``; else the mistake."""
    expected, _ = _run(_reference, seed)
    if torch.equal(out, expected):
        return None
    for mistake, reason in _MISTAKES.items():
        wrong, _ = _run(functools.partial(_reference, mistake=mistake), seed)
        if torch.equal(out, wrong):
            return translated(reason)
    step = int((out != expected).any(dim=0).nonzero()[0]) - _T0
    return tr(
        "the tokens differ from softmax(last logits) -> torch.multinomial(probs, 1, "
        "generator=generator) with seed {seed}, first at new token {step}: sample one token "
        "per row from the probabilities of the last position"
    ).format(seed=seed, step=step)


def _explain_error(error: Exception) -> str:
    """The learner's exception, with the fix when it is a known mistake's."""
    text = tr("raised {kind}: {error}").format(kind=type(error).__name__, error=error)
    message = str(error)
    if "probability tensor contains" in message:
        return text + tr(
            "; torch.multinomial needs probabilities: apply torch.softmax to the logits"
        )
    if isinstance(error, TypeError) and "tuple" in message:
        return text + tr(
            "; the model returns (logits, loss): unpack it, logits, _ = model(context)"
        )
    if isinstance(error, TypeError) and "generator" in message:
        return text + tr(
            "; take the parameter generator=None and pass it on: "
            "torch.multinomial(probs, num_samples=1, generator=generator)"
        )
    return text


def check_generate_loop(generate: Callable) -> bool:
    """Check ``generate(model, ids, max_new_tokens, block_size, generator=None) -> ids``.

    ``model(ids)`` returns ``(logits, loss)`` with logits ``(B, T, V)``; ``ids`` is the prompt
    ``(B, T0)`` (int64). For each of ``max_new_tokens`` steps: crop to the last
    ``block_size`` tokens, take the last position's logits ``(B, V)``, softmax over the
    vocabulary, draw one id per row with ``torch.multinomial(..., generator=generator)``,
    append it on the time axis. Returns ``(B, T0 + max_new_tokens)`` int64.

    Tried with three seeds on a probe model (see the module docstring); names the mistake
    when the answer shows the model the wrong context, returns the wrong thing, or draws
    tokens that one of the known mistakes would draw. Prints one line; returns True or False.
    """

    def attempt() -> str | None:
        for seed in _SEEDS:
            try:
                out, calls = _run(generate, seed)
            except NotImplementedError:
                raise
            except Exception as error:  # the learner's code may fail in any way
                return _explain_error(error)
            problem = (
                _shape_problem(out) or _context_problem(calls, out) or _draw_problem(out, seed)
            )
            if problem is not None:
                return problem
        return None

    return run_check("generate", attempt)
