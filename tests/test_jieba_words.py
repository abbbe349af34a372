"""split_words and WordTokenizer: jieba's segmentation, its cache in a per-user folder (never
the shared <tempdir>/jieba.cache), no log lines on stderr, and the word vocabulary."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import jieba
import pytest

from course_utils.tokenization import WordTokenizer, jieba_tokenizer, split_words


@pytest.fixture
def fresh_jieba(monkeypatch, tmp_path):
    """A jieba that has loaded nothing yet, a private stand-in for the shared temp dir and a
    home cache under tmp_path."""
    monkeypatch.setattr(jieba, "dt", jieba.Tokenizer())
    (tmp_path / "shared_tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "shared_tmp"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home_cache"))
    return tmp_path


@pytest.fixture(scope="module")
def _loaded_once(tmp_path_factory):
    """One jieba tokenizer, loaded once (about a second each time) by the course's own
    jieba_tokenizer, for the tests that only segment; the tests of the loading and its cache
    above get a fresh one each."""
    tokenizer = jieba.Tokenizer()
    tokenizer.tmp_dir = str(tmp_path_factory.mktemp("jieba_cache"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jieba, "dt", tokenizer)
        return jieba_tokenizer()


@pytest.fixture
def loaded_jieba(monkeypatch, _loaded_once):
    monkeypatch.setattr(jieba, "dt", _loaded_once)


def test_known_segmentations(loaded_jieba):
    """jieba's README examples."""
    assert split_words("我爱北京天安门") == ["我", "爱", "北京", "天安门"]
    assert split_words("我来到北京清华大学") == ["我", "来到", "北京", "清华大学"]


def test_the_words_join_back_to_the_text(loaded_jieba):
    text = "I love natural language processing. 我爱自然语言处理！\n  两个空格"
    words = split_words(text)
    assert "".join(words) == text
    assert " " in words and "natural" in words and "自然语言" in words


@pytest.mark.tooling  # jieba's cache on a shared machine (setup): make test-tooling (CI)
def test_cache_goes_to_the_user_folder_not_shared_tmp(fresh_jieba):
    split_words("我爱北京天安门")
    cache = fresh_jieba / "home_cache" / "transformer-course" / "jieba" / "jieba.cache"
    assert cache.is_file() and cache.stat().st_size > 1_000_000
    assert list((fresh_jieba / "shared_tmp").iterdir()) == []
    assert jieba.dt.tmp_dir == str(cache.parent)


@pytest.mark.tooling  # jieba's cache on a shared machine (setup): make test-tooling (CI)
def test_plain_jieba_writes_to_the_shared_temp_dir(fresh_jieba):
    """Control: without the redirection, jieba writes <tempdir>/jieba.cache, so the check
    above can fail."""
    level = jieba.default_logger.level
    jieba.setLogLevel(logging.WARNING)
    try:
        jieba.Tokenizer().initialize()
    finally:
        jieba.setLogLevel(level)
    assert (fresh_jieba / "shared_tmp" / "jieba.cache").is_file()


@pytest.mark.tooling  # jieba's cache on a shared machine (setup): make test-tooling (CI)
def test_no_log_records_and_the_level_is_restored(fresh_jieba, caplog):
    level = jieba.default_logger.level
    with caplog.at_level(logging.DEBUG):
        split_words("我爱北京天安门")
    assert "Building prefix dict" not in caplog.text and "Loading model" not in caplog.text
    assert jieba.default_logger.level == level
    assert jieba.dt.initialized


@pytest.mark.tooling  # a fresh process: make test-tooling (CI)
def test_nothing_on_stderr_in_a_fresh_process(tmp_path):
    """What a notebook kernel sees (nbval compares stderr): jieba's first load is silent."""
    code = "from course_utils.tokenization import split_words; print(split_words('我爱北京天安门'))"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['我', '爱', '北京', '天安门']"
    assert done.stderr == ""


@pytest.mark.tooling  # jieba's cache on a shared machine (setup): make test-tooling (CI)
def test_the_cache_is_reused(fresh_jieba, monkeypatch):
    split_words("我爱北京天安门")
    cache = Path(jieba.dt.tmp_dir) / "jieba.cache"
    written = cache.stat().st_mtime_ns
    monkeypatch.setattr(jieba, "dt", jieba.Tokenizer())
    assert split_words("我爱北京天安门") == ["我", "爱", "北京", "天安门"]
    assert cache.stat().st_mtime_ns == written


