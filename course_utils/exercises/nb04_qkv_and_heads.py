"""Checkers for notebook 04: Q, K, V and heads."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils.exercises.core import compare, count_multiplications, run_check
from course_utils.exercises.difference import Tolerance
from course_utils.exercises.judge import Case, judge
from course_utils.lab.language import N_, tr, translated


def _randn_04(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    B, T, C = x.shape
    return x.view(B, T, n_heads, C // n_heads).transpose(1, 2)  # (B, h, T, d_k)


def _split_heads_cases() -> list[Case]:
    """Every size varied (the running example first), float32 and float64, edge sizes: one
    head, T = 1, B = 1, d_k = 1."""
    cases = []
    for (B, T, C, h), dtype in (
        ((2, 6, 24, 3), torch.float32),  # the running example: every axis its own size
        ((3, 5, 12, 4), torch.float64),
        ((1, 1, 8, 1), torch.float32),  # one head, T = 1
        ((2, 7, 10, 5), torch.float32),  # d_k = 2
        ((4, 3, 6, 6), torch.float64),  # d_k = 1: every channel its own head
    ):
        x = _randn_04(B, T, C, seed=40 + C).to(dtype)
        cases.append(Case(x, h))
    return cases


def _sizes(x: torch.Tensor, n_heads: int) -> tuple[int, int, int, int]:
    B, T, C = x.shape
    return B, n_heads, T, C // n_heads  # (B, h, T, d_k)


_SPLIT_HEADS_MISTAKES = (
    (
        N_(
            "x.view(B, h, T, d_k) (or reshape) in one step: it reads memory in order, so head 0 "
            "gets whole tokens chopped into pieces, positions and channels mixed. Cut the channels "
            "first, view(B, T, h, d_k), then move the heads forward with transpose(1, 2)"
        ),
        lambda x, h: x.reshape(*_sizes(x, h)),
    ),
    (
        N_(
            "the heads cut but not moved: (B, T, h, d_k). Add transpose(1, 2) to get "
            "(B, h, T, d_k), so that each head is a (T, d_k) matrix"
        ),
        lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1),
    ),
    (
        N_(
            "view(B, T, d_k, h): that deals the channels out in turn (head i gets channels i, "
            "i + h, i + 2h, ...); head i holds the block of d_k channels i*d_k .. (i+1)*d_k - 1: "
            "view(B, T, h, d_k)"
        ),
        lambda x, h: x.reshape(x.shape[0], x.shape[1], -1, h).permute(0, 3, 1, 2),
    ),
    (
        N_(
            "view(B, T, h, d_k) then transpose(2, 3) or permute to (B, T, d_k, h): the head axis "
            "must come right after B, transpose(1, 2)"
        ),
        lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1).transpose(2, 3),
    ),
    (
        N_(
            "the heads moved to the front, (h, B, T, d_k): the batch axis stays first, "
            "transpose(1, 2)"
        ),
        lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1).permute(2, 0, 1, 3),
    ),
    (
        N_(
            "a conversion to float32 (.float(), torch.tensor(...)): keep x's dtype, float64 in, "
            "float64 out"
        ),
        lambda x, h: _split_heads(x.float(), h),
    ),
)

_SPLIT_HEADS_ERRORS = (
    (
        RuntimeError,
        r"shape '\[.*\]' is invalid for input of size",
        N_(
            "the sizes given to view/reshape do not fit x: read B, T, C from x.shape and use "
            "d_k = C // n_heads, not notebook globals (B, T, d_model, n_heads, d_k)"
        ),
    ),
    (
        TypeError,
        r"float",
        N_("d_k must be an int: C // n_heads, not C / n_heads"),
    ),
)


def check_split_heads(split_heads: Callable) -> bool:
    """Exercise 04.1, a part of the learner's decoder: ``split_heads(x, n_heads)`` maps
    ``(B, T, C)`` to ``(B, h, T, d_k)``, head ``i`` holding channels ``i*d_k .. (i+1)*d_k - 1``
    of every position (Vaswani et al. 2017, §3.2.2).

    Tried on five inputs with every size varied (the running example (2, 6, 24) with h = 3
    first; one head with T = 1; d_k = 1; float32 and float64), so sizes from notebook globals
    fail. The answer must keep x's dtype; a non-contiguous view, ``reshape``, ``unflatten``,
    ``permute``, ``einops``-style chunks are all right. Named mistakes: a direct view to
    (B, h, T, d_k), the missing transpose, interleaved channels, the wrong axes moved, a fixed
    number of heads, sizes that do not fit, a float d_k. When it passes, the learner's source
    is saved for their decoder (:func:`course_utils.lab.parts.save_part`).
    """
    return judge(
        "split_heads",
        split_heads,
        _split_heads,
        _split_heads_cases(),
        _SPLIT_HEADS_MISTAKES,
        axes="B h T d_k",
        tolerance=Tolerance(atol=0.0, rtol=0.0, exact_dtype=True),
        errors=_SPLIT_HEADS_ERRORS,
        trains=True,
        part=True,
    )


def _head_queries_problem(answer, x, w_q, head: int, d_k: int, work: int) -> str | None:
    """Why ``answer`` (computed with ``work`` scalar multiplications) is not head ``head``'s
    queries, in the exercise's words, or None when it is."""
    block = slice(head * d_k, (head + 1) * d_k)
    own_work = x.shape[0] * x.shape[1] * x.shape[2] * d_k  # B * T * C * d_k
    if work >= 2 * own_work:
        return tr(
            "it does {work} multiplications, {ratio:.0f} times the {own_work} of "
            "x @ W_i^Q: it computes the full projection x @ W_q (all heads, on W_q or a copy, "
            "by @ or by broadcasting) and then slices it; multiply x by head i's own (C, d_k) "
            "block of columns only"
        ).format(work=work, ratio=work / own_work, own_work=own_work)
    if isinstance(answer, torch.Tensor) and answer.shape == x.shape[:2] + (d_k,):
        if torch.allclose(answer.detach().double(), (x @ w_q[block].T).double(), atol=1e-4):
            return tr("it uses {rows}").format(rows=translated(_ROWS))
    return None


