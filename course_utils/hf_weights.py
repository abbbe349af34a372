"""Weights of ``transformers``' Llama, Qwen3 and GPT-2 in the course's decoder.

The course's :class:`~course_utils.modern_model.ModernDecoder` computes the same function as
``LlamaForCausalLM`` (Touvron et al. 2023), ``Qwen3ForCausalLM`` and ``GPT2LMHeadModel``
(Radford et al. 2019) once their weights are copied across by name, with two changes of
layout, each a fact about how the models store their weights, not about what they compute:

* **RoPE's channel pairs.** The course rotates interleaved pairs ``(2i, 2i+1)`` of each head
  by the angle ``pos * base^(-2i/d_k)`` (Su et al. 2021, §3.4, Eq. 34); Llama and Qwen3
  rotate halves, ``(i, i + d_k/2)``, by the same angle (their ``rotate_half``). Both are the
  same rotation of the same pairs once the channels are renamed: course channel ``2i`` is
  their channel ``i``, course channel ``2i+1`` their channel ``i + d_k/2``
  (:func:`rotary_permutation`). Renaming the output rows of ``W^Q`` and ``W^K`` (and the
  QK-norm weights) in every head does it; scores ``q . k`` do not depend on the order of the
  channels, so ``W^V`` and ``W^O`` are copied as they are.
* **GPT-2's ``Conv1D``.** GPT-2 stores its projections as ``(in, out)`` matrices used as
  ``x @ W + b``; ``nn.Linear`` stores ``(out, in)``: transpose them. Its ``c_attn`` holds
  ``W^Q``, ``W^K``, ``W^V`` side by side: ``(C, 3C)`` is split into three.

:func:`load_gpt2_124m` fetches the real 124 M GPT-2 through ``huggingface_hub`` when there is
a network (Colab, a laptop); offline it prints one line and returns None.
"""

from __future__ import annotations

import socket

import torch
from torch import nn

from course_utils.checks import check_instance, check_int
from course_utils.modern_model import ModernConfig, ModernDecoder
from course_utils.rotary import check_rotary_width

GPT2_REPO = "openai-community/gpt2"


