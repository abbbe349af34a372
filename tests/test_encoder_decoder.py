"""The encoder–decoder against torch.nn.Transformer(norm_first=..., batch_first=True), with the
same weights copied across (pre-LN and the paper's post-LN), and its masks, cross-attention,
label smoothing and greedy decoding by property."""

from __future__ import annotations

import warnings

import pytest
import torch
from references import copy_attention_weights
from torch import nn

from course_utils.attention import position_influence
from course_utils.encoder_decoder import (
    CrossAttention,
    CrossDecoderBlock,
    EncoderBlock,
    EncoderDecoder,
    EncoderDecoderConfig,
)

# Every axis its own size: B=2, T_src=7, T_tgt=5, h=3, d_k=8, C=24, d_ff=96, V=11/13.
B, T_SRC, T_TGT, H, C, D_FF = 2, 7, 5, 3, 24, 96
SRC_LENGTHS = [7, 4]


def _config(**overrides) -> EncoderDecoderConfig:
    values = dict(
        src_vocab_size=11, tgt_vocab_size=13, d_model=C, n_heads=H, d_ff=D_FF,
        n_encoder_layers=2, n_decoder_layers=3, max_len=16,
    )  # fmt: skip
    return EncoderDecoderConfig(**(values | overrides))


def _randomise(model: nn.Module) -> None:
    # Non-trivial LayerNorm weights and biases, so a swapped norm would show.
    torch.manual_seed(1)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "ln_" in name or "norm" in name:
                parameter.add_(0.3 * torch.randn_like(parameter))


def _copy(pairs) -> None:
    with torch.no_grad():
        for ours, theirs in pairs:
            theirs.weight.copy_(ours.weight)
            theirs.bias.copy_(ours.bias)


def transformer_like(model: EncoderDecoder) -> nn.Transformer:
    """nn.Transformer (batch-first, no dropout, ``model``'s layout) holding its weights.

    nn.Transformer always builds a final LayerNorm after each stack, post-LN too; the
    paper's post-LN has none, so for ``norm_first=False`` they are removed (set to None,
    which nn.TransformerEncoder/Decoder skip)."""
    c = model.config
    with warnings.catch_warnings():  # "enable_nested_tensor ... norm_first was True": expected
        warnings.simplefilter("ignore", UserWarning)
        reference = nn.Transformer(
            c.d_model, c.n_heads, c.n_encoder_layers, c.n_decoder_layers, c.d_ff,
            dropout=0.0, activation=c.activation, batch_first=True, norm_first=c.norm_first,
        ).eval()  # fmt: skip
    for ours, theirs in zip(model.encoder_blocks, reference.encoder.layers):
        copy_attention_weights(ours.attention, theirs.self_attn)
        _copy([(ours.ln_1, theirs.norm1), (ours.ln_2, theirs.norm2)])
        _copy([(ours.feed_forward.up, theirs.linear1), (ours.feed_forward.down, theirs.linear2)])
    for ours, theirs in zip(model.decoder_blocks, reference.decoder.layers):
        copy_attention_weights(ours.self_attention, theirs.self_attn)
        copy_attention_weights(ours.cross_attention, theirs.multihead_attn)
        _copy([(ours.ln_1, theirs.norm1), (ours.ln_2, theirs.norm2), (ours.ln_3, theirs.norm3)])
        _copy([(ours.feed_forward.up, theirs.linear1), (ours.feed_forward.down, theirs.linear2)])
    if c.norm_first:
        _copy(
            [
                (model.encoder_norm, reference.encoder.norm),
                (model.decoder_norm, reference.decoder.norm),
            ]
        )
    else:
        reference.encoder.norm = reference.decoder.norm = None
    return reference


def _batch(config: EncoderDecoderConfig) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(2)
    src = torch.randint(1, config.src_vocab_size, (B, T_SRC))
    for row, length in enumerate(SRC_LENGTHS):
        src[row, length:] = config.pad_id
    tgt = torch.randint(1, config.tgt_vocab_size, (B, T_TGT))
    return src, tgt


