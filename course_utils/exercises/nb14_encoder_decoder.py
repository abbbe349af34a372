"""Checkers for notebook 14: the encoder–decoder Transformer."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from course_utils.attention import merge_heads, split_heads
from course_utils.exercises.core import compare, run_check


def _cross_reference(
    x, memory, w_q, w_k, w_v, n_heads, real, *, causal=False, padding=True, scale=True
):
    q = split_heads(w_q(x), n_heads)  # (B, T_tgt, C) -> (B, h, T_tgt, d_k)
    k = split_heads(w_k(memory), n_heads)  # (B, T_src, C) -> (B, h, T_src, d_k)
    v = split_heads(w_v(memory), n_heads)
    scores = (
        q @ k.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale else 1.0)
    )  # (B,h,T_tgt,T_src)
    mask = torch.ones_like(scores, dtype=torch.bool)
    if padding:
        mask = mask & real[:, None, None, :]
    if causal:
        mask = mask & torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
    weights = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return merge_heads(weights @ v), weights  # (B, h, T_tgt, d_k) -> (B, T_tgt, C)


def _cross_cases() -> list[tuple]:
    generator = torch.Generator().manual_seed(14)
    cases = []
    for t_tgt, t_src, lengths in ((5, 7, [7, 4]), (6, 6, [3, 6])):
        with torch.random.fork_rng(devices=[]):  # leave the notebook's random state alone
            torch.manual_seed(14 + t_tgt)
            w_q, w_k, w_v = (nn.Linear(24, 24) for _ in range(3))
        x = torch.randn(2, t_tgt, 24, generator=generator)
        memory = torch.randn(2, t_src, 24, generator=generator)
        real = torch.arange(t_src) < torch.tensor(lengths)[:, None]  # (B, T_src)
        cases.append((x, memory, w_q, w_k, w_v, 3, real))
    return cases


def _diagnose_cross(answer, case) -> str | None:
    """The right reason a wrong (output, weights) is wrong, or None if no known mistake fits."""
    x, memory, *_, real = case
    output, weights = answer
    t_tgt, t_src = x.shape[1], memory.shape[1]
    if isinstance(weights, torch.Tensor) and weights.shape[-2:] == (t_tgt, t_tgt) != (t_tgt, t_src):
        return (
            "the weights are (B, h, T_tgt, T_tgt): keys and values must come from memory (the "
            "encoder output), giving (B, h, T_tgt, T_src)"
        )
    if isinstance(weights, torch.Tensor) and weights.shape[-2] == t_src != t_tgt:
        return "the queries must come from x (the decoder), not from memory"
    mistakes = {
        "keys and values come from the decoder; take them from memory (the encoder output)": (
            _cross_reference(x, x, *case[2:])  # K and V projected from x
            if t_tgt == t_src
            else None
        ),
        "a causal mask was applied: in cross-attention every target position may read the "
        "whole source (it is known before decoding starts); mask only the padding": (
            _cross_reference(*case, causal=True)
        ),
        "the scores are not divided by sqrt(d_k) (§3.2.1)": _cross_reference(*case, scale=False),
        "padded source positions get weight: hide keys where memory_mask is False": (
            _cross_reference(*case, padding=False)
        ),
    }
    for reason, reference in mistakes.items():
        if reference is not None and compare(weights, reference[1]) is None:
            return reason
    if (
        isinstance(weights, torch.Tensor)
        and (weights[~real[:, None, None, :].expand_as(weights)] > 0).any()
    ):
        return "weight on padding: memory_mask is True for real tokens (mask where it is False)"
    return None


def check_cross_attention(cross_attention: Callable) -> bool:
    """Check ``cross_attention(x, memory, w_q, w_k, w_v, n_heads, memory_mask)``.

    ``x`` ``(B, T_tgt, C)`` is the decoder's stream, ``memory`` ``(B, T_src, C)`` the encoder
    output, ``memory_mask`` ``(B, T_src)`` bool (True = a real source token). Expected:
    ``(output, weights)``, ``output = merge_heads(weights @ V)`` ``(B, T_tgt, C)`` (no W_o) and
    ``weights`` ``(B, h, T_tgt, T_src)``. Tried with T_tgt != T_src and with T_tgt == T_src
    (where a swap of x and memory keeps the shapes). Names the mistake: K/V from the
    decoder, Q from the encoder, a causal mask, the padding ignored or inverted.
    """

    def attempt() -> str | None:
        for case in _cross_cases():
            x, memory = case[0], case[1]
            name = f"cross_attention(x {tuple(x.shape)}, memory {tuple(memory.shape)})"
            answer = cross_attention(
                *(c.clone() if isinstance(c, torch.Tensor) else c for c in case)
            )
            if not isinstance(answer, tuple) or len(answer) != 2:
                return f"{name} should return (output, weights), got {type(answer).__name__}"
            with torch.no_grad():
                expected = _cross_reference(*case)
                reason = _diagnose_cross(answer, case)
            problem = compare(answer[1], expected[1], name=f"{name}'s weights")
            if problem is None:
                problem = compare(answer[0], expected[0], name=f"{name}'s output")
            if problem is not None:
                return f"{problem}; {reason}" if reason else problem
        return None

    return run_check("cross_attention", attempt)


def _mask_reference(lengths: list[int], t_src: int, t_tgt: int):
    real = torch.arange(t_src) < torch.tensor(lengths)[:, None]  # (B, T_src)
    padding = real[:, None, None, :]  # (B, 1, 1, T_src)
    causal = torch.ones(t_tgt, t_tgt, dtype=torch.bool).tril()  # (T_tgt, T_tgt)
    return padding, causal, padding


def _full(
    mask, batch: int, t_q: int, t_k: int, name: str, longest: int
) -> tuple[torch.Tensor | None, str | None]:
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        found = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        return (
            None,
            f"the {name} mask should be a torch.bool tensor (True = may attend), got {found}",
        )
    try:
        return torch.broadcast_to(mask, (batch, 1, t_q, t_k)), None
    except RuntimeError:
        problem = (
            f"the {name} mask of shape {tuple(mask.shape)} does not broadcast to "
            f"(B={batch}, h, T_q={t_q}, T_k={t_k})"
        )
        if mask.dim() and mask.shape[-1] == longest != t_k:
            problem += (
                f"; its last axis has max(src_lengths) = {longest} keys, but the batch is padded "
                f"to T_src = {t_k}: build it from torch.arange(t_src), not from the longest source"
            )
        return None, problem


def check_encoder_decoder_masks(make_masks: Callable) -> bool:
    """Check ``make_masks(src_lengths, t_src, t_tgt)`` -> ``(encoder_self, decoder_self, cross)``.

    Each is a bool mask (True = may attend) that broadcasts to ``(B, h, T_q, T_k)``: the
    encoder's self-attention ``(T_src, T_src)`` hides source padding only; the decoder's
    self-attention ``(T_tgt, T_tgt)`` is causal; cross-attention ``(T_tgt, T_src)`` hides
    source padding only. Masks are compared after broadcasting, so ``(B, 1, 1, T)`` and
    ``(B, 1, T_q, T)`` are both accepted. Names the mistake: a causal mask in the encoder or
    in cross-attention, no causal mask in the decoder, padding forgotten, the inverted
    convention (True = hidden).
    """
    # The last case pads the batch past its longest source (T_src = 8 > max(lengths) = 5),
    # as a batch cut to a fixed width is: masks built from max(src_lengths) fail there.
    cases = [([7, 4], 7, 5), ([2, 6, 3], 6, 4), ([5, 3], 8, 6)]
    names = ("encoder self-attention", "decoder self-attention", "cross-attention")

    def attempt() -> str | None:
        for lengths, t_src, t_tgt in cases:
            answer = make_masks(list(lengths), t_src, t_tgt)
            if not isinstance(answer, tuple) or len(answer) != 3:
                return f"make_masks should return three masks, got {type(answer).__name__}"
            batch = len(lengths)
            sizes = ((t_src, t_src), (t_tgt, t_tgt), (t_tgt, t_src))
            for name, mask, expected, (t_q, t_k) in zip(
                names, answer, _mask_reference(lengths, t_src, t_tgt), sizes
            ):
                full, problem = _full(mask, batch, t_q, t_k, name, max(lengths))
                if problem:
                    return problem
                expected = torch.broadcast_to(expected, (batch, 1, t_q, t_k))
                problem = compare(full, expected, name=f"the {name} mask for lengths {lengths}")
                if problem:
                    return f"{problem}; {_mask_reason(name, full, expected, lengths, t_q, t_k)}"
        return None

    return run_check("make_masks", attempt)


def _mask_reason(name: str, full, expected, lengths, t_q: int, t_k: int) -> str:
    if torch.equal(full, ~expected):
        return "the convention is inverted: True means 'may attend' (False = hidden)"
    tril = torch.ones(t_q, t_k, dtype=torch.bool).tril()
    if name == "decoder self-attention":
        if (full & ~tril).any():
            return "a target position sees later target tokens: the decoder needs a causal mask"
        if torch.equal(full, expected & torch.ones(t_q, t_k, dtype=torch.bool).tril(-1)):
            return (
                "tril(-1) hides the diagonal too: each target position must also see itself "
                "(use tril() with diagonal 0; the first row would be fully masked)"
            )
        return "the decoder's own tokens are never padding-masked here; use the causal mask only"
    if torch.equal(full, expected & tril):
        return (
            "a causal mask was added: the source is fully known, so every position may read "
            "every real source token"
        )
    if full.all():
        return "the source padding is not hidden: mask keys j >= length"
    if torch.equal(full[..., : max(lengths)], expected[..., : max(lengths)]):
        return (
            f"keys past the longest source (j >= max(src_lengths) = {max(lengths)}) are padding "
            f"too: compare torch.arange(t_src) with the lengths, up to T_src = {t_k}"
        )
    return f"expected True exactly at real source keys (j < length, lengths {lengths})"
