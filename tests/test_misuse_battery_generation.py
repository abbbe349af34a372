"""The misuse battery (issue 12) for generation with a KV cache, positional encodings and the
training loop: each misuse gets the right exception type, raised inside course_utils, whose
message names the argument, the value passed and (where there is one) the fix; the
unambiguous calls next to them (numpy and 0-d tensor integers, lists of ids) are accepted.
Same style as ``tests/test_misuse_battery.py``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from test_bad_inputs import assert_raised_in_course_utils
from test_misuse_battery import CFG, Q, X  # the shared fixtures

from course_utils.config import ModelConfig, TrainConfig
from course_utils.generation import generate, generate_with_cache
from course_utils.kv_cache import KVCache, forward_with_cache
from course_utils.measure.generation_timing import time_per_token
from course_utils.model import TinyDecoder
from course_utils.positional import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    pe_shift_matrix,
    sinusoidal_positional_encoding,
)
from course_utils.rotary import RotaryEmbedding, apply_rotary_embedding
from course_utils.training import loop, make_optimizer, set_explicit_layer_norm, train
from course_utils.training import training_step as step

IDS = torch.tensor([[3, 1, 4]])
XY = torch.randint(20, (2, 8), generator=torch.Generator().manual_seed(2))
STREAM = torch.randint(20, (200,), generator=torch.Generator().manual_seed(3))
K = torch.zeros(1, 3, 1, 8)


def model() -> TinyDecoder:
    torch.manual_seed(0)
    return TinyDecoder(ModelConfig(**CFG)).eval()


def run() -> TrainConfig:
    return TrainConfig(batch_size=2, max_iters=4, warmup_iters=1)


def stepping(**changes):
    """``training_step`` on a fresh model with one argument changed."""
    m = model()
    arguments = dict(
        model=m, optimizer=make_optimizer(m, run()), x=XY, y=XY, learning_rate=1e-3,
        config=run(), device="cpu",
    )  # fmt: skip
    return step(**{**arguments, **changes})


def case(id_, call, error, *parts):
    """``parts``: substrings the message names, in order (the argument first)."""
    pattern = "(?s)" + ".*".join(re.escape(part) for part in parts)
    return pytest.param(call, error, pattern, id=id_)


KV_CACHE = [
    case("generate_float_count", lambda: generate(model(), IDS, 2.5), TypeError,
         "max_new_tokens", "2.5", "int(2.5)"),
    case("generate_text_count", lambda: generate_with_cache(model(), IDS, "3"), TypeError,
         "max_new_tokens", "'3'", "int('3')"),
    case("generate_float_crop_to", lambda: generate(model(), IDS, 2, crop_to=4.0), TypeError,
         "crop_to", "4.0", "int(4.0)"),
    case("generate_model_not_a_decoder", lambda: generate("model", IDS, 2), TypeError,
         "model", "TinyDecoder", "str"),
    case("generate_text_prompt", lambda: generate(model(), "hello", 2), TypeError,
         "ids", "str", "encode"),
    case("generate_float_ids", lambda: generate_with_cache(model(), IDS.float(), 2), TypeError,
         "ids", "torch.float32", ".long()"),
    case("generate_one_dimensional_prompt", lambda: generate(model(), IDS[0], 2), ValueError,
         "ids", "(B, T0)", "(3,)", "ids[None]"),
    case("generate_list_of_one_row", lambda: generate(model(), [3, 1, 4], 2), ValueError,
         "ids", "(B, T0)", "(3,)", "ids[None]"),
    case("generate_id_out_of_range", lambda: generate(model(), IDS + 20, 2), ValueError,
         "ids", "vocab_size=20"),
    case("generate_unknown_sampling_option", lambda: generate(model(), IDS, 2, topk=3),
         TypeError, "topk", "top_k"),
    case("generate_return_logits_text", lambda: generate(model(), IDS, 2, return_logits="yes"),
         TypeError, "return_logits", "'yes'"),
    case("forward_with_cache_no_cache", lambda: forward_with_cache(model(), IDS, None),
         TypeError, "cache", "KVCache", "NoneType", "KVCache()"),
    case("forward_with_cache_list_cache", lambda: forward_with_cache(model(), IDS, []),
         TypeError, "cache", "KVCache", "list"),
    case("forward_with_cache_model", lambda: forward_with_cache("model", IDS, KVCache()),
         TypeError, "model", "TinyDecoder", "str"),
    case("time_per_token_float_length", lambda: time_per_token(model(), [2.5], True), TypeError,
         "context_lengths[0]", "2.5", "int(2.5)"),
    case("time_per_token_float_repeats", lambda: time_per_token(model(), [2], True, repeats=1.5),
         TypeError, "repeats", "1.5", "int(1.5)"),
    case("time_per_token_zero_repeats", lambda: time_per_token(model(), [2], True, repeats=0),
         ValueError, "repeats", "at least 1", "0"),
    case("time_per_token_one_int", lambda: time_per_token(model(), 4, True), TypeError,
         "context_lengths", "list of ints", "4", "[4]"),
    case("time_per_token_use_cache_text", lambda: time_per_token(model(), [2], "yes"), TypeError,
         "use_cache", "'yes'"),
    case("time_per_token_model", lambda: time_per_token("model", [2], True), TypeError,
         "model", "TinyDecoder", "str"),
    case("kv_append_float_layer", lambda: KVCache().append(1.5, K, K), TypeError,
         "layer", "1.5", "int(1.5)"),
    case("kv_append_negative_layer", lambda: KVCache().append(-1, K, K), ValueError,
         "layer", "at least 0", "-1"),
    case("kv_append_numpy_keys", lambda: KVCache().append(0, K.numpy(), K), TypeError,
         "k", "ndarray", "torch.as_tensor(k)"),
    case("kv_append_other_dtype", lambda: KVCache([K], [K]).append(0, K.double(), K.double()),
         ValueError, "layer 0", "torch.float32", "torch.float64", "KVCache()"),
    case("kv_append_k_v_dtypes_differ", lambda: KVCache().append(0, K, K.double()), ValueError,
         "k and v", "torch.float32", "torch.float64"),
    case("kv_cache_keys_not_a_list", lambda: KVCache(keys=K), TypeError,
         "keys", "list", "Tensor", "KVCache()"),
    case("kv_cache_keys_values_unequal", lambda: KVCache([K], []), ValueError,
         "keys and values", "1", "0", "KVCache()"),
]  # fmt: skip

POSITIONAL = [
    case("pe_shift_float_width", lambda: pe_shift_matrix(2, 24.0), TypeError,
         "d_model", "24.0", "int(24.0)"),
    case("pe_shift_text_width", lambda: pe_shift_matrix(2, "24"), TypeError,
         "d_model", "'24'", "int('24')"),
    case("pe_shift_text_offset", lambda: pe_shift_matrix("2", 24), TypeError,
         "k", "'2'", "float('2')"),
    case("pe_shift_nan_offset", lambda: pe_shift_matrix(float("nan"), 24), ValueError,
         "k", "nan"),
    case("pe_shift_base_one", lambda: pe_shift_matrix(2, 24, base=1), ValueError,
         "base", "(1, inf)", "1.0"),
    case("pe_shift_integer_dtype", lambda: pe_shift_matrix(2, 24, dtype=torch.int64),
         TypeError, "dtype", "floating", "torch.int64"),
    case("sinusoidal_integer_dtype",
         lambda: sinusoidal_positional_encoding(8, 24, dtype=torch.int64),
         TypeError, "dtype", "floating", "torch.int64"),
    case("sinusoidal_dtype_text", lambda: sinusoidal_positional_encoding(8, 24, dtype="float32"),
         TypeError, "dtype", "torch.dtype", "'float32'"),
    case("sinusoidal_base_text", lambda: sinusoidal_positional_encoding(8, 24, base="1e4"),
         TypeError, "base", "'1e4'", "float('1e4')"),
    case("sinusoidal_module_float_size", lambda: SinusoidalPositionalEncoding(8.0, 24), TypeError,
         "max_len", "8.0", "int(8.0)"),
    case("sinusoidal_module_base_below_one", lambda: SinusoidalPositionalEncoding(8, 24, base=0.5),
         ValueError, "base", "(1, inf)", "0.5"),
    case("sinusoidal_module_numpy_input", lambda: SinusoidalPositionalEncoding(8, 24)(X.numpy()),
         TypeError, "x", "ndarray", "torch.as_tensor(x)"),
    case("sinusoidal_module_ids_input", lambda: SinusoidalPositionalEncoding(8, 24)(X.long()),
         TypeError, "x", "torch.int64", "token embeddings"),
    case("learned_list_input", lambda: LearnedPositionalEmbedding(8, 24)([[0.0] * 24]), TypeError,
         "x", "list", "torch.as_tensor(x)"),
    case("rotary_base_zero", lambda: RotaryEmbedding(8, 16, base=0), ValueError,
         "base", "(1, inf)", "0.0"),
    case("rotary_base_text", lambda: RotaryEmbedding(8, 16, base="1e4"), TypeError,
         "base", "'1e4'", "float('1e4')"),
    case("rotary_integer_input", lambda: RotaryEmbedding(8, 16)(Q.long()), TypeError,
         "x", "float", "torch.int64"),
    case("rotary_numpy_input", lambda: RotaryEmbedding(8, 16)(Q.numpy()), TypeError,
         "x", "ndarray", "torch.as_tensor(x)"),
    case("rotary_float_offset", lambda: RotaryEmbedding(8, 16)(Q, offset=1.5), TypeError,
         "offset", "1.5", "int(1.5)"),
    case("apply_rotary_negative_base", lambda: apply_rotary_embedding(Q, base=-1), ValueError,
         "base", "(1, inf)", "-1.0"),
    case("apply_rotary_numpy_input", lambda: apply_rotary_embedding(Q.numpy()), TypeError,
         "x", "ndarray", "torch.as_tensor(x)"),
    case("apply_rotary_text_positions", lambda: apply_rotary_embedding(Q, positions="0..5"),
         TypeError, "positions", "str", "torch.arange"),
]  # fmt: skip

TRAINING = [
    case("training_step_text_rate", lambda: stepping(learning_rate="1e-3"), TypeError,
         "learning_rate", "'1e-3'", "float('1e-3')"),
    case("training_step_negative_rate", lambda: stepping(learning_rate=-1e-3), ValueError,
         "learning_rate", "[0, inf)", "uphill", "-0.001"),
    case("training_step_nan_rate", lambda: stepping(learning_rate=float("nan")), ValueError,
         "learning_rate", "nan"),
    case("training_step_optimizer_name", lambda: stepping(optimizer="adamw"), TypeError,
         "optimizer", "torch.optim.Optimizer", "str", "make_optimizer"),
    case("training_step_need_weights_text", lambda: stepping(need_weights="no"), TypeError,
         "need_weights", "'no'"),
    case("training_step_scaler_number", lambda: stepping(scaler=1), TypeError,
         "scaler", "GradScaler", "int", "make_grad_scaler"),
    case("explicit_layer_norm_text", lambda: set_explicit_layer_norm(model(), "yes"), TypeError,
         "explicit", "'yes'"),
    case("explicit_layer_norm_model", lambda: set_explicit_layer_norm("model", True), TypeError,
         "model", "torch.nn.Module", "str"),
    case("train_resume_text", lambda: train(model(), STREAM, STREAM, run(), resume="no"),
         TypeError, "resume", "'no'"),
    case("train_resume_without_path", lambda: train(model(), STREAM, STREAM, run(), resume=True),
         ValueError, "resume=True", "checkpoint_path"),
    case("train_compile_text", lambda: train(model(), STREAM, STREAM, run(), compile="no"),
         TypeError, "compile", "'no'"),
    case("train_progress_text", lambda: train(model(), STREAM, STREAM, run(), progress="no"),
         TypeError, "progress", "'no'"),
    case("train_on_evaluation_text",
         lambda: train(model(), STREAM, STREAM, run(), on_evaluation="print"),
         TypeError, "on_evaluation", "'print'", "on_evaluation=print"),
]  # fmt: skip


@pytest.mark.parametrize("call, error, pattern", [*KV_CACHE, *POSITIONAL, *TRAINING])
def test_misuse_gives_a_clear_error(call, error, pattern):
    with pytest.raises(error, match=pattern) as info:
        call()
    assert_raised_in_course_utils(info)


@pytest.mark.parametrize(
    "options",
    [
        dict(on_evaluation="print"),
        dict(compile="no"),
        dict(resume="no"),
        dict(resume=True),
        dict(progress=1),
    ],
)
def test_train_refuses_bad_options_before_any_step(monkeypatch, options):
    steps = []
    monkeypatch.setattr(loop, "training_step", lambda *args, **kwargs: steps.append(args))
    with pytest.raises((TypeError, ValueError)):
        train(model(), STREAM, STREAM, run(), **options)
    assert steps == []


# --- the calls next to the misuses stay accepted ---------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: generate(model(), IDS, np.int64(2)),
        lambda: generate(model(), IDS, torch.tensor(2), crop_to=torch.tensor(4)),
        lambda: generate_with_cache(model(), IDS, 2, crop_to=np.int64(4)),
        lambda: generate_with_cache(model(), IDS.to(torch.uint8), 2, return_logits=np.bool_(True)),
        lambda: forward_with_cache(model(), [[3, 1, 4]], KVCache()),
        lambda: time_per_token(model(), np.array([1, 2]), np.bool_(True), repeats=np.int64(1)),
        lambda: time_per_token(model(), range(1, 3), False, repeats=torch.tensor(2)),
        lambda: KVCache().append(np.int64(0), K, K),
        lambda: pe_shift_matrix(np.int64(2), np.int64(24), base=np.float32(100)),
        lambda: pe_shift_matrix(-2.5, 24, dtype=torch.float32),
        lambda: sinusoidal_positional_encoding(8, 24, base=torch.tensor(100.0), dtype=torch.half),
        lambda: SinusoidalPositionalEncoding(np.int64(8), 24)(X),
        lambda: LearnedPositionalEmbedding(8, np.int64(24))(X.double()),
        lambda: RotaryEmbedding(8, 16, base=500)(Q, offset=np.int64(2)),
        lambda: RotaryEmbedding(8, 16)(Q.half(), offset=torch.tensor(2)),
        lambda: apply_rotary_embedding(Q, positions=list(range(6)), base=np.float64(500)),
        lambda: apply_rotary_embedding(Q, positions=np.arange(6)),
        lambda: stepping(learning_rate=np.float32(1e-3)),
        lambda: stepping(learning_rate=0, need_weights=np.bool_(True)),
        lambda: set_explicit_layer_norm(model(), np.bool_(True)),
    ],
)
def test_unambiguous_calls_are_accepted(call):
    call()


@pytest.mark.parametrize("convert", [torch.Tensor.tolist, torch.Tensor.numpy])
@pytest.mark.parametrize("generator", [generate, generate_with_cache])
def test_lists_and_numpy_prompts_generate_as_tensors_do(convert, generator):
    """As ``TinyDecoder.generate`` does: the ids are converted, not refused."""
    expected = generator(model(), IDS, 4, greedy=True)
    assert torch.equal(generator(model(), convert(IDS), 4, greedy=True), expected)
    assert torch.equal(model().generate(convert(IDS), 4, greedy=True), expected)


def test_train_calls_on_evaluation_with_each_evaluation():
    seen = []
    config = TrainConfig(batch_size=2, max_iters=4, warmup_iters=1, eval_interval=2, eval_iters=1)
    train(model().train(), STREAM, STREAM, config, progress=False, on_evaluation=seen.append)
    assert [record["step"] for record in seen] == [2, 4]
