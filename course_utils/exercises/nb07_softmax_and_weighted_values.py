"""Checkers for notebook 07: softmax and weighted values."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from course_utils.exercises.core import record_torch_calls
from course_utils.exercises.difference import Tolerance
from course_utils.exercises.judge import Case, judge, report
from course_utils.lab.language import N_, tr

# Library softmaxes the exercise forbids (it asks for the max-subtraction written out), by the
# names every Python route calls: torch.softmax, F.softmax, Tensor.softmax,
# torch.special.softmax, nn.Softmax (which calls F.softmax), log_softmax, torch._softmax.
_LIBRARY_SOFTMAX = {"softmax", "log_softmax", "_softmax", "_log_softmax", "special_softmax"}


def _stable(scores, temperature=1.0, *, shift="row", after=False, times=False):
    """softmax(scores / temperature) over the last axis; the keywords make the mistakes."""
    z = scores * temperature if times else scores / temperature
    if shift == "row":
        z = z - z.amax(dim=-1, keepdim=True)
    elif shift == "raw":  # the mistake: the maximum of the scores before the temperature
        z = z - scores.amax(dim=-1, keepdim=True)
    elif shift == "global":
        z = z - z.max()
    e = z.exp()
    if after:
        e = (scores - scores.amax(dim=-1, keepdim=True)).exp() / temperature
    return e / e.sum(dim=-1, keepdim=True)


STABLE_SOFTMAX_MISTAKES = [
    (
        N_(
            "the maximum of the raw scores subtracted from scores / temperature: with a "
            "temperature below 1 and large scores exp still overflows (inf / inf = NaN), above 1 "
            "it underflows (0 / 0); divide first, then subtract the maximum of what you divided: "
            "z = scores / temperature; z - z.amax(dim=-1, keepdim=True)"
        ),
        lambda s, t=1.0: _stable(s, t, shift="raw"),
    ),
    (
        N_(
            "one maximum over the whole tensor (scores.max()): a row far below it underflows to "
            "0 / 0; subtract each row's own maximum, amax(dim=-1, keepdim=True)"
        ),
        lambda s, t=1.0: _stable(s, t, shift="global"),
    ),
    (
        N_(
            "no maximum subtracted: exp overflows to inf for large scores (inf / inf = NaN); "
            "subtract each row's maximum before exp"
        ),
        lambda s, t=1.0: _stable(s, t, shift=None),
    ),
    (
        N_("the scores multiplied by the temperature: softmax(scores / temperature) divides"),
        lambda s, t=1.0: _stable(s, t, times=True),
    ),
    (
        N_(
            "the temperature ignored (or applied after exp, where the normalisation cancels it): "
            "divide the scores by it before exp"
        ),
        lambda s, t=1.0: _stable(s, 1.0),
    ),
    (
        N_("the softmax over the queries (dim=-2): it runs over the last axis, the keys"),
        lambda s, t=1.0: (
            _stable(s.transpose(-2, -1), t).transpose(-2, -1) if s.dim() > 1 else s * math.nan
        ),
    ),
    (
        N_("a conversion to float32: keep the scores' dtype (float64 in, float64 out)"),
        lambda s, t=1.0: _stable(s.float(), t),
    ),
]

_STABLE_SOFTMAX_ERRORS = [
    (
        RuntimeError,
        r"must match the size of tensor",
        N_("keep the reduced axis so that it broadcasts over the row: amax(dim=-1, keepdim=True)"),
    ),
]


def _stable_softmax_cases() -> list[Case]:
    """Random (2, 3, 4, 5) scores (T_q != T_k) at the default temperature, 0.5 and 2; rows of
    large scores [100, 400, 700, 1000] beside [1, 2, 3, 4] at temperatures 1, 0.5 (the
    notebook's sharpening) and 2; float64; one row (1-D)."""
    generator = torch.Generator().manual_seed(7)
    scores = 3 * torch.randn(2, 3, 4, 5, generator=generator)
    large = torch.tensor([[100.0, 400.0, 700.0, 1000.0], [1.0, 2.0, 3.0, 4.0]])
    large_label = tr("scores [[100, 400, 700, 1000], [1, 2, 3, 4]], temperature={temperature}")
    return [
        Case(scores, label=tr("scores (2, 3, 4, 5), temperature left at its default")),
        Case(scores, 0.5),
        Case(scores, 2.0),
        *(Case(large, t, label=large_label.format(temperature=t)) for t in (1.0, 0.5, 2.0)),
        Case(torch.randn(3, 6, generator=generator, dtype=torch.float64), 0.7),
        Case(torch.tensor([2.0, -1.0, 0.5]), 1.5),
    ]


def _library_softmax(stable_softmax: Callable) -> str | None:
    """The exercise asks for the formula written out: the library's softmax is named."""
    scores = 3 * torch.randn(2, 3, 4, 5, generator=torch.Generator().manual_seed(7))
    try:
        with record_torch_calls() as calls:
            stable_softmax(scores.clone())
    except Exception:  # the judge names the error
        return None
    used = sorted({call.name for call in calls} & _LIBRARY_SOFTMAX)
    if not used:
        return None
    return tr(
        "it runs the library's softmax ({names}); write the formula out with plain "
        "tensor ops: subtract each row's maximum, exp, divide by the row sum"
    ).format(names=", ".join(used))


def check_stable_softmax(stable_softmax: Callable) -> bool:
    """Check ``stable_softmax(scores, temperature=1.0)``: softmax(scores / temperature) over
    the last axis (the key positions), computed without overflow (§3.2.1), keeping the
    scores' dtype.

    Cases (:func:`_stable_softmax_cases`): T_q != T_k, so a softmax over the wrong axis
    shows; rows of large scores at temperatures 1, 0.5 and 2 (``exp`` overflows without the
    max-subtraction, and subtracting the maximum of the raw scores from ``scores /
    temperature`` overflows below 1 and underflows above it); a row of small scores beside
    them (one global maximum underflows it); float64; a 1-D row. Names each mistake of
    :data:`STABLE_SOFTMAX_MISTAKES`; the gradient of the scores is compared too.

    The exercise asks for the formula written out: an answer that runs the library's softmax
    is rejected, saying so. How it is detected: the torch functions called, recorded by
    :func:`~course_utils.exercises.core.record_torch_calls` (a ``TorchFunctionMode``, which
    costs no import, unlike a dispatch mode): every Python route (``torch.softmax``,
    ``F.softmax``, ``Tensor.softmax``, ``torch.special.softmax``, ``nn.Softmax``,
    ``log_softmax``) calls a function named ``softmax`` or ``log_softmax``.
    """
    problem = _library_softmax(stable_softmax) if callable(stable_softmax) else None
    if problem is not None:
        return report(tr("stable softmax"), stable_softmax, problem)
    return judge(
        tr("stable softmax"),
        stable_softmax,
        lambda scores, temperature=1.0: torch.softmax(scores / temperature, dim=-1),
        _stable_softmax_cases(),
        STABLE_SOFTMAX_MISTAKES,
        tolerance=Tolerance(atol=1e-6, rtol=1e-5, exact_dtype=True),
        errors=_STABLE_SOFTMAX_ERRORS,
        trains=True,
    )


# --- the part attention(q, k, v, causal=True) ---------------------------------------------------

_NEG_INF = float("-inf")


def _attend(
    q, k, v, causal=True, *, scale=None, dim=-1, fill=_NEG_INF, diagonal=1, past=False,
    after=False, softmax=True, transposed=False,
):  # fmt: skip
    """Attention with one knob turned: the reference (all defaults) and its mistakes.

    ``scale`` divides the scores (default sqrt(d_k)); ``dim`` is the softmax's axis; the mask
    hides ``triu(diagonal)`` (or ``tril(diagonal)`` when ``past``), filled with ``fill``,
    before the softmax or, with ``after``, on the weights after it; ``transposed`` computes
    k q^T."""
    scale = math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (k @ q.transpose(-2, -1) if transposed else q @ k.transpose(-2, -1)) / scale
    hidden = None
    if causal:
        ones = torch.ones(scores.shape[-2:], dtype=torch.bool)
        hidden = ones.tril(diagonal) if past else ones.triu(diagonal)
    if hidden is not None and not after:
        scores = scores.masked_fill(hidden, fill)
    weights = torch.softmax(scores, dim=dim) if softmax else scores
    if hidden is not None and after:
        weights = weights.masked_fill(hidden, 0.0)
    return weights @ v


def _attention(q, k, v, causal=True):
    return _attend(q, k, v, causal)


def _heads_width(q) -> float:
    """sqrt(d_model) = sqrt(h * d_k) for (B, h, T, d_k) queries (a mistake's scale)."""
    return math.sqrt(q.shape[-1] * q.shape[-3]) if q.dim() >= 4 else math.nan


_ATTENTION_MISTAKES = (
    (N_("no 1/sqrt(d_k) scale: divide the scores by math.sqrt(d_k), d_k = q.shape[-1]"),
     lambda q, k, v, c=True: _attend(q, k, v, c, scale=1.0)),
    (N_("a scale of sqrt(d_model) = sqrt(h * d_k), the width of all heads together: each head "
        "divides by the square root of its own size, d_k = q.shape[-1]"),
     lambda q, k, v, c=True: _attend(q, k, v, c, scale=_heads_width(q))),
    (N_("a fixed scale sqrt(24), the running example's d_model (a notebook global?): d_k is "
        "q.shape[-1]"),
     lambda q, k, v, c=True: _attend(q, k, v, c, scale=math.sqrt(24))),
    (N_("a fixed scale sqrt(8), the running example's d_k (a notebook global?): read d_k from "
        "q.shape[-1]"),
     lambda q, k, v, c=True: _attend(q, k, v, c, scale=math.sqrt(8))),
    (N_("the scores divided by d_k: divide by its square root, math.sqrt(d_k)"),
     lambda q, k, v, c=True: _attend(q, k, v, c, scale=q.shape[-1])),
    (N_("the scores multiplied by sqrt(d_k): divide by it"),
     lambda q, k, v, c=True: _attend(q, k, v, c, scale=1 / math.sqrt(q.shape[-1]))),
    (N_("a scale of sqrt(d_v) = sqrt(v.shape[-1]): d_k is the size of the queries and keys, "
        "q.shape[-1]"),
     lambda q, k, v, c=True: _attend(q, k, v, c, scale=math.sqrt(v.shape[-1]))),
    (N_("a scale from the wrong axis of q (the time axis q.shape[-2]): d_k is the last axis, "
        "q.shape[-1]"),
     lambda q, k, v, c=True: _attend(q, k, v, c, scale=math.sqrt(q.shape[-2]))),
    (N_("a scale of sqrt(T_k), the keys' time axis k.shape[-2]: d_k is the last axis of q and k, "
        "q.shape[-1]"),
     lambda q, k, v, c=True: _attend(q, k, v, c, scale=math.sqrt(k.shape[-2]))),
    (N_("a scale from the wrong axis of q (q.shape[1]): d_k is the last axis, q.shape[-1]"),
     lambda q, k, v, c=True: _attend(q, k, v, c, scale=math.sqrt(q.shape[1]))),
    (N_("the softmax over the queries (dim=-2): it runs over the keys, the last axis, so that "
        "each query's weights sum to 1"),
     lambda q, k, v, c=True: _attend(q, k, v, c, dim=-2)),
    (N_("the softmax over axis 1 (the heads of (B, h, T_q, T_k)): it runs over the keys, dim=-1"),
     lambda q, k, v, c=True: _attend(q, k, v, c, dim=1)),
    (N_("no softmax: the output is softmax(scores) @ v, weights that are >= 0 and sum to 1"),
     lambda q, k, v, c=True: _attend(q, k, v, c, softmax=False)),
    (N_("no softmax (and no mask): the output is softmax(masked scores) @ v"),
     lambda q, k, v, c=True: _attend(q, k, v, False, softmax=False)),
    (N_("the scores transposed, k @ q^T: they are q @ k.transpose(-2, -1), a row per query"),
     lambda q, k, v, c=True: _attend(q, k, v, c, transposed=True)),
    (N_("a mask that also hides each query's own key (triu(diagonal=0)), so query 0 sees "
        "nothing (NaN): hide only the later keys, triu(diagonal=1)"),
     lambda q, k, v, c=True: _attend(q, k, v, c, diagonal=0)),
    (N_("a mask that lets each query see the next key (triu(diagonal=2)): hide every later "
        "key, triu(diagonal=1)"),
     lambda q, k, v, c=True: _attend(q, k, v, c, diagonal=2)),
    (N_("an inverted mask: it hides the past and shows the future (tril where triu belongs, or "
        "True = may attend passed to masked_fill, which fills where True): hide the keys after "
        "the query, triu(diagonal=1)"),
     lambda q, k, v, c=True: _attend(q, k, v, c, diagonal=-1, past=True)),
    (N_("an inverted mask: it hides the past and the query itself, and shows the future "
        "(masked_fill(tril(...), -inf)); hide the keys after the query, triu(diagonal=1)"),
     lambda q, k, v, c=True: _attend(q, k, v, c, diagonal=0, past=True)),
    (N_("hidden scores filled with 0 instead of -inf: a score of 0 still gets weight exp(0) = 1 "
        "in the softmax; fill with float('-inf')"),
     lambda q, k, v, c=True: _attend(q, k, v, c, fill=0.0)),
    (N_("the mask applied to the weights after the softmax: rows no longer sum to 1; mask the "
        "scores with -inf, then take the softmax"),
     lambda q, k, v, c=True: _attend(q, k, v, c, after=True)),
    (N_("no mask with causal=True: each query sees the later keys (masked_fill returns a new "
        "tensor: assign it, scores = scores.masked_fill(...); and the default is causal=True)"),
     lambda q, k, v, c=True: _attend(q, k, v, False)),
    (N_("a mask even with causal=False: mask only when causal is True"),
     lambda q, k, v, c=True: _attend(q, k, v, True)),
    (N_("the weights returned, not weights @ v"), lambda q, k, v, c=True: torch.softmax(
        _mask_if(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), c), dim=-1)),
    (N_("the weights returned (unmasked), not the masked weights @ v"), lambda q, k, v, c=True:
        torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)),
    (N_("(output, weights) returned: the part returns the output only, weights @ v"),
     lambda q, k, v, c=True: (_attention(q, k, v, c), torch.softmax(
         _mask_if(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), c), dim=-1))),
    (N_("a conversion to float32 (.float(), torch.tensor(...)): keep the inputs' dtype"),
     lambda q, k, v, c=True: _attention(q.float(), k.float(), v.float(), c)),
)  # fmt: skip


