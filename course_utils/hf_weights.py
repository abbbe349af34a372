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

What is converted and what is refused: every field of the three configuration classes is
classified in :mod:`course_utils.hf_fields` (reproduced, irrelevant with the reason, or
refused by name), and every tensor of the state dict is checked against the config (a
missing, extra or misshaped tensor is named, with its layer) before anything is copied.

**Precision.** The converted model keeps the weights' dtype (float64 stays float64) and
uses ``transformers``' own RoPE arithmetic (``inv_freq`` and the angles in float32:
``rope_angle_dtype="float32"``), so it rotates q and k bit for bit as ``transformers`` does,
at every position (``tests/test_hf_weights.py`` checks 32768, Qwen3Config's default length).
Its logits equal the original's to 1e-5 in float32 at every length up to the config's
``max_position_embeddings`` (checked at 2048, LlamaConfig's default). In float64, GPT-2
agrees to 1e-12; Llama and Qwen3 to 1e-5 only, because their RMSNorm in ``transformers``
computes in float32 whatever the weights' dtype. A model built with the course's exact
float64 angles (ModernConfig's default) differs from ``transformers`` by the rounding of
float32 angles, about ``pos * 6e-8`` radians: of order 1e-5 in the logits at 2048
positions, 1e-2 in the rotation of q and k at 32768. In half precision the two libraries
round differently (bfloat16: differences of order 0.1 in the logits); no equality is
claimed there.

:func:`load_gpt2_124m` fetches the real 124 M GPT-2 through ``huggingface_hub`` when there is
a network (Colab, a laptop); offline it prints one line and returns None.
"""

from __future__ import annotations

import re
import socket

import torch
from torch import nn

from course_utils.checks import check_instance, check_int, check_tensor
from course_utils.hf_fields import check_converted_config as check_config
from course_utils.hf_fields import check_fields, check_lm_head, check_state_dict
from course_utils.lab.language import tr
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

    Raises:
        TypeError: ``weight`` not a tensor; ``n_heads`` or ``d_k`` not an int.
        ValueError: ``d_k`` odd or below 2; ``weight`` without ``n_heads * d_k`` rows.
    """
    _check_head_rows(weight, n_heads, d_k)
    permutation = rotary_permutation(d_k)
    rows = weight.reshape(n_heads, d_k, *weight.shape[1:])  # (h*d_k, ...) -> (h, d_k, ...)
    return rows[:, permutation].reshape(weight.shape)  # -> (h*d_k, ...)


def _check_head_rows(weight: object, n_heads: object, d_k: object) -> None:
    """Raise unless ``weight`` has ``n_heads * d_k`` rows (its first axis)."""
    check_tensor(weight, "weight", "(n_heads * d_k, ...)")
    n_heads = check_int(n_heads, "n_heads", minimum=1)
    d_k = check_int(d_k, "d_k", minimum=2, why="the head width")
    if weight.ndim == 0 or weight.shape[0] != n_heads * d_k:
        raise ValueError(
            f"weight must have n_heads * d_k = {n_heads} * {d_k} = {n_heads * d_k} rows, got "
            f"shape {tuple(weight.shape)}"
        )


def config_from_transformers(hf_config) -> ModernConfig:
    """A :class:`ModernConfig` with the shape and switches of a Llama, Qwen3 or GPT-2 config.

    Every field is checked first (:func:`course_utils.hf_fields.check_fields`).

    Raises:
        ValueError: another ``model_type``; a field the course does not reproduce (named,
            with its value and what the course supports); values that make no course model.
    """
    kind = check_fields(hf_config)
    settings = _gpt2_settings(hf_config) if kind == "gpt2" else _llama_settings(hf_config)
    return _check_course_config(settings, type(hf_config).__name__)


def _check_course_config(settings: dict, source: str) -> ModernConfig:
    """``ModernConfig(**settings)``; its errors use the course's names, so say which
    settings (hence which fields of ``source``) they were."""
    try:
        return ModernConfig(**settings)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"{source} makes no course model: {error} (course names: "
            + ", ".join(f"{k}={v!r}" for k, v in settings.items())
            + ")"
        ) from None


def _gpt2_settings(hf_config) -> dict:
    """ModernConfig's settings for a GPT2Config (Radford et al. 2019)."""
    act = hf_config.activation_function
    return dict(
        vocab_size=hf_config.vocab_size,
        block_size=hf_config.n_positions,
        d_model=hf_config.n_embd,
        n_heads=hf_config.n_head,
        n_layers=hf_config.n_layer,
        d_ff=hf_config.n_inner if hf_config.n_inner is not None else 4 * hf_config.n_embd,
        positional="learned",
        norm="layernorm",
        feed_forward="gelu" if act == "gelu" else "gelu_tanh",
        bias=True,
        tie_embeddings=hf_config.tie_word_embeddings,
        norm_eps=hf_config.layer_norm_epsilon,
        scale_scores=hf_config.scale_attn_weights,
        scale_by_layer=hf_config.scale_attn_by_inverse_layer_idx,
    )


def _llama_settings(hf_config) -> dict:
    """ModernConfig's settings for a LlamaConfig or Qwen3Config."""
    rope = dict(hf_config.rope_parameters or {})
    return dict(
        vocab_size=hf_config.vocab_size,
        block_size=hf_config.max_position_embeddings,
        d_model=hf_config.hidden_size,
        n_heads=hf_config.num_attention_heads,
        n_layers=hf_config.num_hidden_layers,
        d_ff=hf_config.intermediate_size,
        n_kv_heads=hf_config.num_key_value_heads,
        head_dim=getattr(hf_config, "head_dim", None),
        bias=hf_config.attention_bias,
        mlp_bias=getattr(hf_config, "mlp_bias", False),  # Qwen3's MLP: never biases
        qk_norm=hf_config.model_type == "qwen3",
        tie_embeddings=hf_config.tie_word_embeddings,
        norm_eps=hf_config.rms_norm_eps,
        rope_base=rope.get("rope_theta", 10000.0),
        rope_angle_dtype="float32",  # transformers' inv_freq and angles are float32
        padding_idx=hf_config.pad_token_id,
    )


def _llama_rows(config: ModernConfig) -> list[tuple[str, str, tuple[int, ...]]]:
    """(course name, Llama / Qwen3 name, shape) of every tensor the config needs."""
    C, V, F, d_k = config.d_model, config.vocab_size, config.d_ff, config.d_k
    q, kv = config.n_heads * d_k, config.n_kv_heads * d_k
    head = "model.embed_tokens.weight" if config.tie_embeddings else "lm_head.weight"
    rows = [
        ("token_embedding.weight", "model.embed_tokens.weight", (V, C)),
        ("final_norm.weight", "model.norm.weight", (C,)),
        ("lm_head.weight", head, (V, C)),  # tied: the same matrix under both names
    ]
    layer_rows = [
        ("ln_1.weight", "input_layernorm.weight", (C,)),
        ("ln_2.weight", "post_attention_layernorm.weight", (C,)),
        *(("attention.w_q." + p, "self_attn.q_proj." + p, (q, C)[: 2 - i]) for i, p in _PARTS),
        *(("attention.w_k." + p, "self_attn.k_proj." + p, (kv, C)[: 2 - i]) for i, p in _PARTS),
        *(("attention.w_v." + p, "self_attn.v_proj." + p, (kv, C)[: 2 - i]) for i, p in _PARTS),
        *(("attention.w_o." + p, "self_attn.o_proj." + p, (C, q)[: 2 - i]) for i, p in _PARTS),
        *(("feed_forward.gate." + p, "mlp.gate_proj." + p, (F, C)[: 2 - i]) for i, p in _PARTS),
        *(("feed_forward.up." + p, "mlp.up_proj." + p, (F, C)[: 2 - i]) for i, p in _PARTS),
        *(("feed_forward.down." + p, "mlp.down_proj." + p, (C, F)[: 2 - i]) for i, p in _PARTS),
        ("attention.q_norm.weight", "self_attn.q_norm.weight", (d_k,)),
        ("attention.k_norm.weight", "self_attn.k_norm.weight", (d_k,)),
    ]
    keep = {"attention": config.bias, "feed_forward": config.mlp_bias}
    for layer in range(config.n_layers):
        for ours, theirs, shape in layer_rows:
            if ours.endswith(".bias") and not keep[ours.split(".")[0]]:
                continue
            if "_norm." in ours and not config.qk_norm:
                continue
            rows.append((f"blocks.{layer}.{ours}", f"model.layers.{layer}.{theirs}", shape))
    return rows


_PARTS = ((0, "weight"), (1, "bias"))  # a bias has the weight's shape without its last axis


def llama_state_dict(state_dict: dict, config: ModernConfig) -> dict[str, torch.Tensor]:
    """A Llama or Qwen3 state dict under the course's names, q and k rows permuted.

    Raises:
        TypeError: ``config`` not the course's ModernConfig; ``state_dict`` not a dict.
        ValueError: a tensor the config needs is missing, one it does not describe is there
            (e.g. a layer beyond ``n_layers``), or one has another shape; each named, with
            its layer.
    """
    check_config(config)
    rows = _llama_rows(config)
    expected = {theirs: shape for _, theirs, shape in rows}
    tied = ("lm_head.weight", "model.embed_tokens.weight") if config.tie_embeddings else None
    check_state_dict(state_dict, expected, config, tied=tied)
    heads = {"w_q": config.n_heads, "w_k": config.n_kv_heads, "q_norm": 1, "k_norm": 1}
    out = {}
    for ours, theirs, _ in rows:
        tensor = state_dict[theirs]
        kind = ours.split(".")[-2]  # w_q, w_k, q_norm, ...
        if kind in heads:  # the rotated channels: into the course's interleaved pairs
            tensor = permute_heads(tensor, heads[kind], config.d_k)
        out[ours] = tensor
    return out


def _gpt2_shapes(config: ModernConfig) -> dict[str, tuple[int, ...]]:
    """GPT-2's tensor names (without ``transformer.``) and shapes, ``Conv1D`` as (in, out)."""
    C, V, F = config.d_model, config.vocab_size, config.d_ff
    shapes = {"wte.weight": (V, C), "wpe.weight": (config.block_size, C)}
    shapes |= {"ln_f.weight": (C,), "ln_f.bias": (C,)}
    if not config.tie_embeddings:
        shapes["lm_head.weight"] = (V, C)
    for layer in range(config.n_layers):
        for name, shape in (
            ("ln_1", (C,)),
            ("ln_2", (C,)),
            ("attn.c_attn", (C, 3 * C)),
            ("attn.c_proj", (C, C)),
            ("mlp.c_fc", (C, F)),
            ("mlp.c_proj", (F, C)),
        ):
            shapes[f"h.{layer}.{name}.weight"] = shape
            shapes[f"h.{layer}.{name}.bias"] = shape[-1:]
    return shapes


#: Old GPT-2 files also hold each layer's causal-mask table: buffers, not weights.
_GPT2_MASK_BUFFERS = re.compile(r"h\.\d+\.attn\.(bias|masked_bias)")


def gpt2_state_dict(state_dict: dict, config: ModernConfig) -> dict[str, torch.Tensor]:
    """A GPT-2 state dict under the course's names, ``Conv1D`` weights transposed.

    Takes ``GPT2LMHeadModel``'s names or the hub file's (no ``transformer.`` prefix, no
    ``lm_head`` when tied).

    Raises:
        TypeError: ``config`` not the course's ModernConfig; ``state_dict`` not a dict.
        ValueError: a missing, extra or misshaped tensor, named with its layer.
    """
    check_config(config)
    check_instance(state_dict, "state_dict", dict, "e.g. hf_model.state_dict()")
    sd = {k.removeprefix("transformer."): v for k, v in state_dict.items()}
    tied = ("lm_head.weight", "wte.weight") if config.tie_embeddings else None
    check_state_dict(sd, _gpt2_shapes(config), config, tied=tied, ignored=_GPT2_MASK_BUFFERS)
    head = "wte.weight" if config.tie_embeddings else "lm_head.weight"
    out = {
        "token_embedding.weight": sd["wte.weight"],
        "position.weight": sd["wpe.weight"],
        "final_norm.weight": sd["ln_f.weight"],
        "final_norm.bias": sd["ln_f.bias"],
        "lm_head.weight": sd[head],
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
            out[f"{ours}attention.{name}.weight"] = weight
            out[f"{ours}attention.{name}.bias"] = bias
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
        a :class:`ModernDecoder` in eval mode, in the weights' own dtype, whose logits equal
        the model's to 1e-5 in float32 (and in float64; GPT-2's to 1e-12 in float64), at
        every length up to the config's maximum (see the module's "Precision").

    Raises:
        TypeError: ``hf_model`` is not a module with a ``config``.
        ValueError: an unsupported ``model_type`` or field value (named); a model without
            its LM head (``LlamaModel``: the class to pass is named); a state dict that does
            not match the config (each tensor named); weights of mixed dtypes.
    """
    check_instance(hf_model, "hf_model", nn.Module, "e.g. LlamaForCausalLM(LlamaConfig(...))")
    config = config_from_transformers(getattr(hf_model, "config", None))
    check_lm_head(hf_model, hf_model.config.model_type, config.tie_embeddings)
    state_dict = {k: v.detach() for k, v in hf_model.state_dict().items()}
    dtype = _check_one_dtype(state_dict)
    convert = gpt2_state_dict if config.positional == "learned" else llama_state_dict
    converted = convert(state_dict, config)
    model = ModernDecoder(config).to(dtype)
    model.load_state_dict(converted)
    return model.eval()


def _check_one_dtype(state_dict: dict) -> torch.dtype:
    """The one float dtype of the weights (kept: float64 stays float64)."""
    dtypes = {v.dtype for v in state_dict.values() if v.is_floating_point()}
    if len(dtypes) != 1:
        raise ValueError(
            f"the weights must share one float dtype, got {sorted(map(str, dtypes))}; "
            "convert the model first, e.g. hf_model.to(torch.float32)"
        )
    return dtypes.pop()


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


def _why_not_downloaded(error: Exception) -> str:
    """A few words for the learner: no connection, a missing package, or the error itself."""
    if isinstance(error, ImportError):
        if error.name:
            return tr("{package} is not installed").format(package=error.name)
        return tr("a package it needs is not installed")
    if isinstance(error, OSError):  # socket errors: no route, no name lookup, refused, timeout
        return tr("offline (no connection to huggingface.co)")
    return tr("the download failed ({error})").format(error=error)


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
        said = tr(
            "{why}: this cell needs the internet to download GPT-2 124M ({repo}, about 550 MB) "
            "and generate with the course's own code; skipped"
        )
        print(said.format(why=_why_not_downloaded(error), repo=GPT2_REPO))
        return None
    config = gpt2_124m_config()
    model = ModernDecoder(config)
    model.load_state_dict(gpt2_state_dict(load_file(path), config))
    return model.eval()
