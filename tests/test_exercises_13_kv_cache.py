"""check_forward_cached (notebook 13): the learner's KV cache on their own decoder.

Right answers written other ways pass (F.scaled_dot_product_attention, a list cache edited in
place, lists for pairs); each catalogued mistake is named; a join on the wrong axis, a cache
that forgets or never grows, one that recomputes the keys of past tokens and results of the
wrong form are each rejected with a sentence naming them; nothing crashes the checker.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from checker_verdict import assert_named, assert_unfinished_reported, catalogue_params, verdict

from course_utils.exercises import check_forward_cached
from course_utils.exercises.nb13_cache_reference import forward_cached_reference, forward_variant
from course_utils.exercises.nb13_cached_loop import (
    GENERATE_CACHED_MISTAKES,
    check_generate_cached,
    generate_cached_reference,
)
from course_utils.exercises.nb13_kv_cache import FORWARD_CACHED_MISTAKES
from course_utils.exercises.solution_model import attention, merge_heads, split_heads

CATALOGUES = [(check_forward_cached, FORWARD_CACHED_MISTAKES)]


def notebook_solution(model, ids, cache):
    """The notebook's solution cell, word for word in its logic."""
    B, T_new = ids.shape
    start = 0 if cache is None else cache[0][0].shape[2]
    x = model.token_embedding(ids) * math.sqrt(model.d_model) + model.pe[start : start + T_new]
    new_cache = []
    for i, block in enumerate(model.blocks):
        mha = block.attention
        a = block.ln_1(x)
        q = split_heads(mha.w_q(a), mha.n_heads)
        k = split_heads(mha.w_k(a), mha.n_heads)
        v = split_heads(mha.w_v(a), mha.n_heads)
        if cache is not None:
            k = torch.cat([cache[i][0], k], dim=2)
            v = torch.cat([cache[i][1], v], dim=2)
        new_cache.append((k, v))
        heads = attention(q, k, v, causal=cache is None)
        x = x + mha.w_o(merge_heads(heads))
        x = x + block.feed_forward(block.ln_2(x))
    return model.lm_head(model.final_norm(x)), new_cache


def in_place_sdpa(model, ids, cache):
    """Another right answer: PyTorch's attention, the cache list edited in place, lists."""
    T_new = ids.shape[1]
    start = 0 if not cache else cache[0][0].shape[-2]
    x = model.token_embedding(ids) * model.d_model**0.5 + model.pe[start : start + T_new]
    kept = cache if cache is not None else []
    for i, block in enumerate(model.blocks):
        mha, a = block.attention, block.ln_1(x)
        B, h = a.shape[0], mha.n_heads
        q, k, v = (w(a).view(B, T_new, h, -1).transpose(1, 2) for w in (mha.w_q, mha.w_k, mha.w_v))
        if cache is not None:
            k, v = torch.cat((kept[i][0], k), -2), torch.cat((kept[i][1], v), -2)
            kept[i] = [k, v]
        else:
            kept.append([k, v])
        y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
        x = x + mha.w_o(y.transpose(1, 2).reshape(B, T_new, -1))
        x = x + block.feed_forward(block.ln_2(x))
    return model.lm_head(model.final_norm(x)), kept


