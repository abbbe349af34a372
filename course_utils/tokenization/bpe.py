"""Byte-level BPE written by hand: train, encode, decode, the list of merges (Sennrich et al.
2016; GPT-2, Radford et al. 2019, §2.2), and its conversion to a tiktoken encoding."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

import regex
import tiktoken
import torch
from tiktoken_ext import openai_public

from course_utils.checks import check_int, check_text
from course_utils.tokenization.base import _check_corpus, _ids_in_range
from course_utils.tokenization.ranks import NEVER, merges_from_ranks, ranks_from_vocab

#: GPT-2's pre-tokenisation pattern (tiktoken's ``r50k_pat_str``): an optional space plus a run
#: of letters, of digits or of other symbols, or whitespace; contractions ('s, 't, ...) apart.
GPT2_SPLIT_PATTERN = openai_public.r50k_pat_str


def merge_pair(ids: Sequence[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace each occurrence of ``pair`` in ``ids`` by ``new_id``, scanning left to right.

    Overlaps go to the leftmost match: ``[a, a, a]`` with the pair ``(a, a)`` becomes
    ``[new_id, a]``. The input is not changed.

    Raises:
        TypeError: ``ids`` is text (encode it first: ``list(text.encode("utf-8"))``), or
            ``pair`` / ``new_id`` is not made of ints.
        ValueError: ``pair`` does not have exactly two ids.

    Example:
        >>> merge_pair([5, 6, 5, 6, 7], (5, 6), 256)
        [256, 256, 7]
    """
    _check_ids(ids)
    pair = _check_pair(pair, "pair")
    new_id = check_int(new_id, "new_id", minimum=0)
    return _merge_pair(ids, pair, new_id)


def _check_ids(ids: object) -> None:
    """``ids`` is a sequence of ids (a list or a tensor), not text."""
    if isinstance(ids, str | bytes | bytearray) or not isinstance(ids, Sequence | torch.Tensor):
        raise TypeError(
            f"ids must be a list of int ids, got {type(ids).__name__}; for text use "
            'list(text.encode("utf-8")) (the byte values)'
        )


def _check_pair(pair: object, name: str) -> tuple[int, int]:
    """``pair`` as a tuple of two ints (numpy ints too)."""
    if not isinstance(pair, Sequence) or isinstance(pair, str | bytes):
        raise TypeError(
            f"{name} must be a pair of ids (left, right), got {type(pair).__name__} {pair!r}"
        )
    if len(pair) != 2:
        raise ValueError(
            f"{name} must be a pair of two ids (left, right), got {len(pair)}: {tuple(pair)!r}"
        )
    return check_int(pair[0], f"{name}[0]"), check_int(pair[1], f"{name}[1]")


