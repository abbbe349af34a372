"""The checkers of notebook 07: ``stable_softmax`` (exercise 1) and the decoder's part
``attention(q, k, v, causal=True)`` (exercise 2): right answers in other forms accepted, each
catalogued mistake rejected with its name, wrong answers of every kind (type, shape, dtype, an
exception) reported without an error of the checker's own, the learner's source saved after a
pass, and the notebook's ladder prose kept true."""

from __future__ import annotations

import linecache
import math

import checker_verdict
import pytest
import torch
import torch.nn.functional as F

from course_utils.exercises import check_stable_softmax, solution_model
from course_utils.exercises.nb07_softmax_and_weighted_values import (
    _ATTENTION_MISTAKES,
    STABLE_SOFTMAX_MISTAKES,
    check_attention,
)


def verdict(answer, capsys) -> tuple[bool, str]:
    """The shared verdict of ``check_attention``, the checker most tests here call."""
    return checker_verdict.verdict(check_attention, answer, capsys)


def attend(q, k, v, causal=True, *, scale=None, dim=-1, fill=float("-inf"), diagonal=1):
    """Written as a learner would, with one knob to turn into a mistake."""
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / (math.sqrt(d_k) if scale is None else scale)
    if causal:
        T_q, T_k = scores.shape[-2:]
        future = torch.triu(torch.ones(T_q, T_k, dtype=torch.bool, device=q.device), diagonal)
        scores = scores.masked_fill(future, fill)
    return torch.softmax(scores, dim=dim) @ v


def by_einsum(q, k, v, causal=True):
    scores = torch.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5
    if causal:
        positions_q = torch.arange(q.shape[-2], device=q.device)[:, None]
        positions_k = torch.arange(k.shape[-2], device=k.device)[None, :]
        scores = scores.masked_fill(positions_k > positions_q, -1e9)  # a large negative fill
    return torch.einsum("...qk,...kd->...qd", scores.softmax(-1), v)


def by_tril(q, k, v, causal=True):
    scores = q @ k.mT / math.sqrt(q.size(-1))
    if causal:
        keep = torch.tril(torch.ones(q.size(-2), k.size(-2), device=q.device))
        scores = scores.masked_fill(keep == 0, float("-inf"))
    return F.softmax(scores.double(), dim=-1).to(q.dtype) @ v  # softmax in float64, cast back


@pytest.mark.parametrize(
    "right",
    [
        solution_model.attention,
        attend,
        by_einsum,
        by_tril,
        lambda q, k, v, causal=True: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
        lambda q, k, v, causal=True: attend(q.contiguous(), k.contiguous(), v, causal).mT.mT,
    ],
    ids=["solution", "by-hand", "einsum", "tril", "F.sdpa", "non-contiguous"],
)
def test_attention_accepts_right_variants(right, capsys):
    assert verdict(right, capsys) == (True, "✅ attention: correct\n")


