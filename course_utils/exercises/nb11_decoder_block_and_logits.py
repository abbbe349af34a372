"""Checkers for notebook 11: decoder block and logits."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.core import compare, run_check


def check_top_k_filter(top_k_filter: Callable) -> bool:
    """Check ``top_k_filter(logits, k)``: keep the k largest logits of each row (last axis),
    set the rest to ``-inf``.

    Tried on ``(4, 10)`` logits with k = 3, ``(2, 3, 10)`` with k = 1, ``(2, 10)`` with
    k = 10 (nothing removed) and a tie at the k-th largest (keeping every tied logit and
    keeping exactly k are both accepted). Says when removed entries are 0 instead of
    ``-inf``, when a row keeps the wrong number of entries, when removed entries get a large
    finite negative number (such as -1e9) instead of ``-inf``, and when the answer is already
    probabilities.
    """
    generator = torch.Generator().manual_seed(12)
    # The last case ties the 2nd and 3rd largest logits of row 0 at k = 2: keeping every tied
    # logit (logits >= the k-th largest, the course's top_k_filter) and keeping exactly k of
    # them (torch.topk's indices) are both accepted.
    tied = torch.tensor([[2.0, 0.5, 1.0, 1.0, -1.0], [0.0, 3.0, -2.0, 1.5, 0.5]])
    cases = [
        (torch.randn(4, 10, generator=generator) * 2.0, 3),
        (torch.randn(2, 3, 10, generator=generator) * 2.0, 1),
        (torch.randn(2, 10, generator=generator) * 2.0, 10),
        (tied, 2),
    ]

    def attempt() -> str | None:
        for logits, k in cases:
            answer = top_k_filter(logits.clone(), k)
            kth_largest = torch.topk(logits, k, dim=-1).values[..., -1:]
            remove = logits < kth_largest
            expected = logits.masked_fill(remove, float("-inf"))
            name = f"top_k_filter(logits of shape {tuple(logits.shape)}, k={k})"
            if not isinstance(answer, torch.Tensor) or answer.shape != expected.shape:
                return compare(answer, expected, name=name)
            answer = answer.detach()
            if (answer >= 0).all() and torch.allclose(
                answer.sum(-1).double(), torch.ones(answer.shape[:-1], dtype=torch.double)
            ):
                return f"{name} returned probabilities (rows sum to 1); return filtered logits"
            if remove.any() and (answer[remove] == 0).all():
                return (
                    f"{name} sets removed logits to 0; use -inf, since softmax gives a 0 logit "
                    "a positive probability"
                )
            removed = answer[remove]
            if remove.any() and torch.isfinite(removed).all() and (removed <= -1e4).all():
                return (
                    f"{name} sets removed logits to {removed.max().item():.3g}, a finite number; "
                    "use -inf, which gives probability exactly 0 whatever the other logits are "
                    "(a finite value gives 0 only while the kept logits are far above it)"
                )
            dropped = answer == float("-inf")
            kept = (~dropped).sum(-1)
            only_allowed = not (remove & ~dropped).any()  # nothing below the k-th is kept
            right = torch.equal(dropped, remove) or (only_allowed and bool((kept == k).all()))
            if not right:
                if only_allowed or (kept != k).any():
                    return f"{name} keeps {kept.flatten().tolist()} entries per row, expected k={k}"
                problem = compare(dropped, remove, name=f"{name}'s -inf mask")
                return f"{problem} (keep the k largest, not the k smallest)"
            remove = dropped  # for the tie case: compare the logits the answer kept
            problem = compare(answer.masked_fill(remove, 0.0), expected.masked_fill(remove, 0.0))
            if problem is not None:
                return f"the kept logits of {name} changed: {problem}"
        return None

    return run_check("top_k_filter", attempt)


def check_greedy_next_token(greedy_next_token: Callable) -> bool:
    """Check ``greedy_next_token(logits)``: logits ``(B, T, V)`` -> the most likely next id at
    the *last* position, shape ``(B, 1)``, int64.

    Says when the answer uses the first position, drops the ``(B, 1)`` shape that
    ``torch.cat([ids, next_id], dim=1)`` needs, or has another integer dtype than int64.
    """
    generator = torch.Generator().manual_seed(13)
    cases = [torch.randn(2, 6, 84, generator=generator), torch.randn(3, 1, 5, generator=generator)]

    def attempt() -> str | None:
        for logits in cases:
            answer = greedy_next_token(logits.clone())
            expected = logits[:, -1, :].argmax(dim=-1, keepdim=True)  # (B, V) -> (B, 1)
            name = f"greedy_next_token(logits of shape {tuple(logits.shape)})"
            problem = compare(answer, expected, name=name)
            if problem is None and answer.dtype != torch.int64:
                return (
                    f"{name} has dtype {answer.dtype}; token ids are int64 (torch.long), as "
                    "argmax returns them and torch.cat with the prompt's ids needs"
                )
            if problem is None:
                continue
            if isinstance(answer, torch.Tensor) and answer.shape == expected.shape[:1]:
                return f"{problem}; keep the (B, 1) shape (keepdim=True) for torch.cat(dim=1)"
            first = logits[:, 0, :].argmax(dim=-1, keepdim=True)
            if isinstance(answer, torch.Tensor) and torch.equal(answer, first):
                return f"{problem}; that is the first position: the next token follows the last one"
            return problem
        return None

    return run_check("greedy_next_token", attempt)
