"""A checkpoint's checksum: SHA-256 of its content, independent of the file's bytes.

:func:`~course_utils.training.checkpoint.save_checkpoint` stores it under ``"checksum"``;
:func:`~course_utils.training.checkpoint.load_checkpoint` recomputes it and refuses a file whose
content no longer matches (a disk or copy error, a partial download).
"""

from __future__ import annotations

import hashlib

import torch

#: The checksum's algorithm and what it covers, stored next to the digest.
_CHECKSUM_KIND = "sha256 of every tensor's dtype, shape and bytes and every value, keys sorted"


def payload_sha256(state: object) -> str:
    """SHA-256 (hex) of a checkpoint's content, whatever the file's bytes or the device.

    Tensors contribute their dtype, shape and raw bytes (moved to the CPU, contiguous);
    dicts their items in sorted key order; lists and tuples their items in order; other
    values (str, int, float, bool, None) their type and ``repr``. The ``"checksum"`` entry
    itself is left out. Two states hash the same exactly when every tensor is bit-identical
    and every other value equal.
    """
    digest = hashlib.sha256()
    if isinstance(state, dict):
        state = {key: value for key, value in state.items() if key != "checksum"}
    _feed(state, digest)
    return digest.hexdigest()


def _feed(value: object, digest) -> None:
    if isinstance(value, torch.Tensor):
        flat = value.detach().to("cpu").contiguous().reshape(-1)
        digest.update(f"tensor {value.dtype} {tuple(value.shape)}:".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    elif isinstance(value, dict):
        keys = sorted(value, key=repr)
        digest.update(f"dict {len(keys)}:".encode())
        for key in keys:
            _feed(key, digest)
            _feed(value[key], digest)
    elif isinstance(value, list | tuple):
        digest.update(f"{type(value).__name__} {len(value)}:".encode())
        for item in value:
            _feed(item, digest)
    else:
        digest.update(f"{type(value).__name__} {value!r};".encode())


def _with_checksum(state: dict) -> dict:
    return {**state, "checksum": {"sha256": payload_sha256(state), "covers": _CHECKSUM_KIND}}


def _verify_checksum(state: dict, path: object) -> None:
    """ValueError when the stored checksum differs from the content; no checksum: unchecked."""
    stored = state.get("checksum")
    if stored is None:
        return  # written before checksums existed: nothing records what it should hold
    expected = stored.get("sha256") if isinstance(stored, dict) else None
    actual = payload_sha256(state)
    if expected != actual:
        raise ValueError(
            f"checkpoint {path} is damaged: its content no longer matches the checksum stored "
            f"when it was written (sha256 {str(expected)[:12]}..., now {actual[:12]}...), so "
            "some weights or settings changed on disk or in a copy; it was not loaded. Copy "
            "it again from where it came from, or train again (`make checkpoint` rebuilds the "
            "course's assets/checkpoints/baby.pt)"
        )
