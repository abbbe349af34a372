"""Attention masks: build them, check them, combine them (Vaswani et al. 2017, §3.2.3).

The course's convention is the one of ``F.scaled_dot_product_attention``: a **boolean** mask
where ``True`` means "this query may attend to this key". ``nn.MultiheadAttention`` uses the
opposite convention (``True`` = hidden), and additive float masks (``0`` / ``-inf``) are a third
one. Because a mask from the wrong convention still has the right shape, the checks below look
for its signature and refuse it with an explanation instead of silently attending to the wrong
keys:

* ``mask`` (broadcastable to ``(..., T_q, T_k)``): a self-attention mask (``T_q == T_k``) that
  hides every query's own position is an inverted mask (e.g. ``triu(1)`` instead of ``tril()``).
  So is a mask of any shape (square or not) that leaves a sequence with no visible key at all,
  or, in a batch of several sequences, hides key 0 from every query of every sequence: with the
  course's convention key 0 (the first token) is visible in causal masks and in right- or
  left-padded masks (the longest sequence of a batch is never padded), e.g. ``~padding_mask(...)``.
* a 3-D ``mask`` is refused when the scores have a head axis: ``(B, T_q, T_k)`` would broadcast
  against ``(h, T_q, T_k)`` (and ``nn.MultiheadAttention`` reads it as ``(B * h, T_q, T_k)``).
* ``key_padding_mask`` ``(B, T_k)``, ``True`` = a real token: a sequence with no real token, or
  key 0 hidden in every sequence (the course pads on the right), is an inverted padding mask.
* a 2-D ``mask`` of shape ``(B, T_k)`` when ``B == T_q`` would be read as ``(T_q, T_k)``;
  unless it is causal-like (lower-triangular) or all True, it is refused as ambiguous.
"""

from __future__ import annotations

import torch

from course_utils.checks import as_device, check_int

CONVENTIONS = (
    "The course (like F.scaled_dot_product_attention) uses True = may attend; "
    "nn.MultiheadAttention uses the opposite, True = hidden"
)


def causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Lower-triangular boolean mask, shape ``(T, T)``: query ``t`` may see keys ``0..t``.

    Raises:
        TypeError: ``size`` is not an int (a float, a bool, or a tensor such as ``x`` itself).
        ValueError: ``size`` is negative, or ``device`` is not a device name (``"gpu"``).
        RuntimeError: ``device`` is a CUDA or MPS device this machine does not have.
    """
    size = _check_length(size)
    device = None if device is None else as_device(device, "device")
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


def _check_length(size: object) -> int:
    """``size`` as an int >= 0; a tensor such as ``x`` itself is refused with the fix."""
    if isinstance(size, torch.Tensor) and size.ndim > 0:
        raise TypeError(
            f"size must be an int (the sequence length T), got a tensor of shape "
            f"{tuple(size.shape)}; pass its length, e.g. causal_mask(x.shape[-2]) for x of shape "
            "(B, T, C) or (B, h, T, d_k), or causal_mask(T)"
        )
    return check_int(size, "size", minimum=0, why="a sequence length, e.g. x.shape[1]")


def padding_mask(lengths: torch.Tensor | list[int], size: int) -> torch.Tensor:
    """Boolean key mask for right-padded sequences, shape ``(B, 1, 1, T)``.

    ``mask[b, 0, 0, j]`` is True when key ``j`` is a real token of sequence ``b``
    (``j < lengths[b]``). The two singleton axes broadcast over heads and queries.

    Raises:
        TypeError: ``size`` is not an int, or ``lengths`` are not integers (text, floats).
        ValueError: ``lengths`` is not 1-D, or a length is outside ``[0, size]``.
    """
    size = check_int(size, "size", minimum=0, why="the padded sequence length T")
    lengths = _check_lengths(lengths, size)
    return (torch.arange(size, device=lengths.device) < lengths[:, None])[:, None, None, :]


def _check_lengths(lengths: object, size: int) -> torch.Tensor:
    """``lengths`` as a 1-D integer tensor of values in ``[0, size]``."""
    try:
        lengths = torch.as_tensor(lengths)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(
            f"lengths must be integers, one per sequence (a list or a 1-D tensor), got "
            f"{lengths!r} ({type(lengths).__name__}); e.g. padding_mask([5, 3], size=5)"
        ) from None
    if lengths.dtype == torch.bool or lengths.dtype.is_floating_point or lengths.is_complex():
        raise TypeError(
            f"lengths must be integers (one per sequence), got dtype {lengths.dtype}; "
            "for a 0/1 mask of real tokens use lengths = mask.sum(dim=1)"
        )
    if lengths.ndim != 1 or (lengths < 0).any() or (lengths > size).any():
        raise ValueError(
            f"lengths must be a 1-D list of values in [0, {size}], got {lengths.tolist()}"
        )
    return lengths


def _require_bool(mask: object, name: str, shape_hint: str) -> None:
    """TypeError unless ``mask`` is a torch.bool tensor, with the conversion for each case."""
    if isinstance(mask, torch.Tensor) and mask.dtype == torch.bool:
        return
    if not isinstance(mask, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.bool tensor {shape_hint} (True = may attend), got "
            f"{type(mask).__name__}; build one with torch.tensor(..., dtype=torch.bool)"
        )
    if mask.dtype.is_floating_point:
        raise TypeError(
            f"{name} must be a torch.bool tensor {shape_hint}, got {mask.dtype}. A float mask "
            "is read as additive (0 = may attend, -inf = hidden) by some libraries and as 0/1 by "
            f"others, so the course refuses to guess: for an additive mask pass {name} == 0, "
            f"for a 0/1 mask with 1 = may attend pass {name}.bool()"
        )
    raise TypeError(
        f"{name} must be a torch.bool tensor {shape_hint} (True = may attend), got {mask.dtype} "
        f"(integers are never read as a mask). If 1 means may attend, pass {name}.bool(); "
        f"if 1 means hidden (nn.MultiheadAttention's byte masks), pass {name} == 0"
    )


def check_mask(mask: torch.Tensor, scores_shape: tuple[int, ...]) -> None:
    """Raise a clear error unless ``mask`` is boolean and broadcasts to ``scores_shape``.

    This checks the type and the shape only; :func:`combine_masks` (used by the attention
    functions) also refuses inverted and ambiguous masks.

    Raises:
        TypeError: ``mask`` is not a bool tensor (ints, uint8 and floats included).
        ValueError: ``mask`` does not broadcast to ``scores_shape`` (``(B, h, T_q, T_k)``).
    """
    _require_bool(mask, "mask", "broadcastable to (..., T_q, T_k)")
    try:
        broadcast = torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        broadcast = None
    if broadcast != torch.Size(scores_shape):
        hint = ""
        if mask.ndim == 2 and len(scores_shape) >= 3 and mask.shape[0] == scores_shape[0]:
            hint = "; this looks like a (B, T_k) padding mask: pass it as key_padding_mask="
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
            f"{tuple(scores_shape)} (B, h, T_q, T_k); use (T_q, T_k) for one mask shared by all, "
            f"or (B, 1, 1, T_k) for per-sequence padding{hint}"
        )


def _check_not_inverted(mask: torch.Tensor, scores_shape: tuple[int, ...]) -> None:
    """ValueError when ``mask`` has the signature of the True = hidden convention.

    * a self-attention mask (``T_q == T_k``) that hides every query's own position;
    * a mask (any shape) that leaves some sequence with no visible key at all;
    * in a batch of several sequences, a mask that hides key 0 from every query of every
      sequence (causal, right- and left-padded masks all show key 0: the longest sequence of a
      batch is never padded). A single sequence may be left-padded, so it is not checked.
    """
    t_q, t_k = scores_shape[-2], scores_shape[-1]
    if t_q == 0 or t_k == 0:
        return
    full = mask.expand(scores_shape)
    if t_q == t_k and not full.diagonal(dim1=-2, dim2=-1).any():
        raise ValueError(
            f"mask hides every query's own position (its diagonal is all False; mask shape "
            f"{tuple(mask.shape)}): this is the signature of an inverted mask. {CONVENTIONS}. "
            "If your mask marks hidden keys with True (e.g. torch.triu(..., diagonal=1)), pass "
            "~mask; the causal mask is course_utils.attention.causal_mask(T) (lower-triangular)"
        )
    batched = len(scores_shape) >= 3
    per_sequence = full.reshape(scores_shape[0], -1) if batched else full.reshape(1, -1)
    empty = (~per_sequence.any(dim=1)).nonzero().flatten().tolist()
    fix = (
        "If your mask marks hidden keys (or padding) with True, pass ~mask; for right-padded "
        "sequences build it with course_utils.masks.padding_mask(lengths, T) (shape "
        "(B, 1, 1, T), True = real token)"
    )
    if empty:
        where = f"sequence(s) {empty}" if batched else "the sequence"
        raise ValueError(
            f"mask (shape {tuple(mask.shape)}) leaves {where} with no visible key at all: "
            f"this is the signature of an inverted mask. {CONVENTIONS}. {fix}"
        )
    if batched and scores_shape[0] > 1 and t_k > 1 and not full[..., 0].any():
        raise ValueError(
            f"mask (shape {tuple(mask.shape)}) hides key 0 (the first token) from every query of "
            f"every sequence: this is the signature of an inverted mask, since with the course's "
            f"convention key 0 is visible in causal masks and in right- or left-padded masks "
            f"(the longest sequence is never padded). {CONVENTIONS}. {fix}"
        )


def _check_not_3d(mask: torch.Tensor, scores_shape: tuple[int, ...]) -> None:
    """ValueError for a 3-D mask when the scores have a head axis ``(B, h, T_q, T_k)``."""
    if mask.ndim != 3 or len(scores_shape) < 4:
        return
    raise ValueError(
        f"mask of shape {tuple(mask.shape)} is 3-D, which is ambiguous: it broadcasts against "
        f"(h, T_q, T_k) of the scores {tuple(scores_shape)} (B, h, T_q, T_k), not (B, T_q, T_k), "
        "and nn.MultiheadAttention reads a 3-D mask as (B * h, T_q, T_k). Pass a (T_q, T_k) mask "
        "shared by all sequences, or (B, 1, T_q, T_k) per sequence, e.g. mask[:, None]"
    )


def _check_not_ambiguous(mask: torch.Tensor, scores_shape: tuple[int, ...]) -> None:
    """ValueError for a 2-D mask that could be (T_q, T_k) or a (B, T_k) padding mask."""
    if mask.ndim != 2 or len(scores_shape) < 3:
        return
    batch, t_q = scores_shape[0], scores_shape[-2]
    if batch != t_q or mask.shape[0] != batch or batch == 1:
        return
    if bool(mask.all()) or not bool(mask.triu(1).any()):  # all True or causal-like: same reading
        return
    raise ValueError(
        f"mask of shape {tuple(mask.shape)} is ambiguous: with B == T_q == {batch} it could be a "
        "(T_q, T_k) attention mask or a (B, T_k) padding mask, and it is read as (T_q, T_k). "
        "For padding pass it as key_padding_mask= (shape (B, T_k), True = real token); for a "
        "(T_q, T_k) mask pass mask[None, None] (shape (1, 1, T_q, T_k)) to say so"
    )


def check_key_padding_mask(key_padding_mask: torch.Tensor, batch: int, t_k: int) -> None:
    """Raise unless ``key_padding_mask`` is a bool ``(B, T_k)`` mask with True = real token.

    Raises:
        TypeError: not a bool tensor.
        ValueError: wrong shape; a sequence with no real token; key 0 hidden in every sequence
            (the signature of nn.MultiheadAttention's True = padding convention).
    """
    _require_bool(key_padding_mask, "key_padding_mask", f"(B={batch}, T_k={t_k})")
    if tuple(key_padding_mask.shape) != (batch, t_k):
        raise ValueError(
            f"key_padding_mask must have shape (B={batch}, T_k={t_k}), got "
            f"{tuple(key_padding_mask.shape)}; a (B, 1, 1, T_k) mask goes in mask= instead"
        )
    empty = (~key_padding_mask.any(dim=1)).nonzero().flatten().tolist()
    if empty:
        raise ValueError(
            f"key_padding_mask marks no real token in sequence(s) {empty}: True must mean a real "
            f"token. {CONVENTIONS} (True = padding): if yours marks padding, pass "
            "~key_padding_mask, e.g. ids != pad_id"
        )
    if t_k > 1 and not key_padding_mask[:, 0].any():
        raise ValueError(
            "key_padding_mask hides key 0 in every sequence, but the course pads on the right "
            f"and marks real tokens True. {CONVENTIONS} (True = padding): if yours marks padding, "
            "pass ~key_padding_mask. For left padding pass mask=key_padding_mask[:, None, None, :]"
        )


def combine_masks(
    mask: torch.Tensor | None,
    key_padding_mask: torch.Tensor | None,
    scores_shape: tuple[int, ...],
) -> torch.Tensor | None:
    """Check ``mask`` and ``key_padding_mask`` and merge them into one bool mask.

    Args:
        mask: bool, broadcastable to ``scores_shape`` ``(..., T_q, T_k)``; True = may attend.
        key_padding_mask: bool ``(B, T_k)``, True = a real token (needs a batch axis:
            ``len(scores_shape) >= 3``).
        scores_shape: the attention scores' shape, e.g. ``(B, h, T_q, T_k)``.

    Returns:
        None when both are None, else a bool mask that broadcasts to ``scores_shape``.

    Raises:
        TypeError: a mask that is not bool (ints, uint8, floats).
        ValueError: a bad shape, an inverted mask, an ambiguous 2-D mask, or a 3-D mask for
            scores with a head axis (see module doc).
    """
    _check_masks(mask, key_padding_mask, scores_shape)
    if key_padding_mask is None:
        return mask
    extra = (1,) * (len(scores_shape) - 2)
    keys = key_padding_mask.view(
        scores_shape[0], *extra, scores_shape[-1]
    )  # (B, T_k) -> (B, 1.., T_k)
    return keys if mask is None else mask & keys


def _check_masks(mask: object, key_padding_mask: object, scores_shape: tuple[int, ...]) -> None:
    """Raise unless each mask given is bool, of a fitting shape, neither inverted nor ambiguous."""
    if mask is not None:
        _require_bool(mask, "mask", "broadcastable to (..., T_q, T_k)")
        _check_not_3d(mask, scores_shape)
        check_mask(mask, scores_shape)
        _check_not_ambiguous(mask, scores_shape)
        _check_not_inverted(mask, scores_shape)
    if key_padding_mask is None:
        return
    if len(scores_shape) < 3:
        raise ValueError(
            f"key_padding_mask (B, T_k) needs batched inputs, got scores of shape "
            f"{tuple(scores_shape)}; add a batch axis or pass mask= instead"
        )
    check_key_padding_mask(key_padding_mask, scores_shape[0], scores_shape[-1])