def _mask_if(scores, causal):
    if not causal:
        return scores
    future = torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1)
    return scores.masked_fill(future, _NEG_INF)


_ATTENTION_ERRORS = (
    (RuntimeError, r"must match the size|cannot be multiplied|size mismatch|Expected size for",
     N_("check each product's order and the mask's size: scores = q @ k.transpose(-2, -1) is "
        "(..., T_q, T_k), the mask is built from the scores' last two sizes (not a notebook "
        "global T), output = weights @ v is (..., T_q, d_v)")),
    (RuntimeError, r"view size is not compatible",
     N_("q, k, v may be non-contiguous views (split_heads returns one): use reshape, not view")),
    (RuntimeError, r"same dtype|expected scalar type|dtype",
     N_("keep the inputs' dtype: a float32 conversion (.float()) of some inputs meets float64 "
        "in a product")),
    (TypeError, r"unexpected keyword argument 'causal'",
     N_("give the function the parameter causal=True: attention(q, k, v, causal=True)")),
)  # fmt: skip


def _qkv(shape_q, shape_k, d_v, seed, dtype=torch.float32, split=False):
    """q, k, v with the given shapes; with ``split``, (B, h, T, d) views of (B, T, C) tensors,
    non-contiguous as split_heads returns them."""
    generator = torch.Generator().manual_seed(seed)
    shape_v = (*shape_k[:-1], d_v)
    tensors = []
    for shape in (shape_q, shape_k, shape_v):
        if split:
            B, h, T, d = shape
            flat = torch.randn(B, T, h * d, generator=generator, dtype=dtype)
            tensors.append(flat.view(B, T, h, d).transpose(1, 2))  # (B, h, T, d), a view
        else:
            tensors.append(torch.randn(*shape, generator=generator, dtype=dtype))
    return tensors