def _reference_logits(model, reference, src, tgt, tgt_padding=None):
    real = src != model.config.pad_id
    with torch.no_grad():
        out = reference(
            model.src_embedding(src) + model.position.pe[: src.shape[1]],
            model.tgt_embedding(tgt) + model.position.pe[: tgt.shape[1]],
            tgt_mask=~torch.ones(tgt.shape[1], tgt.shape[1], dtype=torch.bool).tril(),
            src_key_padding_mask=~real,  # nn.Transformer: True = padding (hidden)
            memory_key_padding_mask=~real,
            tgt_key_padding_mask=tgt_padding,
            tgt_is_causal=True,
        )
    return model.lm_head(out)


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN (paper)"])
@pytest.mark.parametrize("need_weights", [False, True], ids=["fast path", "teaching path"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_matches_nn_transformer_with_padding_and_unequal_lengths(
    need_weights, activation, norm_first
):
    torch.manual_seed(0)
    model = EncoderDecoder(_config(activation=activation, norm_first=norm_first)).eval()
    _randomise(model)
    reference = transformer_like(model)
    src, tgt = _batch(model.config)
    assert src.shape[1] != tgt.shape[1] and (src == 0).any()
    with torch.no_grad():
        logits, _ = model(src, tgt, need_weights=need_weights)
        memory = model.encode(src)
        expected_memory = reference.encoder(
            model.src_embedding(src) + model.position.pe[:T_SRC], src_key_padding_mask=src == 0
        )
    torch.testing.assert_close(memory, expected_memory, atol=1e-5, rtol=0)
    expected = _reference_logits(model, reference, src, tgt)
    assert logits.shape == (B, T_TGT, model.config.tgt_vocab_size)
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=0)


def test_post_ln_has_no_final_norms_and_differs_from_pre_ln_with_the_same_weights():
    torch.manual_seed(0)
    pre = EncoderDecoder(_config()).eval()
    post = EncoderDecoder(_config(norm_first=False)).eval()
    assert post.encoder_norm is None and post.decoder_norm is None
    shared = {
        k: v
        for k, v in pre.state_dict().items()
        if not k.startswith(("encoder_norm", "decoder_norm"))
    }
    assert set(shared) == set(post.state_dict())  # same parameters besides the final norms
    post.load_state_dict(shared)
    _randomise(pre), _randomise(post)
    src, tgt = _batch(pre.config)
    with torch.no_grad():
        assert not torch.allclose(pre(src, tgt)[0], post(src, tgt)[0], atol=1e-2)
        # nn.Transformer's post-LN default keeps its two final LayerNorms: not the paper's.
        reference = transformer_like(post)
        assert reference.encoder.norm is None and reference.decoder.norm is None
        expected = _reference_logits(post, reference, src, tgt)
        reference.encoder.norm = nn.LayerNorm(C).eval()
        assert not torch.allclose(_reference_logits(post, reference, src, tgt), expected, atol=1e-3)
    # Each post-LN block ends in a LayerNorm: with weight 1 and bias 0 its rows are normalised.
    fresh = EncoderDecoder(_config(norm_first=False)).eval()
    with torch.no_grad():
        memory = fresh.encode(src)
    torch.testing.assert_close(memory.mean(-1), torch.zeros(B, T_SRC), atol=1e-5, rtol=0)


def test_target_padding_changes_nothing_at_real_positions():
    # Right padding + the causal mask: real target positions never see the padding.
    torch.manual_seed(0)
    model = EncoderDecoder(_config()).eval()
    reference = transformer_like(model)
    src, tgt = _batch(model.config)
    tgt_padding = torch.zeros(B, T_TGT, dtype=torch.bool)
    tgt_padding[1, 3:] = True
    tgt[1, 3:] = 0
    with torch.no_grad():
        logits, _ = model(src, tgt)
    expected = _reference_logits(model, reference, src, tgt, tgt_padding)
    torch.testing.assert_close(logits[~tgt_padding], expected[~tgt_padding], atol=1e-5, rtol=1e-5)


def test_a_wrong_copy_is_detected():
    # The comparison can fail: a cross-attention with the decoder's self-attention weights.
    torch.manual_seed(0)
    model = EncoderDecoder(_config()).eval()
    reference = transformer_like(model)
    copy_attention_weights(
        model.decoder_blocks[0].self_attention, reference.decoder.layers[0].multihead_attn
    )
    src, tgt = _batch(model.config)
    with torch.no_grad():
        logits, _ = model(src, tgt)
    assert not torch.allclose(logits, _reference_logits(model, reference, src, tgt), atol=1e-3)


def test_cross_attention_weights_have_shape_b_h_t_tgt_t_src_and_skip_padding():
    torch.manual_seed(0)
    model = EncoderDecoder(_config()).eval()
    src, tgt = _batch(model.config)
    model(src, tgt, need_weights=True)
    weights = model.decoder_blocks[0].cross_attention.attention_weights
    assert weights.shape == (B, H, T_TGT, T_SRC)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, T_TGT))
    assert (weights[1, :, :, SRC_LENGTHS[1] :] == 0).all()
    assert (weights[1, :, :, : SRC_LENGTHS[1]] > 0).all()
    encoder_weights = model.encoder_blocks[0].attention.attention_weights
    assert encoder_weights.shape == (B, H, T_SRC, T_SRC)
    assert (encoder_weights[0].triu(1) > 0).any()  # bidirectional: keys to the right are read


