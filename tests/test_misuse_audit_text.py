"""Misuse calls from the text/shape audit: each is refused in course_utils with the argument,
the expected and actual value, and the fix; the valid neighbour of each silent case keeps
its old result (tiktoken's, for the encoding)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tiktoken  # noqa: E402
import torch  # noqa: E402

from course_utils.lab import viz  # noqa: E402
from course_utils.lab.shapes import named_shape  # noqa: E402
from course_utils.tokenization import (  # noqa: E402
    BytePairTokenizer,
    CharTokenizer,
    WordTokenizer,
    load_encoding,
)
from course_utils.tokenization.words import split_words  # noqa: E402


@pytest.fixture(scope="module")
def enc():
    return load_encoding("cl100k_base")


def plain(encoding):
    """The same encoding as a bare tiktoken.Encoding (no course checks), for reference."""
    bare = object.__new__(tiktoken.Encoding)
    bare.__dict__.update({k: v for k, v in encoding.__dict__.items() if k != "_course_valid_ids"})
    return bare


# 1. split_words(hmm=...)


@pytest.mark.parametrize("hmm", ["False", "no", 0, None])
def test_split_words_refuses_non_bool_hmm(hmm):
    with pytest.raises(TypeError, match=r"hmm must be True or False, got .*" + type(hmm).__name__):
        split_words("他来到了网易杭研大厦", hmm=hmm)


@pytest.mark.tooling  # slow (make test-tooling, CI): keeps make test under 5 minutes
def test_split_words_bool_hmm_unchanged():
    import jieba

    for hmm in (True, False):
        assert split_words("他来到了网易杭研大厦", hmm=hmm) == jieba.lcut(
            "他来到了网易杭研大厦", HMM=hmm
        )


# 2. batch methods of the tiktoken wrapper


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda e: e.encode_batch("hello world"),
            r"text must be a list of str.*\[text\].*encode\(",
        ),
        (
            lambda e: e.encode_ordinary_batch("hi"),
            r"text must be a list of str.*\[text\].*encode_ordinary\(text\)",
        ),
        (lambda e: e.encode_batch(b"hi"), r"text must be a list of str.*bytes.*decode"),
        (
            lambda e: e.decode_batch(e.encode("hello world")),
            r"batch must be a list of id lists.*flat sequence of 2 ids.*decode\(ids\).*\[ids\]",
        ),
        (
            lambda e: e.decode_batch(torch.tensor(e.encode("hello world"))),
            r"batch must be a list of id lists.*decode\(ids\)",
        ),
        (
            lambda e: e.decode_bytes_batch([1, 2, 3]),
            r"batch must be a list of id lists.*decode_bytes\(ids\)",
        ),
        (lambda e: e.decode_batch("hello"), r"batch must be a list of id lists.*str"),
    ],
)
def test_batch_methods_refuse_single_items(enc, call, match):
    with pytest.raises(TypeError, match=match):
        call(enc)


def test_valid_batch_calls_match_tiktoken(enc):
    bare = plain(enc)
    texts = ["hello world", "hi", "", "我爱北京"]
    assert enc.encode_batch(texts) == bare.encode_batch(texts)
    assert enc.encode_ordinary_batch(texts) == bare.encode_ordinary_batch(texts)
    ids = enc.encode_batch(texts)
    assert enc.decode_batch(ids) == bare.decode_batch(ids) == texts
    assert enc.decode_bytes_batch(ids) == bare.decode_bytes_batch(ids)
    assert enc.decode_batch([]) == []
    assert enc.decode_batch([enc.encode("hello world")]) == ["hello world"]
    special = ["a <|endoftext|> b"]
    assert enc.encode_batch(special, allowed_special="all") == bare.encode_batch(
        special, allowed_special="all"
    )


# 3. encode with a special token in the text


@pytest.mark.parametrize("encode", ["encode", "encode_batch"])
def test_disallowed_special_in_course_voice(enc, encode):
    text = "see <|endoftext|> here"
    arg = text if encode == "encode" else [text]
    with pytest.raises(
        ValueError,
        match=r"'<\|endoftext\|>', a disallowed special token.*allowed_special="
        r".*disallowed_special=\(\)",
    ) as error:
        getattr(enc, encode)(arg)
    assert error.traceback[-1].path.name != "core.py"  # raised in course_utils, not tiktoken
    assert "course_utils" in str(error.traceback[-1].path)


def test_special_token_valid_calls_unchanged(enc):
    bare = plain(enc)
    text = "see <|endoftext|> here"
    for kwargs in ({"allowed_special": {"<|endoftext|>"}}, {"disallowed_special": ()}, {}):
        if kwargs:
            assert enc.encode(text, **kwargs) == bare.encode(text, **kwargs)
    assert enc.encode("hello world") == bare.encode("hello world")


# 4. vocab duplicates, byte_ids


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: CharTokenizer(["a", "a"]), r"duplicates: \['a'\].*CharTokenizer\.from_text"),
        (
            lambda: CharTokenizer(["a", "b", "a", "c", "c"]),
            r"\['a', 'c'\].*5 items, 3 distinct.*dict\.fromkeys",
        ),
        (
            lambda: WordTokenizer(["<unk>", "我", "我"]),
            r"duplicates: \['我'\].*WordTokenizer\.from_text",
        ),
        (
            lambda: BytePairTokenizer(byte_ids=list(range(255))),
            r"byte_ids must be a permutation.*255 ids given.*missing: \[255\]",
        ),
        (
            lambda: BytePairTokenizer(byte_ids=[*range(255), 0]),
            r"byte_ids.*256 ids given.*missing: \[255\].*repeated: \[0\]",
        ),
        (
            lambda: BytePairTokenizer(byte_ids=list(range(1, 257))),
            r"byte_ids.*missing: \[0\].*outside 0\.\.255: \[256\]",
        ),
    ],
)
def test_vocab_problems_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_valid_vocab_and_byte_ids_still_work():
    assert CharTokenizer(["a", "b"]).encode("ab") == [0, 1]
    permuted = list(reversed(range(256)))
    assert BytePairTokenizer(byte_ids=permuted).encode("a") == [255 - ord("a")]


# 5. load_encoding name type


@pytest.mark.parametrize("name", [None, ["gpt2"], 100])
def test_load_encoding_wrong_type(name):
    with pytest.raises(TypeError, match=r"name must be a str, one of .*cl100k_base.*got"):
        load_encoding(name)


def test_load_encoding_unknown_name_is_value_error():
    with pytest.raises(ValueError, match=r"name must be one of .*got 'p50k'"):
        load_encoding("p50k")
    assert load_encoding("cl100k_base") is load_encoding("cl100k_base")
    assert callable(load_encoding.cache_clear)


# 6. named_shape


@pytest.mark.parametrize(
    ("value", "axes", "match"),
    [
        ([[1, 2, 3], [4, 5, 6]], "B T", r"value must be a tensor.*got a list.*tensor\.shape"),
        ([9906], "T", r"value must be a tensor.*list of ints.*torch\.tensor\(value\)"),
        ([2, 3], "B T", r"value must be a tensor.*list of ints"),
        ((2.0, 3), "B T", r"value must be .*tuple of ints.*tuple"),
        ("BT", "B T", r"value must be .*got str"),
        (None, "B", r"value must be .*got NoneType"),
    ],
)
def test_named_shape_refuses_non_shapes(value, axes, match):
    with pytest.raises(TypeError, match=match):
        named_shape(value, axes)


def test_named_shape_of_encoded_ids(enc):
    with pytest.raises(TypeError, match="list of ints"):
        named_shape(enc.encode("hello world"), "T")
    assert named_shape(torch.tensor([enc.encode("hello world")]), "B T") == "(B=1, T=2)"


@pytest.mark.parametrize(
    "value",
    [torch.zeros(2, 3), torch.zeros(2, 3).shape, (2, 3), np.zeros((2, 3)), (np.int64(2), 3)],
)
def test_named_shape_valid_inputs_unchanged(value):
    assert named_shape(value, "B T") == "(B=2, T=3)"


# 7. plot_attention refuses raw scores


@pytest.mark.parametrize(
    "weights",
    [
        torch.tensor([[2.0, -1.0], [0.5, 3.0]]),
        torch.tensor([[0.0, float("-inf")], [0.0, 0.0]]),
        torch.tensor([[0.5, 1.2], [0.2, 0.8]]),
    ],
)
def test_plot_attention_refuses_scores(weights):
    with pytest.raises(ValueError, match=r"weights must be .* in \[0, 1\].*softmax"):
        viz.plot_attention(weights, ["a", "b"])
    with pytest.raises(ValueError, match=r"weights must be .* in \[0, 1\]"):
        viz.plot_attention_heads(weights[None], ["a", "b"])
    plt.close("all")


@pytest.mark.parametrize(
    "weights",
    [
        torch.softmax(torch.randn(3, 3), dim=-1),
        torch.tril(torch.ones(3, 3, dtype=torch.bool)).float(),
        torch.tensor([[1.0 + 1e-6, 0.0, 0.0], [0.5, 0.5, 0.0], [float("nan")] * 3]),
    ],
)
def test_plot_attention_accepts_weights_and_masks(weights):
    ax = viz.plot_attention(weights, ["a", "b", "c"])
    assert ax.images[0].get_clim() == (0.0, 1.0)
    plt.close("all")
