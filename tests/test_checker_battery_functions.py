"""A battery of right and wrong answers to the function exercises (issue 42), written apart from
the catalogues: answers as learners write them, right in several forms, wrong by the classes of
mistakes a forward pass alone does not see (no gradient, the caller's tensor changed, a tensor
made on the CPU, a dtype or an index dtype changed, cases at the edges) and by the classic ones.
No wrong answer passes, no right one is rejected, no checker fails on its own, and at most 10 %
of the rejections are generic (they only say where values differ)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from checker_verdict import run_battery

from course_utils.exercises import (
    check_attention,
    check_causal_mask,
    check_merge_heads,
    check_merge_pair,
    check_nearest_tokens,
    check_padding_mask,
    check_scaled_scores,
    check_split_heads,
    check_stable_softmax,
)

# --- merge_pair --------------------------------------------------------------------------


def merge_while(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if ids[i : i + 2] == list(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def merge_recursive(ids, pair, new_id):
    if len(ids) < 2:
        return list(ids)
    if (ids[0], ids[1]) == pair:
        return [new_id, *merge_recursive(ids[2:], pair, new_id)]
    return [ids[0], *merge_recursive(ids[1:], pair, new_id)]


def merge_as_text_no_separator(ids, pair, new_id):
    text = "-".join(map(str, ids)) + "-"
    text = text.replace(f"{pair[0]}-{pair[1]}-", f"{new_id}-")
    return [int(t) for t in text.split("-") if t]


def merge_pop(ids, pair, new_id):
    i = 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == pair:
            ids[i] = new_id
            ids.pop(i + 1)
        i += 1
    return ids


def merge_every_overlap(ids, pair, new_id):
    return [new_id if (a, b) == pair else a for a, b in zip(ids, ids[1:] + [None])]


MERGE_PAIR = [
    ("while loop", merge_while, "right"),
    ("recursion", merge_recursive, "right"),
    ("a string replace over '-'-joined ids", merge_as_text_no_separator, "wrong"),
    ("the input list changed in place", merge_pop, "wrong"),
    ("every id that starts a pair replaced", merge_every_overlap, "wrong"),
]

# --- nearest_tokens ----------------------------------------------------------------------


def nearest_cosine(weight, token, k):
    sims = F.cosine_similarity(weight, weight[token : token + 1], dim=-1)
    sims[token] = -float("inf")
    return sims.topk(k).indices


def nearest_sorted(weight, token, k):
    unit = F.normalize(weight, dim=-1)
    order = torch.argsort(unit @ unit[token], descending=True)
    return order[order != token][:k]


NEAREST = [
    ("cosine_similarity and topk", nearest_cosine, "right"),
    ("F.normalize and argsort", nearest_sorted, "right"),
    ("int32 ids", lambda w, t, k: nearest_cosine(w, t, k).to(torch.int32), "wrong"),
    ("the token itself included", lambda w, t, k: (
        F.normalize(w, dim=-1) @ F.normalize(w, dim=-1)[t]).topk(k).indices, "wrong"),
    ("dot products", lambda w, t, k: torch.cat(
        [(w @ w[t])[:t], torch.tensor([-1e9], dtype=w.dtype), (w @ w[t])[t + 1 :]]
    ).topk(k).indices, "wrong"),
]  # fmt: skip

# --- split_heads, merge_heads -----------------------------------------------------------


def split_unflatten(x, n_heads):
    return x.unflatten(-1, (n_heads, -1)).transpose(1, 2)


def split_chunks(x, n_heads):
    return torch.stack(x.chunk(n_heads, dim=-1), dim=1)


def split_in_place_view(x, n_heads):
    B, T, C = x.shape
    x.resize_(B, T, n_heads, C // n_heads)  # changes the caller's tensor
    return x.transpose(1, 2)


SPLIT_HEADS = [
    ("unflatten", split_unflatten, "right"),
    ("chunk and stack", split_chunks, "right"),
    ("the caller's x resized", split_in_place_view, "wrong"),
    ("through NumPy", lambda x, h: torch.from_numpy(
        x.detach().numpy().reshape(x.shape[0], x.shape[1], h, -1).swapaxes(1, 2).copy()), "wrong"),
    ("a float32 copy", lambda x, h: split_unflatten(x.to(torch.float32), h), "wrong"),
    ("channels dealt out in turn", lambda x, h: x.unflatten(-1, (-1, h)).permute(0, 3, 1, 2),
     "wrong"),
]  # fmt: skip


def merge_flatten(x):
    return x.transpose(1, 2).flatten(-2)


def merge_einops_like(x):
    B, h, T, d = x.shape
    return x.permute(0, 2, 1, 3).reshape(B, T, h * d)


def merge_into_zeros(x):
    B, h, T, d = x.shape
    out = torch.zeros(B, T, h * d, dtype=x.dtype)  # on the CPU whatever x's device
    out[...] = x.transpose(1, 2).reshape(B, T, -1)
    return out


MERGE_HEADS = [
    ("transpose and flatten", merge_flatten, "right"),
    ("permute and reshape", merge_einops_like, "right"),
    ("a float32 result", lambda x: merge_flatten(x).float(), "wrong"),
    ("made into a buffer on the CPU", merge_into_zeros, "wrong"),
    ("detached", lambda x: merge_flatten(x).detach(), "wrong"),
    ("no transpose", lambda x: x.reshape(x.shape[0], x.shape[2], -1), "wrong"),
]

# --- scaled_scores, masks, stable softmax ------------------------------------------------


def scores_einsum(q, k):
    return torch.einsum("...qd,...kd->...qk", q, k) / q.size(-1) ** 0.5


def scores_in_place(q, k):
    q /= math.sqrt(q.shape[-1])
    return q @ k.transpose(-2, -1)


SCALED_SCORES = [
    ("einsum", scores_einsum, "right"),
    ("matmul and mT", lambda q, k: torch.matmul(q, k.mT) * q.shape[-1] ** -0.5, "right"),
    ("q rescaled in place", scores_in_place, "wrong"),
    ("scores detached", lambda q, k: scores_einsum(q, k).detach(), "wrong"),
    ("under no_grad", lambda q, k: _no_grad(scores_einsum, q, k), "wrong"),
    ("scaled by sqrt(T_k)", lambda q, k: q @ k.mT / math.sqrt(k.shape[-2]), "wrong"),
]


def _no_grad(function, *args):
    with torch.no_grad():
        return function(*args)


def padding_fixed(lengths, T):
    return (torch.arange(T) < torch.as_tensor(lengths).unsqueeze(1)).view(len(lengths), 1, 1, T)


def padding_longest(lengths, T):
    width = max(lengths)
    return (torch.arange(width) < torch.tensor(lengths)[:, None])[:, None, None, :]


PADDING = [
    ("arange against the lengths", padding_fixed, "right"),
    ("a loop of rows", lambda lengths, T: torch.stack(
        [torch.arange(T) < n for n in lengths])[:, None, None], "right"),
    ("as wide as the longest sequence", padding_longest, "wrong"),
    ("True at the padding", lambda lengths, T: ~padding_fixed(lengths, T), "wrong"),
]  # fmt: skip

CAUSAL = [
    ("tril of ones", lambda T: torch.ones(T, T, dtype=torch.bool).tril(), "right"),
    ("the diagonal hidden", lambda T: torch.ones(T, T, dtype=torch.bool).tril(-1), "wrong"),
]


def softmax_by_hand(scores, temperature=1.0):
    z = scores / temperature
    z = z - z.max(dim=-1, keepdim=True).values
    return z.exp() / z.exp().sum(-1, keepdim=True)


def softmax_logsumexp(scores, temperature=1.0):
    z = scores / temperature
    return torch.exp(z - torch.logsumexp(z, dim=-1, keepdim=True))


def softmax_raw_max(scores, temperature=1.0):
    shifted = scores - scores.max(dim=-1, keepdim=True).values
    e = torch.exp(shifted / temperature)
    return e / e.sum(-1, keepdim=True)


def softmax_raw_max_after(scores, temperature=1.0):
    e = torch.exp(scores / temperature - scores.max(dim=-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def softmax_in_place(scores, temperature=1.0):
    scores.sub_(scores.amax(-1, keepdim=True)).div_(temperature)
    return scores.exp() / scores.exp().sum(-1, keepdim=True)


STABLE_SOFTMAX = [
    ("the maximum of z", softmax_by_hand, "right"),
    ("logsumexp", softmax_logsumexp, "right"),
    ("the raw maximum, divided afterwards (right: the shift scales too)", softmax_raw_max, "right"),
    ("the raw maximum subtracted from z", softmax_raw_max_after, "wrong"),
    ("the caller's scores shifted in place", softmax_in_place, "wrong"),
    ("a float32 result", lambda s, temperature=1.0: softmax_by_hand(s.float(), temperature),
     "wrong"),
    ("no shift", lambda s, temperature=1.0: (s / temperature).exp() / (
        s / temperature).exp().sum(-1, keepdim=True), "wrong"),
]  # fmt: skip

# --- attention ---------------------------------------------------------------------------


def attention_positions(q, k, v, causal=True):
    scores = q @ k.mT / math.sqrt(q.shape[-1])
    if causal:
        rows = torch.arange(q.shape[-2], device=q.device)[:, None]
        cols = torch.arange(k.shape[-2], device=q.device)[None, :]
        scores = scores.masked_fill(cols > rows, float("-inf"))
    return scores.softmax(dim=-1) @ v


def attention_where(q, k, v, causal=True):
    scores = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(q.shape[-1])
    if causal:
        keep = torch.ones_like(scores, dtype=torch.bool).tril()
        scores = torch.where(keep, scores, torch.finfo(scores.dtype).min)
    return torch.einsum("...ij,...jd->...id", scores.softmax(-1), v)


def attention_numpy_scores(q, k, v, causal=True):
    import numpy as np

    scores = torch.tensor(np.matmul(q.detach().numpy(), np.swapaxes(k.detach().numpy(), -1, -2)))
    scores = scores / math.sqrt(q.shape[-1])
    if causal:
        T = scores.shape[-1]
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return scores.softmax(-1) @ v


def attention_cpu_positions(q, k, v, causal=True):
    scores = q @ k.mT / math.sqrt(q.shape[-1])
    if causal:
        T = scores.shape[-1]
        scores = scores.masked_fill(torch.arange(T)[None, :] > torch.arange(T)[:, None], -1e9)
    return scores.softmax(-1) @ v


def attention_scaled_in_place(q, k, v, causal=True):
    q *= q.shape[-1] ** -0.5
    return attention_positions(q, k, v, causal) * 1.0 if False else _attend_scaled(q, k, v, causal)


def _attend_scaled(q, k, v, causal):
    scores = q @ k.mT
    if causal:
        T = scores.shape[-1]
        hidden = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(hidden, float("-inf"))
    return scores.softmax(-1) @ v


def _masked_softmax_v(scores, v, causal):
    if causal:
        hidden = torch.ones(scores.shape[-2:], dtype=torch.bool, device=v.device).triu(1)
        scores = scores.masked_fill(hidden, float("-inf"))
    return scores.softmax(-1) @ v


def attention_dropout(q, k, v, causal=True):
    return F.dropout(attention_positions(q, k, v, causal), p=0.1)  # training=True by default


ATTENTION = [
    ("positions compared", attention_positions, "right"),
    ("torch.where and finfo.min", attention_where, "right"),
    ("F.scaled_dot_product_attention", lambda q, k, v, causal=True: (
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)), "right"),
    ("scores through NumPy", attention_numpy_scores, "wrong"),
    ("a mask of CPU positions", attention_cpu_positions, "wrong"),
    ("q scaled in place", attention_scaled_in_place, "wrong"),
    ("dropout left on", attention_dropout, "wrong"),
    ("the keys' length as d_k", lambda q, k, v, causal=True: _masked_softmax_v(
        q @ k.mT / math.sqrt(k.shape[-2]), v, causal), "wrong"),
    ("no mask and the keys' length as d_k (two mistakes)", lambda q, k, v, causal=True: (
        (q @ k.mT / math.sqrt(k.shape[-2])).softmax(-1) @ v), "wrong"),
]  # fmt: skip

ENTRIES = [
    *[
        (check_merge_pair, f"merge_pair: {label}", answer, kind)
        for label, answer, kind in MERGE_PAIR
    ],
    *[(check_nearest_tokens, f"nearest_tokens: {label}", a, k) for label, a, k in NEAREST],
    *[(check_split_heads, f"split_heads: {label}", a, k) for label, a, k in SPLIT_HEADS],
    *[(check_merge_heads, f"merge_heads: {label}", a, k) for label, a, k in MERGE_HEADS],
    *[(check_scaled_scores, f"scaled_scores: {label}", a, k) for label, a, k in SCALED_SCORES],
    *[(check_padding_mask, f"padding_mask: {label}", a, k) for label, a, k in PADDING],
    *[(check_causal_mask, f"causal_mask: {label}", a, k) for label, a, k in CAUSAL],
    *[(check_stable_softmax, f"stable_softmax: {label}", a, k) for label, a, k in STABLE_SOFTMAX],
    *[(check_attention, f"attention: {label}", a, k) for label, a, k in ATTENTION],
]


def test_function_battery(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_MY_MODEL", str(tmp_path / "my_model"))
    found = run_battery(ENTRIES, capsys)
    assert found["crashed"] == [], found["crashed"]
    assert found["wrong accepted"] == [], found["wrong accepted"]
    assert found["right rejected"] == [], found["right rejected"]
    generic = len(found["generic"]) / found["rejections"]
    print(f"generic rejections: {len(found['generic'])} of {found['rejections']}")
    assert generic <= 0.10, found["generic"]
