"""Configurations: the model's shape, the training run, and the named presets."""

from __future__ import annotations

import difflib
import math
from dataclasses import MISSING, dataclass, fields

from course_utils.checks import check_bool, check_choice, check_float, check_int

POSITIONAL_KINDS = ("sinusoidal", "learned", "rope")
#: What ``TrainConfig.autocast_dtype`` may ask for (see :mod:`course_utils.training.precision`).
AUTOCAST_DTYPES = ("float32", "bfloat16", "float16")
#: Warm-up steps by default, and in every preset. A run too short to finish it
#: (``max_iters <= 100``) warms up over ``max_iters // 10`` steps instead; see TrainConfig.
DEFAULT_WARMUP_ITERS = 100


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
        bias: biases in the attention and feed-forward projections (the paper, GPT-2), or
            none (nanoGPT's ``bias=False``, Llama); the LayerNorms keep theirs.
        embedding_scale: multiply the token embeddings by sqrt(d_model) (the paper, §3.4),
            or look them up unscaled (GPT-2).

    Raises:
        TypeError: a size that is not an int (a float such as ``128.0`` or ``1e3``, a bool),
            a dropout that is not a number, a ``positional`` that is not a str, or a
            ``bias`` or ``embedding_scale`` that is not a bool.
        ValueError: a size below 1, d_model not divisible by n_heads, d_model odd with
            sinusoidal positions, d_k odd with rope, ``positional`` unknown, or dropout
            outside ``[0, 1)`` (NaN included).
    """

    vocab_size: int
    block_size: int
    d_model: int
    n_heads: int
    n_layers: int
    d_ff: int | None = None
    dropout: float = 0.0
    positional: str = "sinusoidal"
    bias: bool = True
    embedding_scale: bool = True

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "d_model", "n_heads", "n_layers"):
            setattr(self, name, check_int(getattr(self, name), name, minimum=1))
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model
        self.d_ff = check_int(self.d_ff, "d_ff", minimum=1, why="None means 4 * d_model")
        self._check_heads_divide_d_model()
        self._check_positional_fits()
        self.dropout = check_float(self.dropout, "dropout", 0.0, 1.0, high_open=True)
        self.bias = check_bool(self.bias, "bias")
        self.embedding_scale = check_bool(self.embedding_scale, "embedding_scale")

    def _check_heads_divide_d_model(self) -> None:
        """ValueError unless n_heads divides d_model (d_k is a whole number)."""
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                f"d_k = d_model / n_heads must be a whole number (try n_heads in "
                f"{[h for h in range(1, self.d_model + 1) if self.d_model % h == 0]})"
            )

    def _check_positional_fits(self) -> None:
        """``positional`` is a known kind that fits the widths: sinusoidal positions need an
        even d_model, rope an even d_k."""
        check_choice(self.positional, "positional", POSITIONAL_KINDS)
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ValueError(
                f"sinusoidal positions need an even d_model, got {self.d_model}; "
                "use an even d_model or positional='learned'"
            )
        if self.positional == "rope" and self.d_k % 2:
            raise ValueError(
                f"rope rotates channel pairs: d_k must be even, got {self.d_k} "
                f"(d_model={self.d_model} / n_heads={self.n_heads}); change n_heads or d_model"
            )

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
        warmup_iters: linear warm-up steps, always ``< max_iters`` after construction. The
            default, 100 (also the presets' value), is shortened to ``max_iters // 10`` when
            the run has at most 100 steps, so that a short run (``max_iters=40``, or
            ``get_config("cpu", V, max_iters=3)``) also reaches ``learning_rate`` and decays
            instead of ending in the middle of its warm-up. Any other value that is not
            ``< max_iters`` is refused. (``dataclasses.replace(short, max_iters=5000)`` keeps
            the shortened value: pass ``warmup_iters=100`` again with it.)
        weight_decay: AdamW decay on matrices (not on biases, norms or positions).
        beta2: AdamW's second-moment decay (0.99 suits small batches).
        grad_clip: clip the global gradient norm to this (0 disables).
        eval_interval: evaluate every this many steps (and at the end).
        eval_iters: batches averaged per evaluation.
        autocast_dtype: ``"float32"`` (no autocast), ``"bfloat16"`` (mixed precision on a
            GPU: bf16, or fp16 with loss scaling on compute capability 7.x) or ``"float16"``
            (fp16 with loss scaling on every device); see :mod:`course_utils.training.precision`.
        seed: seeds the weights and the batch order, an int in ``[0, 2**63)``.

    Raises:
        TypeError: a count that is not an int (``2.5``, ``1e3``, ``True``), a rate that is not
            a number, an ``autocast_dtype`` that is not a str (``torch.bfloat16``: pass
            ``"bfloat16"``).
        ValueError: a count below 1; ``learning_rate <= 0`` or infinite; ``min_lr`` outside
            ``[0, learning_rate]``; ``warmup_iters < 0``, or ``>= max_iters`` (except the
            default 100, which is shortened); ``weight_decay`` or ``grad_clip`` negative or
            infinite; ``beta2`` outside ``[0, 1)``; NaN anywhere; ``autocast_dtype`` unknown;
            ``seed < 0``.
    """

    batch_size: int
    max_iters: int
    learning_rate: float = 1e-3
    min_lr: float = 1e-4
    warmup_iters: int = DEFAULT_WARMUP_ITERS
    weight_decay: float = 0.1
    beta2: float = 0.99
    grad_clip: float = 1.0
    eval_interval: int = 250
    eval_iters: int = 20
    autocast_dtype: str = "float32"
    seed: int = 1337

    def __post_init__(self) -> None:
        for name in ("batch_size", "max_iters", "eval_interval", "eval_iters"):
            setattr(self, name, check_int(getattr(self, name), name, minimum=1))
        self.learning_rate = check_float(
            self.learning_rate,
            "learning_rate",
            0.0,
            math.inf,
            low_open=True,
            high_open=True,
            why="a negative rate climbs the loss; typical: 1e-4 to 1e-3",
        )
        self.min_lr = check_float(
            self.min_lr,
            "min_lr",
            0.0,
            self.learning_rate,
            why=f"the end of the decay, at most learning_rate={self.learning_rate}",
        )
        self._check_warmup()
        for name, why in (
            ("weight_decay", "0 disables it; typical: 0.1"),
            ("grad_clip", "0 disables clipping; typical: 1.0"),
        ):
            value = check_float(getattr(self, name), name, 0.0, math.inf, high_open=True, why=why)
            setattr(self, name, value)
        self.beta2 = check_float(
            self.beta2, "beta2", 0.0, 1.0, high_open=True, why="AdamW's second-moment decay"
        )
        check_choice(self.autocast_dtype, "autocast_dtype", AUTOCAST_DTYPES)
        self.seed = check_int(self.seed, "seed", minimum=0, maximum=2**63 - 1)

    def _check_warmup(self) -> None:
        """warmup_iters: an int in ``[0, max_iters)``. The default (100) is the one value that
        is adapted rather than refused: a run of at most 100 steps warms up over
        ``max_iters // 10`` steps (0 for fewer than 10), the proportion the error below
        suggests for any other value."""
        self.warmup_iters = check_int(self.warmup_iters, "warmup_iters", minimum=0)
        if self.warmup_iters < self.max_iters:
            return
        if self.warmup_iters == DEFAULT_WARMUP_ITERS:
            self.warmup_iters = self.max_iters // 10
            return
        raise ValueError(
            f"warmup_iters must be < max_iters={self.max_iters}, got {self.warmup_iters}: "
            "the learning rate would never reach learning_rate nor decay; use e.g. "
            f"warmup_iters={self.max_iters // 10}"
        )


# Named presets for character-level Shakespeare. `vocab_size` comes from the data.
# They use rotary positions: with the baby settings on this corpus, over three seeds, RoPE
# reached a validation loss of 1.796 ± 0.014 nats/char where the paper's additive sinusoidal
# table reached 1.933 ± 0.010 (assets/runs/positional-*.json, each written by
# `python -m course_utils.measure.record --config baby --positional KIND --seed N --threads 1`).
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
    # Notebook 12 on a CPU: a smaller baby (3 layers, d_model 96) at a higher learning rate,
    # 1200 steps: about as low a loss as the baby's 4 layers and 128 at 1e-3, in half the time
    # (how long, on which CPU and under which load: assets/runs/cpu-cpu.json, `make rerecord`).
    "cpu": {
        "model": {**_BABY_MODEL, "d_model": 96, "n_layers": 3},
        "train": {**_BABY_TRAIN, "max_iters": 1200, "eval_interval": 300, "learning_rate": 3e-3},
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


def get_config(
    name: str, vocab_size: int, config_class: type[ModelConfig] | None = None, **overrides
) -> tuple[ModelConfig, TrainConfig]:
    """Build the model and training configs of a named preset.

    Args:
        name: one of ``PRESETS`` (``"cpu"``, ``"baby"``, ``"gpu"``).
        vocab_size: V of the tokenizer in use.
        config_class: the model config to build, :class:`ModelConfig` (None, the default:
            TinyDecoder's) or a subclass such as
            :class:`~course_utils.modern_model.ModernConfig`, whose own defaults fill the
            fields the preset does not set (Llama's recipe for today's decoder; see
            :func:`course_utils.training.model_kinds.preset_config`, by kind).
        **overrides: any field of either config, e.g. ``max_iters=100`` (and of
            ``config_class``, e.g. ``n_kv_heads=2`` for a ModernConfig).

    Raises:
        ValueError: unknown preset name or unknown override field.
        TypeError: ``config_class`` is not ModelConfig or a subclass of it.
    """
    _check_preset(name)
    config_class = _check_config_class(config_class)
    model_fields = {f.name for f in fields(config_class)}
    train_fields = {f.name for f in fields(TrainConfig)}
    _check_overrides(overrides, model_fields | train_fields)
    model_kwargs = {**PRESETS[name]["model"], "vocab_size": vocab_size}
    train_kwargs = dict(PRESETS[name]["train"])
    for key, value in overrides.items():
        (model_kwargs if key in model_fields else train_kwargs)[key] = value
    return config_class(**model_kwargs), TrainConfig(**train_kwargs)


def with_defaults(saved: dict, config_class: type, names=None) -> dict:
    """``saved`` (a config as a dict, from a checkpoint or a record) with every field of
    ``config_class`` it lacks, among ``names`` (default: all), at that field's default: a field
    added to the course after ``saved`` was written had its default's behaviour then."""
    defaults = {f.name: f.default for f in fields(config_class) if f.default is not MISSING}
    wanted = defaults if names is None else [n for n in names if n in defaults]
    return {**{n: defaults[n] for n in wanted if n not in saved}, **saved}


def _check_config_class(config_class: object) -> type[ModelConfig]:
    """``config_class`` (None: ModelConfig); TypeError unless ModelConfig or a subclass."""
    if config_class is None:
        return ModelConfig
    if not (isinstance(config_class, type) and issubclass(config_class, ModelConfig)):
        raise TypeError(
            f"config_class must be ModelConfig or a subclass of it (ModernConfig), got "
            f"{config_class!r}; to pick a model by name use "
            "course_utils.training.model_kinds.preset_config(name, vocab_size, model='modern')"
        )
    return config_class


def _check_preset(name: object) -> None:
    """ValueError unless ``name`` is one of ``PRESETS``."""
    if not isinstance(name, str) or name not in PRESETS:
        raise ValueError(f"unknown config {name!r}; expected one of {sorted(PRESETS)}")


def _check_overrides(overrides: dict, known: set[str]) -> None:
    """ValueError for an override that is no config field, with the closest field as a hint."""
    unknown = set(overrides) - known
    if unknown:
        valid = sorted(known)
        guesses = {u: difflib.get_close_matches(u, valid, n=1) for u in sorted(unknown)}
        hint = "; ".join(f"{u!r} -> {g[0]!r}?" for u, g in guesses.items() if g)
        raise ValueError(
            f"unknown config fields {sorted(unknown)}; valid fields are {valid}"
            + (f" (did you mean: {hint})" if hint else "")
        )
