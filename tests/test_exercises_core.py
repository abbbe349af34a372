"""The exercise machinery: compare() finds each kind of difference; expect_error really fails."""

import pytest
import torch

from course_utils.exercises import compare, expect_error, run_check


def test_compare_accepts_equal_and_names_each_kind_of_difference():
    expected = torch.arange(6.0).reshape(2, 3)
    assert compare(expected.clone(), expected) is None
    assert "torch.Tensor" in compare([[0, 1, 2]], expected)
    assert "shape (3, 2), expected (2, 3)" in compare(expected.T, expected)
    assert "dtype torch.int64" in compare(expected.long(), expected)
    wrong = expected.clone()
    wrong[1, 2] += 0.5
    assert "up to 0.5" in compare(wrong, expected) and "(1, 2)" in compare(wrong, expected)
    nan = expected.clone()
    nan[0, 1] = float("nan")
    assert "NaN at (0, 1)" in compare(nan, expected)
    mask = torch.ones(2, 2, dtype=torch.bool).tril()
    assert "first at index (0, 1)" in compare(torch.ones(2, 2, dtype=torch.bool), mask)


def test_run_check_reports_and_never_raises(capsys):
    assert run_check("demo", lambda: None) is True
    assert run_check("demo", lambda: "shape (1,), expected (2,)") is False

    def unfinished():
        raise NotImplementedError

    assert run_check("demo", unfinished) is False
    assert run_check("demo", lambda: 1 / 0) is False
    out = capsys.readouterr().out
    assert "✅ demo: correct" in out and "not implemented yet" in out
    assert "ZeroDivisionError" in out


def test_expect_error_fails_when_nothing_is_raised(capsys):
    with expect_error(ValueError, match="bad"):
        raise ValueError("bad shape")
    assert "ValueError raised, as expected: bad shape" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="nothing was raised"):
        with expect_error(ValueError):
            pass
    with pytest.raises(AssertionError, match="does not match"):
        with expect_error(ValueError, match="shape"):
            raise ValueError("other")
    with pytest.raises(KeyError):
        with expect_error(ValueError):
            raise KeyError("a different error passes through")


def test_count_multiplications_sees_every_route_to_a_product():
    # How the checkers of 02, 04 and 07 detect a forbidden route: the ATen-level count of
    # scalar multiplications (and the names of the ops that ran), whatever Python called them.
    import torch.nn.functional as F

    from course_utils.exercises.core import count_multiplications

    x, w = torch.randn(2, 3, 4), torch.randn(4, 5)
    expected = 2 * 3 * 4 * 5
    routes = {
        "@": lambda: x @ w,
        "F.linear": lambda: F.linear(x, w.T),
        "F.linear with bias": lambda: F.linear(x, w.T, torch.zeros(5)),
        "einsum": lambda: torch.einsum("btc,cd->btd", x, w),
        "a copy": lambda: x @ w.clone(),
        "broadcasting": lambda: (x[..., None] * w).sum(dim=-2),
        "bmm": lambda: torch.bmm(x, w.expand(2, 4, 5)),
        "one row at a time": lambda: torch.stack([row @ w for row in x.reshape(-1, 4)]),
        "one dot product at a time": lambda: [
            torch.dot(row, column) for row in x.reshape(-1, 4) for column in w.T
        ],
    }
    for name, route in routes.items():
        with count_multiplications() as count:
            route()
        assert count.total == expected, (name, count.total)
    with count_multiplications() as count:
        x[:, :, 0] + 1.0  # no product at all
        w[torch.tensor([0, 2])]  # a lookup
    assert count.total == 0
    with count_multiplications() as count:
        torch.special.softmax(x, -1)
    assert "_softmax" in count.ops


# --- judge: the framework every checker is written with ----------------------------------------

import math  # noqa: E402

from course_utils.exercises import Case, Tolerance, difference, judge  # noqa: E402


def _attention(q, k, v):
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v, weights


_ATTENTION_MISTAKES = [
    (
        "softmax over the queries (dim=-2); softmax runs over the keys, the last axis",
        lambda q, k, v: (
            torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2) @ v,
            torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2),
        ),
    ),
    (
        "head-averaged weights (B, T_q, T_k); return every head's weights (B, h, T_q, T_k)",
        lambda q, k, v: (_attention(q, k, v)[0], _attention(q, k, v)[1].mean(1)),
    ),
]


def _attention_cases():
    g = torch.Generator().manual_seed(0)
    return [
        Case(*(torch.randn(2, 3, t_q if i == 0 else t_k, 4, generator=g) for i in range(3)))
        for t_q, t_k in ((5, 7), (1, 1), (4, 4))
    ]


