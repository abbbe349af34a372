"""Every field of transformers' LlamaConfig, Qwen3Config and GPT2Config is classified
(reproduced, irrelevant, refused); each refused value raises naming the field; each
reproduced switch gives transformers' logits to 1e-5 in float32."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from course_utils import hf_fields
from course_utils.hf_weights import config_from_transformers, from_transformers

LLAMA_SHAPE = dict(
    vocab_size=84,
    hidden_size=24,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=6,
    max_position_embeddings=32,
)
GPT2_SHAPE = dict(
    vocab_size=84, n_embd=24, n_layer=3, n_head=4, n_positions=32, bos_token_id=0, eos_token_id=0
)
CLASSES = {"llama": LlamaConfig, "qwen3": Qwen3Config, "gpt2": GPT2Config}


def class_fields(cls) -> set[str]:
    """Every name a config of ``cls`` carries: to_dict(), the dataclass fields, and the
    targets of its aliases (GPT-2's hidden_size is n_embd)."""
    names = set(cls().to_dict()) | {f.name for f in dataclasses.fields(cls)}
    return names | set(cls.attribute_map.values())


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_every_field_of_the_pinned_classes_is_classified(kind):
    table = hf_fields.FIELDS[kind]
    unclassified = sorted(class_fields(CLASSES[kind]) - set(table))
    assert not unclassified, f"{CLASSES[kind].__name__}: classify {unclassified} in hf_fields"
    for name, field in table.items():
        assert field.kind in (hf_fields.REPRODUCED, hf_fields.IRRELEVANT, hf_fields.REFUSED)
        assert field.note.strip(), f"{name}: say what the course does with it, or why not"
        assert field.kind != hf_fields.REFUSED or field.accepts is not None


def test_the_classification_counts_are_what_the_report_says():
    counted = {kind: hf_fields.counts(kind) for kind in CLASSES}
    assert counted["llama"] == {"reproduced": 16, "irrelevant": 18, "refused": 0}
    assert counted["qwen3"] == {"reproduced": 15, "irrelevant": 19, "refused": 2}
    assert counted["gpt2"] == {"reproduced": 12, "irrelevant": 28, "refused": 1}


def test_a_field_unknown_to_the_course_is_refused_by_name():
    with pytest.raises(ValueError, match=r"LlamaConfig field quantization_config=\{'bits': 4\}"):
        config_from_transformers(LlamaConfig(**LLAMA_SHAPE, quantization_config={"bits": 4}))
    with pytest.raises(ValueError, match="model_type must be 'llama', 'qwen3' or 'gpt2'"):
        config_from_transformers(MistralConfig())


#: One value the course does not compute for every field that accepts only some values.
REFUSED_VALUES = {
    "llama": {
        "model_type": "mistral",
        "hidden_act": "gelu",
        "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4},
        "pad_token_id": 84,
    },
    "qwen3": {
        "model_type": "qwen2",
        "hidden_act": "relu",
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 1e4,
            "partial_rotary_factor": 0.5,
        },
        "pad_token_id": 90,
        "layer_types": ["full_attention", "sliding_attention"],
        "sliding_window": 4,
    },
    "gpt2": {
        "model_type": "gpt_neo",
        "activation_function": "relu",
        "add_cross_attention": True,
    },
}


def restricted(kind: str) -> list[str]:
    return sorted(n for n, f in hf_fields.FIELDS[kind].items() if f.accepts is not None)


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_every_restricted_field_has_a_refusal_test(kind):
    assert restricted(kind) == sorted(REFUSED_VALUES[kind])


@pytest.mark.parametrize(
    "kind, name", [(k, n) for k in sorted(CLASSES) for n in sorted(REFUSED_VALUES[k])]
)
def test_each_refused_value_raises_naming_the_field_its_value_and_the_support(kind, name):
    shape = GPT2_SHAPE if kind == "gpt2" else LLAMA_SHAPE
    config = CLASSES[kind](**shape)
    value = REFUSED_VALUES[kind][name]
    setattr(config, name, value)  # after __post_init__: exactly this one field changed
    if name == "sliding_window":  # only refused where a layer uses it
        config.layer_types = ["full_attention", "sliding_attention"]
    with pytest.raises(ValueError) as error:
        config_from_transformers(config)
    message = str(error.value)
    if name == "model_type":
        assert repr(value) in message and "'llama', 'qwen3' or 'gpt2'" in message
        return
    if name == "sliding_window":  # whichever of the two comes first is named
        assert "field sliding_window=4" in message or "field layer_types=" in message
        return
    assert f"field {name}={value!r}" in message and "supported:" in message


