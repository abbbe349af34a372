"""What positions buy, over seeds (issue 41: a rung for notebook 03's positions): notebook 02's
model with and without the sinusoidal table, and notebook 07's one head with and without it.

Usage::

    python scripts/positions_experiment.py        # writes assets/ladder/positions.json
    python scripts/positions_experiment.py --seeds 0 1 2 --out PATH

The models are :class:`ladder_seeds.Rung`'s (the course's solutions of the learner's parts at
the ladder's widths), trained by :func:`course_utils.lab.ladder.train_briefly` with the
ladder's budget; seed ``s`` sets the initial weights and the windows. A model that reads one
character at a time has no use for where it is; a head that looks back can use the table to
tell the character before from the others. One CPU thread: about a minute in all.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from ladder_seeds import Rung, check_seed_args, over_seeds, seed_parser  # noqa: E402

from course_utils.lab.ladder import LADDER_DIR, ladder_data  # noqa: E402

#: The four models: without positions, then with them, for each of the two notebooks.
VARIANTS = ("02-embedding", "03-positions", "07-no-positions", "07-one-head")


def main(argv: list[str] | None = None) -> int:
    parser = seed_parser("positions_experiment.py", __doc__, LADDER_DIR / "positions.json")
    args = parser.parse_args(argv)
    check_seed_args(parser, args)
    torch.set_num_threads(1)
    data = ladder_data()
    results: dict = {"seeds": args.seeds}
    for key in VARIANTS:
        results[key] = over_seeds(
            key, lambda key=key: Rung(key, data.vocab_size, data.block_size), args
        )
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