WRONG = {
    "no 1/sqrt(d_k) scale": lambda q, k, v, causal=True: attend(q, k, v, causal, scale=1.0),
    "sqrt(d_model) = sqrt(h * d_k)": lambda q, k, v, causal=True: attend(
        q, k, v, causal, scale=math.sqrt(q.shape[-1] * (q.shape[1] if q.dim() == 4 else 1))
    ),
    "the running example's d_model": lambda q, k, v, causal=True: attend(
        q, k, v, causal, scale=math.sqrt(24)
    ),
    "the running example's d_k": lambda q, k, v, causal=True: attend(
        q, k, v, causal, scale=math.sqrt(8)
    ),
    "divided by d_k": lambda q, k, v, causal=True: attend(q, k, v, causal, scale=q.shape[-1]),
    "multiplied by sqrt(d_k)": lambda q, k, v, causal=True: attend(
        q, k, v, causal, scale=q.shape[-1] ** -0.5
    ),
    "sqrt(d_v)": lambda q, k, v, causal=True: attend(q, k, v, causal, scale=v.shape[-1] ** 0.5),
    "softmax over the queries": lambda q, k, v, causal=True: attend(q, k, v, causal, dim=-2),
    "softmax over axis 1": lambda q, k, v, causal=True: attend(q, k, v, causal, dim=1),
    "triu(diagonal=0)": lambda q, k, v, causal=True: attend(q, k, v, causal, diagonal=0),
    "triu(diagonal=2)": lambda q, k, v, causal=True: attend(q, k, v, causal, diagonal=2),
    "filled with 0 instead of -inf": lambda q, k, v, causal=True: attend(q, k, v, causal, fill=0),
    "no mask with causal=True": lambda q, k, v, causal=True: attend(q, k, v, False),
    "a mask even with causal=False": lambda q, k, v, causal=True: attend(q, k, v, True),
    "the default is causal=True": lambda q, k, v, causal=False: attend(q, k, v, causal),
    "k @ q^T": lambda q, k, v, causal=True: attend(k, q, v, causal),  # scores transposed
    "after the softmax": lambda q, k, v, causal=True: (
        torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), -1).masked_fill(
            torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).triu(1) & causal, 0
        )
        @ v
    ),
    "hides the past": lambda q, k, v, causal=True: (
        torch.softmax(
            (q @ k.mT / math.sqrt(q.shape[-1])).masked_fill(
                torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril() & causal,
                float("-inf"),
            ),
            -1,
        )
        @ v
    ),
    "no softmax": lambda q, k, v, causal=True: q @ k.mT / math.sqrt(q.shape[-1]) @ v,
    "the weights returned": lambda q, k, v, causal=True: torch.softmax(
        q @ k.mT / math.sqrt(q.shape[-1]), -1
    ),
    "(output, weights) returned": lambda q, k, v, causal=True: (
        attend(q, k, v, causal),
        torch.softmax(
            (q @ k.mT / math.sqrt(q.shape[-1])).masked_fill(
                torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).triu(1) & causal,
                float("-inf"),
            ),
            -1,
        ),
    ),
    "conversion to float32": lambda q, k, v, causal=True: attend(
        q.float(), k.float(), v.float(), causal
    ),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_attention_names_each_mistake(name, capsys):
    result, out = verdict(WRONG[name], capsys)
    assert result is False and out.startswith("❌ attention: looks like"), out
    assert name in out, out


def test_every_catalogued_mistake_is_named_when_made(capsys):
    """Each catalogue entry, run as an answer, is rejected with its own message (or an
    earlier entry that computes the same on the first case where it goes wrong)."""
    for message, wrong in _ATTENTION_MISTAKES:
        result, out = verdict(wrong, capsys)
        assert result is False and "looks like" in out, (message, out)


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda q, k, v, causal=True: v @ attend(q, k, v, causal), "check each product's order"),
        (
            lambda q, k, v, causal=True: (
                torch.softmax(
                    (q @ k.mT / 8**0.5).masked_fill(
                        torch.ones(6, 6, dtype=torch.bool).triu(1), -1e9
                    ),
                    -1,
                )
                @ v
            ),
            "not a notebook global T",
        ),
        (
            lambda q, k, v, causal=True: attend(q.view(-1, *q.shape[-2:]), k, v, causal),
            "use reshape, not view",
        ),
        (lambda q, k, v: attend(q, k, v), "give it exactly these parameters"),
        (lambda q, k, v, causal=True: attend(q, k, v, causal).numpy(), "numpy.ndarray"),
        (lambda q, k, v, causal=True: None, "returns nothing"),
        (lambda q, k, v, causal=True: attend(q, k, v, causal)[..., :-1], "has shape"),
        (lambda q, k, v, causal=True: attend(q, k, v, causal) + 1e-3, "differs by up to"),
        (lambda q, k, v, causal=True: 1 / 0, "ZeroDivisionError"),
        (lambda q, k, v, causal=True: attend(q.float(), k.float(), v, causal), "keep the inputs"),
        (torch.zeros(3), "should be a function"),
    ],
)
def test_attention_reports_other_wrong_answers_without_breaking(wrong, message, capsys):
    result, out = verdict(wrong, capsys)
    assert result is False and message in out, out


