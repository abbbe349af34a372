"""Misuse classes 2-6 (types and dtypes, configuration values, degenerate data, errors from
other libraries, hints that mislead). Each case asserts the exception type and that the message
names the argument, the expected value and the actual value; accepted cases check the result."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from course_utils.attention import MultiHeadAttention, split_heads
from course_utils.config import ModelConfig, TrainConfig
from course_utils.data import get_batch, load_shakespeare, train_val_split
from course_utils.embedding import TokenEmbedding
from course_utils.model import TinyDecoder
from course_utils.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding
from course_utils.tokenization import BytePairTokenizer, CharTokenizer, load_encoding
from course_utils.training import load_checkpoint, save_checkpoint, train

CONFIG = dict(vocab_size=20, block_size=8, d_model=24, n_heads=3, n_layers=1)


def tiny_model() -> TinyDecoder:
    torch.manual_seed(0)
    return TinyDecoder(ModelConfig(**CONFIG))


def short_run(**changes) -> TrainConfig:
    return TrainConfig(**{**dict(batch_size=2, max_iters=2, warmup_iters=1), **changes})


TOK = CharTokenizer.from_text("hello world")

# (id, call, exception, substrings the message must contain: argument, expected, actual)
CASES = [
    # class 2: types and dtypes
    (
        "max_len_float",
        lambda: SinusoidalPositionalEncoding(1e3, 24),
        TypeError,
        ["max_len", "int", "1000.0", "int(1000.0)"],
    ),
    (
        "learned_max_len_float",
        lambda: LearnedPositionalEmbedding(2.5, 24),
        TypeError,
        ["max_len", "int", "2.5"],
    ),
    (
        "max_new_tokens_float",
        lambda: tiny_model().generate(torch.zeros(1, 2, dtype=torch.long), 2.5),
        TypeError,
        ["max_new_tokens", "int", "2.5"],
    ),
    (
        "top_k_float",
        lambda: tiny_model().generate(torch.zeros(1, 2, dtype=torch.long), 2, top_k=2.0),
        TypeError,
        ["top_k", "int", "2.0"],
    ),
    (
        "split_heads_float",
        lambda: split_heads(torch.randn(2, 6, 24), 3.0),
        TypeError,
        ["n_heads", "int", "3.0"],
    ),
    (
        "mha_d_model_float",
        lambda: MultiHeadAttention(24.0, 3),
        TypeError,
        ["d_model", "int", "24.0"],
    ),
    ("mha_dropout", lambda: MultiHeadAttention(24, 3, dropout=1.5), ValueError, ["[0, 1)", "1.5"]),
    ("encode_bytes", lambda: TOK.encode(b"hello"), TypeError, ["text", "str", "bytes", ".decode"]),
    (
        "from_text_bytes",
        lambda: CharTokenizer.from_text(b"hi"),
        TypeError,
        ["text", "str", "bytes"],
    ),
    ("bpe_bytes", lambda: BytePairTokenizer.train(b"ab ab", 257), TypeError, ["text", "bytes"]),
    (
        "decode_batch",
        lambda: TOK.decode(torch.tensor([[1, 2]])),
        ValueError,
        ["ids", "1-D", "(1, 2)", "ids[0]"],
    ),
    ("decode_text", lambda: TOK.decode("he"), TypeError, ["ids", "str", "encode"]),
    ("decode_float", lambda: TOK.decode([1.0, 2.0]), TypeError, ["ids", "integer", "float32"]),
    (
        "decode_bool",
        lambda: TOK.decode(torch.tensor([True])),
        TypeError,
        ["ids", "integer", "bool"],
    ),
    (
        "ids_float",
        lambda: tiny_model()(torch.zeros(1, 4)),
        TypeError,
        ["ids", "integer", "float32"],
    ),
    (
        "targets_float",
        lambda: tiny_model()(torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 4)),
        TypeError,
        ["targets", "integer", "float32"],
    ),
    # class 3: configuration values
    (
        "negative_lr",
        lambda: short_run(learning_rate=-1e-3),
        ValueError,
        ["learning_rate", "(0, inf)", "-0.001"],
    ),
    ("nan_lr", lambda: short_run(learning_rate=float("nan")), ValueError, ["learning_rate", "nan"]),
    ("min_lr_above_lr", lambda: short_run(min_lr=0.1), ValueError, ["min_lr", "0.001", "0.1"]),
    (
        "negative_warmup",
        lambda: short_run(warmup_iters=-1),
        ValueError,
        ["warmup_iters", "0", "-1"],
    ),
    (
        "warmup_too_long",
        lambda: short_run(max_iters=10, warmup_iters=50),
        ValueError,
        ["warmup_iters", "max_iters=10", "50"],
    ),
    (
        "negative_weight_decay",
        lambda: short_run(weight_decay=-0.1),
        ValueError,
        ["weight_decay", "[0, inf)", "-0.1"],
    ),
    ("beta2_one", lambda: short_run(beta2=1.0), ValueError, ["beta2", "[0, 1)", "1.0"]),
    ("negative_grad_clip", lambda: short_run(grad_clip=-1.0), ValueError, ["grad_clip", "-1.0"]),
    (
        "batch_size_float",
        lambda: short_run(batch_size=2.0),
        TypeError,
        ["batch_size", "int", "2.0"],
    ),
    ("max_iters_bool", lambda: short_run(max_iters=True), TypeError, ["max_iters", "int", "True"]),
    ("eval_iters_zero", lambda: short_run(eval_iters=0), ValueError, ["eval_iters", "1", "0"]),
    (
        "autocast_unknown",
        lambda: short_run(autocast_dtype="fp16"),
        ValueError,
        ["autocast_dtype", "'bfloat16'", "'fp16'"],
    ),
    ("seed_negative", lambda: short_run(seed=-1), ValueError, ["seed", "0", "-1"]),
    (
        "d_model_float",
        lambda: ModelConfig(**{**CONFIG, "d_model": 24.0}),
        TypeError,
        ["d_model", "int", "24.0"],
    ),
    (
        "dropout_nan",
        lambda: ModelConfig(**CONFIG, dropout=float("nan")),
        ValueError,
        ["dropout", "[0, 1)", "nan"],
    ),
    ("d_ff_zero", lambda: ModelConfig(**CONFIG, d_ff=0), ValueError, ["d_ff", "1", "0"]),
    (
        "max_chars_negative",
        lambda: load_shakespeare(max_chars=-5),
        ValueError,
        ["max_chars", "1", "-5"],
    ),
    (
        "max_chars_float",
        lambda: load_shakespeare(max_chars=1e4),
        TypeError,
        ["max_chars", "int", "10000.0"],
    ),
    (
        "val_fraction_percent",
        lambda: train_val_split(torch.arange(100), 10),
        ValueError,
        ["val_fraction", "(0, 1)", "10"],
    ),
    (
        "temperature_zero",
        lambda: tiny_model().generate(torch.zeros(1, 2, dtype=torch.long), 2, temperature=0),
        ValueError,
        ["temperature", "> 0", "got 0", "greedy=True"],
    ),
    # class 4: degenerate data
    (
        "empty_batch",
        lambda: tiny_model()(
            torch.zeros(0, 4, dtype=torch.long), torch.zeros(0, 4, dtype=torch.long)
        ),
        ValueError,
        ["ids", "empty", "(0, 4)"],
    ),
    (
        "all_ignored_targets",
        lambda: tiny_model()(torch.ones(1, 2, dtype=torch.long), torch.full((1, 2), -100)),
        ValueError,
        ["-100", "ignore_index", "NaN"],
    ),
    (
        "short_val_split",
        lambda: train(
            tiny_model(),
            torch.randint(20, (200,)),
            torch.randint(20, (5,)),
            short_run(),
            progress=False,
        ),
        ValueError,
        ["val_data", "block_size + 1 = 9", "5 tokens"],
    ),
    (
        "empty_train_split",
        lambda: train(
            tiny_model(),
            torch.zeros(0, dtype=torch.long),
            torch.randint(20, (50,)),
            short_run(),
            progress=False,
        ),
        ValueError,
        ["train_data", "block_size + 1 = 9", "0 tokens"],
    ),
    (
        "float_train_data",
        lambda: train(
            tiny_model(), torch.rand(200), torch.randint(20, (50,)), short_run(), progress=False
        ),
        TypeError,
        ["train_data", "integer", "float32"],
    ),
    (
        "model_config_as_train_config",
        lambda: train(
            tiny_model(),
            torch.randint(20, (200,)),
            torch.randint(20, (50,)),
            ModelConfig(**CONFIG),
            progress=False,
        ),
        TypeError,
        ["config", "TrainConfig", "ModelConfig"],
    ),
    (
        "get_batch_text",
        lambda: get_batch("hello world", 4, 2),
        TypeError,
        ["data", "str", "encode"],
    ),
    (
        "get_batch_short",
        lambda: get_batch(torch.arange(8), 8, 2),
        ValueError,
        ["data", "8 tokens", "block_size + 1 = 9"],
    ),
    (
        "get_batch_zero_batch",
        lambda: get_batch(torch.arange(100), 8, 0),
        ValueError,
        ["batch_size", "1", "0"],
    ),
    # class 5: errors from other libraries
    (
        "tiktoken_too_large",
        lambda: load_encoding("cl100k_base").decode([10**6]),
        ValueError,
        ["tokens", "[0, 100277)", "1000000"],
    ),
    (
        "tiktoken_negative",
        lambda: load_encoding("cl100k_base").decode([-1]),
        ValueError,
        ["tokens", "[0, 100277)", "-1"],
    ),
    (
        "tiktoken_gap",
        lambda: load_encoding("cl100k_base").decode([100256]),
        ValueError,
        ["tokens", "100256", "cl100k_base", "gaps"],
    ),
    (
        "tiktoken_single",
        lambda: load_encoding("cl100k_base").decode_single_token_bytes(10**6),
        ValueError,
        ["token", "[0, 100277)", "1000000"],
    ),
    (
        "tiktoken_bytes",
        lambda: load_encoding("cl100k_base").encode(b"abc"),
        TypeError,
        ["text", "str", "bytes", ".decode"],
    ),
    (
        "tiktoken_batch",
        lambda: load_encoding("cl100k_base").decode(torch.tensor([[1, 2]])),
        ValueError,
        ["tokens", "1-D", "(1, 2)", "tokens[0]"],
    ),
]


@pytest.mark.parametrize("call, error, parts", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_misuse_is_refused_with_a_clear_message(call, error, parts):
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    for part in parts:
        assert part in message, (part, message)


def test_pickled_whole_model_names_save_checkpoint(tmp_path):
    path = tmp_path / "whole.pt"
    torch.save(tiny_model(), path)
    with pytest.raises(ValueError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert "course_utils.model.TinyDecoder" in message and "save_checkpoint" in message
    assert "weights_only" in message


def test_bare_state_dict_is_explained(tmp_path):
    path = tmp_path / "weights.pt"
    torch.save(tiny_model().state_dict(), path)
    with pytest.raises(ValueError, match=r"bare state_dict.*load_state_dict"):
        load_checkpoint(path)


def test_save_checkpoint_refuses_something_else(tmp_path):
    with pytest.raises(TypeError, match=r"model must be the TinyDecoder or ModernDecoder to save"):
        save_checkpoint(tmp_path / "x.pt", "model", None, step=1)


# --- unambiguous calls are accepted, with the right result ------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda t: t.to(torch.uint8),
        lambda t: t.to(torch.int16),
        lambda t: t.int(),
        lambda t: t.numpy().astype(np.uint16),
        lambda t: t.tolist(),
    ],
    ids=["uint8", "int16", "int32", "numpy-uint16", "list"],
)
def test_any_integer_ids_are_read_as_ids(make):
    ids = torch.tensor([[1, 0, 3, 1], [2, 2, 0, 1]])  # uint8 must not act as a boolean mask
    embedding = TokenEmbedding(20, 24)
    assert torch.equal(embedding(make(ids)), embedding(ids))
    model = tiny_model().eval()
    assert torch.equal(model(make(ids))[0], model(ids)[0])
    assert TOK.decode(make(ids[0])) == TOK.decode(ids[0].tolist())


def test_uint16_stream_trains_like_int64():
    stream = torch.randint(20, (300,))
    x, y = get_batch(stream.numpy().astype(np.uint16), 8, 4, torch.Generator().manual_seed(0))
    x64, y64 = get_batch(stream, 8, 4, torch.Generator().manual_seed(0))
    assert x.dtype == torch.long and torch.equal(x, x64) and torch.equal(y, y64)


def test_ignore_index_targets_match_cross_entropy():
    model = tiny_model().eval()
    ids = torch.tensor([[1, 2, 3, 4]])
    targets = torch.tensor([[2, 3, -100, -100]])
    logits, loss = model(ids, targets)
    expected = torch.nn.functional.cross_entropy(logits[0, :2], targets[0, :2])
    assert torch.allclose(loss, expected)


def test_greedy_ignores_temperature_zero():
    model = tiny_model()
    prompt = torch.zeros(1, 2, dtype=torch.long)
    assert torch.equal(
        model.generate(prompt, 3, temperature=0, greedy=True),
        model.generate(prompt, 3, greedy=True),
    )


def test_checker_given_a_tensor_says_pass_the_function(capsys):
    from course_utils.exercises import check_split_heads

    assert check_split_heads(torch.zeros(2, 3)) is False
    out = capsys.readouterr().out
    assert "pass the function itself, not its result" in out and "Tensor of shape (2, 3)" in out
