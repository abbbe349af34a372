"""A battery of right and wrong answers to the module parts and the training exercises (issue 42),
written apart from the catalogues, and broken parts in the assembly: no wrong answer passes, no
right one is rejected, no checker fails on its own, at most 10 % of rejections are generic, and
my_model names the cause of every part it swaps for the course's solution."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from checker_verdict import is_generic, run_battery
from torch import nn

import course_utils.exercises.solution_model as solution
from course_utils.exercises import (
    check_block,
    check_decoder,
    check_estimate_loss,
    check_feed_forward,
    check_layer_norm,
    check_learning_rate,
    check_multi_head_attention,
    check_training_step,
)
from course_utils.lab import parts

# --- MultiHeadAttention ------------------------------------------------------------------


class MhaFused(solution.MultiHeadAttention):
    def forward(self, x):
        B, T, C = x.shape
        qkv = torch.cat([self.w_q.weight, self.w_k.weight, self.w_v.weight])
        bias = torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias])
        q, k, v = F.linear(x, qkv, bias).split(C, dim=-1)
        q, k, v = (t.reshape(B, T, self.n_heads, -1).permute(0, 2, 1, 3) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.w_o(out.permute(0, 2, 1, 3).reshape(B, T, C))


class MhaBuffer(solution.MultiHeadAttention):
    """A causal mask kept as a non-persistent buffer, sliced to T: right."""

    def __init__(self, d_model, n_heads):
        super().__init__(d_model, n_heads)
        self.register_buffer("keep", torch.ones(64, 64, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x):
        T = x.shape[1]
        q, k, v = (solution.split_heads(w(x), self.n_heads) for w in (self.w_q, self.w_k, self.w_v))
        scores = (q @ k.mT / math.sqrt(q.shape[-1])).masked_fill(~self.keep[:T, :T], -math.inf)
        return self.w_o(solution.merge_heads(scores.softmax(-1) @ v))


class MhaPlainMask(MhaBuffer):
    """The same mask as a plain tensor attribute: .to(device) leaves it on the CPU."""

    def __init__(self, d_model, n_heads):
        nn.Module.__init__(self)
        self.n_heads = n_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))
        self.keep = torch.ones(64, 64, dtype=torch.bool).tril()


class MhaPersistentMask(MhaBuffer):
    def __init__(self, d_model, n_heads):
        super().__init__(d_model, n_heads)
        self.register_buffer("keep", torch.ones(64, 64, dtype=torch.bool).tril())


class MhaNoGradValues(solution.MultiHeadAttention):
    def forward(self, x):
        q = solution.split_heads(self.w_q(x), self.n_heads)
        k = solution.split_heads(self.w_k(x), self.n_heads)
        with torch.no_grad():
            v = solution.split_heads(self.w_v(x), self.n_heads)
        return self.w_o(solution.merge_heads(solution.attention(q, k, v)))


class MhaAttentionDropout(solution.MultiHeadAttention):
    def forward(self, x):
        q, k, v = (solution.split_heads(w(x), self.n_heads) for w in (self.w_q, self.w_k, self.w_v))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.1)
        return self.w_o(solution.merge_heads(out))


class MhaSquashedInPlace(solution.MultiHeadAttention):
    def forward(self, x):
        x.tanh_()  # the caller's tensor is written
        return super().forward(x)


class MhaNoBiasUse(solution.MultiHeadAttention):
    def forward(self, x):
        q, k, v = (
            solution.split_heads(x @ w.weight.T, self.n_heads)
            for w in (self.w_q, self.w_k, self.w_v)
        )
        return self.w_o(solution.merge_heads(solution.attention(q, k, v)))


MHA = [
    ("fused projection and SDPA", MhaFused, "right"),
    ("a non-persistent mask buffer", MhaBuffer, "right"),
    ("a plain tensor attribute as the mask", MhaPlainMask, "wrong"),
    ("a persistent mask buffer", MhaPersistentMask, "wrong"),
    ("values computed under no_grad", MhaNoGradValues, "wrong"),
    ("attention dropout", MhaAttentionDropout, "wrong"),
    ("the caller's x written in place", MhaSquashedInPlace, "wrong"),
    ("the projections' biases skipped", MhaNoBiasUse, "wrong"),
]

# --- LayerNorm ---------------------------------------------------------------------------


def _norm(**change):
    class Norm(solution.LayerNorm):
        def forward(self, x):
            eps = change.get("eps", self.eps)
            dims = change.get("dims", -1)
            mean = x.mean(dims, keepdim=True)
            var = ((x - mean) ** 2).mean(dims, keepdim=True)
            if change.get("detach"):
                var = var.detach()
            x_hat = (x - mean) / (var.sqrt() + eps if change.get("outside") else (var + eps).sqrt())
            return self.weight * x_hat + self.bias

    return Norm


class NormRsqrt(solution.LayerNorm):
    def forward(self, x):
        centred = x - x.mean(-1, keepdim=True)
        return (
            torch.rsqrt(centred.square().mean(-1, keepdim=True) + self.eps)
            * centred
            * (self.weight)
            + self.bias
        )


class NormRandom(solution.LayerNorm):
    def forward(self, x):
        return F.dropout(solution.LayerNorm.forward(self, x), 0.05, self.training)


LAYER_NORM = [
    ("rsqrt of the centred square", NormRsqrt, "right"),
    ("written out", _norm(), "right"),
    ("eps fixed at 1e-6", _norm(eps=1e-6), "wrong"),
    ("eps outside the root", _norm(outside=True), "wrong"),
    ("statistics over every axis", _norm(dims=(0, 1, 2)), "wrong"),
    ("variance detached", _norm(detach=True), "wrong"),
    ("dropout in train mode", NormRandom, "wrong"),
]

# --- FeedForward -------------------------------------------------------------------------


class FfnErf(solution.FeedForward):
    def forward(self, x):
        h = self.up(x)
        return self.down(0.5 * h * (1 + torch.erf(h / math.sqrt(2))))


class FfnNoGrad(solution.FeedForward):
    @torch.no_grad()
    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class FfnTanhByHand(solution.FeedForward):
    def forward(self, x):
        h = self.up(x)
        return self.down(0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3))))


class FfnSwappedLayers(solution.FeedForward):
    def forward(self, x):
        return F.gelu(self.down(F.gelu(self.up(x))))


class FfnDropout(solution.FeedForward):
    def __init__(self, d_model, d_ff):
        super().__init__(d_model, d_ff)
        self.drop = nn.Dropout(0.2)

    def forward(self, x):
        return self.drop(self.down(F.gelu(self.up(x))))


FEED_FORWARD = [
    ("GELU through erf", FfnErf, "right"),
    ("forward under @torch.no_grad()", FfnNoGrad, "wrong"),
    ("the tanh GELU written out", FfnTanhByHand, "wrong"),
    ("GELU after down too", FfnSwappedLayers, "wrong"),
    ("dropout after down", FfnDropout, "wrong"),
]

# --- Block and Decoder -------------------------------------------------------------------


class BlockSteps(solution.Block):
    def forward(self, x):
        attended = self.attention(self.ln_1(x))
        x = x + attended
        fed = self.feed_forward(self.ln_2(x))
        return x + fed


class BlockInPlace(solution.Block):
    def forward(self, x):
        x += self.attention(self.ln_1(x))
        x += self.feed_forward(self.ln_2(x))
        return x


class BlockResidualDropout(solution.Block):
    def forward(self, x):
        x = x + F.dropout(self.attention(self.ln_1(x)), 0.1, self.training)
        return x + self.feed_forward(self.ln_2(x))


class BlockSharedNorm(solution.Block):
    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.feed_forward(self.ln_1(x))


class NormEpsOutside(solution.LayerNorm):
    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = x.var(-1, keepdim=True, unbiased=False).sqrt()
        return self.weight * (x - mean) / (std + self.eps) + self.bias


class BlockEpsOutside(solution.Block):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__(d_model, n_heads, d_ff)
        self.ln_1, self.ln_2 = NormEpsOutside(d_model), NormEpsOutside(d_model)


BLOCK = [
    ("in steps", BlockSteps, "right"),
    ("x += on the residual", BlockInPlace, "wrong"),
    ("dropout on the residual", BlockResidualDropout, "wrong"),
    ("ln_1 for both sublayers", BlockSharedNorm, "wrong"),
    ("LayerNorms with eps outside the root", BlockEpsOutside, "wrong"),
]


def _decoder(positions="buffer", dropout=0.0, detach=False):
    class Model(solution.Decoder):
        def __init__(self, vocab_size, block_size, d_model, n_heads, n_layers, d_ff):
            super().__init__(vocab_size, block_size, d_model, n_heads, n_layers, d_ff)
            if positions == "attribute":  # a plain tensor attribute, not a buffer
                self.table = solution.sinusoidal_table(block_size, d_model)

        def forward(self, ids, targets=None):
            B, T = ids.shape
            x = self.token_embedding(ids) * math.sqrt(self.d_model)
            if positions == "buffer":
                x = x + self.pe[:T]
            elif positions == "attribute":
                x = x + self.table[:T]
            else:  # the table made in forward, on the CPU
                x = x + solution.sinusoidal_table(T, self.d_model)
            x = F.dropout(x, dropout, self.training)
            for block in self.blocks:
                x = block(x)
            h = self.final_norm(x)
            logits = self.lm_head(h.detach() if detach else h)
            if targets is None:
                return logits, None
            return logits, F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))

    return Model


DECODER = [
    ("the table kept as a buffer", _decoder(), "right"),
    ("the table made in forward, on the CPU", _decoder(positions="forward"), "wrong"),
    ("the table kept as a plain attribute", _decoder(positions="attribute"), "wrong"),
    ("dropout after the embedding", _decoder(dropout=0.1), "wrong"),
    ("the head reads a detached stream", _decoder(detach=True), "wrong"),
]

# --- training: learning rate, step, estimate ---------------------------------------------


def lr_right(step, config):
    warmup, total = config.warmup_iters, config.max_iters
    if step < warmup:
        return config.learning_rate * (step + 1) / warmup
    progress = min(max(step - warmup, 0) / (total - warmup), 1.0)
    cosine = (1 + math.cos(math.pi * progress)) / 2
    return config.min_lr + cosine * (config.learning_rate - config.min_lr)


def lr_full_period(step, config):
    if step < config.warmup_iters:
        return config.learning_rate * (step + 1) / config.warmup_iters
    progress = min((step - config.warmup_iters) / (config.max_iters - config.warmup_iters), 1.0)
    cosine = (1 + math.cos(2 * math.pi * progress)) / 2
    return config.min_lr + cosine * (config.learning_rate - config.min_lr)


def step_right(model, optimizer, x, y, lr, grad_clip):
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad(set_to_none=True)
    loss = model(x, y)[1]
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return float(loss.detach())


def step_clip_each(model, optimizer, x, y, lr, grad_clip):
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad()
    loss = model(x, y)[1]
    loss.backward()
    for p in model.parameters():
        if p.grad is not None:
            p.grad.mul_(min(1.0, grad_clip / (p.grad.norm() + 1e-6)))
    optimizer.step()
    return loss.item()


def estimate_right(model, batches):
    mode = model.training
    model.eval()
    with torch.no_grad():
        total = sum(model(x, y)[1].item() for x, y in batches)
    model.train(mode)
    return total / len(batches)


def estimate_eval_late(model, batches):
    mode = model.training
    with torch.no_grad():
        losses = [model(x, y)[1].item() for x, y in batches]
    model.eval()
    model.train(mode)
    return sum(losses) / len(losses)


TRAINING = [
    (check_learning_rate, "learning_rate: written out", lr_right, "right"),
    (check_learning_rate, "learning_rate: a full cosine period", lr_full_period, "wrong"),
    (check_training_step, "training_step: written out", step_right, "right"),
    (check_training_step, "training_step: each gradient clipped alone", step_clip_each, "wrong"),
    (check_estimate_loss, "estimate_loss: written out", estimate_right, "right"),
    (check_estimate_loss, "estimate_loss: eval() after the passes", estimate_eval_late, "wrong"),
]

ENTRIES = [
    *[(check_multi_head_attention, f"MultiHeadAttention: {n}", a, k) for n, a, k in MHA],
    *[(check_layer_norm, f"LayerNorm: {n}", a, k) for n, a, k in LAYER_NORM],
    *[(check_feed_forward, f"FeedForward: {n}", a, k) for n, a, k in FEED_FORWARD],
    *[(check_block, f"Block: {n}", a, k) for n, a, k in BLOCK],
    *[(check_decoder, f"Decoder: {n}", a, k) for n, a, k in DECODER],
    *TRAINING,
]


@pytest.mark.tooling  # slow (make test-tooling, CI): keeps make test under 5 minutes
def test_module_battery(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_MY_MODEL", str(tmp_path / "my_model"))
    found = run_battery(ENTRIES, capsys)
    assert found["crashed"] == [], found["crashed"]
    assert found["wrong accepted"] == [], found["wrong accepted"]
    assert found["right rejected"] == [], found["right rejected"]
    assert len(found["generic"]) <= 0.10 * found["rejections"], found["generic"]


# --- the assembly: every broken part named with its cause ------------------------------------

BROKEN = {
    "split_heads": """
