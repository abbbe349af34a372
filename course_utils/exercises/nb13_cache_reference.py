"""The course's answer to notebook 13's ``forward_cached``, and the variations of it that make
the mistakes its checker names: the reference both of notebook 13's checkers build on
(:mod:`.nb13_kv_cache` for ``forward_cached``, :mod:`.nb13_cached_loop` for the loop).

``forward_cached(model, ids, cache) -> (logits, cache)`` runs the learner's ``Decoder``
(notebook 11's attribute names, :mod:`.solution_model`) on new tokens only, with the keys and
values of the tokens before them kept per block.

Sources: the KV cache as in GPT-2's ``past`` (Radford et al. 2019) and Pope et al. 2022,
"Efficiently Scaling Transformer Inference", §2; causal attention, Vaswani et al. 2017, §3.2.3.
"""

from __future__ import annotations

import math

import torch

import course_utils.exercises.solution_model as solution

__all__ = ["forward_cached_reference", "forward_variant"]


def forward_variant(model, ids, cache, *, offset=True, dim=2, order="old-new", step_mask=False):
    """The course's ``forward_cached``; the keywords make the catalogued mistakes."""
    _, T_new = ids.shape
    start = 0 if cache is None else cache[0][0].shape[2]  # the first new token's position
    at = start if offset else 0
    x = model.token_embedding(ids) * math.sqrt(model.d_model) + model.pe[at : at + T_new]
    new_cache = []
    for i, block in enumerate(model.blocks):
        mha = block.attention
        a = block.ln_1(x)
        q, k, v = (solution.split_heads(w(a), mha.n_heads) for w in (mha.w_q, mha.w_k, mha.w_v))
        if cache is not None:
            k, v = _joined(cache[i], k, v, dim, order)
        new_cache.append((k, v))
        heads = solution.attention(q, k, v, causal=cache is None or step_mask)
        x = x + mha.w_o(solution.merge_heads(heads))
        x = x + block.feed_forward(block.ln_2(x))
    return model.lm_head(model.final_norm(x)), new_cache


def _joined(cached, k, v, dim, order):
    cached_k, cached_v = cached
    if order == "only-new":
        return k, v
    if order == "only-old":
        return cached_k, cached_v
    if order == "new-old":
        return torch.cat([k, cached_k], dim=dim), torch.cat([v, cached_v], dim=dim)
    return torch.cat([cached_k, k], dim=dim), torch.cat([cached_v, v], dim=dim)


def forward_cached_reference(model, ids, cache):
    """The right answer: logits ``(B, T_new, V)`` and one ``(k, v)`` per block, each
    ``(B, h, T_cached + T_new, d_k)``; ``cache`` None for the prompt."""
    return forward_variant(model, ids, cache)
