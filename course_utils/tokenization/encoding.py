"""A tiktoken encoding whose errors speak the course's language.

``tiktoken.Encoding`` reports an out-of-range id as ``KeyError: 'Invalid token for decoding'``
or ``OverflowError: out of range integral type conversion attempted``, a tensor as "'Tensor'
object is not an instance of 'Sequence'", and ``bytes`` as "cannot use a string pattern on a
bytes-like object". :class:`CourseEncoding` is the same encoding (it shares tiktoken's Rust
core, so the ids are identical) with the inputs checked first and those errors re-raised with
the valid range and the fix.
"""

from __future__ import annotations

from collections.abc import Sequence

import tiktoken

from course_utils.checks import as_id_list, check_text


class CourseEncoding(tiktoken.Encoding):
    """``tiktoken.Encoding`` with clear errors; build it with :meth:`wrap`.

    ``decode`` and friends accept a list of ints, a 1-D tensor or numpy array of any integer
    dtype; a ``(1, T)`` batch is refused with the fix ``ids[0]``. ``encode`` refuses ``bytes``
    with the fix ``.decode("utf-8")``.

    Raises:
        TypeError: text where ids are expected (or the reverse), floats, bools, bytes.
        ValueError: an id outside ``[0, n_vocab)`` or in a gap of the vocabulary (the message
            names the valid range), or a 2-D batch passed to decode.
    """

    @classmethod
    def wrap(cls, encoding: tiktoken.Encoding) -> CourseEncoding:
        """The same encoding (same Rust core, same ids) with the course's checks."""
        if isinstance(encoding, cls):
            return encoding
        wrapped = object.__new__(cls)
        wrapped.__dict__.update(encoding.__dict__)
        return wrapped

    def _ids(self, tokens: object, name: str = "tokens") -> list[int]:
        return as_id_list(tokens, self.n_vocab, name)

    def _missing(self, tokens: list[int]) -> ValueError:
        gaps = [t for t in tokens if t not in self._valid_ids()]
        return ValueError(
            f"tokens {gaps[:5]} are not ids of the encoding {self.name!r}: its ids lie in "
            f"[0, {self.n_vocab}) with gaps (n_vocab={self.n_vocab}, max_token_value="
            f"{self.max_token_value}); were they made by another tokenizer?"
        )

    def _valid_ids(self) -> set[int]:
        valid = self.__dict__.get("_course_valid_ids")
        if valid is None:
            valid = set(self._mergeable_ranks.values()) | set(self._special_tokens.values())
            self.__dict__["_course_valid_ids"] = valid
        return valid

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        ids = self._ids(tokens)
        try:
            return super().decode_bytes(ids)
        except (KeyError, OverflowError):
            raise self._missing(ids) from None

    def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        return self.decode_bytes(tokens).decode("utf-8", errors=errors)

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        ids = self._ids(tokens)
        try:
            return super().decode_tokens_bytes(ids)
        except (KeyError, OverflowError):
            raise self._missing(ids) from None

    def decode_single_token_bytes(self, token: int) -> bytes:
        ids = self._ids([token] if not isinstance(token, Sequence) else token, "token")
        if len(ids) != 1:
            raise ValueError(f"token must be one id, got {len(ids)}; use decode_tokens_bytes")
        try:
            return super().decode_single_token_bytes(ids[0])
        except (KeyError, OverflowError):
            raise self._missing(ids) from None

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        ids = self._ids(tokens)
        if any(t not in self._valid_ids() for t in ids):
            raise self._missing(ids)
        return super().decode_with_offsets(ids)

    def encode(self, text: str, **kwargs) -> list[int]:
        return super().encode(check_text(text, "text"), **kwargs)

    def encode_ordinary(self, text: str) -> list[int]:
        return super().encode_ordinary(check_text(text, "text"))