@pytest.mark.tooling  # jieba's cache on a shared machine (setup): make test-tooling (CI)
@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_unwritable_home_falls_back_to_a_private_folder(fresh_jieba, monkeypatch):
    (fresh_jieba / "home_is_a_file").write_text("")
    monkeypatch.setenv("HOME", str(fresh_jieba / "home_is_a_file"))
    monkeypatch.delenv("XDG_CACHE_HOME")
    split_words("我爱北京天安门")
    private = fresh_jieba / "shared_tmp" / f"transformer-course-{os.getuid()}"
    assert (private / "jieba" / "jieba.cache").is_file()
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    assert not (fresh_jieba / "shared_tmp" / "jieba.cache").exists()


@pytest.mark.tooling  # jieba's cache on a shared machine (setup): make test-tooling (CI)
@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_a_planted_shared_folder_is_not_used(fresh_jieba, monkeypatch):
    """Someone else created the per-user temp folder name, writable by all: the cache goes to
    a new private folder instead, never into theirs or into <tempdir>/jieba.cache."""
    (fresh_jieba / "home_is_a_file").write_text("")
    monkeypatch.setenv("HOME", str(fresh_jieba / "home_is_a_file"))
    monkeypatch.delenv("XDG_CACHE_HOME")
    planted = fresh_jieba / "shared_tmp" / f"transformer-course-{os.getuid()}"
    planted.mkdir()
    planted.chmod(0o777)
    split_words("我爱北京天安门")
    folder = Path(jieba.dt.tmp_dir)
    assert (folder / "jieba.cache").is_file()
    assert planted not in (folder, *folder.parents) and list(planted.iterdir()) == []
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert not (fresh_jieba / "shared_tmp" / "jieba.cache").exists()


@pytest.mark.tooling  # jieba's cache on a shared machine (setup): make test-tooling (CI)
def test_a_tmp_dir_set_by_the_user_is_kept(fresh_jieba):
    chosen = fresh_jieba / "chosen"
    chosen.mkdir()
    jieba.dt.tmp_dir = str(chosen)
    jieba_tokenizer()
    assert (chosen / "jieba.cache").is_file()


def test_word_tokenizer_vocabulary_is_sorted_with_unk_first(loaded_jieba):
    tok = WordTokenizer.from_text("我爱北京天安门。我爱自然语言处理。")
    assert tok.vocab[0] == "<unk>"
    assert tok.vocab[1:] == sorted(set(tok.vocab[1:]))
    assert set(tok.vocab[1:]) == {"我", "爱", "北京", "天安门", "。", "自然语言", "处理"}
    ids = tok.encode("我爱北京。")
    assert [tok.vocab[i] for i in ids] == ["我", "爱", "北京", "。"]
    assert tok.decode(ids) == "我爱北京。"


def test_unknown_words_become_unk_and_are_lost(loaded_jieba):
    tok = WordTokenizer.from_text("我爱北京天安门")
    ids = tok.encode("我爱上海")
    assert ids == [tok.vocab.index("我"), tok.vocab.index("爱"), 0]
    assert tok.decode(ids) == "我爱<unk>"


def test_min_count_drops_rare_words(loaded_jieba):
    tok = WordTokenizer.from_text("我爱北京。我爱上海。", min_count=2)
    assert tok.vocab == ["<unk>", "。", "我", "爱"]


@pytest.mark.parametrize(
    ("vocab", "message"),
    [([], "must start with '<unk>'"), (["我"], "must start"), (["<unk>", "a", "a"], "duplicates")],
)
def test_bad_vocabularies_are_rejected(vocab, message):
    with pytest.raises(ValueError, match=message):
        WordTokenizer(vocab)


def test_decode_rejects_out_of_range_ids():
    tok = WordTokenizer(["<unk>", "我"])
    with pytest.raises(ValueError, match=r"\[0, 2\), got \[5\]"):
        tok.decode([1, 5])


def test_empty_text_is_rejected():
    with pytest.raises(ValueError, match="text is empty"):
        WordTokenizer.from_text("")
