"""Character-level tokenizer: one id per character (the tokenizer of the course's model)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

import numpy as np
import torch

from course_utils.checks import check_text
from course_utils.tokenization.base import _as_vocab, _check_corpus, _TableTokenizer


class CharTokenizer(_TableTokenizer):
    """Map each character to an integer id and back.

    The vocabulary is sorted, so the ids are the same in every run. (``list(set(text))``
    is not: Python randomises string hashing per process, so set order changes.)

    Args:
        vocab: the distinct characters, in id order.

    Raises:
        TypeError: ``vocab`` is not a sequence of str (None, a number, ids).
        ValueError: ``vocab`` is empty, has duplicates, or has an item that is not one character.

    Example:
        >>> tok = CharTokenizer.from_text("hello")
        >>> tok.vocab
        ['e', 'h', 'l', 'o']
        >>> tok.encode("hell")
        [1, 0, 2, 2]
        >>> tok.decode([1, 3])
        'ho'
    """

    def __init__(self, vocab: Sequence[str]):
        vocab = _as_vocab(vocab)
        self._check_characters(vocab)
        super().__init__(vocab)

    @staticmethod
    def _check_characters(vocab: list[str]) -> None:
        """``vocab`` is not empty and each of its items is one character."""
        if not vocab:
            raise ValueError(
                "vocab is empty; build it from text with CharTokenizer.from_text(text)"
            )
        bad = [c for c in vocab if not (isinstance(c, str) and len(c) == 1)]
        if bad:
            raise ValueError(f"every vocab item must be one character, got {bad[:5]!r}")

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        """Build the tokenizer from every distinct character of ``text``, sorted.

        Raises:
            TypeError: ``text`` is not a str (bytes included).
            ValueError: ``text`` is empty.
        """
        check_text(text, "text")
        _check_corpus(text)
        return cls(sorted(set(text)))

    def encode(self, text: str) -> list[int]:
        """Text to a list of ids, one per character.

        Raises:
            TypeError: ``text`` is not a str (bytes: decode them first).
            ValueError: ``text`` has a character that is not in the vocabulary.
        """
        check_text(text, "text")
        try:
            return [self.token_to_id[c] for c in text]
        except KeyError as error:
            self._refuse_unknown(error.args[0])

    def encode_tensor(self, text: str) -> torch.Tensor:
        """``encode(text)`` as a 1-D int64 tensor, looked up in NumPy: for a whole corpus
        (Shakespeare's 5 million characters: 0.04 s instead of 1.1 s).

        Raises:
            TypeError: ``text`` is not a str.
            ValueError: ``text`` has a character that is not in the vocabulary.
        """
        check_text(text, "text")
        try:
            points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)  # one per character
        except UnicodeEncodeError:  # a lone surrogate: the plain lookup handles it
            return torch.tensor(self.encode(text), dtype=torch.long)
        vocab_points = np.array([ord(c) for c in self.vocab], dtype=np.uint32)
        size = int(max(vocab_points.max(), points.max(initial=0))) + 1
        table = np.full(size, -1, dtype=np.int64)  # code point -> id; -1: not in the vocabulary
        table[vocab_points] = np.arange(len(vocab_points))
        ids = table[points]
        if (ids < 0).any():
            self._refuse_unknown(chr(points[np.argmax(ids < 0)]))
        return torch.from_numpy(ids)

    def _refuse_unknown(self, character: str) -> NoReturn:
        """The error for a character missing from the vocabulary (raised from ``encode``)."""
        raise ValueError(
            f"character {character!r} is not in the vocabulary of {self.vocab_size} "
            "characters; build the tokenizer from a text that contains it"
        ) from None
