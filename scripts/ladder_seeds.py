"""The loss ladder over three seeds: is each rung below the one before by more than the spread
of its seeds? (issue 41, "Every part earns its rung").

Usage::

    python scripts/ladder_seeds.py                 # writes assets/ladder/seeds.json
    python scripts/ladder_seeds.py --seeds 0 1 2 --out PATH

Each rung's model is the notebook's model-so-far built from the course's solutions of the
learner's parts (course_utils/exercises/solution_model.py), at the ladder's width (d_model 32,
4 heads, d_ff 128; notebook 02's embedding is 24 wide), trained by
:func:`course_utils.lab.ladder.train_briefly` with the ladder's budget. Seed ``s`` sets both
the initial weights (``torch.manual_seed(s)``) and the training windows. One CPU thread, so the
numbers are those of ``make course``'s kernels. About ten minutes on one core.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from course_utils.exercises import solution_model as S  # noqa: E402
from course_utils.lab.ladder import LADDER_DIR, ladder_data, train_briefly  # noqa: E402

D_MODEL, N_HEADS, D_FF = 32, 4, 128


class Rung(nn.Module):
    """The model so far: embedding (+ positions) -> the rung's mixing -> logits. Two keys are
    no rung but the positions experiment's (scripts/positions_experiment.py): ``03-positions``
    (notebook 02's model plus the sinusoidal table) and ``07-no-positions`` (07's head without
    the table)."""

    def __init__(self, key: str, vocab_size: int, block_size: int):
        super().__init__()
        self.key, d = key, (24 if key in ("02-embedding", "03-positions") else D_MODEL)
        self.d_model = d
        self.table = (
            nn.Parameter(torch.zeros(vocab_size, vocab_size)) if key == "00-bigram" else None
        )
        self.token_embedding = nn.Embedding(vocab_size, d)
        nn.init.normal_(self.token_embedding.weight, std=0.02)  # as TokenEmbedding (02) and 07-11
        positions = key not in ("02-embedding", "07-no-positions")  # 02's model has none
        self.register_buffer("pe", S.sinusoidal_table(block_size, d) * positions)
        if key in ("07-one-head", "07-no-positions"):
            self.w_q, self.w_k, self.w_v = (nn.Linear(d, d) for _ in range(3))
        if key in ("08-heads", "09-residual-layernorm", "10-feed-forward"):
            self.attention = S.MultiHeadAttention(d, N_HEADS)
        if key in ("09-residual-layernorm", "10-feed-forward"):
            self.ln_1, self.final_norm = S.LayerNorm(d), S.LayerNorm(d)
        if key == "10-feed-forward":
            self.ln_2, self.feed_forward = S.LayerNorm(d), S.FeedForward(d, D_FF)
        if key == "11-blocks":
            self.blocks = nn.ModuleList([S.Block(d, N_HEADS, D_FF) for _ in range(2)])
            self.final_norm = S.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab_size)

    def forward(self, ids):  # (B, T) -> (B, T, V)
        key, T = self.key, ids.shape[1]
        if key == "00-bigram":
            return self.table[ids]
        x = self.token_embedding(ids) * math.sqrt(self.d_model) + self.pe[:T]  # 02: pe is 0
        if key in ("02-embedding", "03-positions"):
            return self.lm_head(x)
        if key in ("07-one-head", "07-no-positions"):
            x = S.attention(self.w_q(x), self.w_k(x), self.w_v(x), causal=True)
        elif key == "08-heads":
            x = self.attention(x)
        elif key == "11-blocks":
            for block in self.blocks:
                x = block(x)
            x = self.final_norm(x)
        else:
            x = x + self.attention(self.ln_1(x))
            if key == "10-feed-forward":
                x = x + self.feed_forward(self.ln_2(x))
            x = self.final_norm(x)
        return self.lm_head(x)


RUNGS = ["00-bigram", "02-embedding", "07-one-head", "08-heads", "09-residual-layernorm",
         "10-feed-forward", "11-blocks"]  # fmt: skip


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit status 2
        usage = " ".join(self.format_usage().split()[1:])  # one line, without "usage:"
        print(f"{self.prog}: {message}; usage: python scripts/{usage}")
        raise SystemExit(2)


def seed_parser(script: str, doc: str, out: Path) -> _Parser:
    """The options every seed experiment takes (--seeds, --steps, --out); a mistake prints one
    line naming ``script`` and exits with status 2 (:func:`check_seed_args` checks values)."""
    parser = _Parser(prog=script, description=doc.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=None, help="default: the ladder's 600")
    parser.add_argument("--out", type=Path, default=out)
    return parser


def check_seed_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, before any work, fewer than two seeds, steps < 1 and an --out folder missing."""
    if len(set(args.seeds)) < 2:
        parser.error(f"--seeds needs at least two different seeds, got {args.seeds}")
    if args.steps is not None and args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    if not args.out.parent.is_dir():
        parser.error(f"--out {args.out}: the folder {args.out.parent} does not exist")


def over_seeds(name: str, make_model, args: argparse.Namespace) -> list[float]:
    """Train ``make_model()`` once per seed of ``args.seeds`` with the ladder's budget (seed
    ``s`` sets the initial weights and the windows) and return the validation losses."""
    losses = []
    for seed in args.seeds:
        torch.manual_seed(seed)
        model = make_model()
        started = time.perf_counter()
        losses.append(round(train_briefly(model, steps=args.steps, seed=seed), 6))
        print(f"{name} seed {seed}: {losses[-1]:.3f} ({time.perf_counter() - started:.0f} s)")
    return losses


def main(argv: list[str] | None = None) -> int:
    parser = seed_parser("ladder_seeds.py", __doc__, LADDER_DIR / "seeds.json")
    args = parser.parse_args(argv)
    check_seed_args(parser, args)
    torch.set_num_threads(1)
    data = ladder_data()
    results = {}
    for key in RUNGS:
        losses = over_seeds(key, lambda key=key: Rung(key, data.vocab_size, data.block_size), args)
        results[key] = {"seeds": args.seeds, "val_loss": losses}
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
