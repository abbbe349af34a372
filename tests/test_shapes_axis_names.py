"""Naming the axes of a shape by their sizes, in name_axes and format_shape_table."""

import pytest
import torch
from torch import nn

from course_utils.lab.shapes import format_shape_table, name_axes, trace_shapes

SIZES = {"B": 2, "T": 6, "C": 24, "d_ff": 96, "V": 84}


def test_name_axes_names_each_axis_by_its_size():
    assert name_axes((2, 6, 24), SIZES) == "(B=2, T=6, C=24)"
    assert name_axes(torch.zeros(2, 6, 84), SIZES) == "(B=2, T=6, V=84)"
    assert name_axes((6, 5), SIZES) == "(T=6, 5)", "an unknown size stays a bare number"
    assert name_axes((), SIZES) == "()"


def test_name_axes_refuses_two_names_with_one_size():
    with pytest.raises(ValueError, match=r"'T' and 'd_k' both have size 6"):
        name_axes((2, 6), {"B": 2, "T": 6, "d_k": 6})


def test_format_shape_table_with_and_without_axis_names():
    model = nn.Sequential(nn.Linear(24, 96), nn.GELU(), nn.Linear(96, 24))
    records = trace_shapes(model, torch.zeros(2, 6, 24))
    plain = format_shape_table(records)
    assert "(2, 6, 96)" in plain and "B=2" not in plain
    named = format_shape_table(records, axis_names=SIZES)
    lines = named.splitlines()
    assert lines[0].split() == ["module", "type", "input", "shape", "output", "shape"]
    assert lines[2].split() == [
        "0",
        "Linear",
        "(B=2,",
        "T=6,",
        "C=24)",
        "(B=2,",
        "T=6,",
        "d_ff=96)",
    ]
    assert "(B=2, T=6, d_ff=96)" in lines[3] and lines[4].endswith("(B=2, T=6, C=24)")
