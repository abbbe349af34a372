"""The corpus notebook 12 trains on in each edition (course_utils.lab.corpora)."""

import math

import pytest
import torch

from course_utils.lab.corpora import CORPORA, corpus_data
from course_utils.lab.ladder import ladder_data


@pytest.mark.parametrize("corpus", sorted(CORPORA))
def test_each_corpus_is_split_90_10_and_its_prompt_is_in_its_vocabulary(corpus):
    data = corpus_data(corpus)
    total = len(data.train) + len(data.val)
    assert data.train.dtype == torch.int64 and data.train.dim() == 1
    assert math.isclose(len(data.val) / total, 0.1, abs_tol=1e-4)
    assert data.vocab_size == len(data.tokenizer.vocab) == int(data.train.max()) + 1
    assert data.tokenizer.decode(data.tokenizer.encode(data.prompt)) == data.prompt


def test_the_two_editions_read_different_texts():
    english, chinese = corpus_data("shakespeare"), corpus_data("tang_poems")
    assert english.vocab_size < 100 and chinese.vocab_size == 5_840
    assert "床" in chinese.tokenizer.vocab and "床" not in english.tokenizer.vocab


def test_the_ladder_reads_shakespeare_as_notebook_12_does():
    assert torch.equal(ladder_data().val, corpus_data("shakespeare").val)


@pytest.mark.parametrize(
    "corpus, error, said",
    [
        ("poems", ValueError, r"corpus='poems' is not a corpus of the course; expected one of"),
        ("Shakespeare", ValueError, r"\['shakespeare', 'tang_poems'\]"),
        (None, TypeError, r"corpus must be a corpus name \(a str\).*got NoneType None"),
    ],
)
def test_an_unknown_corpus_is_named_with_the_known_ones(corpus, error, said):
    with pytest.raises(error, match=said):
        corpus_data(corpus)