def _merge_pair(ids: Sequence[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """:func:`merge_pair` without the checks (training calls it for every chunk)."""
    merged, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            merged.append(new_id)
            i += 2
        else:
            merged.append(ids[i])
            i += 1
    return merged


def _first_position(pair, chunk_indices, chunks) -> tuple[int, int]:
    """(chunk index, position) of the first occurrence of ``pair`` among ``chunks``."""
    for index in sorted(chunk_indices):
        ids = chunks[index]
        for position in range(len(ids) - 1):
            if (ids[position], ids[position + 1]) == pair:
                return index, position
    raise AssertionError(f"pair {pair} is counted but occurs in no chunk")


def _count_pairs(
    chunks: list[list[int]], weights: list[int]
) -> tuple[Counter[tuple[int, int]], defaultdict[tuple[int, int], set[int]]]:
    """How often each adjacent pair occurs (weighted by chunk counts), and in which chunks."""
    pair_counts: Counter[tuple[int, int]] = Counter()
    chunks_with: defaultdict[tuple[int, int], set[int]] = defaultdict(set)
    for index, ids in enumerate(chunks):
        for pair in zip(ids, ids[1:]):
            pair_counts[pair] += weights[index]
            chunks_with[pair].add(index)
    return pair_counts, chunks_with


def _merge_everywhere(best, new_id, chunks, weights, pair_counts, chunks_with) -> None:
    """Merge ``best`` into ``new_id`` in every chunk that has it, updating the counts in place
    (only the chunks containing the pair are revisited)."""
    touched = set()
    for index in chunks_with.pop(best):
        old = chunks[index]
        new = _merge_pair(old, best, new_id)
        if len(new) == len(old):  # a stale entry: the chunk lost the pair earlier
            continue
        for pair in zip(old, old[1:]):
            pair_counts[pair] -= weights[index]
            touched.add(pair)
        for pair in zip(new, new[1:]):
            pair_counts[pair] += weights[index]
            chunks_with[pair].add(index)
        chunks[index] = new
    for pair in touched:
        if pair_counts[pair] == 0:
            del pair_counts[pair]


def _compile(pat_str: object) -> regex.Pattern:
    """The chunking regex, compiled; regex's errors re-raised with the argument's name."""
    check_text(pat_str, "pat_str")
    try:
        return regex.compile(pat_str)
    except regex.error as error:
        raise ValueError(
            f"pat_str is not a valid regular expression ({error}): {pat_str!r}; the default "
            "is GPT2_SPLIT_PATTERN"
        ) from None


def _byte_ids_problem(byte_ids: list[int]) -> str:
    """Why ``byte_ids`` is not a permutation of 0..255, for the error message."""
    seen = set(byte_ids)
    missing = sorted(set(range(256)) - seen)
    repeated = sorted({i for i in byte_ids if byte_ids.count(i) > 1})
    outside = sorted(i for i in seen if not 0 <= i < 256)
    details = [f"{len(byte_ids)} ids given (need 256)"]
    for label, values in (
        ("missing", missing),
        ("repeated", repeated),
        ("outside 0..255", outside),
    ):
        if values:
            more = f" and {len(values) - 10} more" if len(values) > 10 else ""
            details.append(f"{label}: {values[:10]}{more}")
    return (
        "byte_ids must be a permutation of 0..255, one id per byte value, got "
        + "; ".join(details)
        + "; leave byte_ids=None for the identity list(range(256))"
    )


class BytePairTokenizer:
    """Byte-level byte-pair encoding (BPE): text -> UTF-8 bytes -> ids, by a list of merges.

    BPE (Sennrich et al. 2016, "Neural Machine Translation of Rare Words with Subword Units",
    §3.2) starts from single symbols and learns merges: the most frequent pair of adjacent
    symbols becomes a new symbol, again and again. Byte-level BPE (Radford et al. 2019,
    "Language Models are Unsupervised Multitask Learners", §2.2) starts from the 256 byte
    values, so any text (any script, emoji) encodes without an unknown token, and it first
    splits the text into chunks with a regular expression, so that no merge crosses from a
    word into a space, a digit or a punctuation mark.

    Ids: byte value ``b`` has id ``byte_ids[b]`` (by default ``b``); merge ``i`` creates id
    ``256 + i``. A merge ``(left, right)`` means: where id ``left`` is directly followed by id
    ``right``, write the new id instead. Encoding applies, again and again, the merge learned
    earliest among the adjacent pairs present.

    Args:
        merges: the ``(left id, right id)`` pairs, in the order they were learned.
        pat_str: the chunking regex, in the syntax of the ``regex`` module.
        byte_ids: the id of each byte value 0..255, a permutation of ``range(256)``;
            tiktoken's cl100k_base, for instance, gives ``!`` the id 0.

    Raises:
        TypeError: ``pat_str`` is not a str; ``byte_ids`` or a merge holds something other
            than ints (``98.5``).
        ValueError: ``pat_str`` is not a valid regular expression; ``byte_ids`` is not a
            permutation of ``range(256)``; a merge is not a pair or uses an id that does not
            exist yet.

    Example:
        >>> bpe = BytePairTokenizer.train("aaabdaaabac", vocab_size=259)
        >>> [bpe.vocab[256 + i] for i in range(3)]  # the merged tokens, in learned order
        [b'aa', b'aaa', b'aaab']
        >>> bpe.encode("aaab")
        [258]
    """

    _CACHE_LIMIT = 100_000  # chunks remembered by encode

    def __init__(
        self,
        merges: Sequence[tuple[int, int]] = (),
        pat_str: str = GPT2_SPLIT_PATTERN,
        byte_ids: Sequence[int] | None = None,
    ):
        byte_ids = self._check_byte_ids(byte_ids)
        self.byte_ids = byte_ids
        self.vocab: list[bytes] = [b""] * 256  # vocab[id] = the bytes the id stands for
        for byte, token_id in enumerate(byte_ids):
            self.vocab[token_id] = bytes([byte])
        self.merges: list[tuple[int, int]] = []
        self.merge_ids: dict[tuple[int, int], int] = {}  # (left, right) -> new id
        for number, merge in enumerate(merges):
            new_id = len(self.vocab)
            left, right = self._check_merge(merge, number, new_id)
            self.merges.append((int(left), int(right)))
            self.merge_ids[(int(left), int(right))] = new_id
            self.vocab.append(self.vocab[left] + self.vocab[right])
        self.pat_str = pat_str
        self._pattern = _compile(pat_str)
        self.merge_counts: list[int] | None = None  # set by train()
        self._cache: dict[str, list[int]] = {}

    @staticmethod
    def _check_byte_ids(byte_ids: Sequence[int] | None) -> list[int]:
        """``byte_ids`` as a list of ints, a permutation of 0..255 (the identity when None)."""
        if byte_ids is None:
            return list(range(256))
        byte_ids = [check_int(i, f"byte_ids[{n}]") for n, i in enumerate(byte_ids)]
        if sorted(byte_ids) != list(range(256)):
            raise ValueError(_byte_ids_problem(byte_ids))
        return byte_ids

    @staticmethod
    def _check_merge(merge: object, number: int, new_id: int) -> tuple[int, int]:
        """Merge ``number`` as ``(left, right)``, two ids that exist already (below ``new_id``)."""
        if type(merge) is tuple and len(merge) == 2 and type(merge[0]) is type(merge[1]) is int:
            left, right = merge  # the common case, checked fast (cl100k has 100k merges)
        else:
            left, right = _check_pair(merge, f"merges[{number}]")
        if not (0 <= left < new_id and 0 <= right < new_id):
            raise ValueError(
                f"merge {number} = ({left}, {right}) uses an id that does not "
                f"exist yet; ids so far are 0..{new_id - 1}"
            )
        return left, right

    @property
    def vocab_size(self) -> int:
        """Number of ids: 256 bytes plus one per merge."""
        return len(self.vocab)

    # -- training ------------------------------------------------------------------------

    @classmethod
    def train(
        cls, text: str, vocab_size: int, pat_str: str = GPT2_SPLIT_PATTERN
    ) -> BytePairTokenizer:
        """Learn ``vocab_size - 256`` merges from ``text``.

        Each step counts every pair of adjacent ids inside the chunks of the text, merges the
        most frequent pair everywhere, and gives it the next id. Ties go to the pair that
        occurs first in the text, the rule of tiktoken's educational trainer
        (``tiktoken._educational.bpe_train``), so both learn the same merges. Training stops
        early when no pair is left (every chunk is one token).

        The counts are kept up to date rather than recounted: a merge revisits only the
        distinct chunks that contain the merged pair, weighted by how often each chunk occurs.

        Args:
            text: the training corpus.
            vocab_size: number of ids wanted, at least 256 (the bytes).
            pat_str: the chunking regex.

        Returns:
            the tokenizer; its ``merge_counts[i]`` is how often merge ``i``'s pair occurred
            when it was chosen.

        Raises:
            TypeError: ``text`` or ``pat_str`` is not a str, ``vocab_size`` not an int.
            ValueError: ``vocab_size`` is below 256, ``text`` is empty, or ``pat_str`` is not
                a valid regular expression.
        """
        check_text(text, "text")
        _check_corpus(text, "to learn the merges from")
        vocab_size = check_int(
            vocab_size, "vocab_size", minimum=256, why="the 256 bytes come first"
        )
        chunk_counts = Counter(_compile(pat_str).findall(text))  # in order of first appearance
        chunks = [list(chunk.encode("utf-8")) for chunk in chunk_counts]
        weights = list(chunk_counts.values())
        pair_counts, chunks_with = _count_pairs(chunks, weights)
        merges: list[tuple[int, int]] = []
        merge_counts: list[int] = []
        while 256 + len(merges) < vocab_size and pair_counts:
            top = max(pair_counts.values())
            tied = [pair for pair, count in pair_counts.items() if count == top]
            best = min(tied, key=lambda pair: _first_position(pair, chunks_with[pair], chunks))
            merges.append(best)
            merge_counts.append(top)
            _merge_everywhere(best, 255 + len(merges), chunks, weights, pair_counts, chunks_with)
        tokenizer = cls(merges, pat_str)
        tokenizer.merge_counts = merge_counts
        return tokenizer

    @classmethod
    def from_ranks(cls, mergeable_ranks: dict[bytes, int], pat_str: str) -> BytePairTokenizer:
        """Recover the merges behind a tiktoken vocabulary (``encoding._mergeable_ranks``);
        how: :func:`course_utils.tokenization.ranks.merges_from_ranks`.

        Raises:
            ValueError: the ranks are not ``0..n-1`` with the 256 single bytes first, or a
                token cannot be split into two tokens of lower rank.
        """
        merges, byte_ids = merges_from_ranks(mergeable_ranks)
        return cls(merges, pat_str, byte_ids)

    # -- encoding and decoding -----------------------------------------------------------

    def split(self, text: str) -> list[str]:
        """The chunks BPE works on, each encoded on its own: ``"Hello world!"`` ->
        ``["Hello", " world", "!"]``.

        Raises:
            TypeError: ``text`` is not a str (bytes: decode them first).
        """
        return self._pattern.findall(check_text(text, "text"))

    def encode_chunk(self, chunk: str) -> list[int]:
        """The ids of one chunk: its UTF-8 bytes, then the learned merges, earliest first.

        Raises:
            TypeError: ``chunk`` is not a str (bytes: decode them first).
        """
        check_text(chunk, "chunk")
        cached = self._cache.get(chunk)
        if cached is not None:
            return list(cached)
        ids = [self.byte_ids[b] for b in chunk.encode("utf-8")]
        while len(ids) >= 2:
            pair = min(zip(ids, ids[1:]), key=lambda p: self.merge_ids.get(p, NEVER))
            if pair not in self.merge_ids:
                break  # no adjacent pair was ever merged: done
            ids = _merge_pair(ids, pair, self.merge_ids[pair])
        if len(self._cache) >= self._CACHE_LIMIT:
            self._cache.clear()
        self._cache[chunk] = ids
        return list(ids)

    def encode(self, text: str) -> list[int]:
        """Text to ids: split into chunks, then BPE on each chunk's bytes. Any text encodes.

        Raises:
            TypeError: ``text`` is not a str (bytes: decode them first).
        """
        ids: list[int] = []
        for chunk in self.split(text):
            ids.extend(self.encode_chunk(chunk))
        return ids

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """Ids (ints or a 1-D tensor) to the bytes they stand for.

        Raises:
            ValueError: an id is outside ``[0, vocab_size)``.
        """
        ids = _ids_in_range(ids, self.vocab_size)
        return b"".join(self.vocab[i] for i in ids)

    def decode(self, ids: Iterable[int]) -> str:
        """Ids to text. Bytes that are not valid UTF-8 (a cut through a character) become
        U+FFFD, as in tiktoken; ``decode(encode(text)) == text`` for every text.

        Raises:
            ValueError: an id is outside ``[0, vocab_size)``.
        """
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def to_tiktoken(
        self, name: str = "course_bpe", special_tokens: dict[str, int] | None = None
    ) -> tiktoken.Encoding:
        """The same tokenizer as a ``tiktoken.Encoding``: ``mergeable_ranks`` maps each token's
        bytes to its id, which is also its merge priority, and ``pat_str`` is the same regex.
        tiktoken then runs the same merges, in Rust.

        tiktoken merges any adjacent pair whose joined bytes form a token, not only the pairs
        in the merges list. For merges learned by :meth:`train` or recovered by
        :meth:`from_ranks` the two agree; a hand-made list that can build a token in two ways
        (``a + bc`` and ``ab + c``) may not.

        Args:
            name: the encoding's name.
            special_tokens: extra tokens such as ``{"<|endoftext|>": vocab_size}``.

        Raises:
            ValueError: two ids stand for the same bytes (tiktoken keys tokens by bytes).
        """
        return tiktoken.Encoding(
            name=name, pat_str=self.pat_str, mergeable_ranks=ranks_from_vocab(self.vocab),
            special_tokens=dict(special_tokens or {}),
        )  # fmt: skip

    def __repr__(self) -> str:
        return f"BytePairTokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)})"
