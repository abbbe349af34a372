"""Checkers for notebook 08: the learner's ``merge_heads`` and ``MultiHeadAttention``.

Both are parts of the learner's decoder (:mod:`.solution_model` holds the course's
solutions); a part that passes is saved for notebook 11's model.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

import course_utils.exercises.solution_model as solution
from course_utils.exercises.core import record_torch_calls
from course_utils.exercises.difference import Tolerance
from course_utils.exercises.judge import Case, judge, report
from course_utils.exercises.module_judge import judge_module
from course_utils.lab.language import N_, tr


def _concat(x: torch.Tensor) -> torch.Tensor:
    """Concat(head_1, ..., head_h) of §3.2.2, literally: (B, h, T, d_k) -> (B, T, h * d_k)."""
    return torch.cat(x.unbind(dim=1), dim=-1)


def _merge_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(8)
    shapes = [(2, 3, 6, 8), (3, 2, 5, 4), (1, 1, 1, 7), (4, 5, 3, 2)]  # notebook's shape first
    cases = [Case(torch.randn(*s, generator=generator)) for s in shapes]
    strided = torch.randn(2, 5, 4, 3, generator=generator).transpose(1, 2)  # (2, 4, 5, 3)
    cases.append(Case(strided, label=tr("a non-contiguous x of shape (2, 4, 5, 3)")))
    wide = torch.randn(2, 2, 3, 5, generator=generator, dtype=torch.float64)
    cases.append(Case(wide, label=tr("a float64 x of shape (2, 2, 3, 5)")))
    return cases


_MERGE_MISTAKES = [
    (
        N_(
            "a view or reshape straight from (B, h, T, d_k) to (B, T, C) without "
            "transpose(1, 2): it runs, but each row mixes several tokens of one head; "
            "transpose(1, 2) first"
        ),
        lambda x: x.reshape(x.shape[0], x.shape[2], -1),
    ),
    (
        N_(
            "permute(0, 2, 3, 1) before the reshape: the channels come out d_k-major, "
            "interleaving the heads; transpose(1, 2) keeps each head's d_k channels together"
        ),
        lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1),
    ),
    (
        N_("transpose(2, 3) (T with d_k) instead of transpose(1, 2) (h with T)"),
        lambda x: x.transpose(2, 3).reshape(x.shape[0], x.shape[2], -1),
    ),
    (
        N_(
            "a conversion to float32 (.float(), torch.tensor(...)): keep x's dtype, float64 "
            "in, float64 out"
        ),
        lambda x: x.float().transpose(1, 2).reshape(x.shape[0], x.shape[2], -1),
    ),
    (
        N_("a conversion to float64 (.double()): keep x's dtype, float32 in, float32 out"),
        lambda x: x.double().transpose(1, 2).reshape(x.shape[0], x.shape[2], -1),
    ),
]

_MERGE_ERRORS = [
    (
        RuntimeError,
        "view size is not compatible",
        N_(
            "after transpose(1, 2) the tensor is not contiguous: call .contiguous() before "
            ".view(), or use .reshape()"
        ),
    ),
    (
        RuntimeError,
        r"shape '\[.*\]' is invalid for input of size",
        N_(
            "take the sizes from the input (B, h, T, d_k = x.shape), not from the notebook's "
            "globals such as B or n_heads"
        ),
    ),
]


_JOINS = {"cat", "concat", "concatenate", "stack", "hstack", "dstack", "column_stack"}


def _joins_heads_one_by_one(merge_heads: Callable) -> str | None:
    """The exercise asks for the merge without a loop over the heads (notebook 08 shows the
    Concat with ``torch.cat`` first); an answer that joins them with ``cat`` or ``stack`` (any
    of their names, seen by :func:`.core.record_torch_calls`) is told so."""
    if not callable(merge_heads):
        return None
    x = torch.randn(2, 3, 6, 8, generator=torch.Generator().manual_seed(8))  # (B, h, T, d_k)
    try:
        with record_torch_calls() as calls:
            merge_heads(x)
    except Exception:  # the judge names the error
        return None
    used = sorted({call.name for call in calls} & _JOINS)
    if not used:
        return None
    return tr(
        "it joins the heads one at a time (torch.{calls}), the Concat shown above; write it "
        "without a loop: one transpose(1, 2) that puts T before h, then one reshape (or "
        ".contiguous().view) to (B, T, h * d_k)"
    ).format(calls=", torch.".join(used))


def check_merge_heads(merge_heads: Callable) -> bool:
    """Check ``merge_heads(x)``: ``(B, h, T, d_k)`` -> ``(B, T, h * d_k)``, row t holding head
    0's vector of token t, then head 1's, ... (the Concat of §3.2.2).

    Tried at six shapes (the notebook's (2, 3, 6, 8) first, then sizes where its globals
    B = 2 and n_heads = 3 are wrong; T = 1 with one head; a non-contiguous input; float64,
    whose dtype must be kept). Names a view without the transpose, a permute that
    interleaves the heads, the wrong transpose, a conversion of the dtype, a view of the
    non-contiguous transposed tensor, sizes read from notebook globals, and the heads joined
    one at a time with ``torch.cat`` (the exercise asks for no loop); the gradient of x is
    compared too.
    """
    problem = _joins_heads_one_by_one(merge_heads)
    if problem:
        return report("merge_heads", merge_heads, problem, part=True)
    return judge(
        "merge_heads", merge_heads, _concat, _merge_cases(), _MERGE_MISTAKES,
        axes="B T C", tolerance=Tolerance(exact_dtype=True), errors=_MERGE_ERRORS, trains=True,
        part=True,
    )  # fmt: skip


# --- MultiHeadAttention ----------------------------------------------------------------


class _Reference(solution.MultiHeadAttention):
    """Causal multi-head self-attention through PyTorch's fused kernel."""

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (w(x).view(B, T, self.n_heads, -1).transpose(1, 2) for w in self._qkv())
        heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, h, T, d_k)
        return self.w_o(heads.transpose(1, 2).reshape(B, T, C))

    def _qkv(self):
        return self.w_q, self.w_k, self.w_v


