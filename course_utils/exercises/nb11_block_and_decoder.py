"""Checkers for notebook 11: the learner's ``Block`` and ``Decoder``, the last two parts of
their model.

The ``Block`` is compared with the course's :class:`course_utils.layers.DecoderBlock` and
the ``Decoder`` with :class:`course_utils.model.TinyDecoder` (sinusoidal positions, no
dropout), each holding the same random weights, loaded by name. Before comparing, each
checker runs the answer's sublayers (the learner's parts of notebooks 08-10) on their own,
so a wrong ``LayerNorm`` is named as such, not as a wrong block.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import course_utils.exercises.solution_model as solution
from course_utils.config import ModelConfig
from course_utils.exercises.difference import difference
from course_utils.exercises.judge import Case
from course_utils.exercises.keeping import quiet_verdict
from course_utils.exercises.module_judge import judge_module, random_weights
from course_utils.exercises.nb08_concat_and_w_o import check_multi_head_attention
from course_utils.exercises.nb09_residual_and_layernorm import check_layer_norm
from course_utils.exercises.nb10_feed_forward import check_feed_forward
from course_utils.lab.language import N_, tr
from course_utils.layers import DecoderBlock
from course_utils.model import TinyDecoder


class _ReferenceBlock(DecoderBlock):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__(d_model, n_heads, d_ff)

    def forward(self, x):
        return super().forward(x)


def _block_mistake(order: str) -> type:
    """A block whose forward is one of the wrong orders below, by name."""

    class Mistake(solution.Block):
        def forward(self, x):
            attend, feed = self.attention, self.feed_forward
            ln_1, ln_2 = self.ln_1, self.ln_2
            if order == "post-LN":
                x = ln_1(x + attend(x))
                return ln_2(x + feed(x))
            if order == "no attention residual":
                x = attend(ln_1(x))
                return x + feed(ln_2(x))
            if order == "no FFN residual":
                x = x + attend(ln_1(x))
                return feed(ln_2(x))
            if order == "normalised residual":
                x = ln_1(x)
                x = x + attend(x)
                x = ln_2(x)
                return x + feed(x)
            if order == "parallel":
                return x + attend(ln_1(x)) + feed(ln_2(x))
            if order == "FFN first":
                x = x + feed(ln_2(x))
                return x + attend(ln_1(x))
            if order == "ln_1 twice":
                x = x + attend(ln_1(x))
                return x + feed(ln_1(x))
            x = x + attend(x)  # "no LayerNorm"
            return x + feed(x)

    return Mistake


_BLOCK_MISTAKES = [
    (N_("post-LN, the paper's order, ln(x + sublayer(x)); the course's block is pre-LN: "
        "x = x + attention(ln_1(x)), then x = x + feed_forward(ln_2(x))"), "post-LN"),
    (N_("no residual around the attention: x = x + self.attention(self.ln_1(x))"),
     "no attention residual"),
    (N_("no residual around the feed-forward network: x + self.feed_forward(self.ln_2(x))"),
     "no FFN residual"),
    (N_("the normalised copy carried on the residual path: the stream is x itself, only the "
        "sublayer reads ln(x)"), "normalised residual"),
    (N_("attention and FFN both reading x (a parallel block): the FFN reads the stream after "
        "the attention's update"), "parallel"),
    (N_("the feed-forward network before the attention: attention first"), "FFN first"),
    (N_("ln_1 used for both sublayers: the FFN reads self.ln_2(x)"), "ln_1 twice"),
    (N_("no LayerNorm: each sublayer reads ln(x) (pre-LN)"), "no LayerNorm"),
]  # fmt: skip


def _block_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(21)
    sizes = [(24, 3, 96, (2, 6)), (12, 1, 20, (3, 5)), (16, 4, 64, (1, 1)), (20, 2, 40, (2, 7))]
    return [
        Case(d_model, n_heads, d_ff, torch.randn(b, t, d_model, generator=generator))
        for d_model, n_heads, d_ff, (b, t) in sizes
    ]


def _sublayer_problem(sublayer, reference, x, what: str, checker: str) -> str | None:
    """Why ``sublayer(x)`` is not ``reference(x)`` (one of the learner's earlier parts)."""
    try:
        with torch.no_grad():
            got, expected = sublayer(x), reference(x)
        problem = difference(got, expected, tr("its output"))
    except NotImplementedError:
        problem = tr("is not implemented yet")
    except Exception as error:  # the learner's part may fail in any way
        problem = tr("raised {kind}: {error}").format(kind=type(error).__name__, error=error)
    if problem is None:
        return None
    return tr("{what} is not right yet ({problem}); run {checker} on it first").format(
        what=what, problem=problem, checker=checker
    )


_SUBLAYERS = [  # (attribute, the part it holds, its notebook, the reference's call)
    ("ln_1", "LayerNorm", "09", lambda r: r.ln_1),
    ("attention", "MultiHeadAttention", "08", lambda r: lambda h: r.attention(h, is_causal=True)),
    ("ln_2", "LayerNorm", "09", lambda r: r.ln_2),
    ("feed_forward", "FeedForward", "10", lambda r: r.feed_forward),
]

_COURSE_VERDICTS: dict[type, str | None] = {}  # the course's own classes never change


def class_problem(cls: type, part: str) -> str | None:
    """What part ``part``'s own checker says of the class ``cls`` (the learner's
    ``LayerNorm``, say), run quietly; the course's classes are judged once."""
    if cls in _COURSE_VERDICTS:
        return _COURSE_VERDICTS[cls]
    checkers = {
        "LayerNorm": check_layer_norm,
        "MultiHeadAttention": check_multi_head_attention,
        "FeedForward": check_feed_forward,
        "Block": check_block,
    }
    problem = quiet_verdict(checkers[part], cls)
    if cls.__module__.startswith("course_utils.") or cls.__module__.startswith("torch."):
        _COURSE_VERDICTS[cls] = problem
    return problem


def _block_sublayers(block, reference, x) -> str | None:
    """Each sublayer's class through its own checker (the LayerNorm checker's nearly constant
    tokens show eps outside the root, which a block's random input hides), then each
    sublayer as built inside the block against the reference's."""
    for attribute, part, notebook, call in _SUBLAYERS:
        sublayer = getattr(block, attribute)
        what = tr("its {attribute} (your {part}, notebook {notebook})").format(
            attribute=attribute, part=part, notebook=notebook
        )
        checker = f"check_{_SNAKE[part]}({part})"
        problem = class_problem(type(sublayer), part)
        if problem is not None:
            return _not_right(what, problem, checker)
        problem = _sublayer_problem(sublayer, call(reference), x, what, checker)
        if problem is not None:
            return problem
    return None


def _not_right(what: str, problem: str, checker: str) -> str:
    return tr("{what} is not right yet: {problem}; fix it and run {checker}").format(
        what=what, problem=problem, checker=checker
    )


_SNAKE = {"LayerNorm": "layer_norm", "MultiHeadAttention": "multi_head_attention",
          "FeedForward": "feed_forward"}  # fmt: skip


def check_block(Block: type) -> bool:  # noqa: N803
    """Check the class ``Block(d_model, n_heads, d_ff)`` (``ln_1, attention, ln_2,
    feed_forward``): the pre-LN decoder block, ``x = x + attention(ln_1(x))`` then
    ``x = x + feed_forward(ln_2(x))`` (GPT-2; Xiong et al. 2020).

    First runs each sublayer's class through its own checker (the learner's LayerNorm,
    MultiHeadAttention and FeedForward: the LayerNorm checker's nearly constant tokens show
    eps outside the root, which a block's input hides) and names a wrong one; then each
    sublayer as built inside the block. Then four cases against the course's ``DecoderBlock`` with
    the same random weights: (C, h, d_ff) = (24, 3, 96), (12, 1, 20) one head, (16, 4, 64)
    with T = 1, (20, 2, 40). Names eight mistakes: post-LN, either residual missing, the
    normalised copy on the residual path, a parallel block, the FFN first, ln_1 twice, no
    LayerNorm. Then the block runs as training does: ``x += ...`` on the residual (the
    caller's x changed, backward broken) and dropout are named.
    """
    mistakes = [(message, _block_mistake(order)) for message, order in _BLOCK_MISTAKES]
    return judge_module(
        "Block", Block, _ReferenceBlock, _block_cases(), mistakes, build_args=3,
        checker="check_block", axes="B T C", structure=_block_structure_for,
    )  # fmt: skip


def _block_structure_for(block) -> str | None:
    """The sublayers of the learner's block, built for the first case (24, 3, 96)."""
    reference = _ReferenceBlock(24, 3, 96)
    reference.load_state_dict(random_weights(_ReferenceBlock, (24, 3, 96)))
    x = torch.randn(2, 6, 24, generator=torch.Generator().manual_seed(22))
    return _block_sublayers(block, reference.eval(), x)


# --- Decoder ---------------------------------------------------------------------------


class _ReferenceDecoder(TinyDecoder):
    """The course's TinyDecoder with sinusoidal positions and no dropout, built from the
    learner's arguments."""

    def __init__(self, vocab_size, block_size, d_model, n_heads, n_layers, d_ff):
        sizes = dict(vocab_size=vocab_size, block_size=block_size, d_model=d_model)
        sizes.update(n_heads=n_heads, n_layers=n_layers, d_ff=d_ff)
        super().__init__(ModelConfig(**sizes, positional="sinusoidal", dropout=0.0))

    def forward(self, ids, targets=None):
        return super().forward(ids, targets)


def _decode(model, ids, targets, *, scale="times", positions="added", norm=True, chain=True,
            loss="mean"):  # fmt: skip
    """The decoder's forward with one thing changed (the mistakes below)."""
    B, T = ids.shape
    x = model.token_embedding(ids)
    x = {"times": x * math.sqrt(model.d_model), "none": x, "divide": x / math.sqrt(model.d_model)}[
        scale
    ]
    if positions != "none":
        x = x + model.pe[:T]
    if positions == "scaled too":
        x = x * math.sqrt(model.d_model)
    h = x
    for block in model.blocks:
        h = block(h if chain else x)
    logits = model.lm_head(model.final_norm(h) if norm else h)  # (B, T, V)
    if targets is None:
        return logits, None
    flat = logits.reshape(B * T, -1)
    losses = {
        "mean": lambda: F.cross_entropy(flat, targets.reshape(-1)),
        "sum": lambda: F.cross_entropy(flat, targets.reshape(-1), reduction="sum"),
        "ids": lambda: F.cross_entropy(flat, ids.reshape(-1)),
        "shifted again": lambda: F.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]), targets[:, 1:].reshape(-1)
        ),
        "probabilities": lambda: F.cross_entropy(flat.softmax(-1), targets.reshape(-1)),
    }
    return logits, losses[loss]()


