"""Checkers of notebooks 09-11: the learner's LayerNorm, FeedForward, Block and Decoder (parts
of their model), the pre-LN step and a block's parameter count: each catalogued mistake is
rejected with its own message, right answers written other ways are accepted, and no checker
fails on its own (issue 32's standard)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from checker_verdict import assert_named, unfinished, verdict
from torch import nn

from course_utils.exercises import (
    check_block,
    check_block_parameter_count,
    check_decoder,
    check_feed_forward,
    check_layer_norm,
    check_pre_ln_residual,
)
from course_utils.exercises import solution_model as solution
from course_utils.exercises.nb09_residual_and_layernorm import (
    _LAYER_NORM_MISTAKES,
    _PRE_LN_MISTAKES,
)
from course_utils.exercises.nb10_feed_forward import (
    _BLOCK_COUNT_MISTAKES,
    _FEED_FORWARD_MISTAKES,
    _TanhGelu,
)
from course_utils.exercises.nb11_block_and_decoder import (
    _BLOCK_MISTAKES,
    _DECODER_MISTAKES,
    _block_mistake,
    _decoder_mistake,
)


@pytest.fixture(autouse=True)
def scratch_parts(tmp_path, monkeypatch):
    """Parts that pass are saved: into a scratch folder, never the repository."""
    monkeypatch.setenv("COURSE_MY_MODEL", str(tmp_path / "my_model"))
    return tmp_path / "my_model"


# --- 09: LayerNorm ------------------------------------------------------------------------


class VarMean(solution.LayerNorm):
    def forward(self, x):
        variance, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
        return torch.addcmul(self.bias, (x - mean) * torch.rsqrt(variance + self.eps), self.weight)


class Functional64(solution.LayerNorm):
    def forward(self, x):
        weight, bias = self.weight.double(), self.bias.double()
        return F.layer_norm(x.double(), x.shape[-1:], weight, bias, self.eps)


class Centred(solution.LayerNorm):
    def forward(self, x):
        centred = x - x.mean(-1, keepdim=True)
        return (
            centred / (centred.pow(2).mean(-1, keepdim=True) + self.eps).sqrt() * self.weight
            + self.bias
        )


class Library(solution.LayerNorm):
    def forward(self, x):
        norm = nn.LayerNorm(x.shape[-1], eps=self.eps, device=x.device)
        norm.weight, norm.bias = self.weight, self.bias  # the layer's own parameters
        return norm(x)


class LibraryCopy(solution.LayerNorm):
    """Right values, but a copy of the weights (state_dict detaches them): they never learn."""

    def forward(self, x):
        norm = nn.LayerNorm(x.shape[-1], eps=self.eps)
        norm.load_state_dict(self.state_dict())
        return norm(x)


@pytest.mark.parametrize(
    "part", [solution.LayerNorm, VarMean, Functional64, Centred, Library], ids=lambda c: c.__name__
)
def test_layer_norm_accepts_right_answers(part, capsys):
    assert verdict(check_layer_norm, part, capsys) == (True, "✅ LayerNorm: correct\n")


def test_layer_norm_names_what_training_needs(capsys):
    """Issue 42: detached statistics, a copy of the weights, an in-place centring."""

    class DetachedStatistics(solution.LayerNorm):
        def forward(self, x):
            mean, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
            x_hat = (x - mean.detach()) / torch.sqrt(var.detach() + self.eps)
            return self.weight * x_hat + self.bias

    class CentredInPlace(solution.LayerNorm):
        def forward(self, x):
            var = x.var(-1, keepdim=True, unbiased=False)
            x.sub_(x.mean(-1, keepdim=True))
            return self.weight * x / torch.sqrt(var + self.eps) + self.bias

    said = {
        DetachedStatistics: ["the gradient of x differs", ".detach() (line"],
        LibraryCopy: ["weight and bias get no gradient"],
        CentredInPlace: ["changes its argument x in place", "write `x = x.sub(x.mean("],
    }
    for part, parts in said.items():
        ok, out = verdict(check_layer_norm, part, capsys)
        assert not ok and all(p in out for p in parts), out


@pytest.mark.parametrize("index", range(len(_LAYER_NORM_MISTAKES)))
def test_layer_norm_names_each_catalogued_mistake(index, capsys):
    message, wrong = _LAYER_NORM_MISTAKES[index]
    assert_named(check_layer_norm, wrong, message, capsys)


def test_layer_norm_names_the_popular_one_liner_and_a_hard_coded_eps(capsys):
    class OneLiner(solution.LayerNorm):
        def forward(self, x):
            return (x - x.mean(-1, keepdim=True)) / (
                x.std(-1, keepdim=True) + self.eps
            ) * self.weight + self.bias

    class Fixed(solution.LayerNorm):
        def forward(self, x):
            return F.layer_norm(x, x.shape[-1:], self.weight, self.bias, 1e-5)

    ok, out = verdict(check_layer_norm, OneLiner, capsys)
    assert not ok and "x.std() with eps outside the square root" in out
    ok, out = verdict(check_layer_norm, Fixed, capsys)
    assert not ok and "eps fixed at 1e-5; use self.eps" in out


def test_layer_norm_reports_renamed_parameters_and_stubs(capsys):
    class GammaBeta(nn.Module):
        def __init__(self, d_model, eps=1e-5):
            super().__init__()
            self.gamma, self.beta = (
                nn.Parameter(torch.ones(d_model)),
                nn.Parameter(torch.zeros(d_model)),
            )

    ok, out = verdict(check_layer_norm, GammaBeta, capsys)
    assert not ok and "has no parameter weight, bias but has gamma, beta" in out

    class Stub(solution.LayerNorm):
        forward = unfinished

    assert verdict(check_layer_norm, Stub, capsys) == (False, "❌ LayerNorm: not implemented yet\n")
    ok, out = verdict(check_layer_norm, solution.LayerNorm(24), capsys)
    assert not ok and "pass the class itself: check_layer_norm(LayerNorm)" in out


# --- 09: one pre-LN step ------------------------------------------------------------------


def test_pre_ln_residual_accepts_right_answers(capsys):
    def in_two_steps(x, norm, f):
        update = f(norm(x))
        return update.add(x)

    for right in (
        lambda x, norm, f: x + f(norm(x)),
        in_two_steps,
        lambda x, norm, f: torch.add(x, f(norm(x))).double(),
    ):
        assert verdict(check_pre_ln_residual, right, capsys)[0]


@pytest.mark.parametrize("index", range(len(_PRE_LN_MISTAKES)))
def test_pre_ln_residual_names_each_catalogued_mistake(index, capsys):
    message, wrong = _PRE_LN_MISTAKES[index]
    assert_named(check_pre_ln_residual, wrong, message, capsys)


# --- 10: FeedForward ----------------------------------------------------------------------


class ByHand(solution.FeedForward):
    def forward(self, x):
        h = x @ self.up.weight.T + self.up.bias
        return (0.5 * h * (1 + torch.erf(h / math.sqrt(2)))) @ self.down.weight.T + self.down.bias


class Sequential64(solution.FeedForward):
    def forward(self, x):
        return nn.Sequential(self.up, nn.GELU(), self.down).double()(x.double())


class Einsum(solution.FeedForward):
    def forward(self, x):
        h = F.gelu(torch.einsum("...c,fc->...f", x, self.up.weight) + self.up.bias)
        return torch.einsum("...f,cf->...c", h, self.down.weight) + self.down.bias


@pytest.mark.parametrize(
    "part", [solution.FeedForward, ByHand, Sequential64, Einsum], ids=lambda c: c.__name__
)
def test_feed_forward_accepts_right_answers(part, capsys):
    assert verdict(check_feed_forward, part, capsys) == (True, "✅ FeedForward: correct\n")


def test_feed_forward_rejects_gpt2_s_tanh_gelu_as_my_model_does(capsys):
    """Issue 42: one set of accepted forms; the course's model (and my_model's judge) uses the
    exact GELU, so the checker names the tanh form instead of accepting it."""
    ok, out = verdict(check_feed_forward, _TanhGelu, capsys)
    assert not ok and "looks like GELU's tanh approximation" in out


@pytest.mark.parametrize("index", range(len(_FEED_FORWARD_MISTAKES)))
def test_feed_forward_names_each_catalogued_mistake(index, capsys):
    message, wrong = _FEED_FORWARD_MISTAKES[index]
    assert_named(check_feed_forward, wrong, message, capsys)


def test_feed_forward_names_raw_weights_and_stubs(capsys):
    class Raw(solution.FeedForward):
        def forward(self, x):
            return F.gelu(x @ self.up.weight) @ self.down.weight

    ok, out = verdict(check_feed_forward, Raw, capsys)
    assert not ok and "nn.Linear's weight is (out, in)" in out

    class Stub(solution.FeedForward):
        forward = unfinished

    assert verdict(check_feed_forward, Stub, capsys) == (
        False,
        "❌ FeedForward: not implemented yet\n",
    )


def count_block_parameters(d_model, n_heads, d_ff):
    attention = 4 * (d_model * d_model + d_model)
    return attention + 2 * (2 * d_model) + (d_model * d_ff + d_ff) + (d_ff * d_model + d_model)


def block_built(d_model, n_heads, d_ff):  # the solution's Block, counted
    return sum(p.numel() for p in solution.Block(d_model, n_heads, d_ff).parameters())


def block_in_terms(d_model, n_heads, d_ff):  # per module: 4 Linear(C, C), 2 LayerNorms, FFN
    d_k = d_model // n_heads
    per_head = 4 * d_model * d_k  # each head's slices of w_q, w_k, w_v, w_o
    return n_heads * per_head + 4 * d_model + 4 * d_model + 2 * d_model * d_ff + d_ff + d_model


RIGHT_BLOCK_COUNTS = [
    count_block_parameters,
    block_built,
    block_in_terms,
    lambda c, h, f: int(4 * c * (c + 2) + (2 * c + 1) * f + c),  # another grouping
    lambda c, h, f: int(c * c * 4.0 + c * 8.0 + f * (2.0 * c + 1) + c),  # through floats
]


@pytest.mark.parametrize("right", RIGHT_BLOCK_COUNTS)
def test_block_parameter_count_accepts_right_variants(right, capsys):
    assert verdict(check_block_parameter_count, right, capsys) == (
        True,
        "✅ count_block_parameters: correct\n",
    )


@pytest.mark.parametrize(("message", "wrong"), _BLOCK_COUNT_MISTAKES)
def test_block_parameter_count_names_each_mistake(message, wrong, capsys):
    assert_named(check_block_parameter_count, wrong, message, capsys)


def test_block_parameter_count_names_types_constants_and_stubs(capsys):
    ok, out = verdict(check_block_parameter_count, lambda c, h, f: c * c / h * h, capsys)
    assert not ok and "the float" in out and "return an int" in out
    as_tensor = lambda c, h, f: torch.tensor(count_block_parameters(c, h, f))  # noqa: E731
    ok, out = verdict(check_block_parameter_count, as_tensor, capsys)
    assert not ok and "return a Python int (tensor.item())" in out
    fixed = lambda c, h, f: count_block_parameters(24, h, f)  # noqa: E731
    ok, out = verdict(check_block_parameter_count, fixed, capsys)
    assert not ok and "what d_model=24 gives" in out
    assert verdict(check_block_parameter_count, unfinished, capsys) == (
        False,
        "❌ count_block_parameters: not implemented yet\n",
    )


# --- 11: Block and Decoder ------------------------------------------------------------------


class BlockInSteps(solution.Block):
    def forward(self, x):
        attended = self.attention(self.ln_1(x))
        x = torch.add(x, attended)
        return x.double() + self.feed_forward(self.ln_2(x)).double()


class BlockFromLibrary(solution.Block):
    """The library's LayerNorm with the learner's weights: another right way."""

    def forward(self, x):
        ln_1 = F.layer_norm(x, x.shape[-1:], self.ln_1.weight, self.ln_1.bias, 1e-5)
        x = x + self.attention(ln_1)
        return x + self.feed_forward(
            F.layer_norm(x, x.shape[-1:], self.ln_2.weight, self.ln_2.bias, 1e-5)
        )


class BlockSequential(solution.Block):
    def forward(self, x):
        for norm, sublayer in ((self.ln_1, self.attention), (self.ln_2, self.feed_forward)):
            x = x + sublayer(norm(x))
        return x


@pytest.mark.parametrize(
    "part",
    [solution.Block, BlockInSteps, BlockFromLibrary, BlockSequential],
    ids=lambda c: c.__name__,
)
def test_block_accepts_right_answers(part, capsys):
    assert verdict(check_block, part, capsys) == (True, "✅ Block: correct\n")


@pytest.mark.parametrize("index", range(len(_BLOCK_MISTAKES)))
def test_block_names_each_catalogued_mistake(index, capsys):
    message, order = _BLOCK_MISTAKES[index]
    assert_named(check_block, _block_mistake(order), message, capsys)


def test_block_names_a_wrong_sublayer_first(capsys):
    class OneLiner(solution.LayerNorm):
        def forward(self, x):
            return (x - x.mean(-1, keepdim=True)) / (
                x.std(-1, keepdim=True) + self.eps
            ) * self.weight + self.bias

    class WithWrongNorm(solution.Block):
        def __init__(self, d_model, n_heads, d_ff):
            super().__init__(d_model, n_heads, d_ff)
            self.ln_1 = OneLiner(d_model)

    ok, out = verdict(check_block, WithWrongNorm, capsys)
    assert not ok and "its ln_1 (your LayerNorm, notebook 09) is not right yet" in out

    class StubAttention(solution.MultiHeadAttention):
        forward = unfinished

    class WithStub(solution.Block):
        def __init__(self, d_model, n_heads, d_ff):
            super().__init__(d_model, n_heads, d_ff)
            self.attention = StubAttention(d_model, n_heads)

    ok, out = verdict(check_block, WithStub, capsys)
    assert (
        not ok and "its attention (your MultiHeadAttention, notebook 08) is not right yet: " in out
    )
    assert "not implemented yet; fix it and run check_multi_head_attention" in out

    class EpsOutside(solution.LayerNorm):  # issue 42: hidden by a block's random input
        def forward(self, x):
            mean, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
            return self.weight * (x - mean) / (var.sqrt() + self.eps) + self.bias

    class WithEpsOutside(solution.Block):
        def __init__(self, d_model, n_heads, d_ff):
            super().__init__(d_model, n_heads, d_ff)
            self.ln_2 = EpsOutside(d_model)

    ok, out = verdict(check_block, WithEpsOutside, capsys)
    assert (
        not ok and "its ln_2 (your LayerNorm, notebook 09) is not right yet: looks like eps" in out
    )


class DecoderByHand(solution.Decoder):
    def forward(self, ids, targets=None):
        T = ids.shape[1]
        x = self.token_embedding.weight[ids] * self.d_model**0.5 + self.pe[:T]
        for block in self.blocks:
            x = block(x)
        logits = self.final_norm(x) @ self.token_embedding.weight.T
        if targets is None:
            return logits, None
        log_probs = torch.log_softmax(logits.double(), dim=-1)
        return logits, -log_probs.gather(-1, targets[..., None]).mean()


class DecoderListLoss(solution.Decoder):
    """Returns a list, and flattens with reshape and flatten: also right."""

    def forward(self, ids, targets=None):
        logits, _ = super().forward(ids)
        loss = (
            None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.reshape(-1))
        )
        return [logits, loss]


class DecoderTransposedLoss(solution.Decoder):
    def forward(self, ids, targets=None):
        logits, _ = super().forward(ids)
        loss = None if targets is None else F.cross_entropy(logits.transpose(1, 2), targets)
        return logits, loss


@pytest.mark.parametrize(
    "part",
    [solution.Decoder, DecoderByHand, DecoderListLoss, DecoderTransposedLoss],
    ids=lambda c: c.__name__,
)
def test_decoder_accepts_right_answers(part, capsys):
    assert verdict(check_decoder, part, capsys) == (True, "✅ Decoder: correct\n")


@pytest.mark.parametrize("index", range(len(_DECODER_MISTAKES)))
def test_decoder_names_each_catalogued_mistake(index, capsys):
    message, change = _DECODER_MISTAKES[index]
    assert_named(check_decoder, _decoder_mistake(**change), message, capsys)


def test_decoder_names_structural_mistakes(capsys):
    class Untied(solution.Decoder):
        def __init__(self, vocab_size, *rest):
            super().__init__(vocab_size, *rest)
            self.lm_head = nn.Linear(self.d_model, vocab_size, bias=False)

    class Repeated(solution.Decoder):
        def __init__(self, vocab_size, block_size, d_model, n_heads, n_layers, d_ff):
            super().__init__(vocab_size, block_size, d_model, n_heads, n_layers, d_ff)
            self.blocks = nn.ModuleList([solution.Block(d_model, n_heads, d_ff)] * n_layers)

    class WholeTable(solution.Decoder):
        def forward(self, ids, targets=None):
            x = self.token_embedding(ids) * math.sqrt(self.d_model) + self.pe
            for block in self.blocks:
                x = block(x)
            return self.lm_head(self.final_norm(x)), None

    class OnlyLogits(solution.Decoder):
        def forward(self, ids, targets=None):
            return super().forward(ids, targets)[0]

    ok, out = verdict(check_decoder, Untied, capsys)
    assert not ok and "the head is not tied to the embedding" in out
    ok, out = verdict(check_decoder, Repeated, capsys)
    assert not ok and "the same Block object is repeated" in out
    ok, out = verdict(check_decoder, WholeTable, capsys)
    assert not ok and "not the whole table of block_size rows" in out
    ok, out = verdict(check_decoder, OnlyLogits, capsys)
    assert not ok and "should be the tuple (logits, loss), got a tensor" in out


def test_decoder_names_mistakes_of_its_init(capsys):
    """Notebook 11 has the learner write Decoder.__init__ too: a plain list of blocks, a head
    with a bias, too few blocks and a missing layer are each named with the fix."""

    class PlainList(solution.Decoder):
        def __init__(self, vocab_size, block_size, d_model, n_heads, n_layers, d_ff):
            super().__init__(vocab_size, block_size, d_model, n_heads, n_layers, d_ff)
            del self.blocks  # as if it had never been a ModuleList
            self.blocks = [solution.Block(d_model, n_heads, d_ff) for _ in range(n_layers)]

    class BiasedHead(solution.Decoder):
        def __init__(self, vocab_size, block_size, d_model, *rest):
            super().__init__(vocab_size, block_size, d_model, *rest)
            self.lm_head = nn.Linear(d_model, vocab_size)
            self.lm_head.weight = self.token_embedding.weight

    class OneBlock(solution.Decoder):
        def __init__(self, vocab_size, block_size, d_model, n_heads, n_layers, d_ff):
            super().__init__(vocab_size, block_size, d_model, n_heads, 1, d_ff)

    class NoFinalNorm(solution.Decoder):
        def __init__(self, *sizes):
            super().__init__(*sizes)
            del self.final_norm

    for part, named in [
        (PlainList, "self.blocks is a plain Python list"),
        (BiasedHead, "has biases the course's model does not: lm_head.bias; build those layers "
                     "with bias=False"),
        (OneBlock, "has 1 block(s) in self.blocks, expected 2 (n_layers)"),
        (NoFinalNorm, "has no parameter final_norm.weight, final_norm.bias: use the attribute "
                      "names the exercise gives"),
    ]:  # fmt: skip
        ok, out = verdict(check_decoder, part, capsys)
        assert not ok and named in out, (part.__name__, out)


def test_a_missing_bias_is_named(capsys):
    class NoBias(solution.FeedForward):
        def __init__(self, d_model, d_ff):
            super().__init__(d_model, d_ff)
            self.up = nn.Linear(d_model, d_ff, bias=False)

    ok, out = verdict(check_feed_forward, NoBias, capsys)
    assert not ok and "lacks biases the course's model has: up.bias" in out, out


def test_decoder_equals_tiny_decoder_and_saves_the_part(scratch_parts, capsys):
    """The checker's reference is TinyDecoder (sinusoidal positions, no dropout); the solution
    passes and is saved for my_model()."""

    class Decoder(solution.Decoder):
        pass

    assert verdict(check_decoder, Decoder, capsys)[0]
    assert "class Decoder(solution.Decoder)" in (scratch_parts / "Decoder.py").read_text()
