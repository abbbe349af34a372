"""The course's decoder with copied weights equals transformers' Llama, Qwen3 and GPT-2
(logits and every hidden state to 1e-5 in float32); the rotary channel permutation."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb, rotate_half

import course_utils.hf_weights as hf_weights
from course_utils.generation import generate, generate_with_cache
from course_utils.hf_weights import (
    from_transformers,
    hidden_states_like_transformers,
    permute_heads,
    rotary_permutation,
)
from course_utils.rotary import RotaryEmbedding

SHAPE = dict(
    vocab_size=84,
    hidden_size=24,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=6,
    max_position_embeddings=32,
)


def scrambled(model: torch.nn.Module, std: float = 0.2) -> torch.nn.Module:
    """Random weights far from the init (norm weights around 1), so every part matters."""
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(1.0 if parameter.ndim == 1 else 0.0, std)
    return model.eval()


def reference_models() -> dict[str, torch.nn.Module]:
    gpt2 = GPT2Config(
        vocab_size=84,
        n_embd=24,
        n_layer=2,
        n_head=4,
        n_positions=32,
        bos_token_id=0,
        eos_token_id=0,
    )
    return {
        "llama": LlamaForCausalLM(LlamaConfig(**SHAPE)),
        "qwen3": Qwen3ForCausalLM(Qwen3Config(**SHAPE, rope_parameters={"rope_theta": 1e6})),
        "gpt2": GPT2LMHeadModel(gpt2),
    }


@pytest.mark.parametrize("name", ["llama", "qwen3", "gpt2"])
def test_logits_and_every_hidden_state_equal_transformers(name):
    reference = scrambled(reference_models()[name])
    ours = from_transformers(reference)
    length = reference.config.max_position_embeddings  # the config's own maximum: 32
    ids = torch.randint(0, 84, (3, length), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = reference(ids, output_hidden_states=True)
        logits, _ = ours(ids)
        states = hidden_states_like_transformers(ours, ids)
    assert expected.logits.std() > 0.5  # not a trivially small output
    torch.testing.assert_close(logits, expected.logits, atol=1e-5, rtol=0)
    assert len(states) == len(expected.hidden_states) == 3
    for ours_state, their_state in zip(states, expected.hidden_states):
        torch.testing.assert_close(ours_state, their_state, atol=1e-5, rtol=0)


def test_configs_carry_each_model_s_switches():
    models = {name: from_transformers(m) for name, m in reference_models().items()}
    llama, qwen3, gpt2 = (models[k].config for k in ("llama", "qwen3", "gpt2"))
    assert (llama.n_kv_heads, llama.d_k, llama.qk_norm, llama.bias) == (2, 6, False, False)
    assert qwen3.qk_norm and qwen3.rope_base == 1e6 and not qwen3.tie_embeddings
    assert (gpt2.positional, gpt2.norm, gpt2.feed_forward, gpt2.bias) == (
        "learned",
        "layernorm",
        "gelu_tanh",
        True,
    )
    assert models["gpt2"].lm_head.weight is models["gpt2"].token_embedding.weight


def test_without_the_permutation_llama_differs(monkeypatch):
    reference = scrambled(reference_models()["llama"])
    monkeypatch.setattr(hf_weights, "rotary_permutation", lambda d_k: torch.arange(d_k))
    ours, ids = from_transformers(reference), torch.randint(0, 84, (2, 12))
    with torch.no_grad():
        assert (ours(ids)[0] - reference(ids).logits).abs().max() > 1e-2


def test_rotary_permutation_turns_rotate_half_into_interleaved_pairs():
    d_k, length = 6, 9
    permutation = rotary_permutation(d_k)
    assert permutation.tolist() == [0, 3, 1, 4, 2, 5]
    assert torch.argsort(permutation).tolist() == [0, 2, 4, 1, 3, 5]  # evens, then odds
    x = torch.randn(2, 4, length, d_k)  # (B, h, T, d_k) in the halves layout
    rotary = RotaryEmbedding(d_k, length)
    half = torch.arange(d_k // 2, dtype=torch.float64)
    angles = torch.arange(length, dtype=torch.float64)[:, None] * 10000 ** (-2 * half / d_k)
    cos = torch.cat([angles.cos(), angles.cos()], -1).float()  # (T, d_k): transformers' layout
    sin = torch.cat([angles.sin(), angles.sin()], -1).float()
    theirs, _ = apply_rotary_pos_emb(x, x, cos, sin, unsqueeze_dim=0)
    torch.testing.assert_close(rotary(x[..., permutation]), theirs[..., permutation])
    # the same pairs rotated by the course without the renaming: not the same rotation
    assert (rotary(x) - theirs).abs().max() > 1e-2
    assert torch.equal(rotate_half(x)[..., permutation][..., 0], -x[..., permutation][..., 1])


def test_permute_heads_moves_whole_rows_within_each_head():
    weight = torch.arange(2 * 4 * 3).reshape(8, 3)  # 2 heads of d_k = 4, C = 3
    permuted = permute_heads(weight, 2, 4)
    assert permuted[:, 0].tolist() == [0, 6, 3, 9, 12, 18, 15, 21]
    with pytest.raises(ValueError, match="d_k must be even"):
        rotary_permutation(5)
    with pytest.raises(ValueError, match=r"n_heads \* d_k = 2 \* 4 = 8 rows, got shape \(10, 3\)"):
        permute_heads(torch.zeros(10, 3), 2, 4)


def test_copied_gpt2_generates_the_same_tokens_as_transformers():
    reference = scrambled(reference_models()["gpt2"])
    ours, prompt = from_transformers(reference), torch.tensor([[5, 17, 3]])
    theirs = reference.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=0)
    assert torch.equal(generate(ours, prompt, 8, greedy=True), theirs)
    assert torch.equal(generate_with_cache(ours, prompt, 8, greedy=True), theirs)


def test_unsupported_models_are_refused_with_the_supported_list():
    with pytest.raises(ValueError, match="'llama', 'qwen3' or 'gpt2'"):
        hf_weights.config_from_transformers(None)
    with pytest.raises(TypeError, match="hf_model"):
        from_transformers("gpt2")


def test_gpt2_124m_offline_prints_one_line_and_returns_none(capsys):
    assert hf_weights.load_gpt2_124m() is None  # the tests' network guard blocks the download
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("offline") and "GPT-2 124M" in lines[0]


def test_gpt2_124m_says_why_it_was_not_downloaded_without_naming_an_error_class():
    why = hf_weights._why_not_downloaded
    assert why(OSError("name lookup blocked")) == "offline (no connection to huggingface.co)"
    assert why(ImportError("no module", name="huggingface_hub")).startswith("huggingface_hub is")
    assert why(ValueError("bad file")) == "the download failed (bad file)"


def test_gpt2_124m_config_is_transformers_default_gpt2():
    assert hf_weights.config_from_transformers(GPT2Config()) == hf_weights.gpt2_124m_config()


def test_gpt2_124m_online_path_loads_the_hub_file_layout(tmp_path, monkeypatch):
    """The online branch, with the download replaced by a local file laid out as the hub's
    model.safetensors (no "transformer." prefix, no lm_head: it is tied)."""
    from safetensors.torch import save_file

    reference = scrambled(reference_models()["gpt2"])
    hub_layout = {
        k.removeprefix("transformer."): v.contiguous()
        for k, v in reference.state_dict().items()
        if k != "lm_head.weight"
    }
    path = tmp_path / "model.safetensors"
    save_file(hub_layout, str(path))

    class Connection:
        def close(self):
            pass

    import huggingface_hub

    monkeypatch.setattr(hf_weights.socket, "create_connection", lambda *a, **k: Connection())
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", lambda repo, name: str(path))
    small = from_transformers(reference).config
    monkeypatch.setattr(hf_weights, "gpt2_124m_config", lambda: small)
    model = hf_weights.load_gpt2_124m()
    ids = torch.randint(0, 84, (2, 10))
    with torch.no_grad():
        torch.testing.assert_close(model(ids)[0], reference(ids).logits, atol=1e-5, rtol=0)


# --- state dicts checked tensor by tensor -------------------------------------------------


def test_a_missing_tensor_is_named_with_its_layer():
    reference = reference_models()["llama"]
    config = from_transformers(reference).config
    state_dict = dict(reference.state_dict())
    del state_dict["model.layers.1.mlp.up_proj.weight"]
    with pytest.raises(
        ValueError, match=r"missing model\.layers\.1\.mlp\.up_proj\.weight \(layer 1\)"
    ):
        hf_weights.llama_state_dict(state_dict, config)


def test_more_layers_than_the_config_are_named_not_dropped():
    deeper = LlamaForCausalLM(LlamaConfig(**{**SHAPE, "num_hidden_layers": 3}))
    config = from_transformers(reference_models()["llama"]).config  # 2 layers
    with pytest.raises(ValueError) as error:
        hf_weights.llama_state_dict(deeper.state_dict(), config)
    message = str(error.value)
    assert (
        "extra model.layers.2.self_attn.q_proj.weight (layer 2; the config has n_layers=2"
        in message
    )
    gpt2 = reference_models()["gpt2"]
    deeper = GPT2LMHeadModel(GPT2Config(**{**gpt2.config.to_diff_dict(), "n_layer": 3}))
    with pytest.raises(ValueError, match=r"extra h\.2\.attn\.c_attn\.weight \(layer 2;"):
        hf_weights.gpt2_state_dict(deeper.state_dict(), from_transformers(gpt2).config)


def test_a_misshaped_projection_is_named_with_both_shapes():
    reference = reference_models()["qwen3"]
    config = from_transformers(reference).config
    state_dict = dict(reference.state_dict())
    state_dict["model.layers.0.self_attn.k_proj.weight"] = torch.zeros(6, 24)  # 1 head, not 2
    with pytest.raises(
        ValueError, match=r"k_proj\.weight \(layer 0\) has shape \(6, 24\), expected \(12, 24\)"
    ):
        hf_weights.llama_state_dict(state_dict, config)


def test_a_head_that_is_not_the_tied_embedding_is_refused():
    reference = reference_models()["gpt2"]
    config = from_transformers(reference).config
    state_dict = dict(reference.state_dict())
    state_dict["lm_head.weight"] = state_dict["lm_head.weight"] + 1
    with pytest.raises(ValueError, match="differs from wte.weight although the config ties them"):
        hf_weights.gpt2_state_dict(state_dict, config)


def test_a_classification_model_is_refused_by_its_tensors():
    from transformers import LlamaForSequenceClassification

    classifier = LlamaForSequenceClassification(LlamaConfig(**SHAPE, pad_token_id=0))
    with pytest.raises(ValueError, match=r"missing lm_head\.weight.*extra score\.weight"):
        from_transformers(classifier)


# --- precision: dtypes, lengths, the padding row ------------------------------------------


@pytest.mark.parametrize("name, atol", [("llama", 1e-5), ("qwen3", 1e-5), ("gpt2", 1e-12)])
def test_float64_weights_stay_float64(name, atol):
    """transformers' Llama and Qwen3 RMSNorm computes in float32 whatever the dtype: 1e-5;
    GPT-2 stays in float64 throughout: 1e-12."""
    reference = scrambled(reference_models()[name]).double()
    ours = from_transformers(reference)
    assert {p.dtype for p in ours.parameters()} == {torch.float64}
    ids = torch.randint(0, 84, (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits, expected = ours(ids)[0], reference(ids).logits
    assert logits.dtype == torch.float64
    torch.testing.assert_close(logits, expected, atol=atol, rtol=0)


def test_weights_of_mixed_dtypes_are_refused():
    reference = reference_models()["llama"]
    reference.lm_head.double()
    with pytest.raises(ValueError, match="one float dtype"):
        from_transformers(reference)


LONG = {
    "llama": lambda: LlamaForCausalLM(LlamaConfig(**{**SHAPE, "max_position_embeddings": 2048})),
    "gpt2": lambda: GPT2LMHeadModel(
        GPT2Config(vocab_size=84, n_embd=24, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0)
    ),
}


@pytest.mark.parametrize("name", sorted(LONG))
def test_logits_equal_at_the_config_s_own_maximum_length(name):
    """LlamaConfig's default max_position_embeddings (2048) and GPT2Config's n_positions
    (1024): the whole sequence, not a short prefix."""
    reference = scrambled(LONG[name]())
    length = reference.config.max_position_embeddings
    ours = from_transformers(reference)
    ids = torch.randint(0, 84, (1, length), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids)[0], reference(ids).logits, atol=1e-5, rtol=0)


def test_conversion_uses_transformers_float32_angles_and_they_matter_at_2048():
    """Why conversion uses transformers' float32 angles: at LlamaConfig's 2048 positions and
    head_dim 128, the exact float64 angles rotate q and k differently by more than 1e-5."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    assert from_transformers(reference_models()["llama"]).config.rope_angle_dtype == "float32"
    config = LlamaConfig()
    length, d_k = config.max_position_embeddings, config.head_dim
    x = torch.randn(1, 2, length, d_k, generator=torch.Generator().manual_seed(3))
    cos, sin = LlamaRotaryEmbedding(config)(x, torch.arange(length)[None])
    theirs = apply_rotary_pos_emb(x, x, cos, sin)[0][..., rotary_permutation(d_k)]
    mine = x[..., rotary_permutation(d_k)]
    matched = RotaryEmbedding(d_k, length, angle_dtype=torch.float32)(mine)
    torch.testing.assert_close(matched, theirs, atol=0, rtol=0)
    assert (RotaryEmbedding(d_k, length)(mine) - theirs).abs().max() > 1e-5


