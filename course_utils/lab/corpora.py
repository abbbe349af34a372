"""The text notebook 12 trains on: Shakespeare in the English edition, Tang poems in the Chinese.

The two editions run the same code; the Chinese edition's catalogue translates the one string
that names the corpus (``corpus_data(corpus="shakespeare")``), so its learner trains the same
decoder on Chinese verse. Everything a notebook then does with the data (the vocabulary size V,
ln V, the batches, the prompt of a demo) comes from the :class:`CorpusData`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

from course_utils.data import load_shakespeare, train_val_split
from course_utils.lab.corpus_zh import load_tang_poems
from course_utils.tokenization import CharTokenizer

#: The corpora by name, each with a prompt for demos: a few characters in its style.
CORPORA = {
    "shakespeare": "Romeo.\nBut soft! what light",
    "tang_poems": "静夜思\n床前明月光，疑是地上霜。",
}


@dataclass(frozen=True)
class CorpusData:
    """A corpus read as characters: its name, the tokenizer (every distinct character,
    sorted), the two splits (1-D int64 ids, the last 10 % held out), V and a demo prompt."""

    corpus: str
    tokenizer: CharTokenizer
    train: torch.Tensor
    val: torch.Tensor
    vocab_size: int
    prompt: str


@lru_cache(maxsize=2)
def corpus_data(corpus: str = "shakespeare") -> CorpusData:
    """The characters of ``corpus``, encoded and split 90 % train / 10 % validation (cached).

    Args:
        corpus: ``"shakespeare"`` (the plays of the ``tiny-shakespeare`` data, V = 84 or so;
            the English edition) or ``"tang_poems"`` (about 19,000 Tang regulated poems,
            V = 5,840; the Chinese edition, :func:`course_utils.lab.corpus_zh.load_tang_poems`).

    Returns:
        A :class:`CorpusData`; its ids are int64 tensors of shape ``(N,)`` on the CPU.

    Raises:
        TypeError: ``corpus`` is not a str.
        ValueError: ``corpus`` is not one of :data:`CORPORA` (the message lists them).
        FileNotFoundError: the corpus file is missing (the message says how to restore it).
    """
    if not isinstance(corpus, str):
        raise TypeError(
            f"corpus must be a corpus name (a str), one of {sorted(CORPORA)}, got "
            f"{type(corpus).__name__} {corpus!r}"
        )
    if corpus not in CORPORA:
        raise ValueError(
            f"corpus={corpus!r} is not a corpus of the course; expected one of "
            f"{sorted(CORPORA)} (Shakespeare for the English edition, Tang poems for the Chinese)"
        )
    text = load_shakespeare() if corpus == "shakespeare" else load_tang_poems()
    tokenizer = CharTokenizer.from_text(text)
    train, val = train_val_split(tokenizer.encode_tensor(text))
    return CorpusData(corpus, tokenizer, train, val, len(tokenizer.vocab), CORPORA[corpus])
