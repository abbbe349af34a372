"""check_generate_loop (notebook 12): accepts the right loop, with or without the generator,
and rejects each plausible wrong one naming its mistake; never raises on a wrong answer."""

from __future__ import annotations

import checker_verdict
import pytest
import torch

from course_utils.exercises import check_generate_loop


def verdict(function, capsys) -> tuple[bool, str]:
    """The shared verdict of ``check_generate_loop``, the only checker tested here."""
    return checker_verdict.verdict(check_generate_loop, function, capsys)


def make_generate(
    crop="last",
    position=-1,
    draw="sample",
    softmax_dim=-1,
    use_generator=True,
    returns="all",
    unpack=True,
):
    """The notebook's loop, with one switch per known mistake."""

    def generate(model, ids, max_new_tokens, block_size, generator=None):
        prompt_length = ids.shape[1]
        for _ in range(max_new_tokens):
            context = {
                "last": ids[:, -block_size:],
                "first": ids[:, :block_size],
                "none": ids,
                "newest": ids[:, -1:],
            }[crop]
            out = model(context)
            logits = out[0] if unpack else out
            last = logits[:, position, :]
            if draw == "greedy":
                next_id = last.argmax(dim=-1, keepdim=True)
            else:
                probs = torch.softmax(last, dim=softmax_dim) if draw == "sample" else last
                chosen = generator if use_generator else None
                next_id = torch.multinomial(probs, num_samples=1, generator=chosen)
            ids = torch.cat([ids, next_id], dim=1)
        return ids[:, prompt_length:] if returns == "new" else ids

    return generate


def test_the_solution_passes(capsys):
    ok, out = verdict(make_generate(), capsys)
    assert ok and "✅ generate: correct" in out


def test_the_global_random_state_is_accepted_and_given_back(capsys):
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    ok, out = verdict(make_generate(use_generator=False), capsys)
    assert ok, out
    assert torch.equal(torch.rand(3), before)  # the checker did not consume the global stream


def test_the_notebooks_solution_cell_passes(capsys):
    namespace = {"torch": torch}
    exec(SOLUTION, namespace)
    ok, out = verdict(namespace["generate"], capsys)
    assert ok, out


SOLUTION = """
def generate(model, ids, max_new_tokens, block_size, generator=None):
    for _ in range(max_new_tokens):
        context = ids[:, -block_size:]  # crop: the model has no position past block_size
        logits, _ = model(context)  # (B, T, V)
        probs = torch.softmax(logits[:, -1, :], dim=-1)  # the last position: (B, V)
        next_id = torch.multinomial(probs, num_samples=1, generator=generator)  # (B, 1)
        ids = torch.cat([ids, next_id], dim=1)  # (B, T) -> (B, T + 1)
    return ids
"""


@pytest.mark.parametrize(
    "options, named",
    [
        (dict(crop="none"), "crop the context to its last block_size tokens"),
        (dict(crop="first"), "saw the first block_size tokens; crop to the last"),
        (dict(crop="newest"), "saw only the newest token"),
        (dict(position=0), "the first position's logits"),
        (dict(draw="greedy"), "greedy decoding"),
        (dict(draw="raw"), "needs probabilities: apply torch.softmax"),
        (dict(softmax_dim=0), "softmax ran over the batch axis"),
        (dict(returns="new"), "returned only the 6 new tokens"),
        (dict(unpack=False), "the model returns (logits, loss): unpack it"),
    ],
    ids=[
        "no-crop",
        "first-window",
        "newest-only",
        "first-position",
        "greedy",
        "no-softmax",
        "softmax-batch",
        "new-only",
        "tuple",
    ],
)
def test_each_mistake_is_named(options, named, capsys):
    ok, out = verdict(make_generate(**options), capsys)
    assert not ok
    assert named in out, out


def test_probabilities_appended_instead_of_ids(capsys):
    def generate(model, ids, max_new_tokens, block_size, generator=None):
        out = ids.float()
        for _ in range(max_new_tokens):
            logits, _ = model(out[:, -block_size:].long())
            out = torch.cat([out, torch.softmax(logits[:, -1, :], -1).max(-1, keepdim=True)[0]], 1)
        return out

    ok, out = verdict(generate, capsys)
    assert not ok and "append the sampled token ids" in out


def test_a_loop_without_the_generator_parameter_is_told_to_take_it(capsys):
    def generate(model, ids, max_new_tokens, block_size):
        return ids

    ok, out = verdict(generate, capsys)
    assert not ok and "take the parameter generator=None" in out


def test_a_wrong_seed_stream_is_caught(capsys):
    def generate(model, ids, max_new_tokens, block_size, generator=None):
        other = torch.Generator().manual_seed(99)  # draws from its own stream
        return make_generate()(model, ids, max_new_tokens, block_size, generator=other)

    ok, out = verdict(generate, capsys)
    assert not ok and "the tokens differ from softmax(last logits)" in out


def test_unfinished_and_misused(capsys):
    def generate(model, ids, max_new_tokens, block_size, generator=None):
        raise NotImplementedError

    ok, out = verdict(generate, capsys)
    assert not ok and "not implemented yet" in out
    ok, out = verdict(torch.zeros(2, 3), capsys)
    assert not ok and "pass the function itself" in out