def test_a_sliding_window_no_layer_uses_is_accepted_and_computes_full_attention():
    config = Qwen3Config(**LLAMA_SHAPE, use_sliding_window=True, sliding_window=4)
    assert config.layer_types == ["full_attention"] * 2  # both layers below max_window_layers
    reference = scrambled(Qwen3ForCausalLM(config))
    ids = torch.randint(0, 84, (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(
            from_transformers(reference)(ids)[0], reference(ids).logits, atol=1e-5, rtol=0
        )
    config.max_window_layers = 1  # now layer 1 would slide: refused, by name
    config.layer_types = ["full_attention", "sliding_attention"]
    with pytest.raises(ValueError, match="field (layer_types|sliding_window)="):
        config_from_transformers(config)


def scrambled(model: torch.nn.Module, std: float = 0.2) -> torch.nn.Module:
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(1.0 if parameter.ndim == 1 else 0.0, std)
    return model.eval()


SWITCHES = {
    "llama attention_bias": lambda: LlamaForCausalLM(
        LlamaConfig(**LLAMA_SHAPE, attention_bias=True)
    ),
    "llama mlp_bias": lambda: LlamaForCausalLM(LlamaConfig(**LLAMA_SHAPE, mlp_bias=True)),
    "llama tied": lambda: LlamaForCausalLM(LlamaConfig(**LLAMA_SHAPE, tie_word_embeddings=True)),
    "llama swish": lambda: LlamaForCausalLM(LlamaConfig(**LLAMA_SHAPE, hidden_act="swish")),
    "llama rms_norm_eps": lambda: LlamaForCausalLM(LlamaConfig(**LLAMA_SHAPE, rms_norm_eps=0.05)),
    "llama pad_token_id": lambda: LlamaForCausalLM(LlamaConfig(**LLAMA_SHAPE, pad_token_id=3)),
    "llama rope_theta": lambda: LlamaForCausalLM(
        LlamaConfig(**LLAMA_SHAPE, rope_parameters={"rope_type": "default", "rope_theta": 50.0})
    ),
    "qwen3 tied": lambda: Qwen3ForCausalLM(Qwen3Config(**LLAMA_SHAPE, tie_word_embeddings=True)),
    "gpt2 layer_norm_epsilon": lambda: GPT2LMHeadModel(
        GPT2Config(**GPT2_SHAPE, layer_norm_epsilon=0.05)
    ),
    "qwen3 attention_bias": lambda: Qwen3ForCausalLM(
        Qwen3Config(**LLAMA_SHAPE, attention_bias=True)
    ),
    "gpt2 untied": lambda: GPT2LMHeadModel(GPT2Config(**GPT2_SHAPE, tie_word_embeddings=False)),
    "gpt2 scale_attn_weights=False": lambda: GPT2LMHeadModel(
        GPT2Config(**GPT2_SHAPE, scale_attn_weights=False)
    ),
    "gpt2 scale_attn_by_inverse_layer_idx": lambda: GPT2LMHeadModel(
        GPT2Config(**GPT2_SHAPE, scale_attn_by_inverse_layer_idx=True)
    ),
    "gpt2 reorder_and_upcast_attn eager": lambda: GPT2LMHeadModel(
        GPT2Config(**GPT2_SHAPE, reorder_and_upcast_attn=True, attn_implementation="eager")
    ),
    "gpt2 gelu": lambda: GPT2LMHeadModel(GPT2Config(**GPT2_SHAPE, activation_function="gelu")),
    "gpt2 gelu_pytorch_tanh": lambda: GPT2LMHeadModel(
        GPT2Config(**GPT2_SHAPE, activation_function="gelu_pytorch_tanh")
    ),
    "gpt2 n_inner": lambda: GPT2LMHeadModel(GPT2Config(**GPT2_SHAPE, n_inner=40)),
}


@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_each_reproduced_switch_gives_transformers_logits(switch):
    reference = scrambled(SWITCHES[switch]())
    ours = from_transformers(reference)
    ids = torch.randint(0, 84, (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = reference(ids).logits
        logits = ours(ids)[0]
    assert expected.std() > 0.5
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=0)


def test_the_switches_change_the_function():
    """Each switch above matters: the same weights without it give other logits."""
    ids = torch.randint(0, 84, (2, 20), generator=torch.Generator().manual_seed(1))
    for switch, changes in (
        ("gpt2 scale_attn_weights=False", {"scale_scores": True}),
        ("gpt2 scale_attn_by_inverse_layer_idx", {"scale_by_layer": False}),
        ("gpt2 gelu", {"feed_forward": "gelu_tanh"}),
        ("llama rms_norm_eps", {"norm_eps": 1e-6}),
        ("llama rope_theta", {"rope_base": 10000.0}),
    ):
        ours = from_transformers(scrambled(SWITCHES[switch]()))
        other = type(ours)(dataclasses.replace(ours.config, **changes))
        other.load_state_dict(ours.state_dict())
        with torch.no_grad():
            assert (other.eval()(ids)[0] - ours(ids)[0]).abs().max() > 1e-4, switch