def _attention_cases() -> list[Case]:
    """Every argument varied: causal True, False and left at its default; 4-D, 3-D and 2-D
    inputs; T_q != T_k and d_v != d_k without the mask; one head with T = 1; float64;
    non-contiguous views; d_k of 8, 16, 4 and 32."""
    running = _qkv((2, 3, 6, 8), (2, 3, 6, 8), 8, 70, split=True)
    cross = _qkv((2, 3, 4, 8), (2, 3, 7, 8), 5, 71)
    default = _qkv((3, 5, 16), (3, 5, 16), 16, 72, torch.float64)
    one = _qkv((1, 1, 1, 8), (1, 1, 1, 8), 8, 73)
    square = _qkv((1, 2, 5, 4), (1, 2, 5, 4), 6, 74, torch.float64)
    wide = _qkv((1, 4, 9, 32), (1, 4, 9, 32), 32, 75)
    flat = _qkv((4, 8), (4, 8), 3, 76)
    return [
        Case(
            *running, True, label=tr("the running example, q, k, v (2, 3, 6, 8) views, causal=True")
        ),
        Case(
            *cross, False, label=tr("q (2, 3, 4, 8), k (2, 3, 7, 8), v (2, 3, 7, 5), causal=False")
        ),
        Case(*default, label=tr("q, k, v (3, 5, 16) float64, causal left at its default (True)")),
        Case(*one, True, label=tr("one head, T = 1: q, k, v (1, 1, 1, 8), causal=True")),
        Case(*square, False, label=tr("q, k (1, 2, 5, 4), v (1, 2, 5, 6) float64, causal=False")),
        Case(*wide, True, label=tr("q, k, v (1, 4, 9, 32), causal=True")),
        Case(*flat, True, label=tr("2-D q, k (4, 8), v (4, 3), causal=True")),
    ]


