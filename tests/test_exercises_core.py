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
