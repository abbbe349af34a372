"""Checkers for notebook 02: the embedding bigram's table of logits, and nearest neighbours in an
embedding table.

Written with :func:`course_utils.exercises.judge.judge`: each checker varies every argument,
and names the mistake of its catalogue that the answer makes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from course_utils.exercises.judge import Case, Problem, judge
from course_utils.lab.language import N_, tr

# --- the embedding bigram as a V x V table of logits ----------------------------------------


def _logit_table(embedding_weight, head_weight, head_bias):
    d_model = embedding_weight.shape[1]
    return embedding_weight * math.sqrt(d_model) @ head_weight.T + head_bias  # (V, V)


def _scaled(embedding_weight, factor, head_weight, head_bias):
    return embedding_weight * factor @ head_weight.T + head_bias


def _root_d(embedding_weight) -> float:
    return math.sqrt(embedding_weight.shape[1])


_NOTEBOOK_D_MODEL = 24  # the notebook's global: an answer that reads it fails other widths

LOGIT_TABLE_MISTAKES = [
    (
        N_(
            "the sqrt(d_model) scale left out: TokenEmbedding multiplies each row by sqrt(d_model) "
            "before the head reads it"
        ),
        lambda e, w, b: _scaled(e, 1.0, w, b),
    ),
    (
        N_("a scale of d_model; TokenEmbedding multiplies by sqrt(d_model)"),
        lambda e, w, b: _scaled(e, e.shape[1], w, b),
    ),
    (
        N_("a scale of sqrt(vocab_size); d_model is the table's width, embedding_weight.shape[1]"),
        lambda e, w, b: _scaled(e, math.sqrt(e.shape[0]), w, b),
    ),
    (
        N_(
            "sqrt(24), the notebook's d_model; take d_model from the table, "
            "embedding_weight.shape[1]"
        ),
        lambda e, w, b: _scaled(e, math.sqrt(_NOTEBOOK_D_MODEL), w, b),
    ),
    (
        N_(
            "the whole logits scaled, bias included; sqrt(d_model) scales the embedding only, the "
            "head then adds its bias"
        ),
        lambda e, w, b: (e @ w.T + b) * _root_d(e),
    ),
    (N_("the head's bias left out: nn.Linear adds it"), lambda e, w, b: e * _root_d(e) @ w.T),
    (
        N_(
            "the bias added down the columns (bias[:, None]); the bias has one entry per next "
            "token, a column of the table, so it is added to every row: + head_bias"
        ),
        lambda e, w, b: e * _root_d(e) @ w.T + b[:, None],
    ),
    (
        N_(
            "the table transposed: row i must hold the logits after token i (the model's output "
            "for that token), so compute embedding rows @ head_weight.T"
        ),
        lambda e, w, b: _logit_table(e, w, b).T,
    ),
    (
        N_(
            "head_weight @ embedding_weight.T; row i must be token i's embedding times the head: "
            "(sqrt(d_model) * embedding_weight) @ head_weight.T + head_bias"
        ),
        lambda e, w, b: w @ (e * _root_d(e)).T + b,
    ),
    (
        N_(
            "head_weight used untransposed; nn.Linear stores it as (out, in) = (V, d_model) and "
            "computes x @ weight.T"
        ),
        lambda e, w, b: e * _root_d(e) @ w + b,
    ),
    (
        N_("probabilities (a softmax of each row); the table holds the logits, before any softmax"),
        lambda e, w, b: torch.softmax(_logit_table(e, w, b), dim=-1),
    ),
    (
        N_("log-probabilities (log_softmax); the table holds the logits the model outputs"),
        lambda e, w, b: torch.log_softmax(_logit_table(e, w, b), dim=-1),
    ),
]

_LOGIT_TABLE_ERRORS = [
    (
        RuntimeError,
        "shapes cannot be multiplied|size mismatch|must match the size",
        N_("nn.Linear's weight is (out, in) = (V, d_model): multiply by head_weight.T"),
    ),
]


def _logit_table_cases() -> list[Case]:
    """(V, d_model) = (10, 7), (13, 12) float64, (6, 6) square (an untransposed head runs),
    (5, 1) and (1, 4) (one token); one head weight a non-contiguous transposed view; a
    non-zero bias everywhere."""
    generator = torch.Generator().manual_seed(2)
    cases = []
    for vocab_size, d_model, dtype in (
        (10, 7, torch.float32),
        (13, 12, torch.float64),
        (6, 6, torch.float32),
        (5, 1, torch.float32),
        (1, 4, torch.float32),
    ):
        table = torch.randn(vocab_size, d_model, generator=generator, dtype=dtype) * 0.5
        head = torch.randn(vocab_size, d_model, generator=generator, dtype=dtype) * 0.5
        bias = torch.randn(vocab_size, generator=generator, dtype=dtype)
        if vocab_size == 10:
            head = head.T.contiguous().T  # the same values in a (d_model, V)-ordered layout
        cases.append(Case(table, head, bias))
    return cases


def check_logit_table(logit_table: Callable) -> bool:
    """Check ``logit_table(embedding_weight, head_weight, head_bias)``: the embedding bigram's
    logits for every token at once, a ``(V, V)`` tensor whose row ``i`` is the output of
    ``lm_head(TokenEmbedding(i))``: ``sqrt(d_model) * embedding_weight @ head_weight.T +
    head_bias``, with ``embedding_weight`` ``(V, d_model)``, ``head_weight`` ``(V, d_model)``
    (nn.Linear's (out, in)) and ``head_bias`` ``(V,)``.

    Five tables vary V (1 to 13), d_model (1 to 12), the dtype and the layout; names each
    mistake of :data:`LOGIT_TABLE_MISTAKES`.
    """
    return judge(
        "logit_table",
        logit_table,
        _logit_table,
        _logit_table_cases(),
        LOGIT_TABLE_MISTAKES,
        axes="token next_token",
        errors=_LOGIT_TABLE_ERRORS,
    )


# --- nearest neighbours by cosine similarity ------------------------------------------------


def _cosine(weight):
    unit = weight / weight.norm(dim=1, keepdim=True)  # (V, d_model): rows of norm 1
    return unit @ unit.T  # (V, V)


def _others(scores, token):
    """Similarities to ``token`` with the token itself ruled out."""
    row = scores.clone()
    row[token] = float("-inf")
    return row


def _nearest(weight, token, k):
    return _others(_cosine(weight)[token], token).topk(k).indices


def _ids(similarities, k, largest=True):
    return similarities.topk(k, largest=largest).indices


NEAREST_MISTAKES = [
    (
        N_("the token itself comes first (its cosine with itself is 1); leave it out"),
        lambda w, t, k: _ids(_cosine(w)[t], k),
    ),
    (
        N_(
            "k - 1 neighbours: topk(k) with the token then dropped; take topk(k + 1) and drop it, "
            "or set the token's own similarity to -inf first"
        ),
        lambda w, t, k: _ids(_cosine(w)[t], k)[1:],
    ),
    (
        N_(
            "dot products (or only the token's vector normalised): a long row wins whatever its "
            "direction; cosine similarity divides by the norms of both vectors"
        ),
        lambda w, t, k: _ids(_others(w @ w[t], t), k),
    ),
    (
        N_("the smallest Euclidean distance; cosine similarity compares directions, not positions"),
        lambda w, t, k: _ids(-_others(-torch.cdist(w, w)[t], t), k, largest=False),
    ),
    (
        N_("the least similar tokens (an ascending order); the nearest have the largest cosine"),
        lambda w, t, k: _ids(-_others(-_cosine(w)[t], t), k, largest=False),
    ),
    (
        N_(
            "the columns normalised (norm over dim=0); each token's row is divided by its own "
            "norm, weight.norm(dim=1, keepdim=True)"
        ),
        lambda w, t, k: _ids(_others((w / w.norm(dim=0)) @ (w / w.norm(dim=0))[t], t), k),
    ),
    (
        N_(
            "the absolute cosine: a vector pointing the opposite way (cosine -1) is the least "
            "similar, not the most"
        ),
        lambda w, t, k: _ids(_others(_cosine(w)[t].abs(), t), k),
    ),
    (
        N_("the neighbours in id order; list them most similar first (topk sorts them)"),
        lambda w, t, k: _nearest(w, t, k).sort().values,
    ),
]


def _as_ids(nearest_tokens, weight, token, k):
    """The learner's ids as an int64 tensor (a list, a tuple or an integer tensor is
    accepted), or a Problem naming what came back instead."""
    result = nearest_tokens(weight, token, k)
    if isinstance(result, tuple) and hasattr(result, "indices"):  # torch.topk's pair
        return Problem(tr("returned topk's (values, indices) pair; return its .indices"))
    if isinstance(result, (list, tuple)):
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in result):
            kinds = sorted({type(i).__name__ for i in result})
            return Problem(
                tr("returned a {kind} of {kinds}; return token ids, ints").format(
                    kind=type(result).__name__, kinds=kinds
                )
            )
        return torch.tensor(result, dtype=torch.long)
    if not isinstance(result, torch.Tensor):
        return Problem(
            tr("returned a {kind}; return the k token ids").format(kind=type(result).__name__)
        )
    if result.is_floating_point():
        return Problem(
            tr(
                "returned {dtype} numbers (similarities?); return the token ids, topk's .indices"
            ).format(dtype=result.dtype)
        )
    if result.dtype != torch.long:
        return Problem(
            tr(
                "returned {dtype} ids; the exercise asks for int64 (torch.long), the dtype "
                "of topk's .indices and of the ids an nn.Embedding reads: drop the conversion"
            ).format(dtype=result.dtype)
        )
    return result


def _nearest_cases() -> list[Case]:
    """Rows of very different norms (so dot products, distances and cosines rank differently);
    (V, d_model) = (10, 7), (13, 12) float64, (6, 2), (8, 16), and a non-contiguous (9, 4)
    view; token first, last and inside; k = 1, 2, 3, 5 and V - 1 (every other token)."""
    generator = torch.Generator().manual_seed(20)
    cases = []
    for vocab_size, d_model, token, k, dtype in (
        (10, 7, 3, 3, torch.float32),
        (13, 12, 0, 5, torch.float64),
        (6, 2, 5, 1, torch.float32),
        (8, 16, 7, 7, torch.float32),
        (9, 4, 4, 2, torch.float32),
    ):
        norms = torch.rand(vocab_size, 1, generator=generator, dtype=dtype) * 3 + 0.2
        weight = torch.randn(vocab_size, d_model, generator=generator, dtype=dtype) * norms
        if vocab_size == 9:
            weight = weight.T.contiguous().T  # a non-contiguous (V, d_model) view
        cases.append(Case(weight, token, k))
    return cases


def check_nearest_tokens(nearest_tokens: Callable) -> bool:
    """Check ``nearest_tokens(weight, token, k)``: the ids of the ``k`` tokens whose rows of
    ``weight`` ``(V, d_model)`` have the largest cosine similarity with row ``token``, the
    token itself left out, most similar first; an int64 tensor ``(k,)`` (a list of ints is
    accepted; an int32 tensor is not).

    Five tables vary V, d_model, the dtype, the layout, the token (first, last, inside) and k
    (1 to V - 1), with rows of very different norms; names each mistake of
    :data:`NEAREST_MISTAKES`, similarities returned instead of ids, and a fixed token or k.
    """
    return judge(
        "nearest_tokens",
        nearest_tokens,
        lambda weight, token, k: _nearest(weight, token, k),
        _nearest_cases(),
        NEAREST_MISTAKES,
        call=_as_ids,
        axes="neighbour",
    )
