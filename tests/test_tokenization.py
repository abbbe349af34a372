"""CharTokenizer: sorted, reproducible vocabulary; exact round trip; clear errors."""

from __future__ import annotations

import random
import re

import pytest
import torch

from course_utils.tokenization import CharTokenizer


def test_vocab_is_sorted_distinct_and_covers_the_text():
    """Reference: the definition of a sorted vocabulary (strictly increasing code points)."""
    text = "To be, or not to be: that is the question.\n"
    tok = CharTokenizer.from_text(text)
    assert all(a < b for a, b in zip(tok.vocab, tok.vocab[1:]))
    assert set(tok.vocab) == set(text)
    assert tok.vocab_size == len(set(text))
    assert tok.vocab[0] == "\n" and tok.vocab[1] == " "  # the smallest code points come first


def test_vocab_does_not_depend_on_character_order(shakespeare_text):
    """Shuffling the corpus gives the same ids (unlike list(set(text)))."""
    sample = shakespeare_text[:20_000]
    characters = list(sample)
    random.Random(0).shuffle(characters)
    shuffled = "".join(characters)
    assert shuffled != sample
    assert CharTokenizer.from_text(shuffled).vocab == CharTokenizer.from_text(sample).vocab


def test_encode_decode_round_trip_on_shakespeare(shakespeare_text):
    """decode(encode(s)) == s on a real passage; ids are one per character and in range."""
    tok = CharTokenizer.from_text(shakespeare_text)
    middle = len(shakespeare_text) // 2
    passage = shakespeare_text[middle : middle + 5_000]
    ids = tok.encode(passage)
    assert len(ids) == len(passage)
    assert all(0 <= i < tok.vocab_size for i in ids)
    assert tok.decode(ids) == passage
    assert [tok.vocab[i] for i in ids] == list(passage)  # id i really stands for vocab[i]


def test_encode_tensor_is_encode_as_a_tensor(shakespeare_text):
    """The NumPy lookup gives encode's ids on the corpus, on a vocabulary in any order (ids are
    positions, not code points), beyond the BMP and with a lone surrogate."""
    tok = CharTokenizer.from_text(shakespeare_text)
    ids = tok.encode_tensor(shakespeare_text)
    assert ids.dtype == torch.long and ids.shape == (len(shakespeare_text),)
    assert ids.tolist() == tok.encode(shakespeare_text)
    mixed = CharTokenizer(["z", "中", "😀", "a", "\ud800", "\n"])  # not sorted
    text = "a中😀z\n\ud800" * 3
    assert mixed.encode_tensor(text).tolist() == mixed.encode(text)
    assert mixed.encode_tensor("").shape == (0,)
    for unknown in ("b", "\U0010ffff", "\udfff"):
        said = re.escape(f"character {unknown!r} is not in the vocabulary of 6")
        with pytest.raises(ValueError, match=said):
            mixed.encode_tensor("az" + unknown + "a")


def test_decode_accepts_a_tensor():
    tok = CharTokenizer.from_text("hello")
    assert tok.decode(torch.tensor(tok.encode("hole"))) == "hole"


def test_known_small_example():
    """Hand-computed ids for 'hello': vocab e, h, l, o."""
    tok = CharTokenizer.from_text("hello")
    assert tok.vocab == ["e", "h", "l", "o"]
    assert tok.encode("hell") == [1, 0, 2, 2]
    assert tok.decode([1, 3]) == "ho"


def test_unknown_character_names_the_character():
    tok = CharTokenizer.from_text("hello")
    with pytest.raises(ValueError, match=r"character 'z' is not in the vocabulary of 4"):
        tok.encode("hellz")


@pytest.mark.parametrize("bad_id", [4, 99, -1])
def test_decode_out_of_range_id(bad_id):
    tok = CharTokenizer.from_text("hello")
    with pytest.raises(ValueError, match=rf"\[0, 4\), got \[{bad_id}\]"):
        tok.decode([0, bad_id, 1])


def test_empty_text_is_rejected():
    with pytest.raises(ValueError, match="text is empty"):
        CharTokenizer.from_text("")


@pytest.mark.parametrize(
    ("vocab", "message"),
    [([], "vocab is empty"), (["a", "bc"], "one character"), (["a", "b", "a"], "duplicates")],
)
def test_bad_vocab_is_rejected(vocab, message):
    with pytest.raises(ValueError, match=message):
        CharTokenizer(vocab)