def _decoder_mistake(**change) -> type:
    class Mistake(solution.Decoder):
        def forward(self, ids, targets=None):
            return _decode(self, ids, targets, **change)

    return Mistake


_DECODER_MISTAKES = [
    (N_("the token embedding not scaled by sqrt(d_model) (§3.4): "
        "self.token_embedding(ids) * math.sqrt(self.d_model)"), dict(scale="none")),
    (N_("the token embedding divided by sqrt(d_model); multiply it"), dict(scale="divide")),
    (N_("no positions added: x = x + self.pe[:T], your table's first T rows"),
     dict(positions="none")),
    (N_("the positions scaled by sqrt(d_model) too: scale the token embedding only, then add "
        "the positions"), dict(positions="scaled too")),
    (N_("no final LayerNorm: logits = self.lm_head(self.final_norm(x))"), dict(norm=False)),
    (N_("every block reads the embeddings: each block reads the previous block's output "
        "(x = block(x))"), dict(chain=False)),
    (N_("the loss summed over the tokens; F.cross_entropy's default mean is the loss per token"),
     dict(loss="sum")),
    (N_("the loss against the input ids (unshifted): the targets are the next tokens, "
        "F.cross_entropy(logits.view(B * T, V), targets.view(B * T))"), dict(loss="ids")),
    (N_("the targets shifted a second time (logits[:, :-1] against targets[:, 1:]): targets[:, t] "
        "is already the token after ids[:, t]"), dict(loss="shifted again")),
    (N_("the loss on probabilities: F.cross_entropy takes the logits (it applies log-softmax "
        "itself)"), dict(loss="probabilities")),
]  # fmt: skip

