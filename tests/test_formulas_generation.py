"""Temperature in ``TinyDecoder.generate``: the next token is drawn from softmax(logits / T).

Measured, not re-derived from the code: many copies of one prompt are sampled in a single
batch, and the frequency of each next token is compared with softmax(logits / T) computed
from the model's own logits. T < 1 sharpens the distribution, T > 1 flattens it, and the
default T = 1 leaves the model's distribution unchanged. Each test also checks that the
plausible wrong formula (``logits * T``, or a default other than 1) would be far outside the
tolerance, so the test can fail.
"""

from __future__ import annotations

import pytest
import torch

from course_utils.config import ModelConfig
from course_utils.model import TinyDecoder

V = 6
DRAWS = 40_000  # one batch: frequency error about sqrt(p (1 - p) / N) < 0.003
TOLERANCE = 0.015  # 5 standard errors


@pytest.fixture(scope="module")
def model() -> TinyDecoder:
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=V, block_size=8, d_model=16, n_heads=2, n_layers=1)
    model = TinyDecoder(config).eval()
    with torch.no_grad():
        # A freshly initialised model is nearly uniform over the tokens; a larger final gain
        # spreads its logits over a few units, so a temperature visibly changes them.
        model.final_norm.weight.mul_(15.0)
    return model


PROMPT = torch.tensor([[1, 4, 2]])


def _model_probabilities(model: TinyDecoder, temperature: float) -> torch.Tensor:
    logits, _ = model(PROMPT)  # (1, T, V)
    return torch.softmax(logits[0, -1].double() / temperature, dim=-1)  # (V,)


def _sampled_frequencies(model: TinyDecoder, **options) -> torch.Tensor:
    prompts = PROMPT.expand(DRAWS, -1)  # (N, T0): N independent draws in one batch
    generator = torch.Generator().manual_seed(1)
    out = model.generate(prompts, max_new_tokens=1, generator=generator, **options)
    return torch.bincount(out[:, -1], minlength=V).double() / DRAWS


def test_the_model_distribution_is_far_from_uniform(model):
    """Without a spread of logits no temperature test below could tell formulas apart."""
    p = _model_probabilities(model, 1.0)
    assert p.max() - p.min() > 0.3, p


def test_default_temperature_samples_the_model_distribution(model):
    expected = _model_probabilities(model, 1.0)
    got = _sampled_frequencies(model)  # temperature left at its default
    assert (got - expected).abs().max() < TOLERANCE, (got, expected)
    for wrong_default in (0.5, 2.0):  # a default other than 1 would be caught
        assert (got - _model_probabilities(model, wrong_default)).abs().max() > 3 * TOLERANCE


@pytest.mark.parametrize("temperature", [0.5, 2.0], ids=["sharper", "flatter"])
def test_temperature_divides_the_logits(model, temperature):
    expected = _model_probabilities(model, temperature)
    got = _sampled_frequencies(model, temperature=temperature)
    assert (got - expected).abs().max() < TOLERANCE, (got, expected)
    multiplied = _model_probabilities(model, 1.0 / temperature)  # softmax(logits * T)
    assert (got - multiplied).abs().max() > 3 * TOLERANCE


def test_lower_temperature_is_sharper(model):
    """The most likely token gains probability as T falls; entropy falls with it."""
    frequencies = [_sampled_frequencies(model, temperature=t) for t in (2.0, 1.0, 0.5)]
    top = int(_model_probabilities(model, 1.0).argmax())
    tops = [float(f[top]) for f in frequencies]
    assert tops[0] < tops[1] < tops[2], tops

    def entropy(p: torch.Tensor) -> float:
        p = p[p > 0]
        return float(-(p * p.log()).sum())

    entropies = [entropy(f) for f in frequencies]
    assert entropies[0] > entropies[1] > entropies[2], entropies


def test_top_k_may_be_the_whole_vocabulary(model):
    """top_k = V keeps every token: the same draws as no top_k; V + 1 is refused."""
    draws = {}
    for top_k in (V, None):
        generator = torch.Generator().manual_seed(0)
        draws[top_k] = model.generate(PROMPT, 5, top_k=top_k, generator=generator)
    assert torch.equal(draws[V], draws[None])
    with pytest.raises(ValueError, match=rf"top_k must be in \[1, vocab_size={V}\], got {V + 1}"):
        model.generate(PROMPT, 1, top_k=V + 1)


@pytest.mark.parametrize("shape", [(0, 3), (1, 2, 3), (2, 0)], ids=["no-sequence", "3-D", "empty"])
def test_generate_refuses_a_prompt_that_is_not_b_by_t0(model, shape):
    with pytest.raises(ValueError, match=r"the prompt must be \(B, T0\) token ids"):
        model.generate(torch.zeros(shape, dtype=torch.long), 1, greedy=True)