def _attend(module, x, *, causal=True, scale=None, dim=-1, diagonal=1, heads=None, qk=False):
    """Multi-head attention with one thing changed (the mistakes below)."""
    B, T, C = x.shape
    h = heads or module.n_heads
    q, k, v = (w(x).view(B, T, h, -1).transpose(1, 2) for w in (module.w_q, module.w_k, module.w_v))
    if qk:
        q, k = k, q
    scores = q @ k.transpose(-2, -1) / math.sqrt(scale or q.shape[-1])  # (B, h, T, T)
    if causal:
        future = torch.ones(T, T, dtype=torch.bool).triu(diagonal=diagonal)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=dim) @ v  # (B, h, T, d_k)


def _mistake(**change) -> type:
    class Mistake(solution.MultiHeadAttention):
        def forward(self, x):
            heads = _attend(self, x, **change)
            return self.w_o(heads.transpose(1, 2).reshape(x.shape))

    return Mistake


class _NoWo(solution.MultiHeadAttention):
    def forward(self, x):
        return solution.merge_heads(_attend(self, x))


class _ViewMerge(solution.MultiHeadAttention):
    def forward(self, x):
        return self.w_o(_attend(self, x).reshape(x.shape))


class _RawWeights(solution.MultiHeadAttention):
    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (
            solution.split_heads(x @ w.weight, self.n_heads) for w in (self.w_q, self.w_k, self.w_v)
        )
        heads = solution.attention(q, k, v)
        return solution.merge_heads(heads) @ self.w_o.weight


class _NoBiases(solution.MultiHeadAttention):
    def forward(self, x):
        q, k, v = (
            solution.split_heads(x @ w.weight.T, self.n_heads)
            for w in (self.w_q, self.w_k, self.w_v)
        )
        heads = solution.merge_heads(solution.attention(q, k, v))
        return heads @ self.w_o.weight.T + self.w_o.bias


class _NoBiasesAtAll(_NoBiases):
    def forward(self, x):
        return super().forward(x) - self.w_o.bias


class _ValuesFromWk(solution.MultiHeadAttention):
    def forward(self, x):
        q, k = (
            solution.split_heads(self.w_q(x), self.n_heads),
            solution.split_heads(self.w_k(x), self.n_heads),
        )
        return self.w_o(solution.merge_heads(solution.attention(q, k, k)))


