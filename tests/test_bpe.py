"""BytePairTokenizer: merges worked out by hand, tiktoken's educational trainer as the training
reference, tiktoken's cl100k_base as the encoding reference, exact round trips."""

from __future__ import annotations

import doctest

import pytest
import regex
import tiktoken
from tiktoken._educational import bpe_train

from course_utils import tokenization
from course_utils.tokenization import (
    GPT2_SPLIT_PATTERN,
    BytePairTokenizer,
    load_encoding,
    merge_pair,
    merges_from_ranks,
    ranks_from_vocab,
)

ROUND_TRIP_TEXTS = {
    "English": "To be, or not to be, that is the question:\n  Whether 'tis nobler?",
    "Chinese": "我爱北京天安门。自然语言处理很有趣！",
    "emoji": "🦜🦜 👩\u200d👩\u200d👧 🇨🇳 ❤️",
    "mixed": "GPT-2 用 byte-level BPE：每个字节都有 id 🙂, even 𠀀 and 龘\t\r\n 3.14159",
}


@pytest.fixture(scope="module")
def shakespeare_bpe(shakespeare_text) -> BytePairTokenizer:
    return BytePairTokenizer.train(shakespeare_text[:100_000], vocab_size=256 + 300)


def test_merges_worked_out_by_hand():
    """aaabdaaabac: (a, a) occurs 4 times (overlapping), then (aa, a) and (a, b) tie with 2
    each and (aa, a) comes first in the text, then (aaa, b) occurs twice."""
    bpe = BytePairTokenizer.train("aaabdaaabac", vocab_size=259)
    a, b = ord("a"), ord("b")
    assert bpe.merges == [(a, a), (256, a), (257, b)]
    assert bpe.merge_counts == [4, 2, 2]
    assert bpe.vocab[256:] == [b"aa", b"aaa", b"aaab"]
    assert bpe.encode("aaabdaaabac") == [258, ord("d"), 258, a, ord("c")]


def test_merges_on_a_small_corpus_stay_inside_chunks():
    """Chunks ' low' x3, ' lower' x2, ' newest' x2. Counts: (' ', 'l'), ('l', 'o'), ('o', 'w')
    5 each, ('w', 'e') 4, the rest 2. Ties go to the pair seen first: ' l', ' lo', ' low' (5
    each). Then ('w', 'e') is left only in ' newest' (2), and of the pairs counted 2,
    (' low', 'e') comes first in the text. No merge takes a space after a letter."""
    text = " low low low lower lower newest newest"
    bpe = BytePairTokenizer.train(text, vocab_size=256 + 4)
    assert [bpe.vocab[i] for i in range(256, 260)] == [b" l", b" lo", b" low", b" lowe"]
    assert bpe.merge_counts == [5, 5, 5, 2]
    assert bpe.split(text)[:2] == [" low", " low"]
    assert bpe.encode(" lower newest") == [259, ord("r"), *b" newest"]


def test_merge_pair_scans_left_to_right_and_keeps_its_input():
    ids = [1, 1, 1, 2]
    assert merge_pair(ids, (1, 1), 9) == [9, 1, 2]
    assert ids == [1, 1, 1, 2]
    assert merge_pair([5, 6, 5, 6, 7], (5, 6), 256) == [256, 256, 7]
    assert merge_pair([4, 1, 2], (1, 2), 9) == [4, 9]
    assert merge_pair([], (1, 2), 9) == []


@pytest.mark.tooling  # slow (make test-tooling, CI): keeps make test under 5 minutes
@pytest.mark.parametrize(("start", "length", "merges"), [(0, 8_000, 120), (2_000_000, 6_000, 150)])
def test_training_matches_tiktokens_educational_trainer(shakespeare_text, start, length, merges):
    """tiktoken._educational.bpe_train recounts every pair at every step (no bookkeeping to get
    wrong) and breaks ties the same way; the ranks must be identical."""
    corpus = shakespeare_text[start : start + length]
    reference = bpe_train(corpus, 256 + merges, GPT2_SPLIT_PATTERN, visualise=None)
    bpe = BytePairTokenizer.train(corpus, 256 + merges)
    assert {token: i for i, token in enumerate(bpe.vocab)} == reference