def rotary_permutation(d_k: int) -> torch.Tensor:
    """Indices ``p`` with course channel ``j`` = half-rotation channel ``p[j]``.

    ``p = [0, d_k/2, 1, d_k/2 + 1, ...]``: the pair ``(i, i + d_k/2)`` that ``rotate_half``
    rotates lands on the course's pair ``(2i, 2i+1)``. Its inverse is "evens, then odds":
    ``torch.argsort(p) = [0, 2, 4, ..., 1, 3, 5, ...]``.

    Returns:
        int64 ``(d_k,)``.

    Raises:
        TypeError: ``d_k`` not an int.
        ValueError: ``d_k`` odd or below 2.
    """
    d_k = check_int(d_k, "d_k", minimum=2, why="the head width")
    check_rotary_width(d_k, "d_k")
    half = torch.arange(d_k // 2)
    return torch.stack([half, half + d_k // 2], dim=1).flatten()  # (d/2, 2) -> (d,)


def permute_heads(weight: torch.Tensor, n_heads: int, d_k: int) -> torch.Tensor:
    """Reorder the output rows of a q or k projection, head by head, into the course's pairs.

    Shapes: ``(n_heads * d_k, C)`` (or ``(n_heads * d_k,)`` for a bias, ``(d_k,)`` for a
    QK-norm weight with ``n_heads=1``) -> the same shape.
    """
    permutation = rotary_permutation(d_k)
    rows = weight.reshape(n_heads, d_k, *weight.shape[1:])  # (h*d_k, ...) -> (h, d_k, ...)
    return rows[:, permutation].reshape(weight.shape)  # -> (h*d_k, ...)


def config_from_transformers(hf_config) -> ModernConfig:
    """A :class:`ModernConfig` with the shape and switches of a Llama, Qwen3 or GPT-2 config.

    Raises:
        ValueError: another ``model_type``, or RoPE scaling the course does not implement.
    """
    kind = _check_supported(hf_config)
    if kind == "gpt2":
        return ModernConfig(
            vocab_size=hf_config.vocab_size,
            block_size=hf_config.n_positions,
            d_model=hf_config.n_embd,
            n_heads=hf_config.n_head,
            n_layers=hf_config.n_layer,
            d_ff=hf_config.n_inner or 4 * hf_config.n_embd,
            positional="learned",
            norm="layernorm",
            feed_forward="gelu_tanh",
            bias=True,
            tie_embeddings=True,
            norm_eps=hf_config.layer_norm_epsilon,
        )
    rope = dict(getattr(hf_config, "rope_parameters", None) or {})
    return ModernConfig(
        vocab_size=hf_config.vocab_size,
        block_size=hf_config.max_position_embeddings,
        d_model=hf_config.hidden_size,
        n_heads=hf_config.num_attention_heads,
        n_layers=hf_config.num_hidden_layers,
        d_ff=hf_config.intermediate_size,
        n_kv_heads=hf_config.num_key_value_heads,
        head_dim=getattr(hf_config, "head_dim", None),
        bias=bool(getattr(hf_config, "attention_bias", False)),
        qk_norm=kind == "qwen3",
        tie_embeddings=bool(hf_config.tie_word_embeddings),
        norm_eps=hf_config.rms_norm_eps,
        rope_base=rope.get("rope_theta", 10000.0),
    )


def _check_supported(hf_config) -> str:
    """The config's ``model_type``, if the course implements it (for Llama and Qwen3, its RoPE)."""
    kind = getattr(hf_config, "model_type", None)
    if kind == "gpt2":
        return kind
    if kind not in ("llama", "qwen3"):
        raise ValueError(f"model_type must be 'llama', 'qwen3' or 'gpt2', got {kind!r}")
    rope = dict(getattr(hf_config, "rope_parameters", None) or {})
    if rope.get("rope_type", "default") != "default":
        raise ValueError(f"only plain RoPE is implemented, got rope_type={rope['rope_type']!r}")
    return kind


def _llama_names(layer: int, qk_norm: bool) -> dict[str, str]:
    """Course name -> Llama / Qwen3 name, for block ``layer``."""
    ours, theirs = f"blocks.{layer}.", f"model.layers.{layer}."
    names = {
        "ln_1.weight": "input_layernorm.weight",
        "ln_2.weight": "post_attention_layernorm.weight",
        "attention.w_q.weight": "self_attn.q_proj.weight",
        "attention.w_k.weight": "self_attn.k_proj.weight",
        "attention.w_v.weight": "self_attn.v_proj.weight",
        "attention.w_o.weight": "self_attn.o_proj.weight",
        "feed_forward.gate.weight": "mlp.gate_proj.weight",
        "feed_forward.up.weight": "mlp.up_proj.weight",
        "feed_forward.down.weight": "mlp.down_proj.weight",
    }
    if qk_norm:
        names["attention.q_norm.weight"] = "self_attn.q_norm.weight"
        names["attention.k_norm.weight"] = "self_attn.k_norm.weight"
    return {ours + a: theirs + b for a, b in names.items()}


def llama_state_dict(state_dict: dict, config: ModernConfig) -> dict[str, torch.Tensor]:
    """A Llama or Qwen3 state dict under the course's names, q and k rows permuted.

    Raises:
        KeyError: a weight the config needs is missing (another model, a wrong config).
    """
    out = {"token_embedding.weight": state_dict["model.embed_tokens.weight"]}
    out["final_norm.weight"] = state_dict["model.norm.weight"]
    # tied: the same matrix under both names (load_state_dict expects both)
    head = "model.embed_tokens.weight" if config.tie_embeddings else "lm_head.weight"
    out["lm_head.weight"] = state_dict[head]
    heads = {"w_q": config.n_heads, "w_k": config.n_kv_heads, "q_norm": 1, "k_norm": 1}
    for layer in range(config.n_layers):
        for ours, theirs in _llama_names(layer, config.qk_norm).items():
            tensor = state_dict[theirs]
            kind = ours.split(".")[-2]  # w_q, w_k, q_norm, ...
            if kind in heads:  # the rotated channels: into the course's interleaved pairs
                tensor = permute_heads(tensor, heads[kind], config.d_k)
            out[ours] = tensor
    return out


def gpt2_state_dict(state_dict: dict, config: ModernConfig) -> dict[str, torch.Tensor]:
    """A GPT-2 state dict under the course's names, ``Conv1D`` weights transposed.

    Raises:
        KeyError: a weight the config needs is missing.
    """
    prefix = "transformer." if "transformer.wte.weight" in state_dict else ""
    sd = {k.removeprefix(prefix): v for k, v in state_dict.items()}
    out = {
        "token_embedding.weight": sd["wte.weight"],
        "position.weight": sd["wpe.weight"],
        "final_norm.weight": sd["ln_f.weight"],
        "final_norm.bias": sd["ln_f.bias"],
        "lm_head.weight": sd["wte.weight"],  # tied to the embedding
    }
    for layer in range(config.n_layers):
        ours, theirs = f"blocks.{layer}.", f"h.{layer}."
        for norm in ("ln_1", "ln_2"):
            for part in ("weight", "bias"):
                out[f"{ours}{norm}.{part}"] = sd[f"{theirs}{norm}.{part}"]
        # Conv1D: (in, out) used as x @ W; nn.Linear: (out, in). c_attn: (C, 3C) = [Q | K | V]
        weights = sd[f"{theirs}attn.c_attn.weight"].t().chunk(3, dim=0)  # 3 x (C, C)
        biases = sd[f"{theirs}attn.c_attn.bias"].chunk(3)  # 3 x (C,)
        for name, weight, bias in zip(("w_q", "w_k", "w_v"), weights, biases):
            out[f"{ours}attention.{name}.weight"], out[f"{ours}attention.{name}.bias"] = (
                weight,
                bias,
            )
        for ours_name, theirs_name in (
            ("attention.w_o", "attn.c_proj"),
            ("feed_forward.up", "mlp.c_fc"),
            ("feed_forward.down", "mlp.c_proj"),
        ):
            out[f"{ours}{ours_name}.weight"] = sd[f"{theirs}{theirs_name}.weight"].t()
            out[f"{ours}{ours_name}.bias"] = sd[f"{theirs}{theirs_name}.bias"]
    return out


def from_transformers(hf_model: nn.Module) -> ModernDecoder:
    """The course's decoder with the weights of a ``transformers`` Llama, Qwen3 or GPT-2.

    Args:
        hf_model: ``LlamaForCausalLM``, ``Qwen3ForCausalLM`` or ``GPT2LMHeadModel``.

    Returns:
        a :class:`ModernDecoder` in eval mode, float32, whose logits equal the model's (to
        float rounding: 1e-5 in float32 in ``tests/test_hf_weights.py``).

    Raises:
        TypeError: ``hf_model`` is not a module with a ``config``.
        ValueError: an unsupported ``model_type``.
    """
    check_instance(hf_model, "hf_model", nn.Module, "e.g. LlamaForCausalLM(LlamaConfig(...))")
    config = config_from_transformers(getattr(hf_model, "config", None))
    state_dict = {k: v.detach().float() for k, v in hf_model.state_dict().items()}
    convert = gpt2_state_dict if config.positional == "learned" else llama_state_dict
    model = ModernDecoder(config)
    model.load_state_dict(convert(state_dict, config))
    return model.eval()


def hidden_states_like_transformers(model: ModernDecoder, ids: torch.Tensor) -> list[torch.Tensor]:
    """The course model's residual stream as ``output_hidden_states=True`` lists it.

    ``transformers`` gives ``n_layers + 1`` tensors ``(B, T, C)``: the embedding, the output
    of blocks ``0 .. n_layers - 2``, and the *final norm* of the last block's output.
    """
    states = model.hidden_states(ids)
    return [*states[:-1], model.final_norm(states[-1])]


def gpt2_124m_config() -> ModernConfig:
    """The shape of the released 124 M GPT-2 (Radford et al. 2019, Table 2, smallest)."""
    return ModernConfig(
        vocab_size=50257,
        block_size=1024,
        d_model=768,
        n_heads=12,
        n_layers=12,
        d_ff=3072,
        positional="learned",
        norm="layernorm",
        feed_forward="gelu_tanh",
        bias=True,
        tie_embeddings=True,
        norm_eps=1e-5,
    )


def load_gpt2_124m() -> ModernDecoder | None:
    """The real GPT-2 (124 M) in the course's decoder, downloaded through ``huggingface_hub``
    (about 550 MB, cached); None, after printing one line, when it cannot be downloaded."""
    try:
        from huggingface_hub import hf_hub_download
        from safetensors.torch import load_file

        # one quick probe first: offline, the download would retry for tens of seconds
        socket.create_connection(("huggingface.co", 443), timeout=3).close()
        path = hf_hub_download(GPT2_REPO, "model.safetensors")
    except Exception as error:  # offline, blocked, no huggingface_hub: one line, no failure
        print(
            f"offline ({type(error).__name__}): with a network this would download GPT-2 124M "
            f"({GPT2_REPO}) and generate with the course's own code"
        )
        return None
    config = gpt2_124m_config()
    model = ModernDecoder(config)
    model.load_state_dict(gpt2_state_dict(load_file(path), config))
    return model.eval()