def shifted_mask(model, ids, cache):
    """Another right answer: always a causal mask, shifted by the cache length."""
    T_new = ids.shape[1]
    start = 0 if cache is None else cache[0][0].shape[2]
    x = model.token_embedding(ids) * math.sqrt(model.d_model) + model.pe[start : start + T_new]
    out = []
    for i, block in enumerate(model.blocks):
        mha, a = block.attention, block.ln_1(x)
        q, k, v = (split_heads(w(a), mha.n_heads) for w in (mha.w_q, mha.w_k, mha.w_v))
        if cache is not None:
            k, v = torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)
        out.append((k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        T_k = k.shape[2]
        future = torch.ones(T_new, T_k, dtype=torch.bool).triu(diagonal=1 + start)
        weights = scores.masked_fill(future, float("-inf")).softmax(-1)
        x = x + mha.w_o(merge_heads(weights @ v))
        x = x + block.feed_forward(block.ln_2(x))
    return model.lm_head(model.final_norm(x)), out


@pytest.mark.parametrize(
    "answer", [notebook_solution, in_place_sdpa, shifted_mask, forward_cached_reference]
)
def test_right_answers_written_other_ways_pass(answer, capsys):
    passed, out = verdict(check_forward_cached, answer, capsys)
    assert passed and "✅ forward_cached: correct" in out, out


@pytest.mark.parametrize(("checker", "message", "wrong"), **catalogue_params(CATALOGUES))
def test_each_catalogued_mistake_is_named(checker, message, wrong, capsys):
    assert_named(checker, wrong, message, capsys)


def test_the_catalogue_covers_the_briefs_mistakes():
    said = " ".join(message for message, _ in FORWARD_CACHED_MISTAKES)
    assert "position offset" in said and "causal mask" in said and "before the cached" in said


def recomputing(model, ids, cache):
    """Keeps the tokens (on the model) and runs the whole context again at every step."""
    context = ids if cache is None else torch.cat([model.tokens_so_far, ids], dim=1)
    model.tokens_so_far = context
    logits, full = forward_variant(model, context, None)
    return logits[:, -ids.shape[1] :], full


@pytest.mark.parametrize(
    ("wrong", "said"),
    [
        (lambda m, i, c: forward_variant(m, i, c, dim=1), "the cache grows on the time axis"),
        (lambda m, i, c: forward_variant(m, i, c, dim=-1), "the cache grows on the time axis"),
        (
            lambda m, i, c: forward_variant(m, i, c, order="only-new"),
            "only the new tokens were kept",
        ),
        (
            lambda m, i, c: forward_variant(m, i, c, order="only-old"),
            "the cache came back unchanged",
        ),
        (recomputing, "recomputes the keys of past tokens"),
        (lambda m, i, c: m(i)[0], "must return (logits, cache)"),
        (lambda m, i, c: (m(i)[0], None), "one (k, v) per block"),
        (lambda m, i, c: (m(i)[0][:, -1], []), "the logits must be (B, T_new, V)"),
        (lambda m, i: None, "raised TypeError"),
    ],
)
def test_other_wrong_answers_are_rejected_with_their_cause(wrong, said, capsys):
    passed, out = verdict(check_forward_cached, wrong, capsys)
    assert not passed and said in out, out


def test_unfinished_and_not_a_function_are_reported(capsys):
    assert_unfinished_reported(CATALOGUES, capsys)
    passed, out = verdict(check_forward_cached, 3, capsys)
    assert not passed and "should be a function" in out, out


# --- the loop: generate_cached, the crop at block_size ----------------------------------------


@torch.no_grad()
def generate_cached(model, ids, max_new_tokens, block_size, generator=None):
    """The notebook's solution of the loop (it reads the global forward_cached)."""
    logits, cache = forward_cached(model, ids[:, -block_size:], None)
    for _ in range(max_new_tokens):
        probs = torch.softmax(logits[:, -1, :], dim=-1)
        next_id = torch.multinomial(probs, num_samples=1, generator=generator)
        ids = torch.cat([ids, next_id], dim=1)
        if cache[0][0].shape[2] < block_size:
            logits, cache = forward_cached(model, next_id, cache)
        else:
            logits, cache = forward_cached(model, ids[:, -block_size:], None)
    return ids


forward_cached = notebook_solution  # what the loops above read, as in the notebook


def sample(logits, generator):
    return torch.multinomial(torch.softmax(logits[:, -1], -1), 1, generator=generator)


def forward_first(model, ids, max_new_tokens, block_size, generator=None):
    """Another right loop: the forward call at the top of each step, the window tracked."""
    context, cache = ids[:, -block_size:], None
    for _ in range(max_new_tokens):
        logits, cache = forward_cached(model, context, cache)
        next_id = sample(logits, generator)
        ids = torch.cat([ids, next_id], dim=1)
        if cache[0][0].shape[2] == block_size:
            context, cache = ids[:, -block_size:], None
        else:
            context = next_id
    return ids


def no_crop(model, ids, n, block_size, generator=None):
    logits, cache = forward_cached(model, ids[:, -block_size:], None)
    for _ in range(n):
        next_id = sample(logits, generator)
        ids = torch.cat([ids, next_id], 1)
        logits, cache = forward_cached(model, next_id, cache)
    return ids


def prompt_not_cropped(model, ids, n, block_size, generator=None):
    logits, cache = forward_cached(model, ids, None)
    for _ in range(n):
        next_id = sample(logits, generator)
        ids = torch.cat([ids, next_id], 1)
        if cache[0][0].shape[2] < block_size:
            logits, cache = forward_cached(model, next_id, cache)
        else:
            logits, cache = forward_cached(model, ids[:, -block_size:], None)
    return ids


def whole_context_every_step(model, ids, n, block_size, generator=None):
    for _ in range(n):
        logits, _ = forward_cached(model, ids[:, -block_size:], None)
        ids = torch.cat([ids, sample(logits, generator)], 1)
    return ids


def window_one_short(model, ids, n, block_size, generator=None):
    logits, cache = forward_cached(model, ids[:, -block_size:], None)
    for _ in range(n):
        next_id = sample(logits, generator)
        ids = torch.cat([ids, next_id], 1)
        if cache[0][0].shape[2] < block_size - 1:
            logits, cache = forward_cached(model, next_id, cache)
        else:
            logits, cache = forward_cached(model, ids[:, -(block_size - 1) :], None)
    return ids


LOOP_CATALOGUES = [(check_generate_cached, GENERATE_CACHED_MISTAKES)]


@pytest.mark.parametrize("answer", [generate_cached, forward_first, generate_cached_reference])
def test_right_loops_pass(answer, capsys):
    passed, out = verdict(check_generate_cached, answer, capsys)
    assert passed and "✅ generate_cached: correct" in out, out


def test_the_notebook_checks_both_with_one_call(capsys):
    assert check_forward_cached(notebook_solution, generate_cached)
    out = capsys.readouterr().out
    assert "✅ forward_cached: correct" in out and "✅ generate_cached: correct" in out
    assert not check_forward_cached(notebook_solution, no_crop)
    assert "❌ generate_cached" in capsys.readouterr().out


@pytest.mark.parametrize(("checker", "message", "wrong"), **catalogue_params(LOOP_CATALOGUES))
def test_each_catalogued_loop_mistake_is_named(checker, message, wrong, capsys):
    assert_named(checker, wrong, message, capsys)


@pytest.mark.parametrize(
    ("wrong", "said"),
    [
        (no_crop, "rebuild it from the last block_size tokens (the crop at block_size)"),
        (prompt_not_cropped, "the prompt's last block_size in the prefill"),
        (whole_context_every_step, "feed only the new token"),
        (window_one_short, "the logits sampled from differs"),
        (lambda m, i, n, b, g=None: i, "it ran the model 0 times"),
        (lambda m, i, n, b: i, "raised TypeError"),
    ],
)
def test_other_wrong_loops_are_rejected_with_their_cause(wrong, said, capsys):
    passed, out = verdict(check_generate_cached, wrong, capsys)
    assert not passed and said in out, out


def test_an_unfinished_loop_is_reported(capsys):
    assert_unfinished_reported(LOOP_CATALOGUES, capsys)
