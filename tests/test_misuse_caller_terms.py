"""The last misuses of issue 43, each with one clear message in the caller's terms: the
argument's name, the value passed, and what to do; raised by course_utils itself."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch
from test_bad_inputs import assert_raised_in_course_utils

from course_utils import sampling
from course_utils.config import ModelConfig, TrainConfig
from course_utils.embedding import check_token_ids
from course_utils.generation import generate, generate_with_cache
from course_utils.gqa import expand_kv_heads
from course_utils.kv_cache import cache_bytes
from course_utils.lab.device import get_device, resolve_device
from course_utils.lab.rehearsal import REHEARSAL_ENV, acting_capability
from course_utils.layers import FeedForward, LayerNorm
from course_utils.measure import cli, record
from course_utils.measure.benchmark import benchmark_training
from course_utils.model import TinyDecoder
from course_utils.modern_model import ModernConfig, ModernDecoder
from course_utils.number_task import NumberTask, exact_match
from course_utils.positional import additive_positions
from course_utils.rmsnorm import RMSNorm
from course_utils.rotary import RotaryEmbedding
from course_utils.swiglu import SwiGLUFeedForward
from course_utils.training import make_optimizer, precision, save_checkpoint
from course_utils.training.evaluation import eval_seed
from course_utils.training.model_kinds import build_decoder

CFG = dict(vocab_size=20, block_size=8, d_model=24, n_heads=3, n_layers=1)


def tiny() -> TinyDecoder:
    torch.manual_seed(0)
    return TinyDecoder(ModelConfig(**CFG)).eval()


def modern() -> ModernDecoder:
    torch.manual_seed(0)
    return ModernDecoder(ModernConfig(**{**CFG, "n_heads": 4, "n_kv_heads": 2})).eval()


# --- shapes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("layer", "owner"),
    [
        (RMSNorm(4), "RMSNorm"),
        (RMSNorm(4, explicit=True), "RMSNorm"),
        (LayerNorm(4), "LayerNorm"),
        (FeedForward(4, 8), "FeedForward"),
        (SwiGLUFeedForward(4, 8), "SwiGLUFeedForward"),
    ],
)
def test_a_zero_dimensional_input_to_a_per_channel_layer_is_named(layer, owner):
    with pytest.raises(ValueError) as info:
        layer(torch.tensor(1.0))
    message = str(info.value)
    assert f"{owner} expected x of shape (..., " in message
    assert "got a 0-dimensional tensor (shape (), one number)" in message
    assert "e.g. a (B, T, 4) tensor" in message
    assert_raised_in_course_utils(info)


def test_expand_kv_heads_with_no_key_value_head_says_so():
    with pytest.raises(ValueError) as info:
        expand_kv_heads(torch.zeros(2, 0, 5, 4), 4)
    message = str(info.value)
    assert "x has 0 key/value heads (x.shape[1] = 0 in shape (2, 0, 5, 4))" in message
    assert "n_heads=4" in message and "n_kv_heads >= 1" in message
    assert_raised_in_course_utils(info)
    assert expand_kv_heads(torch.zeros(2, 2, 5, 4), 4).shape == (2, 4, 5, 4)  # still works


def test_a_rotary_embedding_called_on_another_width_names_both_widths():
    rotary = RotaryEmbedding(8, 16)
    for width in (6, 10):
        with pytest.raises(ValueError) as info:
            rotary(torch.zeros(1, 2, 3, width))
        message = str(info.value)
        assert "built for head_dim=8" in message and f"a last axis of {width}" in message
        assert f"RotaryEmbedding(head_dim={width}, ...)" in message
        assert_raised_in_course_utils(info)
    with pytest.raises(ValueError, match=r"head_dim=8 .* a last axis of 9 .* width is even"):
        rotary(torch.zeros(1, 2, 3, 9))
    assert rotary(torch.zeros(1, 2, 3, 8)).shape == (1, 2, 3, 8)


# --- a model where a config is expected, a model without its head --------------------------


@pytest.mark.parametrize("make", [tiny, modern])
def test_cache_bytes_given_a_model_asks_for_its_config(make):
    model = make()
    with pytest.raises(TypeError) as info:
        cache_bytes(model, 1, 4)
    message = str(info.value)
    assert f"config must be a ModelConfig or ModernConfig, got {type(model).__name__}" in message
    assert "pass cache_bytes(model.config, batch, length)" in message
    assert_raised_in_course_utils(info)
    assert cache_bytes(model.config, 1, 4) > 0


def test_cache_bytes_given_something_else_names_it():
    with pytest.raises(TypeError, match=r"config must be a ModelConfig or ModernConfig, got dict"):
        cache_bytes(dict(CFG), 1, 4)


def _hf_shape() -> dict:
    return dict(
        vocab_size=20,
        hidden_size=24,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=6,
        max_position_embeddings=8,
    )


@pytest.mark.parametrize(
    ("base", "config", "wanted"),
    [
        ("LlamaModel", "LlamaConfig", "LlamaForCausalLM"),
        ("Qwen3Model", "Qwen3Config", "Qwen3ForCausalLM"),
    ],
)
def test_from_transformers_given_a_base_model_names_the_head_and_the_class(base, config, wanted):
    transformers = pytest.importorskip("transformers")
    from course_utils.hf_weights import from_transformers

    torch.manual_seed(0)
    model = getattr(transformers, base)(getattr(transformers, config)(**_hf_shape()))
    with pytest.raises(ValueError) as info:
        from_transformers(model)
    message = str(info.value)
    assert f"hf_model is a {base}, which has no LM head (lm_head" in message
    assert f"pass {wanted} instead" in message
    assert_raised_in_course_utils(info)


def test_an_untied_gpt2_base_model_is_refused_and_a_tied_one_still_converts():
    transformers = pytest.importorskip("transformers")
    from course_utils.hf_weights import from_transformers

    shape = dict(vocab_size=20, n_embd=24, n_layer=1, n_head=4, n_positions=8)
    torch.manual_seed(0)
    untied = transformers.GPT2Model(transformers.GPT2Config(**shape, tie_word_embeddings=False))
    with pytest.raises(ValueError, match=r"GPT2Model, which has no LM head.*pass GPT2LMHeadModel"):
        from_transformers(untied)
    tied = transformers.GPT2LMHeadModel(transformers.GPT2Config(**shape)).eval()
    converted = from_transformers(tied.transformer)  # the base model: its head is wte
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        torch.testing.assert_close(converted(ids)[0], tied(ids).logits, rtol=0, atol=1e-5)


# --- devices ----------------------------------------------------------------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("device", ["cuda", "cuda:1", torch.device("cuda")])
def test_the_rehearsal_helper_asked_for_cuda_without_cuda_says_what_to_do(device, monkeypatch):
    monkeypatch.delenv(REHEARSAL_ENV, raising=False)
    with pytest.raises(RuntimeError) as info:
        acting_capability(device)
    message = str(info.value)
    assert f"device={str(torch.device(device))!r} asks for a CUDA GPU" in message
    assert "this machine has no CUDA" in message
    assert f"set {REHEARSAL_ENV} to one of cuda-bf16, cuda-fp16 and pass device='cpu'" in message
    assert_raised_in_course_utils(info)


def test_the_rehearsal_helper_still_answers_for_a_cpu_and_when_rehearsing(monkeypatch):
    monkeypatch.delenv(REHEARSAL_ENV, raising=False)
    assert acting_capability("cpu") is None
    monkeypatch.setenv(REHEARSAL_ENV, "cuda-fp16")
    assert acting_capability("cpu") == (7, 5)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_device_precision_for_cuda_without_cuda_is_the_same_clear_error(monkeypatch):
    monkeypatch.delenv(REHEARSAL_ENV, raising=False)
    config = TrainConfig(batch_size=2, max_iters=2, warmup_iters=1)
    with pytest.raises(RuntimeError) as info:
        precision.device_precision("cuda", config)
    assert "'cuda'" in str(info.value) and "'cpu'" in str(info.value)
    assert_raised_in_course_utils(info)


@pytest.mark.parametrize(
    ("device", "error", "pattern"),
    [
        ("tpu", ValueError, r"unknown device 'tpu'; expected one of"),
        (0, TypeError, r"device must be a device name .*got 0 \(int\); for GPU 0 pass 'cuda:0'"),
        (None, TypeError, r"device must be a device name .*got None .*e\.g\. device='auto'"),
    ],
)
def test_benchmark_training_names_its_own_device_argument(device, error, pattern):
    with pytest.raises(error, match=pattern) as info:
        benchmark_training(device, timed_steps=1, repeats=1)
    assert_raised_in_course_utils(info)


def test_get_device_keeps_naming_its_argument_name():
    with pytest.raises(TypeError, match=r"^name must be a device name"):
        get_device(0)
    with pytest.raises(TypeError, match=r"^map_location must be a device name"):
        resolve_device(1.5, "map_location")
    assert resolve_device("cpu", "device") == torch.device("cpu")


# --- files ------------------------------------------------------------------------------------


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "a_file"
    path.write_text("not a folder")
    return path


@pytest.mark.parametrize("below", ["model.pt", "deeper/model.pt"])
def test_save_checkpoint_under_a_file_names_that_file(a_file, below):
    path = a_file / below
    with pytest.raises(NotADirectoryError) as info:
        save_checkpoint(path, tiny(), None, 0)
    message = str(info.value)
    assert f"path {str(path)!r} goes through {str(a_file)!r}, which is a file" in message
    assert "choose a path in a folder" in message
    assert_raised_in_course_utils(info)
    assert a_file.read_text() == "not a folder"


def _record_refuses(argv: list[str], capsys) -> str:
    """The one line and exit status 2 of ``record`` on ``argv``, before any training."""
    with pytest.raises(SystemExit) as stop:
        record.main(["--config", "baby", "--device", "cpu", *argv])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_record_out_in_a_folder_that_cannot_be_made_is_one_line_exit_2(
    tmp_path, monkeypatch, capsys
):
    real_mkdir = Path.mkdir

    def refuse(self, *args, **kwargs):
        if self.name == "locked":
            raise PermissionError(13, "Permission denied", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", refuse)
    out = tmp_path / "new" / "locked" / "run.json"
    err = _record_refuses(["--out", str(out)], capsys)
    assert f"--out {out}: cannot make the folder {out.parent} (Permission denied)" in err
    assert not (tmp_path / "new").exists()  # the folders it made to try are gone


def test_record_out_in_a_folder_that_takes_no_file_is_one_line_exit_2(
    tmp_path, monkeypatch, capsys
):
    def read_only(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)  # as root, permission bits say nothing
    out = tmp_path / "run.json"
    err = _record_refuses(["--out", str(out)], capsys)
    assert f"cannot write a file in {tmp_path} (Read-only file system)" in err
    assert "choose a path in a folder you can write" in err


def test_a_writable_out_path_leaves_nothing_behind(tmp_path):
    out = tmp_path / "a" / "b" / "run.json"
    assert cli._why_not_writable(out) is None
    assert list(tmp_path.iterdir()) == []


# --- an internal parameter's name in a message ----------------------------------------------


@pytest.mark.parametrize("generator", [generate, generate_with_cache])
@pytest.mark.parametrize(
    ("options", "error", "pattern"),
    [
        (dict(top_p=1.5), ValueError, r"^top_p must be a number in \(0, 1\], got 1\.5; top_p = 1"),
        (dict(top_p="0.9"), TypeError, r"^top_p must be a number, got '0\.9'"),
        (dict(top_k=0), ValueError, r"^top_k must be an int in \[1, V=20\], got 0; top_k = 1"),
        (dict(top_k=2.5), TypeError, r"^top_k must be an int, got 2\.5"),
    ],
)
def test_sampling_options_are_named_as_the_caller_passed_them(generator, options, error, pattern):
    with pytest.raises(error, match=pattern) as info:
        generator(tiny(), torch.zeros(1, 2, dtype=torch.long), 2, **options)
    assert_raised_in_course_utils(info)


def test_the_filters_themselves_keep_their_own_names():
    logits = torch.randn(2, 20)
    with pytest.raises(ValueError, match=r"^p must be a number in \(0, 1\]"):
        sampling.top_p_filter(logits, 1.5)
    with pytest.raises(ValueError, match=r"^k must be an int in \[1, V=20\]"):
        sampling.top_k_filter(logits, 0)
    with pytest.raises(ValueError, match=r"^top_p must be"):
        sampling.sample_next(logits, top_p=0.0)


def test_number_task_lists_name_the_item():
    task = NumberTask.build()
    with pytest.raises(ValueError, match=r"^numbers\[1\] must be an int in \[0, 999\], got 1000"):
        task.batch([3, 1000], ["digits", "digits"])
    with pytest.raises(ValueError, match=r"^outputs\[0\] must be one of \['chinese', 'digits'\]"):
        task.batch([3], ["french"])
    with pytest.raises(TypeError, match=r"^numbers\[0\] must be an int, got 2\.5"):
        exact_match(task, ["2"], [2.5], ["digits"])


def test_token_id_messages_name_the_argument_in_the_fix():
    with pytest.raises(TypeError, match=r"src must be an integer tensor .* src\.long\(\)"):
        check_token_ids(torch.zeros(1, 2), 10, "src")
    with pytest.raises(TypeError, match=r"convert with ids\.long\(\)"):
        check_token_ids(torch.zeros(1, 2), 10)


def test_additive_positions_names_its_argument_kind():
    with pytest.raises(
        ValueError, match=r"^kind must be one of \('sinusoidal', 'learned', 'rope'\)"
    ):
        additive_positions("rotary", 8, 4)


# --- a model where a config is expected, elsewhere ------------------------------------------


@pytest.mark.parametrize(
    "call",
    [lambda model: TinyDecoder(model), lambda model: build_decoder(model)],
    ids=["TinyDecoder", "build_decoder"],
)
def test_a_model_passed_as_its_config_is_told_to_pass_its_config(call):
    pattern = (
        r"got TinyDecoder; that is a model, not its config: pass its \.config \(model\.config\)"
    )
    with pytest.raises(TypeError, match=pattern) as info:
        call(tiny())
    assert_raised_in_course_utils(info)


@pytest.mark.parametrize(
    "call",
    [lambda model: eval_seed(model), lambda model: make_optimizer(model, model)],
    ids=["eval_seed", "make_optimizer"],
)
def test_a_model_passed_as_the_train_config_is_named(call):
    pattern = r"^config must be a TrainConfig, got TinyDecoder; .*TrainConfig\(batch_size=\.\.\."
    with pytest.raises(TypeError, match=pattern) as info:
        call(tiny())
    assert_raised_in_course_utils(info)


def test_transformers_models_and_configs_in_each_others_place():
    transformers = pytest.importorskip("transformers")
    from course_utils.hf_weights import config_from_transformers, gpt2_state_dict, llama_state_dict

    torch.manual_seed(0)
    llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(**_hf_shape()))
    with pytest.raises(
        ValueError,
        match=r"hf_config is a LlamaForCausalLM, a model, not its configuration: pass its \.config",
    ):
        config_from_transformers(llama)
    for convert in (llama_state_dict, gpt2_state_dict):
        with pytest.raises(
            TypeError,
            match=r"must be a ModernConfig, got LlamaConfig; .*config_from_transformers\(hf_config",
        ) as info:
            convert(llama.state_dict(), llama.config)
        assert_raised_in_course_utils(info)
    converted = llama_state_dict(llama.state_dict(), config_from_transformers(llama.config))
    assert "token_embedding.weight" in converted