@pytest.mark.tooling  # slow (make test-tooling, CI): keeps make test under 5 minutes
def test_the_rotation_is_transformers_own_at_qwen3_s_32768_positions():
    from transformers.models.qwen3.modeling_qwen3 import Qwen3RotaryEmbedding

    config = Qwen3Config(head_dim=128, rope_parameters={"rope_theta": 1e6})
    length, d_k = config.max_position_embeddings, 128
    assert length == 32768
    x = torch.randn(1, 2, length, d_k, generator=torch.Generator().manual_seed(2))
    cos, sin = Qwen3RotaryEmbedding(config)(x, torch.arange(length)[None])
    theirs, _ = apply_rotary_pos_emb(x, x, cos, sin)
    permutation = rotary_permutation(d_k)
    ours = RotaryEmbedding(d_k, length, base=1e6, angle_dtype=torch.float32)
    torch.testing.assert_close(ours(x[..., permutation]), theirs[..., permutation], atol=0, rtol=0)
    exact = RotaryEmbedding(d_k, length, base=1e6)  # float64 angles: off by about 1e-2
    assert (exact(x[..., permutation]) - theirs[..., permutation]).abs().max() > 1e-3


def test_the_padding_row_gets_no_gradient_as_in_transformers():
    reference = scrambled(
        LlamaForCausalLM(LlamaConfig(**SHAPE, pad_token_id=3, tie_word_embeddings=False))
    ).train()
    ours = from_transformers(reference).train()
    assert ours.config.padding_idx == 3
    ids = torch.tensor([[3, 5, 3, 7, 9, 3]])
    ours(ids, targets=ids)[1].backward()
    theirs = reference(ids, labels=ids).loss  # transformers shifts the labels itself
    theirs.backward()
    ours_grad = ours.token_embedding.weight.grad
    assert ours_grad[3].abs().max() == 0 and ours_grad[5].abs().max() > 0
    assert reference.model.embed_tokens.weight.grad[3].abs().max() == 0


@pytest.mark.parametrize(
    "make",
    [
        lambda: GPT2LMHeadModel(
            GPT2Config(
                vocab_size=84,
                n_embd=24,
                n_layer=3,
                n_head=4,
                n_positions=32,
                bos_token_id=0,
                eos_token_id=0,
                tie_word_embeddings=False,
                scale_attn_weights=False,
                scale_attn_by_inverse_layer_idx=True,
            )
        ),
        lambda: LlamaForCausalLM(LlamaConfig(**SHAPE, attention_bias=True, mlp_bias=True)),
    ],
    ids=["gpt2 untied, unscaled, scaled by layer", "llama with biases"],
)
def test_the_switches_survive_the_kv_cache(make):
    """The score scale lives in q (GroupedQueryAttention.project), so the KV cache, which
    calls project, generates transformers' tokens too."""
    reference = scrambled(make())
    ours, prompt = from_transformers(reference), torch.tensor([[5, 17, 3]])
    theirs = reference.generate(prompt, max_new_tokens=12, do_sample=False, pad_token_id=0)
    assert torch.equal(generate(ours, prompt, 12, greedy=True), theirs)
    assert torch.equal(generate_with_cache(ours, prompt, 12, greedy=True), theirs)