def test_training_on_chinese_matches_the_educational_trainer():
    corpus = "我爱北京天安门，天安门上太阳升。我爱自然语言处理，自然语言处理很有趣。" * 4
    reference = bpe_train(corpus, 256 + 60, GPT2_SPLIT_PATTERN, visualise=None)
    bpe = BytePairTokenizer.train(corpus, 256 + 60)
    assert {token: i for i, token in enumerate(bpe.vocab)} == reference
    assert "天安门".encode() in bpe.vocab  # three characters, nine bytes, one token


def test_training_stops_when_no_pair_is_left():
    bpe = BytePairTokenizer.train("ab ab", vocab_size=1000)
    assert bpe.vocab[256:] == [b"ab", b" ab"] and bpe.vocab_size == 258


@pytest.mark.parametrize("kind", ROUND_TRIP_TEXTS)
def test_round_trip(shakespeare_bpe, kind):
    text = ROUND_TRIP_TEXTS[kind]
    ids = shakespeare_bpe.encode(text)
    assert shakespeare_bpe.decode(ids) == text
    assert shakespeare_bpe.decode_bytes(ids) == text.encode("utf-8")
    assert all(0 <= i < shakespeare_bpe.vocab_size for i in ids)


def test_round_trip_of_a_whole_passage(shakespeare_bpe, shakespeare_text):
    passage = shakespeare_text[3_000_000:3_050_000]
    ids = shakespeare_bpe.encode(passage)
    assert shakespeare_bpe.decode(ids) == passage
    assert len(ids) < 0.6 * len(passage.encode())  # the merges compress unseen text


def test_unseen_characters_fall_back_to_bytes(shakespeare_bpe):
    """An emoji absent from the (ASCII) training text: one id per UTF-8 byte."""
    parrot = "🦜"
    assert shakespeare_bpe.encode(parrot) == list(parrot.encode("utf-8"))
    assert [shakespeare_bpe.decode([i]) for i in shakespeare_bpe.encode(parrot)] == ["\ufffd"] * 4


def test_learned_tokens_never_cross_a_chunk_boundary(shakespeare_bpe):
    """Every learned token is (part of) one chunk of the split pattern, e.g. ' the', never
    'the ' or 'e,'."""
    pattern = regex.compile(GPT2_SPLIT_PATTERN)
    for token in shakespeare_bpe.vocab[256:]:
        text = token.decode("utf-8")  # ASCII corpus: every token is valid UTF-8
        assert pattern.findall(text) == [text], text


def test_the_tiktoken_wrapper_gives_the_same_ids(shakespeare_bpe, shakespeare_text):
    encoding = shakespeare_bpe.to_tiktoken(special_tokens={"<|endoftext|>": 556})
    assert isinstance(encoding, tiktoken.Encoding) and encoding.n_vocab == 557
    passage = shakespeare_text[4_000_000:4_100_000]
    assert encoding.encode_ordinary(passage) == shakespeare_bpe.encode(passage)
    for text in ROUND_TRIP_TEXTS.values():
        assert encoding.encode_ordinary(text) == shakespeare_bpe.encode(text)
    assert encoding.encode("to be<|endoftext|>", allowed_special="all")[-1] == 556
    assert encoding.decode(shakespeare_bpe.encode(passage)) == passage


@pytest.fixture(scope="module")
def cl100k() -> tiktoken.Encoding:
    return load_encoding("cl100k_base")


@pytest.mark.tooling  # slow (make test-tooling, CI): keeps make test under 5 minutes
def test_cl100k_merges_recovered_by_hand_reproduce_tiktoken(cl100k, shakespeare_text):
    """An independent check of encode: run this module's BPE with the merges behind
    cl100k_base (recovered from its ranks) and its split pattern; every id must equal
    tiktoken's, on English, Chinese, emoji and mixed text."""
    bpe = BytePairTokenizer.from_ranks(cl100k._mergeable_ranks, cl100k._pat_str)
    assert bpe.vocab_size == len(cl100k._mergeable_ranks) == 100_256
    assert bpe.vocab[bpe.byte_ids[ord("!")]] == b"!" and bpe.byte_ids[ord("!")] == 0
    texts = [shakespeare_text[1_000_000:1_100_000], *ROUND_TRIP_TEXTS.values()]
    for text in texts:
        assert bpe.encode(text) == cl100k.encode_ordinary(text)
    # the first merges of cl100k_base, as byte strings
    assert [bpe.vocab[256 + i] for i in range(4)] == [b"  ", b"    ", b"in", b" t"]


