"""Draw the decoder with every tensor's shape on the running example, from the real model.

Usage::

    python scripts/draw_decoder_diagram.py          # write assets/figures/decoder_shapes.svg
    python scripts/draw_decoder_diagram.py --check  # exit 1 if the committed file is stale

(``make assets`` runs the first form.) The shapes are not typed in: a ``TinyDecoder`` with the
running example's sizes (B=2, T=6, d_model=24, h=3, d_k=8, d_ff=96, and V=84: the characters of
the course's Shakespeare, as notebooks 00 and 11 load them) runs once with
forward hooks (:func:`course_utils.lab.shapes.trace_shapes`) and the attention weights kept; each
box's shape is read from that run, and the per-head tensors come from the model's own
``split_heads``. Every axis has its own size, so each printed shape names its axes.

The SVG is deterministic (a fixed ``svg.hashsalt``, no date in the metadata, glyphs drawn as
paths with matplotlib's bundled DejaVu Sans), so the file changes only when the model, the
drawing code or the matplotlib release changes.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import torch  # noqa: E402

from course_utils.attention import split_heads  # noqa: E402
from course_utils.config import ModelConfig  # noqa: E402
from course_utils.data import load_shakespeare  # noqa: E402
from course_utils.lab.diagram import draw_decoder_diagram  # noqa: E402
from course_utils.lab.shapes import named_shape, trace_shapes  # noqa: E402
from course_utils.model import TinyDecoder  # noqa: E402
from course_utils.tokenization import CharTokenizer  # noqa: E402

OUTPUT = ROOT / "assets" / "figures" / "decoder_shapes.svg"
# The running example (COURSE_DESIGN.md): every size different, so shapes name their axes.
B, T, D_MODEL, N_HEADS, D_FF, N_LAYERS = 2, 6, 24, 3, 96, 2
# V as notebooks 00 and 11 have it: one token per distinct character of the corpus.
VOCAB_SIZE = CharTokenizer.from_text(load_shakespeare()).vocab_size


def traced_stages() -> list[tuple[str, str]]:
    """``(stage, shape)`` pairs in data-flow order, read from one forward pass of the model.

    Names that start with two spaces are inside the repeated decoder block (block 0 shown).

    Raises:
        AssertionError: a traced shape is not the running example's (the model changed).
    """
    config = ModelConfig(
        vocab_size=VOCAB_SIZE, block_size=16, d_model=D_MODEL, n_heads=N_HEADS,
        n_layers=N_LAYERS, d_ff=D_FF,
    )  # fmt: skip
    torch.manual_seed(0)
    model = TinyDecoder(config).eval()
    ids = torch.randint(0, VOCAB_SIZE, (B, T))
    records = trace_shapes(model, ids, need_weights=True)
    out = {r.name: r.output_shape for r in records}
    inp = {r.name: r.input_shape for r in records}
    attention = model.blocks[0].attention
    d_k = D_MODEL // N_HEADS
    heads = split_heads(torch.zeros(out["blocks.0.attention.w_q"]), N_HEADS).shape
    weights = attention.attention_weights.shape  # (B, h, T_q, T_k), kept by need_weights
    mixed = (*weights[:3], heads[-1])  # weights @ V: (B, h, T_q, T_k) @ (B, h, T_k, d_k)
    expected = {
        "token_embedding": (B, T, D_MODEL),
        "blocks.0.feed_forward.up": (B, T, D_FF),
        "lm_head": (B, T, VOCAB_SIZE),
    }
    for name, shape in expected.items():
        assert out[name] == shape, f"{name}: traced {out[name]}, running example {shape}"
    assert tuple(heads) == (B, N_HEADS, T, d_k) and tuple(weights) == (B, N_HEADS, T, T)
    return [
        ("token ids", named_shape(inp["token_embedding"], "B T")),
        ("token embedding × √d_model", named_shape(out["token_embedding"], "B T d_model")),
        ("+ positional encoding", named_shape(out["position"], "B T d_model")),
        ("  LayerNorm", named_shape(out["blocks.0.ln_1"], "B T d_model")),
        ("  Q = x·W_Q  (K, V alike)", named_shape(out["blocks.0.attention.w_q"], "B T d_model")),
        ("  split into h heads", named_shape(heads, "B h T d_k")),
        ("  softmax(Q·Kᵀ/√d_k + causal mask)", named_shape(weights, "B h T_q T_k")),
        ("  weights · V", named_shape(mixed, "B h T_q d_k")),
        ("  merge heads", named_shape(inp["blocks.0.attention.w_o"], "B T d_model")),
        ("  output projection W_O", named_shape(out["blocks.0.attention.w_o"], "B T d_model")),
        ("  + residual", named_shape(inp["blocks.0.ln_2"], "B T d_model")),
        ("  LayerNorm, FFN up + GELU", named_shape(out["blocks.0.feed_forward.up"], "B T d_ff")),
        ("  FFN down, + residual", named_shape(out["blocks.0"], "B T d_model")),
        ("final LayerNorm", named_shape(out["final_norm"], "B T d_model")),
        ("LM head → logits", named_shape(out["lm_head"], "B T V")),
    ]


def render_svg() -> str:
    """The diagram as SVG text, byte-for-byte the same on every run."""
    matplotlib.rcdefaults()
    matplotlib.rcParams["svg.hashsalt"] = "transformer-course"  # stable clip-path ids
    matplotlib.rcParams["svg.fonttype"] = "path"
    fig = draw_decoder_diagram(
        traced_stages(),
        title=f"Decoder-only Transformer, every tensor's shape\nrunning example: B={B}, T={T}, "
        f"d_model={D_MODEL}, h={N_HEADS}, d_k={D_MODEL // N_HEADS}, d_ff={D_FF}, V={VOCAB_SIZE}",
        repeat_label="× n_layers",
    )
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    matplotlib.pyplot.close(fig)
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write; exit 1")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    svg = render_svg()
    current = args.output.read_text(encoding="utf-8") if args.output.exists() else None
    if args.check:
        if svg != current:
            print(f"{args.output} is out of date; run `make assets`")
            return 1
        return 0
    if svg != current:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(svg, encoding="utf-8")
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
