"""Misuse found by an audit: each call is refused in course_utils with the right exception type
and a message naming the argument, what was expected, what was given and the fix."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from course_utils.checks import check_choice, check_float_dtype
from course_utils.config import ModelConfig, TrainConfig
from course_utils.encoder_decoder import EncoderBlock, EncoderDecoder, EncoderDecoderConfig
from course_utils.lab.device import get_device
from course_utils.lab.pretrained import attention_maps
from course_utils.layers import FeedForward
from course_utils.model import TinyDecoder
from course_utils.number_task import NumberTask
from course_utils.tokenization import CharTokenizer
from course_utils.training.checkpoint import save_checkpoint
from course_utils.training.evaluation import estimate_loss
from course_utils.training.precision import make_grad_scaler

TEXT = "hello world"
TOK = CharTokenizer.from_text(TEXT)
STREAM = torch.tensor(TOK.encode(TEXT * 4))


def tiny_model() -> TinyDecoder:
    torch.manual_seed(0)
    return TinyDecoder(ModelConfig(TOK.vocab_size, 8, d_model=16, n_heads=2, n_layers=1))


def ed_config(**changes) -> EncoderDecoderConfig:
    values = dict(
        src_vocab_size=11, tgt_vocab_size=13, d_model=16, n_heads=2, d_ff=32,
        n_encoder_layers=1, n_decoder_layers=1, max_len=8,
    )  # fmt: skip
    return EncoderDecoderConfig(**(values | changes))


def ed_model() -> EncoderDecoder:
    torch.manual_seed(0)
    return EncoderDecoder(ed_config())


SRC = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0]])
TGT = torch.tensor([[1, 2, 3], [4, 5, 6]])
TRAIN = dict(batch_size=4, max_iters=10)

# (id, call, exception, regex the message must match)
CASES = [
    (
        "ffn_activation_list",
        lambda: FeedForward(16, 64, activation=["gelu"]),
        TypeError,
        r"activation must be a name, one of \('gelu', 'relu'\), got \['gelu'\].*pass 'gelu'",
    ),
    (
        "ffn_activation_module",
        lambda: FeedForward(16, 64, activation=torch.nn.GELU()),
        TypeError,
        r"activation must be a name.*got a GELU module; pass the name 'gelu'",
    ),
    (
        "ffn_activation_class",
        lambda: FeedForward(16, 64, activation=torch.nn.ReLU),
        TypeError,
        r"activation must be a name.*the class ReLU; pass the name 'relu'",
    ),
    (
        "encoder_block_activation_list",
        lambda: EncoderBlock(16, 2, 32, activation=["relu"]),
        TypeError,
        r"activation must be a name.*pass 'relu' itself, not a list",
    ),
    (
        "ed_config_activation_module",
        lambda: ed_config(activation=torch.nn.ReLU()),
        TypeError,
        r"activation must be a name.*ReLU module; pass the name 'relu'",
    ),
    (
        "ed_all_padding_source_row",
        lambda: ed_model()(torch.tensor([[3, 4, 5, 0], [0, 0, 0, 0]]), TGT),
        ValueError,
        r"src row 1 is all padding \(every id is pad_id=0\).*at least one real token",
    ),
    (
        "ed_encode_all_padding_source_row",
        lambda: ed_model().encode(torch.tensor([[0, 0, 0, 0], [3, 0, 0, 0]])),
        ValueError,
        r"src row 0 is all padding",
    ),
    (
        "ed_encode_misspelled_keyword",
        lambda: ed_model().encode(SRC, need_weight=True),
        TypeError,
        r"encode\(\) got an unexpected keyword argument 'need_weight'",
    ),
    (
        "ed_decode_misspelled_keyword",
        lambda: ed_model().decode(TGT, torch.zeros(2, 4, 16), need_weight=True),
        TypeError,
        r"decode\(\) got an unexpected keyword argument 'need_weight'",
    ),
    (
        "estimate_loss_optimizer_as_model",
        lambda: estimate_loss(
            torch.optim.AdamW(tiny_model().parameters()), {"val": STREAM}, TrainConfig(**TRAIN)
        ),
        TypeError,
        r"model must be a torch.nn.Module, got AdamW; pass the model .*not the optimizer",
    ),
    (
        "estimate_loss_module_without_config",
        lambda: estimate_loss(torch.nn.Linear(2, 2), {"val": STREAM}, TrainConfig(**TRAIN)),
        TypeError,
        r"model must carry a config with a block_size.*got a Linear",
    ),
    (
        "attention_maps_empty_text",
        lambda: attention_maps(tiny_model(), TOK, ""),
        ValueError,
        r"text is empty \(''\); it must have 1 to block_size=8 characters, so at least one",
    ),
    (
        "attention_maps_swapped",
        lambda: attention_maps(TOK, tiny_model(), "hello"),
        TypeError,
        r"model must be a TinyDecoder, got CharTokenizer; the model and the tokenizer look "
        r"swapped; the order is attention_maps\(model, tokenizer, text\)",
    ),
    (
        "attention_maps_model_as_str",
        lambda: attention_maps("model", TOK, "hi"),
        TypeError,
        r"model must be a TinyDecoder, got str; the order is attention_maps\(model, tokenizer",
    ),
    (
        "attention_maps_tokenizer_as_str",
        lambda: attention_maps(tiny_model(), "tok", "hi"),
        TypeError,
        r"tokenizer must be a tokenizer with an encode method.*got str",
    ),
    (
        "grad_scaler_gpu",
        lambda: make_grad_scaler("gpu", "fp16"),
        ValueError,
        r"device must be a torch.device or a name such as 'cpu', 'cuda'.*got 'gpu'",
    ),
    (
        "grad_scaler_precision_dtype",
        lambda: make_grad_scaler("cpu", torch.float16),
        TypeError,
        r"precision must be a name, one of \('bf16', 'fp16', 'fp32'\), got torch.float16",
    ),
    (
        "tag_id_list",
        lambda: NumberTask.build().tag_id(["digits"]),
        TypeError,
        r"output must be a name, one of \('chinese', 'digits'\), got \['digits'\].*"
        r"pass 'digits' itself",
    ),
    (
        "tag_id_unknown",
        lambda: NumberTask.build().tag_id("roman"),
        ValueError,
        r"output must be one of \['chinese', 'digits'\], got 'roman'",
    ),
    (
        "autocast_dtype_torch_dtype",
        lambda: TrainConfig(**TRAIN, autocast_dtype=torch.bfloat16),
        TypeError,
        r"autocast_dtype must be a name, one of .*got torch.bfloat16.*pass the name 'bfloat16'",
    ),
    (
        "autocast_dtype_unknown_name",
        lambda: TrainConfig(**TRAIN, autocast_dtype="bf16"),
        ValueError,
        r"autocast_dtype must be one of .*got 'bf16'",
    ),
    (
        "positional_list",
        lambda: ModelConfig(20, 8, 16, 2, 1, positional=["rope"]),
        TypeError,
        r"positional must be a name.*pass 'rope' itself, not a list",
    ),
    (
        "get_device_int",
        lambda: get_device(0),
        TypeError,
        r"name must be a device name \(a str such as 'auto', 'cpu'.*got 0 \(int\); for GPU 0 "
        r"pass 'cuda:0'",
    ),
    (
        "get_device_none",
        lambda: get_device(None),
        TypeError,
        r"name must be a device name.*got None \(NoneType\)",
    ),
]


@pytest.mark.parametrize("call, error, pattern", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_misuse_is_refused_with_a_clear_message(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


def test_save_checkpoint_into_a_directory_names_a_file(tmp_path):
    with pytest.raises(IsADirectoryError, match=r"is an existing directory.*model\.pt"):
        save_checkpoint(tmp_path, tiny_model(), None, 0)
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


@pytest.mark.parametrize(
    "value, error",
    [
        ("swish", ValueError),
        (None, TypeError),
        ({"gelu": 1}, TypeError),
        (1.5, TypeError),
    ],
)
def test_check_choice_of_names(value, error):
    with pytest.raises(error, match="activation must be"):
        check_choice(value, "activation", ("gelu", "relu"))


def test_check_choice_of_numbers_keeps_value_error_and_accepts_members():
    assert check_choice(2, "n", (1, 2)) == 2
    assert check_choice(None, "x", (None, "a")) is None
    with pytest.raises(ValueError, match=r"n must be one of \(1, 2\), got 3"):
        check_choice(3, "n", (1, 2))
    with pytest.raises(ValueError, match=r"n must be one of"):
        check_choice([1], "n", (1, 2))


def test_encoder_decoder_targets_accept_minus_100_like_pad_id():
    model = ed_model().eval()
    targets = torch.tensor([[2, 3, -100], [4, 0, 0]])
    logits, loss = model(SRC, TGT, targets)
    keep = (targets != -100) & (targets != 0)
    expected = F.cross_entropy(logits[keep], targets[keep])
    assert torch.allclose(loss, expected)
    _, same = model(SRC, TGT, targets.masked_fill(targets == -100, 0))
    assert torch.equal(loss, same)


def test_encoder_decoder_explicit_keywords_still_work():
    model = ed_model().eval()
    memory = model.encode(SRC, need_weights=True)
    logits = model.decode(TGT, memory, SRC != 0, need_weights=True)
    fast = model.decode(TGT, model.encode(SRC), SRC != 0)
    assert torch.allclose(logits, fast, atol=1e-5)


@pytest.mark.parametrize(
    ("dtype", "message"),
    [
        ("float32", r"dtype must be a torch.dtype such as torch.float32, got 'float32' \(str\)"),
        (torch.int64, r"dtype must be a floating dtype .*, got torch.int64: tables"),
        (torch.bool, r"dtype must be a floating dtype .*, got torch.bool: tables"),
    ],
)
def test_check_float_dtype_refuses_names_and_integer_dtypes(dtype, message):
    with pytest.raises(TypeError, match=message):
        check_float_dtype(dtype, why="tables would be truncated")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_check_float_dtype_returns_float_dtypes(dtype):
    assert check_float_dtype(dtype) is dtype
