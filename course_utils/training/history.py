"""What a training run records."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class History:
    """What a run recorded. Losses are mean cross-entropy in nats per token."""

    step: list[int] = field(default_factory=list)  # steps at which evaluation ran
    train_loss: list[float] = field(default_factory=list)  # evaluated on train batches
    val_loss: list[float] = field(default_factory=list)  # evaluated on validation batches
    batch_loss: list[float] = field(default_factory=list)  # every optimizer step
    seconds: float = 0.0  # wall time spent in train(), evaluations included
    tokens: int = 0  # training tokens processed (all ranks together)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0