_DECODER_ERRORS = [
    (
        RuntimeError,
        r"size of tensor a \(\d+\) must match the size of tensor b \(\d+\)",
        N_(
            "add one row of the table per input position, self.pe[:T] with T from ids.shape, "
            "not the whole table of block_size rows"
        ),
    ),
]


def _decoder_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(31)
    sizes = [  # (V, block_size, C, h, layers, d_ff), (B, T), targets?
        ((84, 16, 24, 3, 2, 96), (2, 6), True),
        ((11, 8, 12, 1, 1, 20), (3, 8), True),  # one head, one layer, T = block_size
        ((30, 10, 16, 4, 3, 64), (1, 1), False),  # T = 1, no targets: loss None
        ((50, 12, 20, 2, 2, 40), (2, 5), True),
    ]
    cases = []
    for args, shape, with_targets in sizes:
        ids = torch.randint(args[0], shape, generator=generator)
        targets = torch.randint(args[0], shape, generator=generator) if with_targets else None
        cases.append(Case(*args, ids, targets))
    return cases


def _decoder_structure(model) -> str | None:
    if model.lm_head.weight.data_ptr() != model.token_embedding.weight.data_ptr():
        return tr(
            "the head is not tied to the embedding: self.lm_head.weight = "
            "self.token_embedding.weight (weight tying, §3.4) makes them one tensor"
        )
    if len({id(block) for block in model.blocks}) < len(model.blocks):
        return tr(
            "the same Block object is repeated in self.blocks ([Block(...)] * n_layers): "
            "build a new one per layer, [Block(...) for _ in range(n_layers)]"
        )
    reference = _ReferenceBlock(24, 3, 96)
    reference.load_state_dict(
        {
            k[len("blocks.0.") :]: v
            for k, v in model.state_dict().items()
            if k.startswith("blocks.0.")
        }
    )
    x = torch.randn(2, 6, 24, generator=torch.Generator().manual_seed(32))
    final_norm = tr("its final_norm (your LayerNorm, notebook 09)")
    for what, sublayer, part in (
        (tr("its blocks[0] (your Block, notebook 11)"), model.blocks[0], "Block"),
        (final_norm, model.final_norm, "LayerNorm"),
    ):
        problem = class_problem(type(sublayer), part)
        if problem is not None:
            checker = "check_block(Block)" if part == "Block" else "check_layer_norm(LayerNorm)"
            return _not_right(what, problem, checker)
    problem = _sublayer_problem(
        model.blocks[0], reference.eval(), x, tr("its blocks[0] (your Block)"), "check_block(Block)"
    )
    if problem is not None:
        return problem
    return _sublayer_problem(
        model.final_norm, lambda h: F.layer_norm(h, (24,), model.final_norm.weight,
                                                 model.final_norm.bias, 1e-5),
        x, final_norm, "check_layer_norm(LayerNorm)",
    )  # fmt: skip


