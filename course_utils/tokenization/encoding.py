"""A tiktoken encoding whose errors speak the course's language.

``tiktoken.Encoding`` reports an out-of-range id as ``KeyError: 'Invalid token for decoding'``
or ``OverflowError: out of range integral type conversion attempted``, a tensor as "'Tensor'
object is not an instance of 'Sequence'", and ``bytes`` as "cannot use a string pattern on a
bytes-like object". :class:`CourseEncoding` is the same encoding (it shares tiktoken's Rust
core, so the ids are identical) with the inputs checked first and those errors re-raised with
the valid range and the fix.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import NoReturn

import numpy as np
import tiktoken
import torch

from course_utils.checks import as_id_list, check_text


class CourseEncoding(tiktoken.Encoding):
    """``tiktoken.Encoding`` with clear errors; build it with :meth:`wrap`.

    ``decode`` and friends accept a list of ints, a 1-D tensor or numpy array of any integer
    dtype; a ``(1, T)`` batch is refused with the fix ``ids[0]``. ``encode`` refuses ``bytes``
    with the fix ``.decode("utf-8")``, and re-words tiktoken's error for a special token such as
    ``<|endoftext|>`` in the text (with both fixes). The batch methods refuse one str (it would
    be encoded character by character) and one flat list of ids (each id would be decoded on
    its own); valid batches give tiktoken's results.

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

    def _refuse_missing(self, tokens: list[int]) -> NoReturn:
        """tiktoken's ``KeyError`` / ``OverflowError`` for ``tokens`` in the course's words."""
        raise self._missing(tokens) from None

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
            self._refuse_missing(ids)

    def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        return self.decode_bytes(tokens).decode("utf-8", errors=errors)

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        ids = self._ids(tokens)
        try:
            return super().decode_tokens_bytes(ids)
        except (KeyError, OverflowError):
            self._refuse_missing(ids)

    def decode_single_token_bytes(self, token: int) -> bytes:
        ids = self._ids([token] if not isinstance(token, Sequence) else token, "token")
        self._check_one_id(ids)
        try:
            return super().decode_single_token_bytes(ids[0])
        except (KeyError, OverflowError):
            self._refuse_missing(ids)

    @staticmethod
    def _check_one_id(ids: list[int]) -> None:
        """``token`` (as the list ``ids``) is exactly one id."""
        if len(ids) != 1:
            raise ValueError(f"token must be one id, got {len(ids)}; use decode_tokens_bytes")

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        ids = self._ids(tokens)
        self._check_known(ids)
        return super().decode_with_offsets(ids)

    def _check_known(self, ids: list[int]) -> None:
        """Every id of ``ids`` is a token of the encoding (none falls in a gap)."""
        if any(t not in self._valid_ids() for t in ids):
            raise self._missing(ids)

    def encode(self, text: str, **kwargs) -> list[int]:
        text = check_encodable(check_text(text, "text"))
        try:
            return super().encode(text, **kwargs)
        except ValueError as error:
            self._refuse_special(text, error)

    def _refuse_special(self, text: str, error: ValueError) -> NoReturn:
        """tiktoken's "Encountered text corresponding to disallowed special token" in the
        course's words, with both fixes; any other ``error`` goes on unchanged."""
        if "disallowed special token" not in str(error):
            raise error
        found = [token for token in sorted(self.special_tokens_set) if token in text]
        token = next((t for t in found if repr(t) in str(error)), found[0] if found else "?")
        raise ValueError(
            f"text contains {token!r}, a disallowed special token: encode refuses special "
            "tokens in text by default (text from users must not inject control tokens). Pass "
            f"allowed_special={{{token!r}}} to encode it as its special id "
            f"{self._special_tokens.get(token, '?')}, or disallowed_special=() to encode it as "
            "ordinary text"
        ) from None

    def encode_ordinary(self, text: str) -> list[int]:
        return super().encode_ordinary(check_encodable(check_text(text, "text")))

    def encode_batch(self, text: list[str], **kwargs) -> list[list[int]]:
        return super().encode_batch(_text_batch(text, "encode_batch"), **kwargs)

    def encode_ordinary_batch(self, text: list[str], **kwargs) -> list[list[int]]:
        return super().encode_ordinary_batch(_text_batch(text, "encode_ordinary_batch"), **kwargs)

    def decode_batch(self, batch: Sequence[Sequence[int]], **kwargs) -> list[str]:
        return super().decode_batch(_id_batch(batch, "decode_batch"), **kwargs)

    def decode_bytes_batch(self, batch: Sequence[Sequence[int]], **kwargs) -> list[bytes]:
        return super().decode_bytes_batch(_id_batch(batch, "decode_bytes_batch"), **kwargs)


def _text_batch(text: object, method: str) -> object:
    """``text`` unchanged if it is a batch of texts; one str (iterated, it would give one list
    of ids per character) or bytes is refused with the fix."""
    single = method.removesuffix("_batch")
    if isinstance(text, str):
        raise TypeError(
            f"text must be a list of str for {method}, got one str ({text[:40]!r}); iterating "
            f"it would encode each character on its own. Pass [text] for a batch of one, or "
            f"call {single}(text)"
        )
    if isinstance(text, bytes | bytearray):
        raise TypeError(
            f"text must be a list of str for {method}, got {type(text).__name__}; decode it "
            f'first: [text.decode("utf-8")]'
        )
    for i, item in enumerate(text if isinstance(text, list | tuple) else ()):
        if isinstance(item, str):
            check_encodable(item, f"text[{i}]")
    return text


def check_encodable(text: str, name: str = "text") -> str:
    """``text`` unchanged, or ValueError when it holds a lone surrogate (U+D800..U+DFFF).

    Such a str is not valid Unicode and has no UTF-8 bytes; tiktoken would replace it with
    U+FFFD without a word, so decode(encode(text)) would not give the text back.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        char = text[error.start]
        raise ValueError(
            f"{name} holds a lone surrogate U+{ord(char):04X} at index {error.start}, which is "
            "not valid Unicode and has no UTF-8 bytes (tiktoken would silently replace it with "
            "U+FFFD, so the round trip would not give the text back); repair the text where it "
            "was made (a surrogate pair split apart, or bytes decoded with "
            "errors='surrogateescape'), or replace it on purpose: "
            "text.encode('utf-8', 'replace').decode('utf-8')"
        ) from None
    return text


def _id_batch(batch: object, method: str) -> object:
    """``batch`` unchanged if it is a batch of id sequences; one flat sequence of ids (each id
    would be decoded on its own) or text is refused with the fix."""
    single = method.removesuffix("_batch")
    if isinstance(batch, str | bytes | bytearray):
        raise TypeError(
            f"batch must be a list of id lists for {method}, got {type(batch).__name__}; "
            "it is already text (encode it first to get ids)"
        )
    flat = (
        batch.ndim == 1
        if isinstance(batch, torch.Tensor | np.ndarray)
        else isinstance(batch, Sequence)
        and len(batch) > 0
        and all(isinstance(i, numbers.Integral) for i in batch)
    )
    if flat:
        raise TypeError(
            f"batch must be a list of id lists for {method}, got one flat sequence of "
            f"{len(batch)} ids; each id would be decoded on its own. Call {single}(ids) for "
            f"one text, or pass [ids] for a batch of one"
        )
    return batch
