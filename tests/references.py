"""PyTorch's own layers holding our modules' weights: the independent references of the tests."""

from __future__ import annotations

import torch
from torch import nn

from course_utils.attention import MultiHeadAttention
from course_utils.layers import DecoderBlock


def copy_attention_weights(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    """nn.MultiheadAttention keeps W_q, W_k, W_v stacked in one (3C, C) in_proj_weight."""
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
        theirs.out_proj.weight.copy_(ours.w_o.weight)
        theirs.out_proj.bias.copy_(ours.w_o.bias)


def multihead_attention_like(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    """nn.MultiheadAttention(batch_first=True) with ``ours``' weights, in eval mode."""
    theirs = nn.MultiheadAttention(ours.d_model, ours.n_heads, batch_first=True).eval()
    copy_attention_weights(ours, theirs)
    return theirs


def encoder_layer_like(block: DecoderBlock, norm_first: bool = True) -> nn.TransformerEncoderLayer:
    """nn.TransformerEncoderLayer (GELU, no dropout) holding ``block``'s weights, in eval mode."""
    attention = block.attention
    reference = nn.TransformerEncoderLayer(
        attention.d_model,
        attention.n_heads,
        block.feed_forward.up.out_features,
        dropout=0.0,
        activation="gelu",
        batch_first=True,
        norm_first=norm_first,
    ).eval()
    copy_attention_weights(attention, reference.self_attn)
    pairs = [
        (block.feed_forward.up, reference.linear1),
        (block.feed_forward.down, reference.linear2),
        (block.ln_1, reference.norm1),
        (block.ln_2, reference.norm2),
    ]
    with torch.no_grad():
        for ours, theirs in pairs:
            theirs.weight.copy_(ours.weight)
            theirs.bias.copy_(ours.bias)
    return reference
