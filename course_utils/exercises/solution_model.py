"""The course's solution of the learner's decoder: every part of notebooks 03-11 in one file.

Read top to bottom, this is the whole decoder-only Transformer the learner writes, part by
part: the sinusoidal table of positions (03), split the heads (04), attention with its causal
mask (05-07), merge the heads and multi-head attention (08), LayerNorm (09), the feed-forward
network (10), the pre-LN block and the whole model (11). Each notebook's collapsed solution
cell holds exactly the source of one def or class below (``tests/test_learner_parts.py`` checks
it), and :func:`course_utils.lab.parts.my_model` takes the part from here when the learner has
not written it yet. It computes the same function as :class:`course_utils.model.TinyDecoder`
with ``positional="sinusoidal"`` and ``dropout=0.0`` (the attribute names match, so the
course's weights load with ``load_state_dict``).

Sources: Vaswani et al. 2017, "Attention Is All You Need" §3.1-3.4; pre-LN as in GPT-2
(Radford et al. 2019) and Xiong et al. 2020.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    pair = torch.arange(d_model // 2, dtype=torch.float32)  # (d_model/2,)
    angle = position / 10000.0 ** (2 * pair / d_model)  # (max_len, 1) / (d_model/2,): broadcast
    table = torch.zeros(max_len, d_model)  # float32
    table[:, 0::2] = torch.sin(angle)  # channels 0, 2, 4, ...
    table[:, 1::2] = torch.cos(angle)  # channels 1, 3, 5, ...
    return table


def split_heads(x, n_heads):
    B, T, C = x.shape
    d_k = C // n_heads
    # (B, T, C) -> (B, T, h, d_k) -> (B, h, T, d_k)
    return x.view(B, T, n_heads, d_k).transpose(1, 2)


def attention(q, k, v, causal=True):
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
    if causal:
        T_q, T_k = scores.shape[-2:]
        future = torch.ones(T_q, T_k, dtype=torch.bool, device=q.device).triu(diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))  # a query sees no later key
    weights = torch.softmax(scores, dim=-1)  # over the keys: each row sums to 1
    return weights @ v  # (..., T_q, T_k) @ (..., T_k, d_v) -> (..., T_q, d_v)


def merge_heads(x):
    B, h, T, d_k = x.shape
    # (B, h, T, d_k) -> (B, T, h, d_k) -> (B, T, C)
    return x.transpose(1, 2).contiguous().view(B, T, h * d_k)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)

    def forward(self, x):
        q = split_heads(self.w_q(x), self.n_heads)  # (B, T, C) -> (B, h, T, d_k)
        k = split_heads(self.w_k(x), self.n_heads)
        v = split_heads(self.w_v(x), self.n_heads)
        heads = attention(q, k, v, causal=True)  # (B, h, T, d_k)
        return self.w_o(merge_heads(heads))  # (B, h, T, d_k) -> (B, T, C) -> (B, T, C)


class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)  # biased, as nn.LayerNorm
        return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.up = nn.Linear(d_model, d_ff)
        self.down = nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))  # (B, T, C) -> (B, T, d_ff) -> (B, T, C)


class Block(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.ln_1 = LayerNorm(d_model)
        self.attention = MultiHeadAttention(d_model, n_heads)
        self.ln_2 = LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, d_ff)

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))  # pre-LN: normalise, attend, add back
        return x + self.feed_forward(self.ln_2(x))


class Decoder(nn.Module):
    def __init__(self, vocab_size, block_size, d_model, n_heads, n_layers, d_ff):
        super().__init__()
        self.d_model = d_model
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        # your table of notebook 03, fixed: a buffer moves with .to(device) and is not trained
        self.register_buffer("pe", sinusoidal_table(block_size, d_model), persistent=False)
        self.blocks = nn.ModuleList([Block(d_model, n_heads, d_ff) for _ in range(n_layers)])
        self.final_norm = LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.token_embedding.weight  # weight tying (§3.4)
        # small start, as TinyDecoder (nn.Embedding's default N(0, 1), x sqrt(d_model) and the
        # tied head, would give huge first logits): the first loss is near ln(vocab_size)
        nn.init.normal_(self.token_embedding.weight, std=0.02)

    def forward(self, ids, targets=None):
        B, T = ids.shape
        x = self.token_embedding(ids) * math.sqrt(self.d_model)  # (B, T) -> (B, T, C)
        x = x + self.pe[:T]  # + (T, C): the positions, broadcast over B
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.final_norm(x))  # (B, T, C) -> (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
        return logits, loss