_ROWS = N_(
    "rows of W_q (W_q[a:b] is (d_k, C), a block of input channels, the nn.Linear orientation); "
    "in the paper's orientation head i's matrix W_i^Q is a block of columns: "
    "W_q[:, i*d_k:(i+1)*d_k]"
)


def check_head_queries(head_queries: Callable) -> bool:
    """Exercise 04.2: ``head_queries(x, W_q, head, n_heads)`` is head ``head``'s queries,
    ``(B, T, d_k)``, computed as ``x @ W_i^Q`` with ``W_i^Q`` the ``(C, d_k)`` block of
    columns of ``W_q`` (paper orientation, ``(C, C)``; §3.2.2).

    Every head of the running example (C=24, h=3, float32) and of C=12, h=4 (float64) is
    tried. The exercise forbids the full projection: how it is detected is by the work
    done, not by which calls were made: :func:`~course_utils.exercises.core.count_multiplications`
    counts the scalar multiplications at the ATen level, and an answer that does at least
    twice head i's own ``B*T*C*d_k`` (the full projection does h times that, on ``W_q``, a
    copy, a transposed view or by broadcasting) is rejected even though its numbers are
    right. Any route to the right block (``x @ W_q[:, a:b]``, ``F.linear(x, W_q.T[a:b])``,
    ``einsum``, broadcasting over the block) is accepted. Rows of ``W_q`` instead of columns
    are named as such.
    """

    def attempt() -> str | None:
        cases = (((2, 6, 24, 3), 42, torch.float32), ((1, 5, 12, 4), 43, torch.float64))
        for (batch, time, channels, heads), seed, dtype in cases:
            x = _randn_04(batch, time, channels, seed=seed).to(dtype)
            w_q = _randn_04(channels, channels, seed=seed + 100).to(dtype)
            d_k = channels // heads
            for head in range(heads):
                expected = x @ w_q[:, head * d_k : (head + 1) * d_k]
                name = tr("head_queries(..., head={head}, n_heads={heads}) with C={channels}")
                name = name.format(head=head, heads=heads, channels=channels)
                with count_multiplications() as work:
                    try:
                        answer = head_queries(x.clone(), w_q.clone(), head, heads)
                    except RuntimeError as error:
                        if f"and {d_k}x{channels})" not in str(error):
                            raise
                        return tr("{name} raised {error}: {rows}").format(
                            name=name, error=error, rows=translated(_ROWS)
                        )
                problem = _head_queries_problem(answer, x, w_q, head, d_k, work.total)
                if problem is None:
                    problem = compare(answer, expected, name, atol=1e-4)
                    if problem is None and answer.dtype != dtype:
                        problem = tr("{name} is {got} for {dtype} inputs; keep their dtype")
                        problem = problem.format(name=name, got=answer.dtype, dtype=dtype)
                else:
                    problem = tr("{name}: {problem}").format(name=name, problem=problem)
                if problem:
                    return problem
        return None

    return run_check("head_queries", attempt)
