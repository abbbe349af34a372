"""Checkers for the notebooks' exercises, and a helper for cells that must raise.

A checker calls the student's function on fixed inputs, compares the result with a
reference, and prints one clear line: a tick when it matches, otherwise what differs (the
type, the shape, or the largest deviation and where it is). Checkers never raise on a wrong
answer, so a notebook with an unfinished exercise still runs to the end; they return
``True`` or ``False``. One module per notebook; what they share:

- :mod:`.judge` (with :mod:`.cases` and :mod:`.naming`): run the answer on many cases beside
  a reference and a catalogue of named mistakes, and name what is wrong;
- :mod:`.in_training` (with :mod:`.runner` and :mod:`.watch`): once the values are right,
  run the part as training does (its inputs left alone, train mode, one backward pass, the
  gradients of every input and parameter, tensors made on the CPU) and name what breaks;
- :mod:`.module_judge`: the same for the ``nn.Module`` parts, with the course's weights;
- :mod:`.sources` and :mod:`.assembly`: a part saved with the helpers it needs, and the
  learner's assembled decoder judged by the same checkers
  (:func:`course_utils.lab.parts.my_model`);
- :mod:`.core` and :mod:`.difference`: the older helpers and the sentence for a difference.
"""

from course_utils.exercises.core import compare, expect_error, run_check
from course_utils.exercises.difference import Tolerance, difference
from course_utils.exercises.judge import Case, judge
from course_utils.exercises.nb01_tokenization import (
    check_count_pairs,
    check_join_documents,
    check_merge_pair,
)
from course_utils.exercises.nb02_embeddings import check_logit_table, check_nearest_tokens
from course_utils.exercises.nb03_positional_encoding import (
    check_pe_shift_matrix,
    check_sinusoidal_table,
)
from course_utils.exercises.nb04_qkv_and_heads import check_head_queries, check_split_heads
from course_utils.exercises.nb05_scores_and_scaling import (
    check_scaled_scores,
    check_softmax_jacobian,
)
from course_utils.exercises.nb06_masking import (
    check_causal_mask,
    check_masked_softmax,
    check_padding_mask,
)
from course_utils.exercises.nb07_softmax_and_weighted_values import (
    check_attention,
    check_stable_softmax,
)
from course_utils.exercises.nb08_concat_and_w_o import check_merge_heads, check_multi_head_attention
from course_utils.exercises.nb09_residual_and_layernorm import (
    check_layer_norm,
    check_pre_ln_residual,
)
from course_utils.exercises.nb10_feed_forward import check_block_parameter_count, check_feed_forward
from course_utils.exercises.nb11_block_and_decoder import check_block, check_decoder
from course_utils.exercises.nb12_generation_loop import check_generate_loop
from course_utils.exercises.nb12_training import (
    check_estimate_loss,
    check_learning_rate,
    check_training_step,
)
from course_utils.exercises.nb13_generation import (
    check_append_to_cache,
    check_new_positions,
    check_top_p_filter,
)
from course_utils.exercises.nb13_kv_cache import check_forward_cached
from course_utils.exercises.nb14_encoder_decoder import (
    check_cross_attention,
    check_encoder_decoder_masks,
)

__all__ = [
    "Case",
    "Tolerance",
    "difference",
    "judge",
    "compare",
    "expect_error",
    "run_check",
    "check_count_pairs",
    "check_merge_pair",
    "check_join_documents",
    "check_logit_table",
    "check_nearest_tokens",
    "check_sinusoidal_table",
    "check_pe_shift_matrix",
    "check_split_heads",
    "check_head_queries",
    "check_scaled_scores",
    "check_softmax_jacobian",
    "check_causal_mask",
    "check_padding_mask",
    "check_masked_softmax",
    "check_stable_softmax",
    "check_attention",
    "check_merge_heads",
    "check_multi_head_attention",
    "check_layer_norm",
    "check_pre_ln_residual",
    "check_feed_forward",
    "check_block_parameter_count",
    "check_block",
    "check_decoder",
    "check_training_step",
    "check_learning_rate",
    "check_estimate_loss",
    "check_generate_loop",
    "check_append_to_cache",
    "check_new_positions",
    "check_top_p_filter",
    "check_forward_cached",
    "check_cross_attention",
    "check_encoder_decoder_masks",
]