def test_every_target_position_reads_every_real_source_token_and_no_padding():
    torch.manual_seed(0)
    block = CrossDecoderBlock(C, H, D_FF).eval()
    y, memory = torch.randn(B, T_TGT, C), torch.randn(B, T_SRC, C)
    real = torch.ones(B, T_SRC, dtype=torch.bool)
    real[1, SRC_LENGTHS[1] :] = False
    influence = position_influence(lambda m: block(y[1:], m, real[1:]), memory[1:])
    assert influence.shape == (T_TGT, T_SRC)
    assert (influence[:, : SRC_LENGTHS[1]] > 0).all()  # no causal mask on cross-attention
    assert (influence[:, SRC_LENGTHS[1] :] == 0).all()  # padding is never read


def test_decoder_is_causal_and_encoder_is_bidirectional():
    torch.manual_seed(0)
    model = EncoderDecoder(_config()).eval()
    src, _ = _batch(model.config)
    memory = model.encode(src).detach()
    block = model.decoder_blocks[0]
    influence = position_influence(lambda y: block(y, memory), torch.randn(B, T_TGT, C))
    lower = torch.ones(T_TGT, T_TGT, dtype=torch.bool).tril()
    assert (influence[~lower] == 0).all() and (influence[lower] > 0).all()
    encoder = model.encoder_blocks[0]
    influence = position_influence(lambda x: encoder(x), torch.randn(B, T_SRC, C))
    assert (influence > 0).all()


def test_encoder_padding_is_invisible_to_real_tokens():
    torch.manual_seed(0)
    model = EncoderDecoder(_config()).eval()
    src, tgt = _batch(model.config)
    other = src.clone()
    other[1, SRC_LENGTHS[1] :] = 5  # garbage where the padding was, still masked
    real = src != 0
    with torch.no_grad():
        a = model.decode(tgt, model.encode(src, real), real)
        b = model.decode(tgt, model.encode(other, real), real)
    torch.testing.assert_close(a, b)


def test_shared_embeddings_use_one_table_and_the_head_is_tied():
    shared = EncoderDecoder(_config(src_vocab_size=13, shared_embeddings=True))
    separate = EncoderDecoder(_config(src_vocab_size=13))
    assert shared.src_embedding is shared.tgt_embedding
    assert separate.src_embedding is not separate.tgt_embedding
    assert shared.lm_head.weight is shared.tgt_embedding.weight
    assert separate.num_parameters() - shared.num_parameters() == 13 * C
    for src_vocab_size in (11, 17):  # smaller and larger than the target's 13
        with pytest.raises(ValueError, match="shared_embeddings needs one vocabulary"):
            _config(src_vocab_size=src_vocab_size, shared_embeddings=True)


