"""Words: jieba cuts Chinese (and English) text into words; :class:`WordTokenizer` maps them
to ids. jieba's dictionary cache goes to a per-user folder, never to a file in ``/tmp`` shared
by every user."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence

from course_utils.checks import check_bool, check_int, check_text
from course_utils.lab.cache_dirs import user_cache_dir
from course_utils.tokenization.base import _as_vocab, _check_corpus, _TableTokenizer

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
    from course_utils.lab.quiet_imports import import_jieba

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

    Raises:
        TypeError: ``text`` is not a str (jieba would decode bytes silently), or ``hmm`` is
            not True / False (the string ``"False"`` would count as True).
    """
    hmm = check_bool(hmm, "hmm")
    return jieba_tokenizer().lcut(check_text(text, "text"), HMM=hmm)


class WordTokenizer(_TableTokenizer):
    """Map each word (cut by :func:`split_words`) to an id; unknown words become ``<unk>``.

    Words are an open set: a vocabulary built from one text lacks words of the next, and
    those all become ``<unk>`` (id 0), whose text is lost on decoding. Characters and bytes
    do not have this problem; byte-level BPE keeps the short ids of frequent words without it.

    Args:
        vocab: the words in id order, ``vocab[0] == WordTokenizer.UNK``.

    Raises:
        TypeError: ``vocab`` is not a sequence of str.
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
        vocab = _as_vocab(vocab)
        self._check_unk_first(vocab)
        super().__init__(vocab)

    def _check_unk_first(self, vocab: list[str]) -> None:
        """``vocab`` starts with ``UNK`` (so that unknown words get id 0)."""
        if not vocab or vocab[0] != self.UNK:
            raise ValueError(f"vocab must start with {self.UNK!r}, got {vocab[:1]!r}")

    @classmethod
    def from_text(cls, text: str, min_count: int = 1) -> WordTokenizer:
        """Build the vocabulary from the words of ``text`` seen at least ``min_count`` times,
        sorted (so the ids are the same in every run), after ``<unk>``.

        Raises:
            TypeError: ``text`` is not a str, or ``min_count`` is not an int.
            ValueError: ``text`` is empty, or ``min_count < 1``.
        """
        check_text(text, "text")
        min_count = check_int(min_count, "min_count", minimum=1)
        _check_corpus(text)
        counts = Counter(split_words(text))
        words = sorted(w for w, n in counts.items() if n >= min_count and w != cls.UNK)
        return cls([cls.UNK, *words])

    def encode(self, text: str) -> list[int]:
        """Text to ids, one per word; a word not in the vocabulary gets id 0 (``<unk>``).

        Raises:
            TypeError: ``text`` is not a str.
        """
        return [self.token_to_id.get(word, 0) for word in split_words(text)]
