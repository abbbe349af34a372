"""The two decoders the training code takes, by kind: ``"tiny"`` and ``"modern"``.

* ``"tiny"``: :class:`~course_utils.model.TinyDecoder`, built from a plain
  :class:`~course_utils.config.ModelConfig` (GPT-2's recipe, notebooks 11-12);
* ``"modern"``: :class:`~course_utils.modern_model.ModernDecoder`, built from a
  :class:`~course_utils.modern_model.ModernConfig` (Llama's and Qwen3's, notebook 15).

A checkpoint records its model's kind (``"model_kind"``) next to the config's fields, so that
:func:`~course_utils.training.checkpoint.model_from_checkpoint` rebuilds the right class and
:func:`~course_utils.training.checkpoint.load_checkpoint` refuses to load one kind's weights
into the other. A checkpoint written before kinds were recorded holds a TinyDecoder. The
training command picks the kind with ``--model`` (:func:`preset_config`).
"""

from __future__ import annotations

from dataclasses import fields

from torch import nn

from course_utils.config import ModelConfig, TrainConfig, get_config
from course_utils.model import TinyDecoder
from course_utils.modern_model import ModernConfig, ModernDecoder

#: The kinds, in the order the command line lists them.
MODEL_KINDS = ("tiny", "modern")
#: The class of each kind's model, and of its config.
DECODER_CLASSES: dict[str, type[nn.Module]] = {"tiny": TinyDecoder, "modern": ModernDecoder}
CONFIG_CLASSES: dict[str, type[ModelConfig]] = {"tiny": ModelConfig, "modern": ModernConfig}
#: The kind of a checkpoint that records none (written before ModernDecoder had checkpoints).
DEFAULT_KIND = "tiny"


def model_kind(model: object) -> str | None:
    """``"tiny"`` for a TinyDecoder, ``"modern"`` for a ModernDecoder, None for anything else."""
    for kind, cls in DECODER_CLASSES.items():
        if isinstance(model, cls):
            return kind
    return None


def config_class(kind: str) -> type[ModelConfig]:
    """ModelConfig for ``"tiny"``, ModernConfig for ``"modern"``.

    Raises:
        ValueError: ``kind`` is not one of :data:`MODEL_KINDS`.
    """
    _check_model_kind(kind)
    return CONFIG_CLASSES[kind]


def describe_kind(kind: str) -> str:
    """E.g. ``"a modern model (ModernDecoder, ModernConfig)"``."""
    return f"a {kind} model ({DECODER_CLASSES[kind].__name__}, {config_class(kind).__name__})"


def build_decoder(config: ModelConfig) -> TinyDecoder | ModernDecoder:
    """The decoder of ``config``'s kind: a ModernDecoder for a ModernConfig, else a TinyDecoder.

    Raises:
        TypeError: ``config`` is not a ModelConfig (the decoders' own check names it).
    """
    for kind, cls in CONFIG_CLASSES.items():
        if type(config) is cls:
            return DECODER_CLASSES[kind](config)
    return TinyDecoder(config)  # its own check names what was passed


def preset_config(
    name: str, vocab_size: int, model: str = "tiny", **overrides
) -> tuple[ModelConfig, TrainConfig]:
    """:func:`~course_utils.config.get_config` for a model kind: the preset's sizes as a
    ModelConfig (``"tiny"``) or a ModernConfig (``"modern"``: Llama's defaults, RMSNorm,
    SwiGLU, no biases, an untied head; its fields as overrides, e.g. ``n_kv_heads=2``).

    Raises:
        ValueError: an unknown kind; a field of the other kind's config (``n_kv_heads`` for
            ``"tiny"``), named as such; as ``get_config`` (unknown preset, field, bad value).
    """
    _check_model_kind(model)
    _check_fields_of_kind(overrides, model)
    return get_config(name, vocab_size, config_class(model), **overrides)


def _check_model_kind(kind: object) -> None:
    """ValueError unless ``kind`` is one of :data:`MODEL_KINDS`."""
    if not isinstance(kind, str) or kind not in MODEL_KINDS:
        raise ValueError(
            f"unknown model {kind!r}; expected one of {list(MODEL_KINDS)} ('tiny': "
            "TinyDecoder, GPT-2's recipe; 'modern': ModernDecoder, Llama's recipe)"
        )


def _check_fields_of_kind(overrides: dict, kind: str) -> None:
    """ValueError for overrides that are fields of another kind's config only."""
    own = {f.name for f in fields(CONFIG_CLASSES[kind])}
    for other, cls in CONFIG_CLASSES.items():
        misplaced = sorted((set(overrides) - own) & {f.name for f in fields(cls)})
        if misplaced:
            raise ValueError(
                f"{misplaced} are fields of {cls.__name__} ({DECODER_CLASSES[other].__name__}), "
                f"not of {CONFIG_CLASSES[kind].__name__} (model={kind!r}); pass "
                f"model={other!r} (--model {other}) to train {describe_kind(other)}"
            )
