"""What every tokenizer of the course shares: the id checks, and the table tokenizer (a token's
id is its position in a vocabulary list) that :class:`CharTokenizer` and :class:`WordTokenizer`
build on."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from course_utils.checks import as_id_list


def _ids_in_range(ids: Iterable[int], vocab_size: int) -> list[int]:
    """One sequence of ids as a list of ints in ``[0, V)`` (see ``checks.as_id_list``).

    Raises:
        TypeError: text, floats or bools instead of integer ids.
        ValueError: a ``(1, T)`` batch instead of one sequence, or an id outside ``[0, V)``.
    """
    return as_id_list(ids, vocab_size, "ids")


def _as_vocab(vocab: object) -> list[str]:
    """``vocab`` as a list of str tokens.

    Raises:
        TypeError: not a sequence of strings (None, a number, a list of ids).
    """
    if isinstance(vocab, bytes | bytearray) or not isinstance(vocab, Iterable):
        raise TypeError(
            f"vocab must be a list of str tokens in id order, got {type(vocab).__name__}; "
            "build the tokenizer from text with .from_text(text)"
        )
    vocab = list(vocab)
    bad = [token for token in vocab if not isinstance(token, str)]
    if bad:
        raise TypeError(
            f"vocab must be a list of str tokens in id order, got {type(bad[0]).__name__} "
            f"items such as {bad[:3]!r}; ids are positions in the vocab, not its items"
        )
    return vocab


def _check_corpus(text: str, use: str = "the tokenizer should cover") -> None:
    """``text`` (the corpus a tokenizer is built or trained from, for ``use``) is not empty."""
    if not text:
        raise ValueError(f"text is empty; pass the corpus {use}")


class _TableTokenizer:
    """What the table tokenizers share: a token's id is its position in ``vocab``.

    Raises:
        TypeError: ``vocab`` is not a list of str tokens (None, a number, ids).
        ValueError: ``vocab`` has duplicates.
    """

    def __init__(self, vocab: Sequence[str]):
        vocab = _as_vocab(vocab)
        self._check_distinct(vocab)
        self.vocab = vocab
        self.token_to_id = {token: i for i, token in enumerate(vocab)}

    def _check_distinct(self, vocab: list[str]) -> None:
        """Each token of ``vocab`` appears once (one id per token)."""
        if len(set(vocab)) != len(vocab):
            counts = Counter(vocab)
            repeated = [token for token, n in counts.items() if n > 1]
            raise ValueError(
                f"vocab has duplicates: {repeated[:5]!r} appear more than once ({len(vocab)} "
                f"items, {len(counts)} distinct); each token needs exactly one id: pass "
                "list(dict.fromkeys(vocab)) (keeps the first of each, in order), or build the "
                f"vocabulary from text with {type(self).__name__}.from_text(text)"
            )

    @property
    def vocab_size(self) -> int:
        """Number of distinct tokens, V."""
        return len(self.vocab)

    def decode(self, ids: Iterable[int]) -> str:
        """A sequence of ids (ints or a 1-D tensor) back to text.

        Raises:
            ValueError: an id is outside ``[0, vocab_size)``.
        """
        ids = _ids_in_range(ids, self.vocab_size)
        return "".join(self.vocab[i] for i in ids)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size})"
