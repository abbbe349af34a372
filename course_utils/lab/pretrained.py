"""The small trained model the course ships: the ``baby`` preset after ``make checkpoint``.

Notebooks before 12 use it to show what *trained* attention heads do, and notebook 13 to
generate text, without training anything themselves. :func:`pattern_pairs` gives the named
positions a head may attend to (the previous character, the start of the word, ...), so a
notebook can measure how much each head attends to them. The weights live in
``assets/checkpoints/baby.pt``; the tokenizer is rebuilt from the corpus (a sorted character
vocabulary, so the ids are the ones the model was trained with).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import torch

from course_utils.checks import as_device, check_int, check_text
from course_utils.data import load_shakespeare
from course_utils.lab.assets import asset_path
from course_utils.model import TinyDecoder
from course_utils.tokenization import CharTokenizer

BABY_CHECKPOINT = "checkpoints/baby.pt"


@lru_cache(maxsize=1)
def shakespeare_tokenizer() -> CharTokenizer:
    """The character tokenizer of the whole corpus (84 symbols), as the presets train with."""
    return CharTokenizer.from_text(load_shakespeare())


def load_baby(
    path: str | Path | None = None, device: torch.device | str = "cpu"
) -> tuple[TinyDecoder, CharTokenizer]:
    """The trained baby model, in eval mode, and its tokenizer.

    Args:
        path: a checkpoint file; default ``assets/checkpoints/baby.pt``.
        device: where to put the model.

    Returns:
        ``(model, tokenizer)``; ``model.config.vocab_size == tokenizer.vocab_size``.

    Raises:
        FileNotFoundError: no checkpoint there (``make checkpoint`` writes it).
        TypeError: ``path`` is not a str or Path.
        ValueError: the checkpoint's vocabulary is not the corpus's, or ``device`` is not a
            device name (``"gpu"``: use ``"cuda"``).
        RuntimeError: a CUDA or MPS device this machine does not have.
    """
    from course_utils.training import model_from_checkpoint

    device = as_device(device)
    model = model_from_checkpoint(path or asset_path(BABY_CHECKPOINT), map_location=device)
    tokenizer = shakespeare_tokenizer()
    if model.config.vocab_size != tokenizer.vocab_size:
        raise ValueError(
            f"checkpoint vocab_size={model.config.vocab_size} but the corpus has "
            f"{tokenizer.vocab_size} characters; retrain it with `make checkpoint`"
        )
    return model.eval(), tokenizer


def _check_model_and_tokenizer(model: object, tokenizer: object, function: str) -> None:
    """TypeError unless ``model`` is a TinyDecoder and ``tokenizer`` has an ``encode``
    method; the message recalls the argument order ``(model, tokenizer, text)``."""
    order = f"the order is {function}(model, tokenizer, text)"
    swapped = isinstance(tokenizer, TinyDecoder)
    if not isinstance(model, TinyDecoder):
        hint = "; the model and the tokenizer look swapped" if swapped else ""
        raise TypeError(
            f"model must be a TinyDecoder, got {type(model).__name__}{hint}; {order}, e.g. "
            "model, tokenizer = load_baby()"
        )
    if isinstance(tokenizer, torch.nn.Module | str) or not callable(
        getattr(tokenizer, "encode", None)
    ):
        raise TypeError(
            f"tokenizer must be a tokenizer with an encode method (a CharTokenizer), got "
            f"{type(tokenizer).__name__}; {order}, e.g. model, tokenizer = load_baby()"
        )


@torch.no_grad()
def attention_maps(model: TinyDecoder, tokenizer: CharTokenizer, text: str) -> torch.Tensor:
    """Every head's attention weights on ``text``.

    Args:
        model: a :class:`TinyDecoder` (put in eval mode by the caller for deterministic maps).
        tokenizer: its tokenizer.
        text: 1 to ``block_size`` characters of the model's vocabulary.

    Returns:
        float32 ``(n_layers, n_heads, T, T)``: row ``i`` of ``[layer, head]`` is how query
        position ``i`` spreads its attention over key positions ``0..i``.

    Raises:
        TypeError: ``model`` is not a TinyDecoder or ``tokenizer`` has no ``encode`` (the
            arguments swapped, say); ``text`` is not a str.
        ValueError: ``text`` is empty, longer than ``block_size``, or has unknown characters.
    """
    _check_model_and_tokenizer(model, tokenizer, "attention_maps")
    check_text(text, "text")
    if not text:
        raise ValueError(
            f"text is empty (''); it must have 1 to block_size={model.config.block_size} "
            "characters, so at least one character, e.g. attention_maps(model, tokenizer, 'To be')"
        )
    if len(text) > model.config.block_size:
        raise ValueError(
            f"text must have 1 to block_size={model.config.block_size} characters, "
            f"got {len(text)}; shorten it"
        )
    device = next(model.parameters()).device
    ids = torch.tensor([tokenizer.encode(text)], device=device)  # (1, T)
    model(ids, need_weights=True)
    maps = [block.attention.attention_weights[0] for block in model.blocks]  # n_layers x (h, T, T)
    return torch.stack(maps).float().cpu()  # (n_layers, h, T, T)


#: The named positions a head may attend to, for :func:`pattern_pairs`.
HEAD_PATTERNS = ("itself", "previous character", "start of the word", "last space")


def pattern_pairs(text: str) -> dict[str, list[tuple[int, int]]]:
    """The (query, key) position pairs of each pattern in :data:`HEAD_PATTERNS` in ``text``.

    * ``itself``: ``(i, i)``; ``previous character``: ``(i, i - 1)``, for i >= 1.
    * ``start of the word``: ``(i, s)`` for a letter i whose word starts at s <= i - 2 (a
      word is a run of letters). Nearer starts are left out: they would be "itself" or
      "previous character" again.
    * ``last space``: ``(i, s)`` with s the most recent space before i, when s <= i - 2
      (same reason).

    Raises:
        TypeError: ``text`` is not a str.
    """
    check_text(text, "text")
    pairs: dict[str, list[tuple[int, int]]] = {name: [] for name in HEAD_PATTERNS}
    word_start, last_space = 0, None
    for i, char in enumerate(text):
        if char.isalpha() and (i == 0 or not text[i - 1].isalpha()):
            word_start = i
        if i >= 1:
            pairs["itself"].append((i, i))
            pairs["previous character"].append((i, i - 1))
        if char.isalpha() and i - word_start >= 2:
            pairs["start of the word"].append((i, word_start))
        if last_space is not None and i - last_space >= 2:
            pairs["last space"].append((i, last_space))
        if char == " ":
            last_space = i
    return pairs


def corpus_windows(text: str, n: int, length: int, seed: int = 0) -> list[str]:
    """``n`` windows of ``length`` characters from ``text`` at random places (seeded), e.g.
    to average a head's measured weights over more than one sentence.

    Raises:
        TypeError: ``text`` is not a str, or ``n``, ``length`` or ``seed`` is not an int.
        ValueError: ``n`` or ``length`` below 1, ``seed < 0``, or ``text`` is not longer than
            ``length``.
    """
    check_text(text, "text")
    n = check_int(n, "n", minimum=1, why="the number of windows")
    length = check_int(length, "length", minimum=1, why="characters per window")
    seed = check_int(seed, "seed", minimum=0)
    if len(text) <= length:
        raise ValueError(f"text has {len(text)} characters; it must be longer than length={length}")
    generator = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, len(text) - length, (n,), generator=generator).tolist()
    return [text[start : start + length] for start in starts]
