"""Every field of ``transformers``' LlamaConfig, Qwen3Config and GPT2Config, classified.

:func:`course_utils.hf_weights.from_transformers` converts a model only when the course
computes the same function. Each field of the configuration (``config.to_dict()``, checked
with transformers 5.24) is one of three kinds:

* **reproduced**: the course's :class:`~course_utils.modern_model.ModernConfig` has the same
  switch (``attention_bias`` becomes ``bias``, ``scale_attn_weights`` becomes
  ``scale_scores``...). Some are reproduced for some values only (``hidden_act="silu"``);
  another value is refused.
* **irrelevant** to the function computed from token ids to logits, with the reason
  (``use_cache`` changes the speed of ``generate``, ``attn_pdrop`` acts in training only, the
  converted model being in eval mode).
* **refused** unless off: a feature the course does not implement (sliding windows,
  cross-attention) is accepted only at the value that switches it off.

A field that is in no table (a new release of ``transformers``, a key added by hand) is
refused by name: nothing is converted on a guess. ``tests/test_hf_fields.py`` enumerates
every field of each class and fails on any that is not classified.

The tensors are checked the same way (:func:`check_state_dict`): every tensor the config
needs must be there, in its shape, and nothing else (a layer beyond ``n_layers``, a
classification head); each one that is not is named, with its layer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import torch

from course_utils.checks import check_instance

REPRODUCED, IRRELEVANT, REFUSED = "reproduced", "irrelevant", "refused"


@dataclass(frozen=True)
class Field:
    """How the course treats one configuration field.

    Attributes:
        kind: ``"reproduced"``, ``"irrelevant"`` or ``"refused"``.
        note: reproduced: the course setting it becomes; irrelevant: why it does not change
            the function; refused: what the course supports instead.
        accepts: ``accepts(value, config)`` is True for the values the course computes
            (None: every value). A refused field accepts only its "off" value.
    """

    kind: str
    note: str
    accepts: Callable[[object, object], bool] | None = None


def _is(*values: object) -> Callable[[object, object], bool]:
    return lambda value, config: any(value is v or value == v for v in values)


def _rope_is_plain(value: object, config: object) -> bool:
    """Plain RoPE (Su et al. 2021): ``rope_type="default"`` and ``rope_theta`` only."""
    rope = dict(value or {})
    return rope.get("rope_type", "default") == "default" and set(rope) <= {
        "rope_type",
        "rope_theta",
    }


def _pad_in_vocab(value: object, config: object) -> bool:
    return value is None or (isinstance(value, int) and 0 <= value < config.vocab_size)


def _reproduced(note: str, accepts=None) -> Field:
    return Field(REPRODUCED, note, accepts)


def _irrelevant(note: str) -> Field:
    return Field(IRRELEVANT, note)


def _refused(note: str, accepts) -> Field:
    return Field(REFUSED, note, accepts)


_OUTPUT = "chooses what the forward pass returns, not the logits"
_GENERATE = "read by generate() and tokenizers, not by the forward pass"
_TRAINING = "dropout acts in training only: the converted model is in eval mode (dropout=0)"

#: PretrainedConfig's own fields and the ones every causal LM here shares.
COMMON = {
    "_name_or_path": _irrelevant("where the config was loaded from"),
    "architectures": _irrelevant("a label of the saved model class"),
    "transformers_version": _irrelevant("the version that saved the config"),
    "model_type": _reproduced(
        "the model family: 'llama', 'qwen3' or 'gpt2'", _is("llama", "qwen3", "gpt2")
    ),
    "output_attentions": _irrelevant(_OUTPUT),
    "output_hidden_states": _irrelevant(_OUTPUT),
    "return_dict": _irrelevant(_OUTPUT),
    "use_cache": _irrelevant("the KV cache makes generate() faster, same logits"),
    "dtype": _irrelevant("a loading default; from_transformers keeps the weights' own dtype"),
    "chunk_size_feed_forward": _irrelevant("not read by these models' forward pass"),
    "is_encoder_decoder": _irrelevant("read by generate(); these classes are decoders"),
    "id2label": _irrelevant("labels of sequence-classification heads, not of the LM head"),
    "label2id": _irrelevant("labels of sequence-classification heads, not of the LM head"),
    "problem_type": _irrelevant("the loss of sequence-classification heads"),
    "initializer_range": _irrelevant("the random init; the weights are copied"),
    "bos_token_id": _irrelevant(_GENERATE),
    "eos_token_id": _irrelevant(_GENERATE),
    "tie_word_embeddings": _reproduced("tie_embeddings"),
    "vocab_size": _reproduced("vocab_size"),
}

#: Llama's fields (Touvron et al. 2023), transformers' LlamaConfig.
LLAMA = {
    **COMMON,
    "hidden_size": _reproduced("d_model"),
    "intermediate_size": _reproduced("d_ff (SwiGLU's hidden width)"),
    "num_hidden_layers": _reproduced("n_layers"),
    "num_attention_heads": _reproduced("n_heads"),
    "num_key_value_heads": _reproduced("n_kv_heads"),
    "head_dim": _reproduced("head_dim (d_k)"),
    "max_position_embeddings": _reproduced("block_size (and RoPE's table length)"),
    "rms_norm_eps": _reproduced("norm_eps"),
    "attention_bias": _reproduced("bias (q, k, v and o projections)"),
    "mlp_bias": _reproduced("mlp_bias (gate, up and down projections)"),
    "pad_token_id": _reproduced(
        "padding_idx (that embedding row gets no gradient); a token id below vocab_size",
        _pad_in_vocab,
    ),
    "hidden_act": _reproduced(
        "SwiGLU's gate activation: the course supports hidden_act='silu' (or 'swish')",
        _is("silu", "swish"),
    ),
    "rope_parameters": _reproduced(
        "rope_base; the course implements plain RoPE: rope_type='default' with rope_theta "
        "only (no linear, dynamic, yarn, longrope or llama3 scaling, no partial rotation)",
        _rope_is_plain,
    ),
    "attention_dropout": _irrelevant(_TRAINING),
    "pretraining_tp": _irrelevant("not read by LlamaForCausalLM in transformers 5"),
}

_FULL = "full_attention"

#: Qwen3's fields: Llama's without mlp_bias and pretraining_tp, plus the sliding window.
QWEN3 = {
    **{k: v for k, v in LLAMA.items() if k not in ("mlp_bias", "pretraining_tp")},
    "layer_types": _refused(
        "every layer 'full_attention' (the course has no sliding-window attention)",
        lambda value, config: value is None or all(kind == _FULL for kind in value),
    ),
    "use_sliding_window": _irrelevant(
        "only builds layer_types and sliding_window, which are checked themselves (with "
        "num_hidden_layers <= max_window_layers every layer is still full attention)"
    ),
    "sliding_window": _refused(
        "no sliding window: None, or a value that no layer uses (layer_types all 'full_attention')",
        lambda value, config: value is None or all(k == _FULL for k in config.layer_types or ()),
    ),
    "max_window_layers": _irrelevant("only builds layer_types, which is checked itself"),
}

_SUMMARY = "used by GPT2DoubleHeadsModel's classification head only"

#: GPT-2's fields (Radford et al. 2019), transformers' GPT2Config.
GPT2 = {
    **COMMON,
    "n_embd": _reproduced("d_model"),
    "n_layer": _reproduced("n_layers"),
    "n_head": _reproduced("n_heads"),
    "n_positions": _reproduced("block_size (the learned position table's rows)"),
    "n_inner": _reproduced("d_ff (None: 4 * n_embd)"),
    "layer_norm_epsilon": _reproduced("norm_eps"),
    "activation_function": _reproduced(
        "the MLP's activation: the course supports 'gelu_new' and 'gelu_pytorch_tanh' "
        "(feed_forward='gelu_tanh') and 'gelu' (feed_forward='gelu')",
        _is("gelu_new", "gelu_pytorch_tanh", "gelu"),
    ),
    "scale_attn_weights": _reproduced("scale_scores (divide q . k by sqrt(d_k))"),
    "scale_attn_by_inverse_layer_idx": _reproduced("scale_by_layer (divide by layer + 1)"),
    "reorder_and_upcast_attn": _irrelevant(
        "only the rounding of transformers' eager attention (q . k in float32 with the "
        "scale folded in); the function is the same, and sdpa ignores it"
    ),
    "add_cross_attention": _refused(
        "add_cross_attention=False: the course's decoder has no cross-attention (notebook "
        "14's encoder-decoder has)",
        _is(False),
    ),
    "pad_token_id": _irrelevant("GPT-2's embedding has no padding_idx; " + _GENERATE),
    "resid_pdrop": _irrelevant(_TRAINING),
    "embd_pdrop": _irrelevant(_TRAINING),
    "attn_pdrop": _irrelevant(_TRAINING),
    "summary_type": _irrelevant(_SUMMARY),
    "summary_use_proj": _irrelevant(_SUMMARY),
    "summary_activation": _irrelevant(_SUMMARY),
    "summary_proj_to_labels": _irrelevant(_SUMMARY),
    "summary_first_dropout": _irrelevant(_SUMMARY),
    # keys of the released config.json that GPT2Config keeps as extra attributes
    "n_ctx": _irrelevant("the old name of n_positions in the released config.json, unread"),
    "task_specific_params": _irrelevant("generation settings for pipelines"),
}

#: The classification of each supported ``model_type``.
FIELDS = {"llama": LLAMA, "qwen3": QWEN3, "gpt2": GPT2}


def check_fields(hf_config: object) -> str:
    """The config's ``model_type``, once every field is known and every value computable.

    Raises:
        ValueError: an unsupported ``model_type``; a field with a value the course does not
            reproduce (named with its value and what the course supports); a field in no table.
    """
    kind = _check_model_type(hf_config)
    table = FIELDS[kind]
    cls = type(hf_config).__name__
    for name, value in hf_config.to_dict().items():
        field = table.get(name)
        if field is None:
            raise ValueError(
                f"{cls} field {name}={value!r} is not one the course knows, so it cannot "
                "say whether it changes the function computed; if it does not, delete it "
                f"(del config.{name}) and convert again"
            )
        if field.accepts is not None and not field.accepts(value, hf_config):
            raise ValueError(
                f"{cls} field {name}={value!r} is not reproduced by the course's decoder; "
                f"supported: {field.note}"
            )
    return kind


def _check_model_type(hf_config: object) -> str:
    """``model_type`` if it is a supported one and ``hf_config`` looks like a config."""
    kind = getattr(hf_config, "model_type", None)
    if callable(getattr(hf_config, "state_dict", None)) and hasattr(hf_config, "config"):
        raise ValueError(
            f"hf_config is a {type(hf_config).__name__}, a model, not its configuration: pass "
            "its .config (config_from_transformers(model.config)), or convert the whole model "
            "with from_transformers(model)"
        )
    if kind not in FIELDS or not callable(getattr(hf_config, "to_dict", None)):
        raise ValueError(
            f"model_type must be 'llama', 'qwen3' or 'gpt2' (a LlamaConfig, Qwen3Config or "
            f"GPT2Config), got {kind!r} from {type(hf_config).__name__}"
        )
    return kind


def counts(kind: str) -> dict[str, int]:
    """How many fields of ``model_type`` ``kind`` are reproduced, irrelevant and refused."""
    tally = {REPRODUCED: 0, IRRELEVANT: 0, REFUSED: 0}
    for field in FIELDS[kind].values():
        tally[field.kind] += 1
    return tally


#: The class with the language-model head, per ``model_type``: what the conversion takes.
HEAD_CLASSES = {"llama": "LlamaForCausalLM", "qwen3": "Qwen3ForCausalLM", "gpt2": "GPT2LMHeadModel"}


def check_lm_head(hf_model: object, kind: str, tied: bool) -> None:
    """ValueError when ``hf_model`` is a base model, with no head at all (``LlamaModel``
    instead of ``LlamaForCausalLM``): no LM head (``lm_head``, the ``(vocab_size,
    hidden_size)`` matrix from hidden states to logits). A GPT-2 whose head is tied needs none:
    its head is ``wte``, which the base ``GPT2Model`` holds (as the hub's file does). A model
    with another head (a classifier) is left to :func:`check_state_dict`, which names it."""
    is_base = getattr(hf_model, "base_model", None) is hf_model  # transformers' own notion
    if not is_base or (kind == "gpt2" and tied):
        return
    wanted = HEAD_CLASSES[kind]
    raise ValueError(
        f"hf_model is a {type(hf_model).__name__}, which has no LM head (lm_head, the "
        "(vocab_size, hidden_size) matrix that turns hidden states into logits), so there "
        f"are no logits to reproduce; pass {wanted} instead, e.g. {wanted}.from_pretrained(name) "
        f"or {wanted}(config): the same model with its head"
    )


def check_converted_config(config: object) -> None:
    """TypeError unless ``config`` is the course's ModernConfig (``transformers``' own config
    is converted first, with ``config_from_transformers``)."""
    from course_utils.modern_model import ModernConfig

    fix = "the course's config; from a transformers config: config_from_transformers(hf_config)"
    check_instance(config, "config", ModernConfig, fix)


def check_state_dict(
    state_dict: dict,
    expected: dict[str, tuple[int, ...]],
    config,
    tied: tuple[str, str] | None = None,
    ignored: re.Pattern | None = None,
) -> None:
    """Raise unless ``state_dict`` holds exactly the tensors ``expected`` names, in its shapes.

    ``tied = (head, embedding)``: the head may be absent, or equal to the embedding.
    ``ignored``: names that are buffers, not weights (GPT-2's old mask tables).

    Raises:
        TypeError: ``state_dict`` is not a dict of tensors.
        ValueError: every missing, extra and misshaped tensor, each with its layer (up to 8).
    """
    check_instance(state_dict, "state_dict", dict, "e.g. hf_model.state_dict()")
    problems = []
    for name, shape in expected.items():
        tensor = state_dict.get(name)
        if tensor is None and not (tied and name == tied[0]):
            problems.append(f"missing {name}{_where(name, config)}")
        elif tensor is not None and not isinstance(tensor, torch.Tensor):
            problems.append(f"{name} is a {type(tensor).__name__}, not a tensor")
        elif tensor is not None and tuple(tensor.shape) != shape:
            problems.append(
                f"{name}{_where(name, config)} has shape {tuple(tensor.shape)}, expected {shape}"
            )
    for name in state_dict:
        if name not in expected and not (ignored and ignored.fullmatch(name)):
            if not (tied and name == tied[0]):
                problems.append(f"extra {name}{_where(name, config)}")
    problems += _check_tied(state_dict, tied)
    if problems:
        more = f"; and {len(problems) - 8} more" if len(problems) > 8 else ""
        raise ValueError(
            f"the state dict does not match the config (n_layers={config.n_layers}, d_model="
            f"{config.d_model}, n_heads={config.n_heads}, n_kv_heads={config.n_kv_heads}, "
            f"d_k={config.d_k}, d_ff={config.d_ff}, vocab_size={config.vocab_size}): "
            + "; ".join(problems[:8])
            + more
            + "; pass the state dict of the model this config describes"
        )


def _check_tied(state_dict: dict, tied: tuple[str, str] | None) -> list[str]:
    """A tied head present in the state dict must be the embedding itself."""
    if not tied or not isinstance(state_dict.get(tied[0]), torch.Tensor):
        return []
    head, embedding = state_dict[tied[0]], state_dict.get(tied[1])
    if isinstance(embedding, torch.Tensor) and head.shape == embedding.shape:
        if torch.equal(head, embedding):
            return []
    return [
        f"{tied[0]} differs from {tied[1]} although the config ties them "
        "(tie_word_embeddings=True): untie the config, or drop the head"
    ]


def _where(name: str, config) -> str:
    """`` (layer 3)``, or ``(layer 3; the config has 2 layers, 0 .. 1)``, for a layer's tensor."""
    found = re.search(r"(?:layers|h)\.(\d+)\.", name)
    if found is None:
        return ""
    layer, n = int(found.group(1)), config.n_layers
    beyond = f"; the config has n_layers={n}, layers 0 .. {n - 1}" if layer >= n else ""
    return f" (layer {layer}{beyond})"