def check_decoder(Decoder: type) -> bool:  # noqa: N803
    """Check the class ``Decoder(vocab_size, block_size, d_model, n_heads, n_layers, d_ff)``:
    ``forward(ids, targets=None) -> (logits, loss)``, the whole decoder-only model.

    Equal to the course's ``TinyDecoder`` (sinusoidal positions, no dropout) holding the same
    random weights, logits and loss, on four cases: (V, block_size, C, h, layers, d_ff) =
    (84, 16, 24, 3, 2, 96); (11, 8, 12, 1, 1, 20) with T = block_size; (30, 10, 16, 4, 3, 64)
    with T = 1 and no targets (loss None); (50, 12, 20, 2, 2, 40). Checks first that the
    head is tied, that the blocks are distinct, and that blocks[0] and final_norm (the
    learner's Block and LayerNorm, through their own checkers) are right. Names ten
    mistakes: the sqrt(d_model) scale missing or divided, no positions, positions scaled, no
    final norm, blocks not chained, a summed loss, a loss against the input ids, targets
    shifted again, a loss on probabilities; and the whole position table added. Then the
    model runs as training does: the gradient of every parameter compared by name, dropout,
    and a table made on the CPU or kept as a plain attribute (not a buffer) are named.
    """
    mistakes = [(message, _decoder_mistake(**change)) for message, change in _DECODER_MISTAKES]
    return judge_module(
        "Decoder", Decoder, _ReferenceDecoder, _decoder_cases(), mistakes, build_args=6,
        checker="check_decoder", axes=("logits", "loss"), structure=_decoder_structure,
        errors=_DECODER_ERRORS,
    )  # fmt: skip
