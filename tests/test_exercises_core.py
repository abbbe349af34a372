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
