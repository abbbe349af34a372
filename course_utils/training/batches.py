"""Random training windows sampled on the device where the token stream lives."""

from __future__ import annotations

import warnings

import torch

from course_utils.checks import as_device, check_int
from course_utils.data import _gather_windows, as_token_stream
from course_utils.lab.language import tr


class DeviceBatches:
    """Random ``(input, target)`` windows sampled where the token stream lives.

    The stream is copied to ``device`` once; every :meth:`sample` draws the window starts
    with a seeded ``torch.Generator`` on that device and gathers the windows there, so no
    batch crosses the host-device link and nothing waits for the device.

    With several processes (DDP), every rank draws the same ``world_size * batch_size``
    starts and keeps its own slice of ``batch_size``: together the ranks see exactly the
    batch one process with ``world_size * batch_size`` windows would see, and one
    generator state describes every rank (so a checkpoint resumes exactly).

    On the CPU the windows are those of :func:`course_utils.data.get_batch` with a
    generator seeded the same way, so CPU runs reproduce exactly.

    Args:
        data: 1-D integer token stream ``(N,)``, on any device (any integer dtype, numpy
            and lists too; kept as int64).
        block_size: window length T.
        batch_size: windows per rank, B.
        device: where the stream is kept and the batches are made.
        seed: seeds :attr:`generator`.
        rank, world_size: this process's slice of the global batch.
        name: what to call ``data`` in error messages (e.g. ``"val"``).

    Raises:
        ValueError: ``data`` is not 1-D, is too short for one window, a size is below 1,
            the rank is outside ``[0, world_size)``, or ``device`` is not a device name.
        TypeError: ``data`` does not hold integer ids, or a size or the seed is not an int.
        RuntimeError: a CUDA or MPS device this machine does not have.
    """

    def __init__(
        self,
        data: torch.Tensor,
        block_size: int,
        batch_size: int,
        device: torch.device | str = "cpu",
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        *,
        name: str = "data",
    ):
        data = as_token_stream(data, name)
        block_size = check_int(block_size, "block_size", minimum=1)
        batch_size = check_int(batch_size, "batch_size", minimum=1)
        seed = check_int(seed, "seed", minimum=0)
        world_size = check_int(world_size, "world_size", minimum=1)
        rank = check_int(rank, "rank")
        self._check_window(data, block_size, name)
        self._check_rank(rank, world_size)
        self.device = as_device(device)
        self.data = data.to(self.device)  # once
        self.block_size, self.batch_size = block_size, batch_size
        self.rank, self.world_size = rank, world_size
        try:
            self.generator = torch.Generator(device=self.device).manual_seed(seed)
        except RuntimeError:  # a device without its own generator: draw starts on the CPU
            self.generator = torch.Generator().manual_seed(seed)

    @staticmethod
    def _check_window(data: torch.Tensor, block_size: int, name: str) -> None:
        """ValueError when ``data`` is too short for one window of ``block_size + 1`` tokens."""
        if len(data) <= block_size:
            raise ValueError(
                f"{name} has {len(data)} tokens, need more than block_size={block_size} "
                "for one window"
            )

    @staticmethod
    def _check_rank(rank: int, world_size: int) -> None:
        """ValueError when ``rank`` is outside ``[0, world_size)``."""
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, world_size={world_size}), got {rank}")

    def sample(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(x, y)``, both int64 ``(batch_size, block_size)`` on the device, with
        ``y[:, t]`` the token after ``x[:, t]``."""
        high = len(self.data) - self.block_size
        count = self.world_size * self.batch_size
        starts = torch.randint(
            high, (count,), generator=self.generator, device=self.generator.device
        )
        if self.world_size > 1:
            starts = starts[self.rank * self.batch_size : (self.rank + 1) * self.batch_size]
        starts = starts.to(self.device, non_blocking=True)
        return _gather_windows(self.data, starts, self.block_size)

    def restore(self, state: torch.Tensor | None, fallback_seed: int) -> None:
        """Load a saved :attr:`generator` state; if it cannot be used here (written on
        another kind of device), warn and reseed with ``fallback_seed``."""
        if state is None:
            return
        try:
            self.generator.set_state(state)
        except (RuntimeError, TypeError, ValueError):
            warnings.warn(
                tr(
                    "the checkpoint's batch-sampler state does not fit a {device} generator "
                    "(written on another device?); batches continue from seed {seed} instead, "
                    "so the resumed run is not step-for-step exact"
                ).format(device=self.generator.device, seed=fallback_seed),
                stacklevel=3,
            )
            self.generator.manual_seed(fallback_seed)
