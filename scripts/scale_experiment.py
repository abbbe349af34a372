"""What the 1/sqrt(d_k) scale buys: one attention head trained with and without it, over seeds
(issue 41: "without 1/sqrt(d_k) at a width where it matters, training stalls or slows").

Usage::

    python scripts/scale_experiment.py            # writes assets/ladder/scale.json
    python scripts/scale_experiment.py --seeds 0 1 2 --d-k 512 --out PATH
    python scripts/scale_experiment.py --steps 150 --out assets/ladder/scale-150-steps.json

The model is notebook 09's rung at one head of width ``d_k`` (= d_model): token embedding x
sqrt(d_model) + the sinusoidal table, x + attention(LayerNorm(x)), a final LayerNorm, logits.
LayerNorm gives the head unit-variance inputs, so the scores q . k have a spread that grows as
sqrt(d_k) (Vaswani et al. 2017, section 3.2.1, footnote 4) unless divided by sqrt(d_k). Each
model trains with the loss ladder's budget (:func:`course_utils.lab.ladder.train_briefly`);
seed ``s`` sets the initial weights and the windows. One CPU thread: about 50 s a run.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from course_utils.exercises import solution_model as S  # noqa: E402
from course_utils.lab.ladder import LADDER, LADDER_DIR, ladder_data  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
from ladder_seeds import check_seed_args, over_seeds, seed_parser  # noqa: E402


class OneHead(nn.Module):
    """Embedding + positions, one pre-LN attention head with a residual, final LN, logits."""

    def __init__(self, vocab_size: int, block_size: int, d_k: int, scale: bool):
        super().__init__()
        self.d_k, self.scale = d_k, scale
        self.token_embedding = nn.Embedding(vocab_size, d_k)
        nn.init.normal_(self.token_embedding.weight, std=0.02)
        self.register_buffer("pe", S.sinusoidal_table(block_size, d_k), persistent=False)
        self.ln_1, self.final_norm = S.LayerNorm(d_k), S.LayerNorm(d_k)
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_k, d_k) for _ in range(4))
        self.lm_head = nn.Linear(d_k, vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        T = ids.shape[1]
        x = self.token_embedding(ids) * math.sqrt(self.d_k) + self.pe[:T]  # (B, T, d_k)
        h = self.ln_1(x)
        scores = self.w_q(h) @ self.w_k(h).transpose(-2, -1)  # (B, T, T)
        if self.scale:
            scores = scores / math.sqrt(self.d_k)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        x = x + self.w_o(weights @ self.w_v(h))  # (B, T, d_k)
        return self.lm_head(self.final_norm(x))  # (B, T, V)


def main(argv: list[str] | None = None) -> int:
    parser = seed_parser("scale_experiment.py", __doc__, LADDER_DIR / "scale.json")
    parser.add_argument("--d-k", type=int, default=512)
    args = parser.parse_args(argv)
    check_seed_args(parser, args)
    if args.d_k < 2:
        parser.error(f"--d-k must be at least 2, got {args.d_k}")
    torch.set_num_threads(1)
    data = ladder_data()
    results = {"d_k": args.d_k, "steps": args.steps or LADDER.steps, "seeds": args.seeds}
    for name, scale in (("scaled", True), ("unscaled", False)):
        results[name] = over_seeds(
            name,
            lambda scale=scale: OneHead(data.vocab_size, data.block_size, args.d_k, scale),
            args,
        )
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