_MHA_MISTAKES = [
    (N_("no causal mask: call attention(q, k, v, causal=True) (or mask the future)"),
     _mistake(causal=False)),
    (N_("scores scaled by sqrt(d_model); scale by sqrt(d_k), the width of one head"), None),
    (N_("scores not scaled by 1/sqrt(d_k)"), _mistake(scale=1)),
    (N_("softmax over the queries (dim=-2); it runs over the keys, the last axis"),
     _mistake(dim=-2)),
    (N_("a causal mask that also hides the diagonal (triu(diagonal=0)): a query must see itself"),
     _mistake(diagonal=0)),
    (N_("scores k q^T instead of q k^T: with the causal mask each key sees later queries"),
     _mistake(qk=True)),
    (N_("one head over all C channels: split into self.n_heads heads"), _mistake(heads=1)),
    (N_("no W_o: project the merged heads with self.w_o"), _NoWo),
    (N_("heads merged by a view without transpose(1, 2) (see merge_heads)"), _ViewMerge),
    (N_("x @ w.weight: nn.Linear computes x @ weight.T + bias; call self.w_q(x)"), _RawWeights),
    (N_("the biases of w_q, w_k, w_v skipped (x @ w.weight.T): nn.Linear adds its bias; call "
        "self.w_q(x)"), _NoBiases),
    (N_("every bias skipped (x @ w.weight.T): nn.Linear adds its bias; call self.w_q(x) ... "
        "self.w_o(h)"), _NoBiasesAtAll),
    (N_("the values computed with w_k (a copy-paste slip): v = self.w_v(x)"), _ValuesFromWk),
]  # fmt: skip


def _mha_mistakes() -> list[tuple[str, type]]:
    """The catalogue, with the d_model scaling bound to each module's width."""

    class ScaledByDModel(solution.MultiHeadAttention):
        def forward(self, x):
            heads = _attend(self, x, scale=x.shape[-1])
            return self.w_o(heads.transpose(1, 2).reshape(x.shape))

    return [(m, ScaledByDModel if cls is None else cls) for m, cls in _MHA_MISTAKES]


def _mha_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(10)
    sizes = [(24, 3, (2, 6)), (12, 1, (3, 5)), (16, 4, (1, 1)), (20, 5, (2, 7)), (30, 2, (1, 9))]
    cases = []
    for d_model, n_heads, (b, t) in sizes:
        x = torch.randn(b, t, d_model, generator=generator)
        cases.append(Case(d_model, n_heads, x))
    strided = torch.randn(7, 2, 20, generator=generator).transpose(0, 1)  # (2, 7, 20)
    cases.append(
        Case(20, 4, strided, label=tr("d_model=20, n_heads=4, a non-contiguous x (2, 7, 20)"))
    )
    return cases


def check_multi_head_attention(MultiHeadAttention: type) -> bool:  # noqa: N803
    """Check the class ``MultiHeadAttention(d_model, n_heads)``: causal multi-head
    self-attention ``(B, T, C)`` -> ``(B, T, C)`` with ``w_q, w_k, w_v, w_o``
    (``nn.Linear(C, C)``), §3.2.2 of Vaswani et al. 2017.

    Builds it at six sizes (one head, T = 1, d_k = 2 to 15, a non-contiguous input), loads the
    same random weights as the reference (``F.scaled_dot_product_attention`` with
    ``is_causal=True``) and compares the outputs. Names thirteen mistakes: no causal mask, the
    wrong scale (sqrt(d_model), none), softmax over the queries, the diagonal masked, k q^T,
    one head, no W_o, a merge without the transpose, raw weights without the bias, biases
    skipped (some or all), values from w_k. A renamed attribute (``w_q`` ...) or a
    persistent buffer is named before any run; then the module runs as training does
    (train mode, the gradients of x and of every projection, a mask made on the CPU).
    """
    return judge_module(
        "MultiHeadAttention", MultiHeadAttention, _Reference, _mha_cases(), _mha_mistakes(),
        build_args=2, checker="check_multi_head_attention", axes="B T C", errors=_MERGE_ERRORS,
    )  # fmt: skip
