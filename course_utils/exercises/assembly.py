"""Judge the learner's assembled decoder the way the checkers judge its parts.

:func:`course_utils.lab.parts.my_model` assembles the learner's parts in one file. Each part
of the learner's is then run, inside that file, through its own checker (:data:`CHECKERS`:
the same cases, tolerance and accepted forms as in its notebook), quietly
(:func:`quietly`: nothing printed, nothing saved); then, when the decoder itself is the
course's, notebook 11's decoder checker runs on the whole (logits, loss, the gradient of every
parameter, train mode, the device). A part that fails is replaced by the course's solution,
with one line that names what its checker found: a forward difference, a gradient, randomness
in train mode, an exception with its line.
"""

from __future__ import annotations

from collections.abc import Callable

from course_utils.exercises.keeping import quiet_verdict
from course_utils.exercises.nb03_positional_encoding import check_sinusoidal_table
from course_utils.exercises.nb04_qkv_and_heads import check_split_heads
from course_utils.exercises.nb07_softmax_and_weighted_values import check_attention
from course_utils.exercises.nb08_concat_and_w_o import check_merge_heads, check_multi_head_attention
from course_utils.exercises.nb09_residual_and_layernorm import check_layer_norm
from course_utils.exercises.nb10_feed_forward import check_feed_forward
from course_utils.exercises.nb11_block_and_decoder import check_block, check_decoder
from course_utils.lab.language import tr

__all__ = ["CHECKERS", "judged", "part_problem"]

#: The checker of each part.
CHECKERS = {
    "sinusoidal_table": check_sinusoidal_table,
    "split_heads": check_split_heads,
    "attention": check_attention,
    "merge_heads": check_merge_heads,
    "MultiHeadAttention": check_multi_head_attention,
    "LayerNorm": check_layer_norm,
    "FeedForward": check_feed_forward,
    "Block": check_block,
    "Decoder": check_decoder,
}


def part_problem(name: str, part: object) -> str | None:
    """What part ``name``'s checker says of ``part``, run quietly (None when it passes, when
    the checker itself fails, or for a part without a checker)."""
    return quiet_verdict(CHECKERS[name], part) if name in CHECKERS else None


def judged(sources: dict[str, str], solutions: dict[str, str],
           load: Callable[[dict[str, str]], object]) -> dict[str, str]:  # fmt: skip
    """``sources`` with each of the learner's parts that fails (alone, or inside the decoder)
    replaced by its solution, one printed line each. ``load(sources)`` returns the assembled
    module, or a str saying why it does not load."""
    sources = dict(sources)
    for name in sources:
        if sources[name].strip() == solutions[name].strip():
            continue
        problem = _alone(name, sources, solutions, load)
        if problem is not None:
            print(
                tr(
                    "{name}: yours is replaced by the course's solution in this model: {problem}"
                ).format(name=name, problem=problem)
            )
            sources[name] = solutions[name]
    mine = [n for n in sources if sources[n].strip() != solutions[n].strip()]
    if not mine or "Decoder" in mine:
        return sources  # the learner's Decoder was judged whole above
    problem = _decoder_problem(sources, load)
    if problem is None:
        return sources
    culprits = mine if len(mine) == 1 else [
        n for n in mine if _decoder_problem({**solutions, n: sources[n]}, load)
    ]  # fmt: skip
    for name in culprits or mine:
        print(
            tr(
                "{name}: yours passes its own check but not inside the decoder, so the course's "
                "solution is used: {problem}"
            ).format(name=name, problem=problem)
        )
        sources[name] = solutions[name]
    return sources


def _alone(name: str, sources, solutions, load) -> str | None:
    """Why part ``name`` fails: its file does not parse, it does not load beside the
    solutions, or its checker, run on it inside the assembled file, rejects it."""
    try:
        compile(sources[name], f"{name}.py", "exec")
    except SyntaxError as error:
        return tr(
            "its file {name}.py in your parts folder does not parse (SyntaxError: {error}, line "
            "{lineno}); run its checker cell again"
        ).format(name=name, error=error.msg, lineno=error.lineno)
    trial = load({**solutions, name: sources[name]})
    if isinstance(trial, str):
        return trial
    module = load(sources)
    if isinstance(module, str):  # another part of the learner's breaks the file: judge alone
        module = trial
    return part_problem(name, getattr(module, name, None))


def _decoder_problem(sources, load) -> str | None:
    module = load(sources)
    if isinstance(module, str):
        return module
    return part_problem("Decoder", module.Decoder)
