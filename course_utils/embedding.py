"""Token embedding: a lookup table scaled by sqrt(d_model) (Vaswani et al. 2017, §3.4)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.checks import check_bool, check_int

_trusted_depth = 0


@contextlib.contextmanager
def trusted_token_ids() -> Iterator[None]:
    """Inside this block :func:`check_token_ids` checks the dtype only, not the value range.

    The range check reads the smallest and largest id back from the device, which on a GPU
    stalls the host once per call. :func:`course_utils.training.train` checks its whole token
    streams once up front, then runs the loop inside this block. (Under ``torch.compile``
    the range check is skipped too: it would break the compiled graph.)
    """
    global _trusted_depth
    _trusted_depth += 1
    try:
        yield
    finally:
        _trusted_depth -= 1


def token_ids_trusted() -> bool:
    """True inside :func:`trusted_token_ids` (or under ``torch.compile``): value checks that
    would read back from the device are skipped."""
    return bool(_trusted_depth) or torch.compiler.is_compiling()


def check_token_ids(ids: torch.Tensor, vocab_size: int, name: str = "token ids") -> None:
    """Raise a clear error unless ``ids`` is an integer tensor with values in ``[0, vocab_size)``.

    Inside :func:`trusted_token_ids` only the type and dtype are checked. Any integer dtype
    passes (``uint8``, ``uint16`` and ``int32`` included): :func:`as_token_ids` converts them.

    Raises:
        TypeError: ``ids`` is not a tensor, or holds floats, bools or complex numbers.
        ValueError: an id is negative or ``>= vocab_size``.
    """
    if not isinstance(ids, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor, got {type(ids).__name__}; convert with "
            "torch.tensor(ids)"
        )
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise TypeError(
            f"{name} must be an integer tensor (torch.long), got dtype {ids.dtype}; "
            f"convert with {name if name.isidentifier() else 'ids'}.long()"
        )
    if token_ids_trusted():
        return
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        low, high = int(ids.min()), int(ids.max())
        hint = "was the text encoded with a different tokenizer?"
        if low < 0 and (ids == -100).any():
            hint = (
                "-100 is F.cross_entropy's ignore_index (padding to skip); it is valid in "
                "targets, never in the input ids"
            )
        raise ValueError(
            f"{name} must be in [0, vocab_size={vocab_size}), got min {low} and max {high}; {hint}"
        )


def as_token_ids(ids: object, vocab_size: int, name: str = "token ids") -> torch.Tensor:
    """``ids`` as a checked ``torch.long`` tensor.

    Any integer dtype is converted (``uint8`` would otherwise be read by indexing as a
    boolean mask; ``uint16`` comes from nanoGPT-style ``.bin`` memmaps), and so are numpy
    arrays and Python lists of ints. Floats and bools are refused.

    Raises:
        TypeError / ValueError: as :func:`check_token_ids`.
    """
    ids = _check_tensor_like(ids, name)
    if not (ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool):
        ids = ids.long()  # uint16 and friends have no min/max kernels: convert first
    check_token_ids(ids, vocab_size, name)
    return ids


def _check_tensor_like(ids: object, name: str) -> torch.Tensor:
    """``ids`` as a tensor (numpy arrays and lists converted); text is refused."""
    if isinstance(ids, torch.Tensor):
        return ids
    if isinstance(ids, str | bytes):
        raise TypeError(
            f"{name} must be integer ids, got {type(ids).__name__}; encode the text first"
        )
    try:
        return torch.as_tensor(np.asarray(ids))
    except (TypeError, ValueError, RuntimeError) as error:
        raise TypeError(
            f"{name} must be a tensor of integer ids, got {type(ids).__name__}: {error}"
        ) from None


class TokenEmbedding(nn.Module):
    """Look up a learned vector for each token id and multiply it by sqrt(d_model).

    Looking up row ``i`` of the table ``W`` equals ``one_hot(i) @ W``; the lookup is just
    the fast way to do that product. The paper multiplies by sqrt(d_model) (§3.4) without
    giving a reason; the usual reading, that it makes embeddings as large as the positional
    table, holds only for a table initialised with std about 1/sqrt(d_model). This table
    starts from N(0, 0.02), so a scaled entry has std 0.02 * sqrt(d_model) (about 0.1 for
    d_model = 24, 0.45 for 512), below the sinusoidal table's entries in [-1, 1] (RMS
    1/sqrt(2)). With weight tying the same ``W`` is also the output layer.

    Args:
        vocab_size: V, number of distinct tokens.
        d_model: C, width of each vector.
        scale: multiply by sqrt(d_model) (the paper) or not (GPT-2).

    Shapes:
        ids ``(B, T)`` of any integer dtype (converted to int64) -> ``(B, T, d_model)`` float.

    Raises:
        TypeError / ValueError: from :func:`check_token_ids` on bad ids (floats, bools, ids
            outside ``[0, vocab_size)``); a size that is not a positive int; a ``scale`` that
            is not a bool.
    """

    def __init__(self, vocab_size: int, d_model: int, scale: bool = True):
        super().__init__()
        self.vocab_size = check_int(vocab_size, "vocab_size", minimum=1)
        self.d_model = check_int(d_model, "d_model", minimum=1)
        self.scale = math.sqrt(self.d_model) if check_bool(scale, "scale") else 1.0
        self.weight = nn.Parameter(torch.empty(self.vocab_size, self.d_model))
        nn.init.normal_(self.weight, mean=0.0, std=0.02)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        ids = as_token_ids(ids, self.vocab_size)  # any integer dtype -> long
        # The row lookup weight[ids], through PyTorch's embedding kernel: the same rows, and a
        # backward that sums each row's gradients faster than indexing's (2x on a CPU).
        return F.embedding(ids, self.weight) * self.scale  # (B, T) -> (B, T, C)

    def extra_repr(self) -> str:
        return f"vocab_size={self.vocab_size}, d_model={self.d_model}, scale={self.scale:.3f}"