def test_attention_names_what_training_and_a_gpu_need(capsys):
    """Issue 42: right values, but no gradient (NumPy), the caller's q rescaled in place, a
    mask made on the CPU: each named with its line."""

    def through_numpy(q, k, v, causal=True):
        scores = torch.from_numpy(q.detach().numpy() @ k.detach().numpy().swapaxes(-1, -2))
        return attend_scores(scores / math.sqrt(q.shape[-1]), v, causal)

    def in_place(q, k, v, causal=True):
        q /= math.sqrt(q.shape[-1])
        return attend_scores(q @ k.mT, v, causal)

    def cpu_mask(q, k, v, causal=True):
        scores = q @ k.mT / math.sqrt(q.shape[-1])
        if causal:
            future = torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        return scores.softmax(-1) @ v

    said = {
        through_numpy: ["q and k get no gradient", ".numpy() (line", "goes through NumPy"],
        in_place: ["changes its argument q in place", "write `q = q / math.sqrt(q.shape[-1])`"],
        cpu_mask: ["torch.ones (line", "on a GPU this stops", "(device=q.device)"],
    }
    for wrong, parts in said.items():
        result, out = verdict(wrong, capsys)
        assert result is False and all(p in out for p in parts), out


def attend_scores(scores, v, causal):
    if causal:
        T_q, T_k = scores.shape[-2:]
        future = torch.ones(T_q, T_k, dtype=torch.bool, device=v.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return scores.softmax(-1) @ v


def test_attention_stub_is_not_implemented(capsys):
    def attention(q, k, v, causal=True):
        raise NotImplementedError  # your code here

    assert verdict(attention, capsys) == (False, "❌ attention: not implemented yet\n")


def test_attention_saves_the_learner_s_source_after_a_pass(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_MY_MODEL", str(tmp_path))
    source = (
        "def attention(q, k, v, causal=True):\n"
        "    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)\n"
    )
    linecache.cache["<cell-07>"] = (len(source), None, source.splitlines(True), "<cell-07>")
    namespace: dict = {"F": F}
    exec(compile(source, "<cell-07>", "exec"), namespace)
    assert verdict(namespace["attention"], capsys)[0] is True
    assert (tmp_path / "attention.py").read_text() == source


def cells_of_07():
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    path = root / "notebooks" / "07_softmax_and_weighted_values.ipynb"
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def test_notebook_07_ladder_prose_matches_its_rung():
    """The prose says the one-head model's loss "falls below the embedding bigram's": the
    committed rung of notebook 07 and the printed value must say so too."""
    import json
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    rungs = {p.stem: json.loads(p.read_text()) for p in (root / "assets" / "ladder").glob("*.json")}
    one_head, embedding = rungs["07-one-head"]["val_loss"], rungs["02-embedding"]["val_loss"]
    assert one_head < embedding
    prose = "".join("".join(c["source"]) for c in cells_of_07())
    assert "the loss falls below the embedding bigram's" in " ".join(prose.split())
    cells = json.loads((root / "notebooks" / "07_softmax_and_weighted_values.ipynb").read_text())
    printed = "".join(
        "".join(o.get("text", ""))
        for c in cells["cells"]
        if "show_ladder(" in "".join(c["source"])
        for o in c.get("outputs", [])
    )
    found = re.search(r"\+ one self-attention head: validation loss (\d\.\d{3})", printed)
    assert found and abs(float(found.group(1)) - one_head) < 5e-4, printed


# --- exercise 1: stable_softmax (moved from tests/test_exercises_07_08.py) -------------------


def stable_softmax(scores, temperature=1.0):
    z = scores / temperature
    e = (z - z.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)


def test_stable_softmax_accepts_the_right_answer(capsys):
    assert check_stable_softmax(stable_softmax) is True
    assert "✅ stable softmax: correct" in capsys.readouterr().out


def test_stable_softmax_rejects_the_naive_softmax_that_overflows(capsys):
    def naive(scores, temperature=1.0):
        e = (scores / temperature).exp()
        return e / e.sum(dim=-1, keepdim=True)

    assert check_stable_softmax(naive) is False
    out = capsys.readouterr().out
    assert "❌ stable softmax: looks like no maximum subtracted" in out and "NaN" in out


def test_stable_softmax_rejects_a_global_maximum(capsys):
    def global_max(scores, temperature=1.0):
        z = scores / temperature
        e = (z - z.max()).exp()  # one maximum for the whole tensor: small rows underflow
        return e / e.sum(dim=-1, keepdim=True)

    assert check_stable_softmax(global_max) is False
    assert "looks like one maximum over the whole tensor" in capsys.readouterr().out


def test_stable_softmax_rejects_the_raw_maximum_at_a_temperature_below_one(capsys):
    """Issue 42: subtracting the maximum of the raw scores from scores / temperature is right
    at T = 1 only; large scores at T = 0.5 (the notebook's sharpening) overflow."""

    def raw_maximum(scores, temperature=1.0):
        e = (scores / temperature - scores.amax(dim=-1, keepdim=True)).exp()
        return e / e.sum(dim=-1, keepdim=True)

    assert check_stable_softmax(raw_maximum) is False
    assert "looks like the maximum of the raw scores subtracted" in capsys.readouterr().out


def test_stable_softmax_names_a_float32_result_and_an_in_place_change(capsys):
    as_float32 = lambda s, temperature=1.0: stable_softmax(s.float(), temperature)  # noqa: E731
    assert check_stable_softmax(as_float32) is False
    assert "looks like a conversion to float32" in capsys.readouterr().out

    def in_place(scores, temperature=1.0):
        scores /= temperature
        e = (scores - scores.amax(dim=-1, keepdim=True)).exp()
        return e / e.sum(dim=-1, keepdim=True)

    assert check_stable_softmax(in_place) is False
    out = capsys.readouterr().out
    assert "changes its argument scores in place" in out
    assert "write `scores = scores / temperature` instead" in out


def test_stable_softmax_rejects_the_wrong_axis_and_a_missing_temperature(capsys):
    wrong_axis = lambda s, temperature=1.0: stable_softmax(s.mT, temperature).mT  # noqa: E731
    assert check_stable_softmax(wrong_axis) is False
    assert "looks like the softmax over the queries (dim=-2)" in capsys.readouterr().out
    assert check_stable_softmax(lambda s, temperature=1.0: stable_softmax(s)) is False
    assert "looks like the temperature ignored" in capsys.readouterr().out
    both = lambda s, temperature=1.0: stable_softmax(s.mT).mT  # noqa: E731
    assert check_stable_softmax(both) is False  # two mistakes: the first named, the other said
    assert "so something else is wrong as well" in capsys.readouterr().out


def test_stable_softmax_rejects_the_library_softmax(capsys):
    """The exercise forbids the library: each way of calling it is named, although the values
    are right."""

    def library(scores, temperature=1.0):
        return torch.softmax(scores / temperature, dim=-1)

    def functional(scores, temperature=1.0):
        return F.softmax(scores / temperature, dim=-1)

    def method(scores, temperature=1.0):
        return (scores / temperature).softmax(-1)

    def via_log(scores, temperature=1.0):
        return F.log_softmax(scores / temperature, dim=-1).exp()

    def special(scores, temperature=1.0):  # issue 22: this route used to pass
        return torch.special.softmax(scores / temperature, dim=-1)

    def module(scores, temperature=1.0):
        return torch.nn.Softmax(dim=-1)(scores.clone() / temperature)

    for answer in (library, functional, method, via_log, special, module):
        assert check_stable_softmax(answer) is False
        out = capsys.readouterr().out
        assert "runs the library's softmax" in out and "write the formula out" in out, out


@pytest.mark.parametrize(
    "right",
    [
        # each row's own maximum taken by max(...).values, and division by the temperature late
        lambda s, temperature=1.0: (lambda e: e / e.sum(-1, keepdim=True))(
            ((s - s.max(dim=-1, keepdim=True).values) / temperature).exp()
        ),
        # log-sum-exp, another stable formula written with plain ops
        lambda s, temperature=1.0: (
            s / temperature - (s / temperature).logsumexp(dim=-1, keepdim=True)
        ).exp(),
    ],
)
def test_stable_softmax_accepts_other_stable_formulas(right, capsys):
    assert check_stable_softmax(right) is True, capsys.readouterr().out


def test_stable_softmax_reports_an_unfinished_stub(capsys):
    def stub(scores, temperature=1.0):
        raise NotImplementedError

    assert check_stable_softmax(stub) is False
    assert "not implemented yet" in capsys.readouterr().out


@pytest.mark.parametrize("index", range(len(STABLE_SOFTMAX_MISTAKES)))
def test_stable_softmax_names_each_catalogued_mistake(index, capsys):
    message, wrong = STABLE_SOFTMAX_MISTAKES[index]
    assert check_stable_softmax(wrong) is False
    assert f"looks like {message}" in capsys.readouterr().out
