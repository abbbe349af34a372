"""Tokenizers. This module starts with the simplest one: characters."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


class CharTokenizer:
    """Map each character to an integer id and back.

    The vocabulary is sorted, so the ids are the same in every run. (``list(set(text))``
    is not: Python randomises string hashing per process, so set order changes.)

    Args:
        vocab: the distinct characters, in id order.

    Raises:
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
        vocab = list(vocab)
        if not vocab:
            raise ValueError(
                "vocab is empty; build it from text with CharTokenizer.from_text(text)"
            )
        bad = [c for c in vocab if not (isinstance(c, str) and len(c) == 1)]
        if bad:
            raise ValueError(f"every vocab item must be one character, got {bad[:5]!r}")
        if len(set(vocab)) != len(vocab):
            raise ValueError(
                f"vocab has duplicates: {len(vocab)} items, {len(set(vocab))} distinct"
            )
        self.vocab = vocab
        self.char_to_id = {c: i for i, c in enumerate(vocab)}

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        """Build the tokenizer from every distinct character of ``text``, sorted.

        Raises:
            ValueError: ``text`` is empty.
        """
        if not text:
            raise ValueError("text is empty; pass the corpus the tokenizer should cover")
        return cls(sorted(set(text)))

    @property
    def vocab_size(self) -> int:
        """Number of distinct tokens, V."""
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        """Text to a list of ids, one per character.

        Raises:
            ValueError: ``text`` has a character that is not in the vocabulary.
        """
        try:
            return [self.char_to_id[c] for c in text]
        except KeyError as error:
            raise ValueError(
                f"character {error.args[0]!r} is not in the vocabulary of {self.vocab_size} "
                "characters; build the tokenizer from a text that contains it"
            ) from None

    def decode(self, ids: Iterable[int]) -> str:
        """A sequence of ids (ints or a 1-D tensor) back to text.

        Raises:
            ValueError: an id is outside ``[0, vocab_size)``.
        """
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"ids must be in [0, {self.vocab_size}), got {bad[:5]}")
        return "".join(self.vocab[i] for i in ids)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"
