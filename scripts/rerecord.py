"""Redo the CPU records that notebook 12 reads, one after the other: ``make rerecord``.

It runs, in sequence and each with one thread on the CPU (the thread count is in every
record's ``command``):

1. ``python -m course_utils.measure.record --config cpu --device cpu --threads 1``
   -> ``assets/runs/cpu-cpu.json`` (notebook 12's regression check and timing);
2. ``python -m course_utils.measure.record --config baby --positional KIND --seed N --device cpu
   --threads 1`` for KIND in rope, sinusoidal and N in 1, 2, 3
   -> ``assets/runs/positional-KIND-seedN.json`` (why RoPE; the spread over seeds that sets
   notebook 12's ``RECORD_MARGIN``).

Run it on an idle machine (about 14 minutes on one core of a 2-core AMD EPYC: 74 s, then
6 x ~115 s): each record stores the load average while it ran
(:mod:`course_utils.measure.record_conditions`). Then re-execute notebook 12. Options: ``--dry-run``
prints the commands; ``--out-dir DIR`` writes there instead of ``assets/runs``; any other
option (``--max-iters 4 --max-chars 100000``) is passed to every command, for a quick
test. Stops at the first command that fails (exit status 1).
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
POSITIONAL_KINDS = ("rope", "sinusoidal")
SEEDS = (1, 2, 3)


def planned_commands(out_dir: Path, extra: list[str]) -> list[tuple[list[str], Path]]:
    """``[(argv, output file)]`` for every record, in the order they run."""
    base = ["-m", "course_utils.measure.record", "--device", "cpu", "--threads", "1"]
    plan = [([*base, "--config", "cpu"], out_dir / "cpu-cpu.json")]
    for kind in POSITIONAL_KINDS:
        for seed in SEEDS:
            argv = [*base, "--config", "baby", "--positional", kind, "--seed", str(seed)]
            plan.append((argv, out_dir / f"positional-{kind}-seed{seed}.json"))
    return [([*argv, *extra, "--out", _shown_path(out)], out) for argv, out in plan]


def _shown_path(path: Path) -> str:
    """The path relative to the repository when it is inside it (records store the command, and
    a reader's checkout is elsewhere), else as given."""
    path = Path(path).resolve()
    return str(path.relative_to(REPOSITORY)) if path.is_relative_to(REPOSITORY) else str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/rerecord.py", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    parser.add_argument(
        "--out-dir", type=Path, default=REPOSITORY / "assets" / "runs", help="where to write"
    )
    args, extra = parser.parse_known_args(argv)
    plan = planned_commands(args.out_dir, extra)
    for index, (command, _) in enumerate(plan, 1):
        shown = shlex.join(["python", *command])
        print(f"[{index}/{len(plan)}] {shown}", flush=True)
        if args.dry_run:
            continue
        started = time.perf_counter()
        done = subprocess.run([sys.executable, *command], cwd=REPOSITORY)
        if done.returncode:
            print(f"rerecord: command {index} failed (exit {done.returncode}): {shown}")
            return 1
        print(f"[{index}/{len(plan)}] done in {time.perf_counter() - started:.0f} s", flush=True)
    if not args.dry_run:
        print(f"{len(plan)} records written to {args.out_dir}; now re-execute notebook 12")
    return 0


if __name__ == "__main__":
    sys.exit(main())