def test_loss_ignores_padding_and_starts_near_ln_v():
    torch.manual_seed(0)
    model = EncoderDecoder(_config())
    src, tgt = _batch(model.config)
    targets = torch.randint(1, model.config.tgt_vocab_size, (B, T_TGT))
    targets[1, 2:] = 0
    logits, loss = model(src, tgt, targets)
    real = targets != 0
    expected = nn.functional.cross_entropy(logits[real], targets[real])
    torch.testing.assert_close(loss, expected)
    assert abs(loss.item() - torch.log(torch.tensor(13.0)).item()) < 1.0


def test_label_smoothing_matches_its_formula_and_zero_is_the_plain_loss():
    torch.manual_seed(0)
    model = EncoderDecoder(_config())
    src, tgt = _batch(model.config)
    targets = torch.randint(1, model.config.tgt_vocab_size, (B, T_TGT))
    targets[1, 3:] = 0  # padding, left out
    eps = 0.1
    logits, smoothed = model(src, tgt, targets, label_smoothing=eps)
    _, plain = model(src, tgt, targets)
    real = targets != 0
    log_p = logits[real].log_softmax(-1)  # (N, V)
    nll = -log_p.gather(-1, targets[real][:, None]).squeeze(-1)
    uniform = -log_p.mean(-1)  # cross-entropy against the uniform distribution over V
    torch.testing.assert_close(smoothed, ((1 - eps) * nll + eps * uniform).mean())
    torch.testing.assert_close(plain, nll.mean())
    torch.testing.assert_close(model(src, tgt, targets, label_smoothing=0.0)[1], plain)
    assert smoothed > plain - 1  # and the two differ
    assert not torch.isclose(smoothed, plain)
    with pytest.raises(ValueError, match="label_smoothing"):
        model(src, tgt, targets, label_smoothing=1.0)
    with pytest.raises(TypeError, match="label_smoothing"):
        model(src, tgt, targets, label_smoothing="0.1")


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
def test_greedy_decode_with_cross_kv_computed_once_equals_recomputing_it(norm_first):
    torch.manual_seed(0)
    model = EncoderDecoder(_config(norm_first=norm_first)).eval()
    _randomise(model)
    src, _ = _batch(model.config)
    start = torch.full((B, 1), 2)
    # an end id this model never writes in 8 steps, so both rows decode all 8 steps
    eos = next(
        i
        for i in range(1, model.config.tgt_vocab_size)
        if model.greedy_decode(src, start, eos_id=i, max_new_tokens=8).shape[1] == 9
    )
    calls = []
    hooks = [
        block.cross_attention.w_k.register_forward_hook(lambda *_: calls.append(1))
        for block in model.decoder_blocks
    ]
    once = model.greedy_decode(src, start, eos_id=eos, max_new_tokens=8)
    n_once = len(calls)
    again = model.greedy_decode(src, start, eos_id=eos, max_new_tokens=8, reuse_cross_kv=False)
    n_again = len(calls) - n_once
    for hook in hooks:
        hook.remove()
    assert torch.equal(once, again)
    steps = once.shape[1] - 1
    assert steps == 8
    assert n_once == model.config.n_decoder_layers
    assert n_again == model.config.n_decoder_layers * steps
    # The logits of one step agree too.
    with torch.no_grad():
        memory = model.encode(src)
        kv = model.cross_keys_values(memory)
        torch.testing.assert_close(
            model.decode(once, None, src != 0, memory_kv=kv),
            model.decode(once, memory, src != 0),
            atol=1e-6,
            rtol=0,
        )
        with pytest.raises(ValueError, match="one \\(K, V\\) pair per decoder block"):
            model.decode(once, memory, memory_kv=kv[:1])
        with pytest.raises(ValueError, match=r"pair \(K, V\).*got tuple of \[\(2, 3, 16, 8\)\]"):
            model.decoder_blocks[0].cross_attention(
                torch.randn(B, 2, C), None, memory_kv=(torch.randn(B, H, 16, 8),)
            )
        with pytest.raises(ValueError, match="memory_kv"):
            model.decode(once, memory, memory_kv=[(kv[0][0], kv[0][1][:, :1])] * len(kv))


