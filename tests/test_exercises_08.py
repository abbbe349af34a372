"""Checkers of notebook 08, the learner's merge_heads and MultiHeadAttention: each catalogued
mistake is rejected with its own message, right answers written other ways are accepted, and
the checker never fails on its own (issue 32's standard)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from checker_verdict import verdict
from torch import nn

from course_utils.exercises import check_merge_heads, check_multi_head_attention
from course_utils.exercises import solution_model as solution
from course_utils.exercises.nb08_concat_and_w_o import _MERGE_MISTAKES, _mha_mistakes


@pytest.fixture(autouse=True)
def scratch_parts(tmp_path, monkeypatch):
    """Parts that pass are saved: into a scratch folder, never the repository."""
    monkeypatch.setenv("COURSE_MY_MODEL", str(tmp_path / "my_model"))
    return tmp_path / "my_model"


# --- merge_heads ---------------------------------------------------------------------------


RIGHT_MERGES = {
    "solution": solution.merge_heads,
    "reshape": lambda x: x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1),
    "flatten": lambda x: x.transpose(1, 2).flatten(2),
    "einsum": lambda x: torch.einsum("bhtd->bthd", x).reshape(x.shape[0], x.shape[2], -1),
    "permute": lambda x: x.permute(0, 2, 1, 3).contiguous().view(x.shape[0], x.shape[2], -1),
}


@pytest.mark.parametrize("name", RIGHT_MERGES)
def test_merge_heads_accepts_right_answers(name, capsys):
    assert verdict(check_merge_heads, RIGHT_MERGES[name], capsys) == (
        True,
        "✅ merge_heads: correct\n",
    )


@pytest.mark.parametrize("index", range(len(_MERGE_MISTAKES)))
def test_merge_heads_names_each_catalogued_mistake(index, capsys):
    message, wrong = _MERGE_MISTAKES[index]
    ok, out = verdict(check_merge_heads, wrong, capsys)
    assert not ok and f"looks like {message}" in out


@pytest.mark.parametrize(
    "joined",
    [lambda x: torch.cat([x[:, i] for i in range(x.shape[1])], dim=-1),  # notebook 08's Concat
     lambda x: torch.cat(x.unbind(dim=1), dim=-1),
     lambda x: torch.stack([x[:, i] for i in range(x.shape[1])], dim=2).flatten(2)],
)  # fmt: skip
def test_merge_heads_without_a_loop_rejects_the_heads_joined_one_by_one(joined, capsys):
    """The values are right, but the exercise asks for the merge without a loop: the Concat
    shown by hand above it is not the answer."""
    ok, out = verdict(check_merge_heads, joined, capsys)
    assert not ok and "joins the heads one at a time (torch." in out and "transpose(1, 2)" in out


def test_merge_heads_names_a_view_of_the_transposed_tensor(capsys):
    ok, out = verdict(
        check_merge_heads, lambda x: x.transpose(1, 2).view(x.shape[0], x.shape[2], -1), capsys
    )
    assert not ok and "call .contiguous() before .view()" in out


def test_merge_heads_catches_the_notebook_s_globals(capsys):
    B, n_heads, T, d_model = 2, 3, 6, 24  # the notebook's running example

    def with_globals(x):
        return x.transpose(1, 2).contiguous().view(B, x.shape[2], n_heads * x.shape[3])

    def all_globals(x):
        return x.transpose(1, 2).contiguous().view(B, T, d_model)

    ok, out = verdict(check_merge_heads, with_globals, capsys)
    assert not ok and "it was right on x of shape (2, 3, 6, 8)" in out, out
    assert "it reads B = 2, n_heads = 3 from your notebook's globals" in out, out
    ok, out = verdict(check_merge_heads, all_globals, capsys)
    assert not ok and "not from the notebook's globals" in out
    assert "it reads B = 2, T = 6, d_model = 24 from your notebook's globals" in out, out


def test_merge_heads_reports_wrong_shapes_types_and_stubs(capsys):
    ok, out = verdict(check_merge_heads, lambda x: x.transpose(1, 2), capsys)
    assert not ok and "shape (2, 6, 3, 8), expected (B, T, C) = (2, 6, 24)" in out
    ok, out = verdict(check_merge_heads, lambda x: x.transpose(1, 2).tolist(), capsys)
    assert not ok and "should be a torch.Tensor, got a list" in out
    ok, out = verdict(check_merge_heads, solution.merge_heads(torch.zeros(1, 1, 1, 1)), capsys)
    assert not ok and "pass the function itself" in out

    def stub(x):
        raise NotImplementedError  # your code here

    assert verdict(check_merge_heads, stub, capsys) == (
        False,
        "❌ merge_heads: not implemented yet\n",
    )


def test_merge_heads_saves_the_part_only_when_right(scratch_parts, capsys):
    def merge_heads(x):
        return x.reshape(x.shape[0], x.shape[2], -1)

    assert not verdict(check_merge_heads, merge_heads, capsys)[0]
    assert not (scratch_parts / "merge_heads.py").exists()

    def merge_heads(x):  # noqa: F811 (the learner's second try)
        return x.transpose(1, 2).flatten(2)

    assert verdict(check_merge_heads, merge_heads, capsys)[0]
    assert "transpose(1, 2).flatten(2)" in (scratch_parts / "merge_heads.py").read_text()


# --- MultiHeadAttention ----------------------------------------------------------------------


class WithSDPA(solution.MultiHeadAttention):
    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (
            w(x).reshape(B, T, self.n_heads, -1).permute(0, 2, 1, 3)
            for w in (self.w_q, self.w_k, self.w_v)
        )
        heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.w_o(heads.permute(0, 2, 1, 3).reshape(B, T, C))


class ByHandFloat64(solution.MultiHeadAttention):
    def forward(self, x):
        B, T, C = x.shape
        d_k = C // self.n_heads
        q, k, v = (
            F.linear(x.double(), w.weight.double(), w.bias.double())
            for w in (self.w_q, self.w_k, self.w_v)
        )
        q, k, v = (t.view(B, T, self.n_heads, d_k).transpose(1, 2) for t in (q, k, v))
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(d_k)
        keep = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~keep, -torch.inf)
        heads = scores.softmax(-1) @ v
        return F.linear(
            heads.transpose(1, 2).reshape(B, T, C), self.w_o.weight.double(), self.w_o.bias.double()
        )


class PerHeadLoop(solution.MultiHeadAttention):
    def forward(self, x):
        T, C = x.shape[1], x.shape[2]
        d_k = C // self.n_heads
        q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)
        outs = []
        for i in range(self.n_heads):
            part = slice(i * d_k, (i + 1) * d_k)
            scores = q[..., part] @ k[..., part].transpose(-2, -1) / d_k**0.5
            scores = scores + torch.full((T, T), float("-inf"), device=x.device).triu(1)
            outs.append(scores.softmax(-1) @ v[..., part])
        return self.w_o(torch.cat(outs, dim=-1))


class WithLibrary(solution.MultiHeadAttention):
    """nn.MultiheadAttention with the learner's weights copied in under no_grad: the values are
    right, but w_q ... w_o never learn (issue 42)."""

    def forward(self, x):
        C = x.shape[-1]
        library = nn.MultiheadAttention(C, self.n_heads, batch_first=True)
        with torch.no_grad():
            library.in_proj_weight.copy_(
                torch.cat([self.w_q.weight, self.w_k.weight, self.w_v.weight])
            )
            library.in_proj_bias.copy_(torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias]))
            library.out_proj.weight.copy_(self.w_o.weight)
            library.out_proj.bias.copy_(self.w_o.bias)
        mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)  # True = hidden
        return library(x, x, x, attn_mask=mask, need_weights=False)[0]


RIGHT_MHAS = [solution.MultiHeadAttention, WithSDPA, ByHandFloat64, PerHeadLoop]


@pytest.mark.parametrize("part", RIGHT_MHAS, ids=lambda c: c.__name__)
def test_multi_head_attention_accepts_right_answers(part, capsys):
    ok, out = verdict(check_multi_head_attention, part, capsys)
    assert ok, out


@pytest.mark.parametrize("index", range(len(_mha_mistakes())))
def test_multi_head_attention_names_each_catalogued_mistake(index, capsys):
    message, wrong = _mha_mistakes()[index]
    ok, out = verdict(check_multi_head_attention, wrong, capsys)
    assert not ok and f"looks like {message}" in out


def test_multi_head_attention_catches_a_fixed_number_of_heads(capsys):
    class Global(solution.MultiHeadAttention):
        def forward(self, x):
            n_heads = 3 if x.shape[-1] % 3 == 0 else self.n_heads  # the notebook's n_heads = 3
            q, k, v = (solution.split_heads(w(x), n_heads) for w in (self.w_q, self.w_k, self.w_v))
            return self.w_o(solution.merge_heads(solution.attention(q, k, v)))

    ok, out = verdict(check_multi_head_attention, Global, capsys)
    assert not ok and "what n_heads=3 gives, not n_heads=1" in out


def test_multi_head_attention_reports_structure_types_and_stubs(capsys):
    class Renamed(nn.Module):
        def __init__(self, d_model, n_heads):
            super().__init__()
            self.n_heads = n_heads
            self.query = nn.Linear(d_model, d_model)
            self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(3))

    ok, out = verdict(check_multi_head_attention, Renamed, capsys)
    assert (
        not ok and "has no parameter w_q.weight, w_q.bias but has query.weight, query.bias" in out
    )

    class NoBias(solution.MultiHeadAttention):
        def __init__(self, d_model, n_heads):
            super().__init__(d_model, n_heads)
            self.w_q = nn.Linear(d_model, d_model, bias=False)

    ok, out = verdict(check_multi_head_attention, NoBias, capsys)
    assert not ok and "lacks biases the course's model has: w_q.bias" in out

    class WrongInit(nn.Module):
        def __init__(self, d_model):
            super().__init__()

    ok, out = verdict(check_multi_head_attention, WrongInit, capsys)
    assert not ok and "__init__ takes (d_model, n_heads)" in out

    ok, out = verdict(check_multi_head_attention, solution.MultiHeadAttention(24, 3), capsys)
    assert not ok and "pass the class itself: check_multi_head_attention(MultiHeadAttention)" in out
    ok, out = verdict(check_multi_head_attention, solution.merge_heads, capsys)
    assert not ok and "(a subclass of nn.Module), got a function" in out

    class Pair(solution.MultiHeadAttention):
        def forward(self, x):
            return super().forward(x), None

    ok, out = verdict(check_multi_head_attention, Pair, capsys)
    assert not ok and "should be a torch.Tensor, got a tuple of 2 items" in out

    class Stub(solution.MultiHeadAttention):
        def forward(self, x):
            raise NotImplementedError  # your code here

    assert verdict(check_multi_head_attention, Stub, capsys) == (
        False,
        "❌ MultiHeadAttention: not implemented yet\n",
    )


class Detached(solution.MultiHeadAttention):
    def forward(self, x):
        q, k, v = (solution.split_heads(w(x).detach(), self.n_heads) for w in self._qkv())
        return self.w_o(solution.merge_heads(solution.attention(q, k, v)))

    def _qkv(self):
        return self.w_q, self.w_k, self.w_v


class WithDropout(solution.MultiHeadAttention):
    def __init__(self, d_model, n_heads):
        super().__init__(d_model, n_heads)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        return self.dropout(super().forward(x))


class CpuMask(solution.MultiHeadAttention):
    def forward(self, x):
        T = x.shape[1]
        q, k, v = (solution.split_heads(w(x), self.n_heads) for w in (self.w_q, self.w_k, self.w_v))
        scores = q @ k.mT / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        return self.w_o(solution.merge_heads(scores.softmax(-1) @ v))


@pytest.mark.parametrize(
    ("part", "said"),
    [
        (WithLibrary, ["w_q, w_k, w_v and w_o get no gradient", "autograd off at line"]),
        (Detached, ["x, w_q, w_k and w_v get no gradient", ".detach() (line"]),
        (WithDropout, ["random in train mode", "self.dropout = Dropout(p=0.1)", "no dropout"]),
        (CpuMask, ["torch.ones (line", "`masked_fill` meets it", "(device=x.device)"]),
    ],
    ids=["copied under no_grad", "detached projections", "dropout", "mask on the CPU"],
)
def test_multi_head_attention_names_what_training_and_a_gpu_need(part, said, capsys):
    """Issue 42: right values in eval mode, but what trains or runs on a GPU is broken."""
    ok, out = verdict(check_multi_head_attention, part, capsys)
    assert not ok and all(s in out for s in said), out


def test_multi_head_attention_leaves_the_global_random_state_alone(capsys):
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    verdict(check_multi_head_attention, solution.MultiHeadAttention, capsys)
    assert torch.equal(torch.rand(3), expected)


def test_a_reference_gradient_within_atol_of_zero_is_rounding_not_a_gradient():
    """With T = 1 the softmax is 1 whatever q and k are: w_q's true gradient is 0, and the
    reference's is 0 or about 1e-9 depending on the CPU's kernels (an AVX-512 machine gave the
    latter). A zero gradient then is right; against a real gradient it is still named."""
    from course_utils.exercises.in_training import _gradient_problem
    from course_utils.exercises.runner import Prepared
    from course_utils.exercises.watch import Watch

    def prepared(grad):
        leaf = torch.zeros(4, 4, requires_grad=True)
        leaf.grad = grad
        return Prepared(None, {"w_q.weight": leaf}, {})

    zero = torch.zeros(4, 4)
    assert _gradient_problem(prepared(zero), prepared(torch.full((4, 4), 1e-9)), Watch()) is None
    message = _gradient_problem(prepared(zero), prepared(torch.full((4, 4), 0.5)), Watch())
    assert message is not None and "gets no gradient" in message and "w_q" in message
