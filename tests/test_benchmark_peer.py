"""The benchmark's peer (PyTorch's nn.TransformerEncoderLayer) and the table's arithmetic."""

from __future__ import annotations

import math

import pytest
import torch

from course_utils.config import ModelConfig, get_config
from course_utils.measure.benchmark import flops_per_token, non_embedding_parameters
from course_utils.measure.benchmark_peer import PeerDecoder
from course_utils.measure.benchmark_report import mfu_line, ratio_lines
from course_utils.model import TinyDecoder


@pytest.mark.parametrize("positional", ["rope", "sinusoidal", "learned"])
def test_the_peer_has_the_course_model_s_shape_and_work(positional):
    """Same N outside the embedding tables, so the same FLOPs per token and the same MFU."""
    config, _ = get_config("baby", 84, positional=positional)
    ours, peer = TinyDecoder(config), PeerDecoder(config)
    assert non_embedding_parameters(peer) == non_embedding_parameters(ours)
    assert flops_per_token(peer) == flops_per_token(ours)
    assert peer.lm_head.weight is peer.token_embedding.weight  # tied, as in TinyDecoder
    layer = peer.blocks.layers[0]
    assert layer.norm_first and layer.self_attn.batch_first


def test_the_peer_is_causal_and_returns_logits_and_loss():
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=13, block_size=8, d_model=16, n_heads=2, n_layers=2)
    peer = PeerDecoder(config).eval()
    ids = torch.randint(13, (2, 8))
    logits, loss = peer(ids, ids)
    assert logits.shape == (2, 8, 13) and loss.ndim == 0
    assert abs(loss.item() - math.log(13)) < 1.5
    changed = ids.clone()
    changed[:, 5:] = (changed[:, 5:] + 1) % 13  # change only the future of position 4
    later = peer(changed)[0]
    torch.testing.assert_close(later[:, :5], logits[:, :5])  # the past does not see it
    assert not torch.allclose(later[:, 5:], logits[:, 5:])  # the check can fail
    assert peer(ids[:, :5])[0].shape == (2, 5, 13)  # shorter inputs use a cropped mask
    with pytest.raises(ValueError, match="1 <= T <= block_size=8"):
        peer(torch.randint(13, (2, 9)))


def _row(path, rate, dtype="float32", compiled=False):
    return dict(path=path, dtype=dtype, compiled=compiled, tokens_per_second=rate)


def test_ratio_lines():
    rows = [_row("teaching", 100.0), _row("fast", 150.0), _row("peer", 120.0)]
    rows += [_row("fast", 300.0, "bfloat16"), _row("peer", None, "bfloat16")]  # peer failed
    assert ratio_lines(rows) == [  # nothing to compare the bfloat16 fast row with
        "speed ratios (float32, eager): fast / teaching = 1.50x; fast / peer = 1.25x"
    ]


def test_mfu_line_writes_the_formula_out_and_checks_it():
    results = dict(
        model_config=dict(n_layers=6, block_size=256, d_model=384),
        non_embedding_parameters=10_745_088,
        flops_per_token=6 * 10_745_088 + 12 * 6 * 256 * 384,
        peak_flops=989e12,
        peak_flops_source="H100 SXM",
    )
    line = mfu_line(results)
    assert "6 x 10,745,088 + 12 x 6 x 256 x 384 = 71,548,416" in line
    assert "989 TFLOP/s (H100 SXM bf16 dense)" in line
    with pytest.raises(ValueError, match="re-run make bench"):
        mfu_line({**results, "flops_per_token": 1})