def _judge_attention(answer):
    return judge(
        "attention", answer, _attention, _attention_cases(), _ATTENTION_MISTAKES,
        axes=("output", "weights"),
    )  # fmt: skip


def test_judge_accepts_right_variants(capsys):
    variants = {
        "as written": _attention,
        "float64": lambda q, k, v: _attention(q.double(), k.double(), v.double()),
        "a list": lambda q, k, v: list(_attention(q, k, v)),
        "F.sdpa and a non-contiguous view": lambda q, k, v: (
            torch.nn.functional.scaled_dot_product_attention(q, k, v)
            .transpose(1, 2)
            .transpose(1, 2),
            _attention(q, k, v)[1].transpose(-1, -2).contiguous().transpose(-1, -2),
        ),
    }
    for name, answer in variants.items():
        assert _judge_attention(answer), (name, capsys.readouterr().out)
    assert capsys.readouterr().out.count("✅ attention: correct") == len(variants)


def test_judge_names_each_catalogued_mistake_and_each_structural_one(capsys):
    def swapped(q, k, v):
        return _attention(q, k, v)[::-1]

    def raises(q, k, v):
        return q @ k  # a shape error in the learner's code

    expected = {
        "softmax over the queries": _ATTENTION_MISTAKES[0][1],
        "head-averaged weights": _ATTENTION_MISTAKES[1][1],
        "(weights, output), in another order": swapped,
        "your function raised RuntimeError": raises,
        "is a bool mask": lambda q, k, v: (_attention(q, k, v)[0], _attention(q, k, v)[1] > 0.1),
        "the function returns nothing": lambda q, k, v: None,
        "has 1 items, expected 2": lambda q, k, v: (_attention(q, k, v)[0],),
        "not implemented yet": lambda q, k, v: (_ for _ in ()).throw(NotImplementedError),
        "your function takes (q, k)": lambda q, k: None,
    }
    for message, answer in expected.items():
        assert not _judge_attention(answer)
        out = capsys.readouterr().out
        assert message in out and "checker itself" not in out, (message, out)


def test_judge_locates_an_unnamed_difference_and_a_notebook_global(capsys):
    def wrong_diagonal(q, k, v):
        out, weights = _attention(q, k, v)
        weights = weights.clone()
        weights[..., 0, 0] += 0.5
        return out, weights

    assert not _judge_attention(wrong_diagonal)
    out = capsys.readouterr().out
    assert "differs by up to 0.5" in out and "only where dim 2 = 0 and dim 3 = 0" in out

    def hard_coded(q, k, v):  # right only for the first case's T_k = 7
        return _attention(q, k, v) if k.shape[2] == 7 else _attention(q, k, v)[::-1][::-1][:1]

    assert not _judge_attention(hard_coded)
    assert "(it was right on q of shape (2, 3, 5, 4)" in capsys.readouterr().out


def test_judge_names_an_ignored_scalar_argument_and_its_own_failure(capsys):
    def norm(x, eps):
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)

    cases = [Case(torch.rand(2, 3) * 0.1, 0.5), Case(torch.rand(1, 4) * 0.1, 1e-5)]
    assert not judge("norm", lambda x, eps: norm(x, 1e-5), norm, cases)
    assert "what eps=1e-05 gives, not eps=0.5" in capsys.readouterr().out
    assert not judge("norm", norm, lambda x, eps: 1 / 0, cases)
    assert "the checker itself failed (ZeroDivisionError" in capsys.readouterr().out
    assert not judge("norm", norm(*cases[0].args), norm, cases)
    assert "pass the function itself" in capsys.readouterr().out


def test_difference_never_raises_and_names_what_is_wrong():
    expected = torch.arange(6.0).reshape(2, 3)
    assert difference(expected.double(), expected) is None
    assert "numpy" in difference(expected.numpy(), expected)
    assert "the axis T is missing" in difference(expected.sum(1), expected, axes="B T")
    assert "the axes are in the order (T, B)" in difference(expected.T, expected, axes="B T")
    assert "NaN" in difference(expected / 0 * 0, expected)
    assert "integer dtype" in difference(expected.long(), expected)
    assert "dtype torch.int32" in difference(
        torch.arange(3, dtype=torch.int32), torch.arange(3), tolerance=Tolerance(exact_dtype=True)
    )
    assert "return a Python float" in difference(torch.tensor(1.0), 1.0)
    assert "a list; return a tuple" in difference(
        [1.0], (1.0,), tolerance=Tolerance(allow_list=False)
    )
    assert difference(object(), expected).startswith("the answer should be a torch.Tensor")