def check_attention(attention: Callable) -> bool:
    """Exercise 07.2, a part of the learner's decoder: ``attention(q, k, v, causal=True)`` is
    ``softmax(q k^T / sqrt(d_k)) @ v`` (Vaswani et al. 2017, §3.2.1, Eq. 1), the softmax over
    the keys, with ``causal=True`` hiding the keys after each query (§3.2.3; T_q == T_k).

    Shapes: q ``(..., T_q, d_k)``, k ``(..., T_k, d_k)``, v ``(..., T_k, d_v)`` ->
    ``(..., T_q, d_v)``, keeping the inputs' dtype. Seven cases vary every argument (module
    docstring of :func:`_attention_cases`). Right in any form: ``@`` or ``einsum``, -inf or
    a large negative fill, ``torch.tril`` or comparisons of positions,
    ``F.scaled_dot_product_attention``. Names 27 mistakes (:data:`_ATTENTION_MISTAKES`: the
    scale, the softmax's axis, the mask's diagonal, direction and fill, the mask after the
    softmax, the causal argument ignored, what is returned, the dtype) and the errors of a
    product in the wrong order, a mask of a fixed size, a view of a non-contiguous input.
    Then it runs as training does (:mod:`.in_training`): q, k and v left alone, their
    gradients compared, a mask made on the CPU named. When it passes, the learner's source is
    saved for their decoder with the helpers it needs (:func:`course_utils.exercises.keeping.keep`).
    """
    return judge(
        "attention",
        attention,
        _attention,
        _attention_cases(),
        _ATTENTION_MISTAKES,
        axes="B h T_q d_v",
        tolerance=Tolerance(atol=1e-5, rtol=1e-4, exact_dtype=True),
        errors=_ATTENTION_ERRORS,
        trains=True,
        part=True,
    )
