"""Tokenizers, from the simplest to the one GPT models use.

- :class:`CharTokenizer`: one id per character.
- :func:`split_words` and :class:`WordTokenizer`: Chinese (and English) words, cut by jieba.
- :class:`BytePairTokenizer`: byte-level BPE written by hand (train, encode, decode, the list
  of merges), after Sennrich et al. 2016 and the GPT-2 paper (Radford et al. 2019, §2.2).
- :func:`merges_from_ranks` and :func:`ranks_from_vocab`: tiktoken's rank table as BPE merges,
  and back.
- :func:`load_encoding`: tiktoken's ``cl100k_base``, ``o200k_base``, ``r50k_base`` and ``gpt2``,
  also on a machine without internet, from rank files that installed packages ship.

Caches (tiktoken's rank files, jieba's dictionary) go to a per-user folder
(:func:`course_utils.lab.bootstrap.user_cache_dir`), never to a file shared by every user in
``/tmp``.
"""

from course_utils.tokenization.base import _ids_in_range, _TableTokenizer
from course_utils.tokenization.bpe import GPT2_SPLIT_PATTERN, BytePairTokenizer, merge_pair
from course_utils.tokenization.char import CharTokenizer
from course_utils.tokenization.encoding import CourseEncoding
from course_utils.tokenization.ranks import merges_from_ranks, ranks_from_vocab
from course_utils.tokenization.tiktoken_loader import (
    NETWORK_TIMEOUT_S,
    OFFLINE_ENCODINGS,
    SHIPPED_RANK_FILES,
    EncodingUnavailableError,
    ShippedRankFile,
    TiktokenRecipe,
    can_connect,
    load_encoding,
    parse_rank_file,
    rank_file_bytes,
    rank_file_matches,
    tiktoken_recipe,
)
from course_utils.tokenization.words import WordTokenizer, jieba_tokenizer, split_words

__all__ = [
    "GPT2_SPLIT_PATTERN",
    "NETWORK_TIMEOUT_S",
    "OFFLINE_ENCODINGS",
    "SHIPPED_RANK_FILES",
    "BytePairTokenizer",
    "CharTokenizer",
    "CourseEncoding",
    "EncodingUnavailableError",
    "ShippedRankFile",
    "TiktokenRecipe",
    "WordTokenizer",
    "can_connect",
    "jieba_tokenizer",
    "load_encoding",
    "merge_pair",
    "merges_from_ranks",
    "parse_rank_file",
    "rank_file_bytes",
    "rank_file_matches",
    "ranks_from_vocab",
    "split_words",
    "tiktoken_recipe",
    "_TableTokenizer",
    "_ids_in_range",
]
