"""A battery of misuses over the whole public API (issue 12), one parametrised case per call.

Each case asserts the exception type and, with ``match``, that the message names the argument
and the value passed (and, where there is one, the fix); the innermost frame of the traceback
must be a course_utils file, so the error is the course's, not a library's. The classes: masks,
types and dtypes, configuration values, degenerate data, errors from other libraries, and
hints. The last tests check that the unambiguous calls next to each misuse are still accepted
(numpy and torch integer scalars count as ints), and the warm-up rule of TrainConfig.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from test_bad_inputs import assert_raised_in_course_utils

from course_utils import attention as att
from course_utils import data, masks, sampling
from course_utils import number_task as nt
from course_utils.config import DEFAULT_WARMUP_ITERS, ModelConfig, TrainConfig, get_config
from course_utils.embedding import TokenEmbedding
from course_utils.encoder_decoder import (
    CrossAttention,
    CrossDecoderBlock,
    EncoderBlock,
    EncoderDecoder,
    EncoderDecoderConfig,
)
from course_utils.exercises.core import compare, expect_error
from course_utils.lab import (
    assets,
    curves,
    diagram,
    environment,
    pretrained,
    shapes,
    viz,
)
from course_utils.lab.device import describe_device, seed_everything
from course_utils.layers import DecoderBlock, FeedForward, LayerNorm, PostLNDecoderBlock
from course_utils.model import TinyDecoder
from course_utils.tokenization import BytePairTokenizer, CharTokenizer, WordTokenizer, merge_pair
from course_utils.training import (
    DeviceBatches,
    History,
    autocast_context,
    estimate_loss,
    init_distributed,
    learning_rate_at,
    load_checkpoint,
    make_optimizer,
    precision,
    save_checkpoint,
    train,
)

CFG = dict(vocab_size=20, block_size=8, d_model=24, n_heads=3, n_layers=1)
X = torch.randn(2, 6, 24, generator=torch.Generator().manual_seed(0))
Q = torch.randn(2, 3, 6, 8, generator=torch.Generator().manual_seed(1))
IDS = torch.zeros(2, 6, dtype=torch.long)
STREAM = torch.randint(20, (200,), generator=torch.Generator().manual_seed(2))
LOGITS = torch.randn(2, 13, generator=torch.Generator().manual_seed(3))
TOK = CharTokenizer.from_text("hello world")
TASK = nt.NumberTask.build()
SRC = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0]])
TGT = torch.tensor([[2, 5, 6], [2, 7, 0]])


def model() -> TinyDecoder:
    torch.manual_seed(0)
    return TinyDecoder(ModelConfig(**CFG))


def run(**changes) -> TrainConfig:
    return TrainConfig(**{**dict(batch_size=2, max_iters=4, warmup_iters=1), **changes})


def ed_config(**changes) -> EncoderDecoderConfig:
    sizes = dict(
        src_vocab_size=11, tgt_vocab_size=13, d_model=24, n_heads=3, d_ff=96,
        n_encoder_layers=1, n_decoder_layers=1, max_len=16,
    )  # fmt: skip
    return EncoderDecoderConfig(**{**sizes, **changes})


def ed() -> EncoderDecoder:
    torch.manual_seed(0)
    return EncoderDecoder(ed_config())


def case(id_, call, error, *parts):
    """``parts``: substrings the message names, in order (the argument first)."""
    pattern = "(?s)" + ".*".join(re.escape(part) for part in parts)
    return pytest.param(call, error, pattern, id=id_)


def _checkpoint(tmp_path):
    return save_checkpoint(tmp_path / "ok.pt", model(), None, step=1)


MASKS = [
    case(
        "sdpa_mask_uint8",
        lambda: att.scaled_dot_product_attention(Q, Q, Q, torch.ones(6, 6, dtype=torch.uint8)),
        TypeError,
        "mask",
        "torch.uint8",
        ".bool()",
    ),
    case(
        "sdpa_mask_additive",
        lambda: att.scaled_dot_product_attention(Q, Q, Q, torch.zeros(6, 6)),
        TypeError,
        "mask",
        "torch.float32",
        "== 0",
    ),
    case(
        "sdpa_mask_inverted",
        lambda: att.scaled_dot_product_attention(
            Q, Q, Q, torch.ones(6, 6, dtype=torch.bool).triu(1)
        ),
        ValueError,
        "mask",
        "inverted",
        "~mask",
    ),
    case(
        "sdpa_mask_numpy",
        lambda: att.scaled_dot_product_attention(Q, Q, Q, np.ones((6, 6), bool)),
        TypeError,
        "mask",
        "ndarray",
    ),
    case(
        "mha_mask_list",
        lambda: att.MultiHeadAttention(24, 3)(X, mask=[[True] * 6] * 6),
        TypeError,
        "mask",
        "list",
    ),
    case(
        "mha_kpm_float",
        lambda: att.MultiHeadAttention(24, 3)(X, key_padding_mask=torch.ones(2, 6)),
        TypeError,
        "key_padding_mask",
        "torch.float32",
    ),
    case(
        "mha_kpm_shape",
        lambda: att.MultiHeadAttention(24, 3)(
            X, key_padding_mask=torch.ones(2, 5, dtype=torch.bool)
        ),
        ValueError,
        "key_padding_mask",
        "(2, 5)",
    ),
    case(
        "padding_mask_text_lengths",
        lambda: masks.padding_mask("23", 6),
        TypeError,
        "lengths",
        "'23'",
    ),
    case(
        "padding_mask_float_size",
        lambda: masks.padding_mask([2, 3], 6.0),
        TypeError,
        "size",
        "6.0",
        "int(6.0)",
    ),
    case("causal_mask_float", lambda: masks.causal_mask(6.0), TypeError, "size", "6.0", "int(6.0)"),
    case("causal_mask_negative", lambda: masks.causal_mask(-1), ValueError, "size", "-1"),
    case(
        "encoder_kpm_long",
        lambda: EncoderBlock(24, 3, 96)(X, key_padding_mask=torch.ones(2, 6, dtype=torch.long)),
        TypeError,
        "key_padding_mask",
        "torch.int64",
    ),
    case(
        "encoder_kpm_inverted",
        lambda: EncoderBlock(24, 3, 96)(
            X, key_padding_mask=torch.tensor([[False] * 4 + [True] * 2] * 2)
        ),
        ValueError,
        "key_padding_mask",
        "~key_padding_mask",
    ),
    case(
        "encoder_kpm_empty_row",
        lambda: EncoderBlock(24, 3, 96)(
            X, key_padding_mask=torch.tensor([[True] * 6, [False] * 6])
        ),
        ValueError,
        "key_padding_mask",
        "sequence(s) [1]",
    ),
    case(
        "cross_kpm_float",
        lambda: CrossAttention(24, 3)(X, torch.randn(2, 4, 24), torch.ones(2, 4)),
        TypeError,
        "key_padding_mask",
        "torch.float32",
    ),
    case(
        "cross_kpm_inverted",
        lambda: CrossAttention(24, 3)(
            X, torch.randn(2, 4, 24), torch.tensor([[False, False, True, True]] * 2)
        ),
        ValueError,
        "key_padding_mask",
        "~key_padding_mask",
    ),
    case(
        "encode_src_mask_inverted",
        lambda: ed().encode(SRC, src_key_padding_mask=SRC == 0),
        ValueError,
        "key_padding_mask",
    ),
]

TYPES = [
    case(
        "model_config_dict",
        lambda: TinyDecoder(dict(CFG)),
        TypeError,
        "config",
        "ModelConfig",
        "dict",
    ),
    case(
        "ed_config_dict",
        lambda: EncoderDecoder(dict(src_vocab_size=3)),
        TypeError,
        "config",
        "EncoderDecoderConfig",
        "dict",
    ),
    case(
        "char_vocab_none", lambda: CharTokenizer(None), TypeError, "vocab", "NoneType", "from_text"
    ),
    case("char_vocab_ids", lambda: CharTokenizer([1, 2]), TypeError, "vocab", "int", "[1, 2]"),
    case("word_vocab_int", lambda: WordTokenizer(5), TypeError, "vocab", "int"),
    case(
        "bpe_pattern_int",
        lambda: BytePairTokenizer.train("ab ab", 260, pat_str=5),
        TypeError,
        "pat_str",
        "int",
    ),
    case(
        "bpe_pattern_invalid",
        lambda: BytePairTokenizer(pat_str="[a-"),
        ValueError,
        "pat_str",
        "'[a-'",
    ),
    case(
        "bpe_merge_float",
        lambda: BytePairTokenizer(merges=[(97, 98.5)]),
        TypeError,
        "merges[0][1]",
        "98.5",
    ),
    case(
        "bpe_merge_triple",
        lambda: BytePairTokenizer(merges=[(97, 98, 99)]),
        ValueError,
        "merges[0]",
        "(97, 98, 99)",
    ),
    case(
        "bpe_byte_ids_float",
        lambda: BytePairTokenizer(byte_ids=[float(i) for i in range(256)]),
        TypeError,
        "byte_ids[0]",
        "0.0",
    ),
    case(
        "bpe_chunk_bytes",
        lambda: BytePairTokenizer().encode_chunk(b"ab"),
        TypeError,
        "chunk",
        "bytes",
        ".decode",
    ),
    case(
        "merge_pair_text",
        lambda: merge_pair("abc", ("a", "b"), 9),
        TypeError,
        "ids",
        "str",
        "encode",
    ),
    case("merge_pair_int_pair", lambda: merge_pair([1, 2, 3], 5, 9), TypeError, "pair", "5"),
    case(
        "merge_pair_triple",
        lambda: merge_pair([1, 2, 3], (1, 2, 3), 9),
        ValueError,
        "pair",
        "(1, 2, 3)",
    ),
    case(
        "merge_pair_float_id", lambda: merge_pair([1, 2], (1, 2), 9.0), TypeError, "new_id", "9.0"
    ),
    case(
        "split_heads_numpy",
        lambda: att.split_heads(np.zeros((2, 6, 24)), 3),
        TypeError,
        "x",
        "ndarray",
        "torch.as_tensor",
    ),
    case("merge_heads_list", lambda: att.merge_heads([1, 2]), TypeError, "x", "list"),
    case(
        "mha_x_numpy",
        lambda: att.MultiHeadAttention(24, 3)(X.numpy()),
        TypeError,
        "x",
        "ndarray",
        "torch.as_tensor",
    ),
    case("layernorm_x_numpy", lambda: LayerNorm(24)(X.numpy()), TypeError, "x", "ndarray"),
    case("ffn_x_list", lambda: FeedForward(24, 96)([[0.0] * 24]), TypeError, "x", "list"),
    case(
        "cross_memory_numpy",
        lambda: CrossAttention(24, 3)(X, np.zeros((2, 4, 24))),
        TypeError,
        "memory",
        "ndarray",
    ),
    case(
        "windows_at_float_starts",
        lambda: data.windows_at(STREAM, torch.tensor([0.0, 1.0]), 8),
        TypeError,
        "starts",
        "torch.float32",
        ".long()",
    ),
    case(
        "device_batches_block_float",
        lambda: DeviceBatches(STREAM, 8.0, 2),
        TypeError,
        "block_size",
        "8.0",
    ),
    case(
        "device_batches_seed_float",
        lambda: DeviceBatches(STREAM, 8, 2, seed=1.5),
        TypeError,
        "seed",
        "1.5",
    ),
    case(
        "top_k_float", lambda: sampling.top_k_filter(LOGITS, 2.0), TypeError, "k", "2.0", "int(2.0)"
    ),
    case(
        "top_p_text",
        lambda: sampling.top_p_filter(LOGITS, "0.9"),
        TypeError,
        "p",
        "'0.9'",
        "float('0.9')",
    ),
    case(
        "temperature_text",
        lambda: sampling.apply_temperature(LOGITS, "1.0"),
        TypeError,
        "temperature",
        "'1.0'",
    ),
    case(
        "sample_next_generator_int",
        lambda: sampling.sample_next(LOGITS, generator=0),
        TypeError,
        "generator",
        "torch.Generator",
        "int",
    ),
    case(
        "sample_next_greedy_text",
        lambda: sampling.sample_next(LOGITS, greedy="no"),
        TypeError,
        "greedy",
        "'no'",
    ),
    case(
        "seeded_generator_float", lambda: sampling.seeded_generator(1.5), TypeError, "seed", "1.5"
    ),
    case(
        "seed_everything_text", lambda: seed_everything("7"), TypeError, "seed", "'7'", "int('7')"
    ),
    case(
        "generate_temperature_text",
        lambda: model().generate(IDS[:1], 2, temperature="1"),
        TypeError,
        "temperature",
        "'1'",
    ),
    case("number_float", lambda: nt.number_to_words(12.0), TypeError, "n", "12.0", "int(12.0)"),
    case(
        "encode_source_bytes",
        lambda: TASK.encode_source(b"three"),
        TypeError,
        "words",
        "bytes",
        ".decode",
    ),
    case(
        "batch_outputs_str",
        lambda: TASK.batch([1, 2], "digits"),
        TypeError,
        "outputs",
        "str",
        "['digits'] * n",
    ),
    case("batch_numbers_int", lambda: TASK.batch(5, ["digits"]), TypeError, "numbers", "int"),
    case(
        "decode_target_batch",
        lambda: TASK.decode_target(torch.tensor([[5, 6]])),
        ValueError,
        "ids",
        "(1, 2)",
        "ids[0]",
    ),
    case(
        "split_numbers_seed_float",
        lambda: nt.split_numbers(0.2, seed=1.5),
        TypeError,
        "seed",
        "1.5",
    ),
    case(
        "exact_match_str",
        lambda: nt.exact_match(TASK, "3", [3], ["digits"]),
        TypeError,
        "predictions",
        "str",
    ),
    case("all_pairs_int", lambda: nt.all_pairs(5), TypeError, "numbers", "int"),
    case("ed_src_float", lambda: ed()(torch.zeros(2, 4), TGT), TypeError, "src", "torch.float32"),
    case(
        "ed_targets_float",
        lambda: ed()(SRC, TGT, torch.zeros(2, 3)),
        TypeError,
        "targets",
        "torch.float32",
    ),
    case(
        "ed_targets_out_of_range",
        lambda: ed()(SRC, TGT, TGT + 20),
        ValueError,
        "targets",
        "vocab_size=13",
    ),
    case(
        "ed_eos_float",
        lambda: ed().greedy_decode(SRC, TGT[:, :1], 1.0, 2),
        TypeError,
        "eos_id",
        "1.0",
    ),
    case(
        "ed_max_new_float",
        lambda: ed().greedy_decode(SRC, TGT[:, :1], 1, 2.5),
        TypeError,
        "max_new_tokens",
        "2.5",
    ),
    case(
        "trace_shapes_not_a_module",
        lambda: shapes.trace_shapes("model", IDS),
        TypeError,
        "model",
        "torch.nn.Module",
        "str",
    ),
    case(
        "trace_shapes_depth_float",
        lambda: shapes.trace_shapes(model(), IDS, max_depth=1.5),
        TypeError,
        "max_depth",
        "1.5",
    ),
    case(
        "named_shape_list",
        lambda: shapes.named_shape(X, ["B", "T", "C"]),
        TypeError,
        "axes",
        "list",
        "' '.join",
    ),
    case(
        "name_axes_list",
        lambda: shapes.name_axes((2, 6), ["B", "T"]),
        TypeError,
        "axis_names",
        "dict",
        "list",
    ),
    case(
        "name_axes_float_size",
        lambda: shapes.name_axes((2, 6), {"B": 2.0, "T": 6}),
        TypeError,
        "axis_names['B']",
        "2.0",
    ),
    case(
        "plot_labels_int",
        lambda: viz.plot_attention(torch.rand(3, 3), 3),
        TypeError,
        "query_tokens",
        "int",
    ),
    case(
        "plot_loss_dict",
        lambda: curves.plot_loss_curves({"step": [1]}),
        TypeError,
        "history",
        "History",
        "dict",
    ),
    case(
        "plot_loss_bar_text",
        lambda: curves.plot_loss_curves(History(), bar="1.5"),
        TypeError,
        "bar",
        "'1.5'",
    ),
    case(
        "diagram_stages_str",
        lambda: diagram.draw_decoder_diagram("abc"),
        TypeError,
        "stages",
        "str",
    ),
    case(
        "diagram_bad_stage",
        lambda: diagram.draw_decoder_diagram([("a",)]),
        ValueError,
        "stages",
        "('a',)",
    ),
    case("asset_path_none", lambda: assets.asset_path(None), TypeError, "relative", "NoneType"),
    case(
        "parse_constraints_bytes",
        lambda: environment.parse_constraints(b"torch==2.0"),
        TypeError,
        "text",
        "bytes",
        ".decode",
    ),
    case("release_float", lambda: environment.release(2.13), TypeError, "version", "2.13"),
    case(
        "expect_error_name",
        lambda: expect_error("ValueError").__enter__(),
        TypeError,
        "exception",
        "'ValueError'",
    ),
    case(
        "compare_expected_list",
        lambda: compare(torch.zeros(2), [0.0, 0.0]),
        TypeError,
        "expected",
        "list",
    ),
    case(
        "pattern_pairs_bytes",
        lambda: pretrained.pattern_pairs(b"hello"),
        TypeError,
        "text",
        "bytes",
    ),
    case(
        "corpus_windows_float",
        lambda: pretrained.corpus_windows("hello world " * 10, 2.5, 5),
        TypeError,
        "n",
        "2.5",
    ),
    case(
        "make_optimizer_model_config",
        lambda: make_optimizer(model(), ModelConfig(**CFG)),
        TypeError,
        "config",
        "TrainConfig",
        "ModelConfig",
    ),
    case(
        "make_optimizer_not_a_module",
        lambda: make_optimizer("model", run()),
        TypeError,
        "model",
        "torch.nn.Module",
        "str",
    ),
    case(
        "lr_at_model_config",
        lambda: learning_rate_at(3, ModelConfig(**CFG)),
        TypeError,
        "config",
        "TrainConfig",
        "ModelConfig",
    ),
    case(
        "lr_at_float_step",
        lambda: learning_rate_at(2.5, run()),
        TypeError,
        "step",
        "2.5",
        "int(2.5)",
    ),
    case("lr_at_text_step", lambda: learning_rate_at("3", run()), TypeError, "step", "'3'"),
    case(
        "estimate_loss_tensor",
        lambda: estimate_loss(model(), STREAM, run()),
        TypeError,
        "splits",
        "dict",
        "Tensor",
    ),
    case(
        "estimate_loss_model_config",
        lambda: estimate_loss(model(), {"val": STREAM}, ModelConfig(**CFG)),
        TypeError,
        "config",
        "TrainConfig",
    ),
    case(
        "estimate_loss_float_split",
        lambda: estimate_loss(model(), {"val": torch.rand(100)}, run()),
        TypeError,
        "val",
        "torch.float32",
    ),
    case(
        "autocast_model_config",
        lambda: autocast_context("cpu", ModelConfig(**CFG)),
        TypeError,
        "config",
        "TrainConfig",
    ),
    case(
        "capability_float",
        lambda: precision.choose_precision("cuda", 8.0),
        TypeError,
        "capability",
        "8.0",
        "(8, 0)",
    ),
    case(
        "train_not_a_model",
        lambda: train("model", STREAM, STREAM, run(), progress=False),
        TypeError,
        "model",
        "TinyDecoder",
        "str",
    ),
]

CONFIGURATION = [
    case(
        "layernorm_float",
        lambda: LayerNorm(24.0),
        TypeError,
        "normalized_shape",
        "24.0",
        "int(24.0)",
    ),
    case("layernorm_zero", lambda: LayerNorm(0), ValueError, "normalized_shape", "at least 1", "0"),
    case("layernorm_tuple", lambda: LayerNorm((24,)), TypeError, "normalized_shape", "(24,)"),
    case(
        "layernorm_eps_negative",
        lambda: LayerNorm(24, eps=-1),
        ValueError,
        "eps",
        "(0, inf)",
        "-1.0",
    ),
    case("layernorm_eps_zero", lambda: LayerNorm(24, eps=0), ValueError, "eps", "(0, inf)", "0.0"),
    case("layernorm_eps_text", lambda: LayerNorm(24, eps="1e-5"), TypeError, "eps", "'1e-5'"),
    case(
        "layernorm_explicit_text",
        lambda: LayerNorm(24, explicit="yes"),
        TypeError,
        "explicit",
        "'yes'",
    ),
    case("ffn_d_ff_float", lambda: FeedForward(24, 96.0), TypeError, "d_ff", "96.0", "int(96.0)"),
    case("ffn_d_model_zero", lambda: FeedForward(0, 96), ValueError, "d_model", "at least 1", "0"),
    case(
        "ffn_dropout_two",
        lambda: FeedForward(24, 96, dropout=2),
        ValueError,
        "dropout",
        "[0, 1)",
        "2",
    ),
    case("block_d_model_float", lambda: DecoderBlock(24.0, 3, 96), TypeError, "d_model", "24.0"),
    case("block_heads_float", lambda: DecoderBlock(24, 3.0, 96), TypeError, "n_heads", "3.0"),
    case("block_d_ff_negative", lambda: DecoderBlock(24, 3, -1), ValueError, "d_ff", "-1"),
    case(
        "block_dropout_one",
        lambda: DecoderBlock(24, 3, 96, dropout=1.0),
        ValueError,
        "dropout",
        "[0, 1)",
        "1.0",
    ),
    case(
        "block_rotary_float",
        lambda: DecoderBlock(24, 3, 96, rotary_max_len=8.0),
        TypeError,
        "rotary_max_len",
        "8.0",
    ),
    case("post_ln_d_ff_1e2", lambda: PostLNDecoderBlock(24, 3, 1e2), TypeError, "d_ff", "100.0"),
    case(
        "mha_dropout_text",
        lambda: att.MultiHeadAttention(24, 3, dropout="0.1"),
        TypeError,
        "dropout",
        "'0.1'",
    ),
    case(
        "mha_rotary_zero",
        lambda: att.MultiHeadAttention(24, 3, rotary_max_len=0),
        ValueError,
        "rotary_max_len",
        "0",
    ),
    case(
        "mha_bias_text", lambda: att.MultiHeadAttention(24, 3, bias="no"), TypeError, "bias", "'no'"
    ),
    case("encoder_block_d_ff_float", lambda: EncoderBlock(24, 3, 96.0), TypeError, "d_ff", "96.0"),
    case(
        "encoder_block_activation",
        lambda: EncoderBlock(24, 3, 96, activation="swish"),
        ValueError,
        "activation",
        "'swish'",
    ),
    case(
        "cross_block_dropout",
        lambda: CrossDecoderBlock(24, 3, 96, dropout=1.5),
        ValueError,
        "dropout",
        "1.5",
    ),
    case("edc_d_model_float", lambda: ed_config(d_model=24.0), TypeError, "d_model", "24.0"),
    case("edc_max_len_1e3", lambda: ed_config(max_len=1e3), TypeError, "max_len", "1000.0"),
    case("edc_dropout_one", lambda: ed_config(dropout=1.0), ValueError, "dropout", "1.0"),
    case(
        "edc_activation", lambda: ed_config(activation="swish"), ValueError, "activation", "'swish'"
    ),
    case(
        "edc_pad_id_outside", lambda: ed_config(pad_id=13), ValueError, "pad_id", "at most 10", "13"
    ),
    case(
        "edc_shared_text",
        lambda: ed_config(shared_embeddings="yes"),
        TypeError,
        "shared_embeddings",
        "'yes'",
    ),
    case(
        "lr_at_negative_step",
        lambda: learning_rate_at(-1, run()),
        ValueError,
        "step",
        "at least 0",
        "-1",
    ),
    case(
        "warmup_too_long",
        lambda: run(max_iters=10, warmup_iters=50),
        ValueError,
        "warmup_iters",
        "max_iters=10",
        "50",
    ),
    case(
        "warmup_equal",
        lambda: run(max_iters=10, warmup_iters=10),
        ValueError,
        "warmup_iters",
        "max_iters=10",
        "got 10",
    ),
    case(
        "target_text_1000",
        lambda: TASK.target_text(1000, "digits"),
        ValueError,
        "n",
        "[0, 999]",
        "1000",
    ),
    case(
        "device_type_gpu",
        lambda: precision.choose_precision("gpu", None, "bfloat16"),
        ValueError,
        "device_type",
        "'gpu'",
    ),
    case(
        "device_type_with_index",
        lambda: precision.choose_precision("cuda:0", (8, 0)),
        ValueError,
        "device_type",
        "'cuda:0'",
    ),
    case(
        "grad_scaler_precision",
        lambda: precision.make_grad_scaler("cpu", "half"),
        ValueError,
        "precision",
        "'half'",
    ),
    case(
        "describe_precision_unknown",
        lambda: precision.describe_precision("fp8", "cpu"),
        ValueError,
        "precision",
        "'fp8'",
    ),
    case(
        "seeded_generator_device",
        lambda: sampling.seeded_generator(0, device="gpu"),
        ValueError,
        "device",
        "'gpu'",
    ),
    case("describe_device_gpu", lambda: describe_device("gpu"), ValueError, "device", "'gpu'"),
    case("init_distributed_gpu", lambda: init_distributed("gpu"), ValueError, "device", "'gpu'"),
    case(
        "device_batches_gpu",
        lambda: DeviceBatches(STREAM, 8, 2, device="gpu"),
        ValueError,
        "device",
        "'gpu'",
    ),
    case(
        "device_batches_batch_zero",
        lambda: DeviceBatches(STREAM, 8, 0),
        ValueError,
        "batch_size",
        "0",
    ),
    case(
        "corpus_windows_zero",
        lambda: pretrained.corpus_windows("hello world " * 10, 0, 5),
        ValueError,
        "n",
        "at least 1",
        "0",
    ),
    case(
        "trace_shapes_depth_negative",
        lambda: shapes.trace_shapes(model(), IDS, max_depth=-1),
        ValueError,
        "max_depth",
        "-1",
    ),
]

DEGENERATE = [
    case(
        "windows_past_the_end",
        lambda: data.windows_at(STREAM, torch.tensor([195]), 8),
        ValueError,
        "starts",
        "[0, 192)",
        "[195]",
    ),
    case(
        "estimate_loss_short_split",
        lambda: estimate_loss(model(), {"val": STREAM[:5]}, run()),
        ValueError,
        "val",
        "5 tokens",
        "block_size=8",
    ),
    case(
        "estimate_loss_no_splits",
        lambda: estimate_loss(model(), {}, run()),
        ValueError,
        "splits",
        "empty",
    ),
    case(
        "plot_empty_weights",
        lambda: viz.plot_attention(torch.zeros(0, 0), []),
        ValueError,
        "weights",
        "(0, 0)",
    ),
    case(
        "plot_heads_batch",
        lambda: viz.plot_attention_heads(torch.rand(1, 3, 4, 4), list("abcd")),
        ValueError,
        "weights",
        "(1, 3, 4, 4)",
        "weights[0]",
    ),
    case(
        "ed_max_new_negative",
        lambda: ed().greedy_decode(SRC, TGT[:, :1], 1, -1),
        ValueError,
        "max_new_tokens",
        "-1",
    ),
    case(
        "corpus_windows_length_zero",
        lambda: pretrained.corpus_windows("hello world " * 10, 2, 0),
        ValueError,
        "length",
        "0",
    ),
]

SECOND_ROUND = [
    case("get_batch_empty_list", lambda: data.get_batch([], 8, 2), ValueError, "data", "0 tokens"),
    case(
        "embedding_scale_text",
        lambda: TokenEmbedding(20, 24, scale="yes"),
        TypeError,
        "scale",
        "'yes'",
    ),
    case(
        "mha_is_causal_text",
        lambda: att.MultiHeadAttention(24, 3)(X, is_causal="False"),
        TypeError,
        "is_causal",
        "'False'",
    ),
    case(
        "model_need_weights_text",
        lambda: model()(IDS, need_weights="no"),
        TypeError,
        "need_weights",
        "'no'",
    ),
    case(
        "position_influence_tensor", lambda: att.position_influence(X, X), TypeError, "fn", "Tensor"
    ),
    case(
        "plot_ax_text",
        lambda: viz.plot_attention(torch.rand(3, 3), "abc", ax="ax"),
        TypeError,
        "ax",
        "str",
    ),
    case(
        "plot_head_titles_text",
        lambda: viz.plot_attention_heads(torch.rand(3, 3, 3), "abc", head_titles="xyz"),
        TypeError,
        "head_titles",
        "str",
    ),
    case(
        "plot_heads_no_head",
        lambda: viz.plot_attention_heads(torch.rand(0, 3, 3), "abc"),
        ValueError,
        "weights",
        "(0, 3, 3)",
    ),
    case(
        "translate_decoder_only",
        lambda: nt.translate(model(), TASK, [1], ["digits"]),
        TypeError,
        "model",
        "EncoderDecoder",
        "TinyDecoder",
    ),
    case(
        "check_versions_list",
        lambda: environment.check_versions(installed=["torch"]),
        TypeError,
        "installed",
        "list",
    ),
    case(
        "trace_shapes_no_inputs",
        lambda: shapes.trace_shapes(model()),
        TypeError,
        "inputs",
        "trace_shapes(model, ids)",
    ),
    case(
        "sample_next_nan",
        lambda: sampling.sample_next(torch.full((2, 5), float("nan"))),
        ValueError,
        "distribution",
        "NaN",
    ),
]

LIBRARIES = [
    case(
        "checkpoint_map_location_gpu",
        lambda: load_checkpoint(Path("nowhere.pt"), map_location="gpu"),
        ValueError,
        "map_location",
        "'gpu'",
        "cuda",
    ),
    case(
        "constraints_missing",
        lambda: environment.tested_versions(Path("/nonexistent/constraints.txt")),
        FileNotFoundError,
        "constraints",
        "/nonexistent/constraints.txt",
    ),
    case(
        "save_checkpoint_path_int",
        lambda: save_checkpoint(123, model(), None, step=1),
        TypeError,
        "path",
        "int",
    ),
]


@pytest.mark.parametrize(
    "call, error, pattern",
    [*MASKS, *TYPES, *CONFIGURATION, *DEGENERATE, *SECOND_ROUND, *LIBRARIES],
)
def test_misuse_gives_a_clear_error(call, error, pattern):
    with pytest.raises(error, match=pattern) as info:
        call()
    assert_raised_in_course_utils(info)


@pytest.mark.parametrize(
    "changes, pattern",
    [
        (dict(step=2.5), r"step must be an int, got 2\.5"),
        (dict(step=-1), r"step must be at least 0"),
        (dict(optimizer="adam"), r"optimizer must be a torch\.optim\.Optimizer, got str"),
        (dict(train_config=ModelConfig(**CFG)), r"train_config must be a TrainConfig, got Model"),
        (dict(history={"step": []}), r"history must be a History, got dict"),
        (dict(batch_generator=0), r"batch_generator must be a torch\.Generator, got int"),
    ],
)
def test_save_checkpoint_refuses_what_it_could_not_write(tmp_path, changes, pattern):
    arguments = {"optimizer": None, "step": 1, **changes}
    with pytest.raises((TypeError, ValueError), match=pattern):
        save_checkpoint(tmp_path / "x.pt", model(), **arguments)
    assert not (tmp_path / "x.pt").exists()


def test_load_checkpoint_names_a_folder_and_a_model_of_another_kind(tmp_path):
    path = _checkpoint(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"is a directory, not a checkpoint file"):
        load_checkpoint(tmp_path)
    with pytest.raises(TypeError, match=r"model must be a TinyDecoder or ModernDecoder, got str"):
        load_checkpoint(path, model="model")
    with pytest.raises(ValueError, match=r"map_location must be .* got 'gpu'"):
        load_checkpoint(path, map_location="gpu")


# --- the calls next to the misuses stay accepted ---------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: masks.causal_mask(np.int64(6)),
        lambda: masks.padding_mask(torch.tensor([3, 6]), torch.tensor(6)),
        lambda: att.MultiHeadAttention(np.int64(24), torch.tensor(3), dropout=np.float32(0.1)),
        lambda: LayerNorm(np.int64(24), eps=np.float64(1e-5))(X),
        lambda: FeedForward(np.int64(24), np.int64(96), dropout=0.1)(X),
        lambda: DecoderBlock(np.int64(24), np.int64(3), np.int64(96), rotary_max_len=np.int64(8))(
            X
        ),
        lambda: learning_rate_at(np.int64(3), run()),
        lambda: learning_rate_at(torch.tensor(3), run()),
        lambda: model().generate(
            IDS[:1], np.int64(2), temperature=np.float32(0.8), top_k=np.int64(3)
        ),
        lambda: model().generate(IDS[:1], 2, temperature=torch.tensor(0.8)),
        lambda: sampling.top_k_filter(LOGITS, np.int64(3)),
        lambda: sampling.top_p_filter(LOGITS, np.float32(0.9)),
        lambda: sampling.apply_temperature(LOGITS, np.float32(0.7)),
        lambda: sampling.seeded_generator(np.int64(3)),
        lambda: seed_everything(np.int64(3)),
        lambda: describe_device("cpu"),
        lambda: nt.number_to_words(np.int64(312)),
        lambda: TASK.batch((np.int64(3), 12), ("digits", "chinese")),
        lambda: nt.split_numbers(0.2, seed=np.int64(1)),
        lambda: ed_config(d_model=np.int64(24), max_len=np.int64(16), dropout=np.float32(0.1)),
        lambda: ed()(SRC.to(torch.uint8), TGT.int(), TGT.to(torch.uint8)),
        lambda: ed().greedy_decode(SRC, TGT[:, :1], np.int64(1), np.int64(3)),
        lambda: DeviceBatches(STREAM.numpy().astype(np.uint16), np.int64(8), np.int64(2)).sample(),
        lambda: DeviceBatches(STREAM.tolist(), 8, 2).sample(),
        lambda: data.windows_at(STREAM, torch.tensor([0, 191], dtype=torch.int32), 8),
        lambda: shapes.name_axes(torch.Size([2, 6]), {"B": np.int64(2), "T": 6}),
        lambda: shapes.trace_shapes(model(), IDS, max_depth=np.int64(1)),
        lambda: viz.plot_attention(np.eye(3), "abc"),
        lambda: viz.plot_attention_heads(np.ones((2, 3, 3)) / 3, "abc"),
        lambda: merge_pair((1, 2, 3), (np.int64(1), np.int64(2)), np.int64(9)),
        lambda: BytePairTokenizer(merges=[(np.int64(97), np.int64(98))]),
        lambda: CharTokenizer("abc"),
        lambda: precision.choose_precision("cuda", [7, 5], "bfloat16"),
        lambda: pretrained.corpus_windows("hello world " * 10, np.int64(2), 5, seed=np.int64(0)),
    ],
)
def test_unambiguous_calls_are_accepted(call):
    call()
    viz.plt.close("all")


def test_empty_id_lists_decode_to_empty_text():
    assert TOK.decode([]) == "" and BytePairTokenizer().decode([]) == ""


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_device_this_machine_lacks_is_named_before_any_work(tmp_path):
    with pytest.raises(RuntimeError, match=r"device='cuda' was requested but this machine has 0"):
        data.get_batch(STREAM, 8, 2, device="cuda")
    with pytest.raises(RuntimeError, match=r"map_location='cuda' was requested"):
        load_checkpoint(_checkpoint(tmp_path), map_location="cuda")


def test_a_model_with_nan_weights_is_named_when_sampling():
    broken = model()
    with torch.no_grad():
        broken.lm_head.weight.fill_(float("nan"))
    with pytest.raises(ValueError, match=r"diverged in training"):
        broken.generate(IDS[:1], 2)


def test_a_numpy_step_is_saved_as_an_int(tmp_path):
    path = save_checkpoint(tmp_path / "np.pt", model(), None, step=np.int64(3))
    assert load_checkpoint(path)["step"] == 3


def test_lists_of_ids_reach_the_encoder_decoder_with_their_padding_mask():
    model = ed().eval()
    logits, _ = model(SRC, TGT)
    from_lists, _ = model(SRC.tolist(), TGT.tolist())
    assert torch.equal(logits, from_lists)  # lists get the same src != pad_id mask


# --- the warm-up rule ----------------------------------------------------------------------


@pytest.mark.parametrize("max_iters", [1, 9, 10, 40, 100])
def test_the_default_warmup_is_shortened_for_a_short_run(max_iters):
    config = TrainConfig(batch_size=8, max_iters=max_iters)
    assert config.warmup_iters == max_iters // 10 < max_iters
    rates = [learning_rate_at(step, config) for step in range(max_iters)]
    assert max(rates) == pytest.approx(config.learning_rate)  # the run reaches the peak


def test_presets_keep_their_warmup_and_shorten_it_for_a_short_run():
    for name in ("baby", "cpu", "gpu"):
        assert get_config(name, 84)[1].warmup_iters == DEFAULT_WARMUP_ITERS
    assert get_config("cpu", 84, max_iters=3)[1].warmup_iters == 0
    assert get_config("cpu", 84, max_iters=50)[1].warmup_iters == 5
    assert TrainConfig(batch_size=8, max_iters=101).warmup_iters == DEFAULT_WARMUP_ITERS


def test_any_other_warmup_must_end_before_max_iters():
    with pytest.raises(ValueError, match=r"warmup_iters must be < max_iters=50, got 99"):
        TrainConfig(batch_size=8, max_iters=50, warmup_iters=99)
    assert TrainConfig(batch_size=8, max_iters=50, warmup_iters=49).warmup_iters == 49
    short = TrainConfig(batch_size=8, max_iters=40)
    assert replace(short, max_iters=5000, warmup_iters=100).warmup_iters == 100