def test_from_ranks_rejects_ranks_with_gaps():
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 300}
    with pytest.raises(ValueError, match="ranks must be 0..n-1"):
        BytePairTokenizer.from_ranks(ranks, GPT2_SPLIT_PATTERN)


def test_ranks_and_merges_round_trip(shakespeare_bpe):
    """Trained merges -> tiktoken's rank table -> the same merges and byte ids again."""
    ranks = ranks_from_vocab(shakespeare_bpe.vocab)
    assert len(ranks) == shakespeare_bpe.vocab_size
    merges, byte_ids = merges_from_ranks(ranks)
    assert merges == [tuple(pair) for pair in shakespeare_bpe.merges]
    assert byte_ids == list(range(256))


def test_merges_from_ranks_boundaries():
    single_bytes = {bytes([b]): b for b in range(256)}
    assert merges_from_ranks(single_bytes) == ([], list(range(256)))  # no merge at all
    assert merges_from_ranks(single_bytes | {b"ab": 256, b"abc": 257})[0] == [
        (97, 98),
        (256, 99),
    ]
    with pytest.raises(ValueError, match="ranks 0..255 must be the 256 single bytes"):
        merges_from_ranks({b"ab": 0} | {bytes([b]): b + 1 for b in range(256)})
    with pytest.raises(ValueError, match=r"token b'abc' \(rank 256\) is not a merge"):
        merges_from_ranks(single_bytes | {b"abc": 256})  # neither "ab" nor "bc" came before


def test_hand_made_merges_can_disagree_with_tiktoken():
    """The subtlety the to_tiktoken docstring states: ab+c and a+bc both make 'abc'. Merge
    order bc, ab, ab+c: BPE stops at [a, bc] (no merge (a, bc)); tiktoken joins a+bc because
    'abc' is a token. Learned merges never do this (see the tests above)."""
    a, b, c = ord("a"), ord("b"), ord("c")
    bpe = BytePairTokenizer([(b, c), (a, b), (257, c)])
    assert bpe.encode("abc") == [a, 256]
    assert bpe.to_tiktoken().encode_ordinary("abc") == [258]


def test_to_tiktoken_rejects_two_ids_with_the_same_bytes():
    a, b, c = ord("a"), ord("b"), ord("c")
    bpe = BytePairTokenizer([(a, b), (256, c), (b, c), (a, 258)])  # 'abc' twice: 257, 259
    with pytest.raises(ValueError, match=r"ids \[\(257, 259\)\] stand for the same bytes"):
        bpe.to_tiktoken()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"merges": [(97, 256)]}, r"merge 0 = \(97, 256\) uses an id that does not exist yet"),
        ({"byte_ids": [0] * 256}, "permutation of 0..255"),
    ],
)
def test_bad_merges_or_byte_ids_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BytePairTokenizer(**kwargs)


def test_train_rejects_a_small_vocabulary_and_an_empty_text():
    with pytest.raises(ValueError, match="at least 256"):
        BytePairTokenizer.train("abc", vocab_size=255)
    with pytest.raises(ValueError, match="text is empty"):
        BytePairTokenizer.train("", vocab_size=300)


def test_decode_rejects_out_of_range_ids():
    bpe = BytePairTokenizer.train("ab ab", vocab_size=257)
    with pytest.raises(ValueError, match=r"\[0, 257\), got \[257\]"):
        bpe.decode([97, 257])


@pytest.mark.tooling  # slow (make test-tooling, CI): keeps make test under 5 minutes
def test_module_examples_run(monkeypatch, tmp_path):
    """The docstring examples of course_utils.tokenization (CharTokenizer, BPE, jieba)."""
    import jieba

    monkeypatch.setattr(jieba, "dt", jieba.Tokenizer())  # a fresh jieba, cached under tmp_path
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    attempted = 0
    for module in (tokenization.char, tokenization.bpe, tokenization.words):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, module.__name__
        attempted += result.attempted
    assert attempted >= 8