def test_greedy_decode_equals_step_by_step_argmax_and_pads_after_eos():
    torch.manual_seed(0)
    model = EncoderDecoder(_config()).eval()
    src, _ = _batch(model.config)
    start = torch.full((B, 1), 2)
    eos = 3
    out = model.greedy_decode(src, start, eos_id=eos, max_new_tokens=6)
    ids = start
    for _ in range(out.shape[1] - 1):
        logits, _ = model(src, ids)
        ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    for row in range(B):
        ended = (ids[row] == eos).nonzero()
        stop = int(ended[0]) + 1 if len(ended) else ids.shape[1]
        assert torch.equal(out[row, :stop], ids[row, :stop])
        assert (out[row, stop:] == 0).all()


def test_bad_inputs_raise_clear_errors():
    model = EncoderDecoder(_config())
    src, tgt = _batch(model.config)
    with pytest.raises(TypeError, match="key_padding_mask must be a torch.bool tensor"):
        model.encode(src, src_key_padding_mask=(src != 0).long())
    with pytest.raises(ValueError, match="key_padding_mask marks no real token"):
        model.encode(src, src_key_padding_mask=src == 0)  # inverted: True = padding
    with pytest.raises(ValueError, match="same batch size, got 2 and 3"):
        CrossAttention(C, H)(torch.randn(2, T_TGT, C), torch.randn(3, T_SRC, C))
    with pytest.raises(ValueError, match="src must be"):
        model.encode(src[0])
    with pytest.raises(ValueError, match=r"src must be \(B, T\) token ids, got \(2, 7, 1\)"):
        model.encode(src[..., None])  # one axis too many
    for eos_id in (13, -1):  # one past the last target id, and below the first
        with pytest.raises(ValueError, match="eos_id"):
            model.greedy_decode(src, tgt[:, :1], eos_id=eos_id, max_new_tokens=2)
    assert model.greedy_decode(src, tgt[:, :1], eos_id=12, max_new_tokens=2).shape == (2, 3)
    with pytest.raises(ValueError, match="exceeds max_len"):
        model.greedy_decode(src, tgt[:, :1], eos_id=1, max_new_tokens=16)
    with pytest.raises(ValueError, match="targets must have the shape"):
        model(src, tgt, tgt[:, :2])
    with pytest.raises(ValueError, match="divisible by n_heads"):
        _config(n_heads=5)
    with pytest.raises(ValueError, match="src must be in"):
        model(src + 20, tgt)


def test_encoder_block_alone_matches_nn_transformer_encoder_layer():
    torch.manual_seed(0)
    block = EncoderBlock(C, H, D_FF).eval()
    reference = nn.TransformerEncoderLayer(
        C, H, D_FF, dropout=0.0, batch_first=True, norm_first=True
    ).eval()
    copy_attention_weights(block.attention, reference.self_attn)
    _copy([(block.ln_1, reference.norm1), (block.ln_2, reference.norm2)])
    _copy(
        [(block.feed_forward.up, reference.linear1), (block.feed_forward.down, reference.linear2)]
    )
    x = torch.randn(B, T_SRC, C)
    real = torch.ones(B, T_SRC, dtype=torch.bool)
    real[1, 4:] = False
    with torch.no_grad():
        torch.testing.assert_close(
            block(x, real), reference(x, src_key_padding_mask=~real), atol=1e-5, rtol=1e-5
        )