def split_heads(x, n_heads):
    return x.reshape(x.shape[0], n_heads, x.shape[1], -1)
""",
    "attention": """
def attention(q, k, v, causal=True):
    scores = torch.from_numpy(q.detach().numpy() @ k.detach().numpy().swapaxes(-1, -2))
    scores = scores / math.sqrt(q.shape[-1])
    if causal:
        T = scores.shape[-1]
        hidden = torch.ones(T, T, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(hidden, float("-inf"))
    return scores.softmax(-1) @ v
""",
    "merge_heads": """
def merge_heads(x):
    return x.transpose(1, 2).flatten(2).float()
""",
    "MultiHeadAttention": """
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.w_q, self.w_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.w_v, self.w_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        q, k, v = (split_heads(w(x), self.n_heads) for w in (self.w_q, self.w_k, self.w_v))
        return self.dropout(self.w_o(merge_heads(attention(q, k, v))))
""",
    "LayerNorm": """
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        var = x.var(-1, keepdim=True, unbiased=False)
        x_hat = (x - x.mean(-1, keepdim=True)) / torch.sqrt(var + 1e-6)
        return self.weight * x_hat + self.bias
""",
    "FeedForward": """
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.up = nn.Linear(d_model, d_ff)
        self.down = nn.Linear(d_ff, d_model)

    def forward(self, x):
        with torch.no_grad():
            return self.down(F.gelu(self.up(x)))
""",
    "Block": """
class Block(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.ln_1, self.ln_2 = LayerNorm(d_model), LayerNorm(d_model)
        self.attention = MultiHeadAttention(d_model, n_heads)
        self.feed_forward = FeedForward(d_model, d_ff)

    def forward(self, x):
        x += self.attention(self.ln_1(x))
        return x + self.feed_forward(self.ln_2(x))
""",
    "Decoder": """
class Decoder(nn.Module):
    def __init__(self, vocab_size, block_size, d_model, n_heads, n_layers, d_ff):
        super().__init__()
        self.d_model = d_model
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList([Block(d_model, n_heads, d_ff) for _ in range(n_layers)])
        self.final_norm = LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.token_embedding.weight

    def forward(self, ids, targets=None):
        B, T = ids.shape
        x = self.token_embedding(ids) * math.sqrt(self.d_model) + sinusoidal_table(T, self.d_model)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.final_norm(x))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(B * T, -1), targets.view(-1))
        return logits, loss
""",
}

CAUSES = {
    "split_heads": "looks like x.view(B, h, T, d_k)",
    "attention": "goes through NumPy",
    "merge_heads": "looks like a conversion to float32",
    "MultiHeadAttention": "random in train mode",
    "LayerNorm": "looks like eps fixed at 1e-6",
    "FeedForward": "autograd off",
    "Block": "changes its argument x in place",
    "Decoder": "makes a tensor on the CPU",
}


def test_my_model_names_every_broken_part_with_its_cause(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "my_model"
    monkeypatch.setenv("COURSE_MY_MODEL", str(folder))
    folder.mkdir()
    for name, source in BROKEN.items():
        (folder / f"{name}.py").write_text(source.strip() + "\n")
    parts.my_model()
    lines = capsys.readouterr().out.splitlines()
    for name, cause in CAUSES.items():
        said = [x for x in lines if x.startswith(f"{name}: yours is replaced")]
        assert said and cause in said[0] and not is_generic(said[0]), (name, said)
    assembled = (folder / "my_model.py").read_text()
    assert assembled.count("the course's solution\n") == len(parts.PARTS)
