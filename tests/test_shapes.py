"""The shape tracer against shapes computed by hand."""

import pytest
import torch
from torch import nn

from course_utils.config import ModelConfig
from course_utils.lab.shapes import format_shape_table, named_shape, trace_shapes
from course_utils.model import TinyDecoder


def test_trace_records_every_submodule_in_call_order():
    model = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 3))
    records = trace_shapes(model, torch.zeros(2, 5))
    assert [(r.name, r.kind, r.input_shape, r.output_shape) for r in records] == [
        ("0", "Linear", (2, 5), (2, 7)),
        ("1", "ReLU", (2, 7), (2, 7)),
        ("2", "Linear", (2, 7), (2, 3)),
    ]
    assert not model._forward_hooks and not model[0]._forward_hooks, "hooks must be removed"


def test_trace_of_the_decoder_matches_the_config():
    config = ModelConfig(vocab_size=11, block_size=8, d_model=24, n_heads=3, n_layers=2, d_ff=40)
    model = TinyDecoder(config).eval()
    records = {r.name: r for r in trace_shapes(model, torch.zeros(2, 6, dtype=torch.long))}
    assert records["token_embedding"].output_shape == (2, 6, 24)
    assert records["blocks.1.feed_forward.up"].output_shape == (2, 6, 40)
    assert records["lm_head"].output_shape == (2, 6, 11)
    shallow = trace_shapes(model, torch.zeros(2, 6, dtype=torch.long), max_depth=1)
    assert [r.name for r in shallow] == [
        "token_embedding",
        "position",
        "dropout",
        "blocks.0",
        "blocks.1",
        "final_norm",
        "lm_head",
    ]
    table = format_shape_table(list(records.values()))
    assert "lm_head" in table and "(2, 6, 11)" in table


def test_named_shape():
    assert named_shape(torch.zeros(2, 3, 6, 6), "B h T_q T_k") == "(B=2, h=3, T_q=6, T_k=6)"
    with pytest.raises(ValueError, match=r"3 axis names.*4-D"):
        named_shape((2, 3, 6, 6), "B h T")
