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
    ids = torch.randint(0, 84, (3, 20), generator=torch.Generator().manual_seed(1))
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
