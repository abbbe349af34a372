"""The small trained model the course ships: the ``baby`` preset after ``make checkpoint``.

Notebooks before 12 use it to show what *trained* attention heads do, and notebook 13 to
generate text, without training anything themselves. The weights live in
``assets/checkpoints/baby.pt``; the tokenizer is rebuilt from the corpus (a sorted character
vocabulary, so the ids are the ones the model was trained with).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import torch

from course_utils.assets import asset_path
from course_utils.data import load_shakespeare
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
        ValueError: the checkpoint's vocabulary is not the corpus's.
    """
    from course_utils.training import model_from_checkpoint

    model = model_from_checkpoint(path or asset_path(BABY_CHECKPOINT), map_location=device)
    tokenizer = shakespeare_tokenizer()
    if model.config.vocab_size != tokenizer.vocab_size:
        raise ValueError(
            f"checkpoint vocab_size={model.config.vocab_size} but the corpus has "
            f"{tokenizer.vocab_size} characters; retrain it with `make checkpoint`"
        )
    return model.eval(), tokenizer


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
        ValueError: ``text`` is empty, longer than ``block_size``, or has unknown characters.
    """
    if not 1 <= len(text) <= model.config.block_size:
        raise ValueError(
            f"text must have 1 to block_size={model.config.block_size} characters, "
            f"got {len(text)}; shorten it"
        )
    device = next(model.parameters()).device
    ids = torch.tensor([tokenizer.encode(text)], device=device)  # (1, T)
    model(ids, need_weights=True)
    maps = [block.attention.attention_weights[0] for block in model.blocks]  # n_layers x (h, T, T)
    return torch.stack(maps).float().cpu()  # (n_layers, h, T, T)
