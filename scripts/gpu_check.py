"""``make gpu-check``: what only a GPU can measure, in two parts of at most 8 minutes each.

A lent GPU machine may give about 15 minutes in all and 10 minutes a command, so each part
fits in 8 minutes on an H100, offline setup (``make setup TORCH=system WHEELS=DIR``, about a
minute) included: every step has a time limit, and a step that reaches it is stopped (its log
says so) while the later steps still run. A failing step does not stop the later ones either;
the exit status is 1 if any step failed or was stopped.

Part 1 (``make gpu-check``), the measurements (time limits, seconds; in brackets what each
took on one H100 80GB HBM3 on 2026-11-26, logs/gpu-check-20261126-h100/):

1. ``environment`` (15) [4]: torch, CUDA, the GPU, ``nvidia-smi``;
2. ``record-gpu`` (135) [107]: ``make record CONFIG=gpu ARGS="--eval-iters 200 --compile"``,
   the ``gpu`` preset's record in bf16, compiled (validation loss, ms/step, tokens/s, MFU; the
   steady ms/step and MFU leave out the first 500 steps, where compilation happens);
3. ``record-gpu-fp16`` (55) [41]: the float16 + gradient-scaler path (a T4's), forced, over
   1000 steps (``--max-iters 1000 --eval-interval 250``), eager: its ms/step and tokens/s
   compare with bf16's, and its MFU is what the appendix's T4 estimate assumes;
4. ``notebook-12`` (180) [158]: notebook 12 under strict nbval on CUDA (the learner's decoder
   trained at the ``gpu`` size, TF32: 5000 steps then; 2500 since, which on one H200 on
   2026-11-28 executed in 113 s alone and passed strict nbval in 180 s beside other runs);
5. ``bench`` (45) [32]: the key benchmark variants, eager and compiled: teaching and fast path
   in bf16, the fast path in fp32, PyTorch's peer in bf16, eager; the fast path in bf16
   compiled;
6. ``profile`` (20) [10]: a ``torch.profiler`` table of one training step of the ``gpu`` preset.

Limits 450 s; with setup (``make setup TORCH=system WHEELS=DIR``: 30 s there), 480 s.

Part 2 (``make gpu-check PART=2``): strict nbval of every other notebook on CUDA.

1. ``environment`` (15);
2. ``notebooks`` (400): ``make test TESTS= JOBS=8 NBVAL=...``, every notebook but 12 under
   strict nbval, eight at a time. On one H200 (16 cores) on 2026-11-28 the 377 cells took
   283 s (logs/gpu-check-20261128-h200/call1/others-nbval.log); six failed there, all one
   checker's bug (fixed, then 08 and 11 passed: call2/).

Limits 415 s; with setup, under 8 minutes. The CPU unit tests stay in CI (``make test``).

Every step's output goes to one folder, ``--logs DIR`` (default
``logs/gpu-check-<UTC time>-part<N>/``): one log per step, ``summary.txt``, and a copy of every
record and benchmark file the steps wrote (under their repository paths: ``assets/runs/``,
``benchmarks/results/``, which also hold them, ready to commit). Without CUDA it stops at once
with one line (exit status 1). ``--dry-run`` prints the steps and needs neither torch nor setup.
A mistake in the arguments prints one line and exits with status 2.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

REPOSITORY = Path(__file__).resolve().parent.parent
BUDGET_S = 8 * 60  # what one part may take, setup included
SETUP_S = 30  # make setup TORCH=system WHEELS=DIR, measured on an H100 machine
RECORD_ARGS = "--eval-iters 200"
FP16_ARGS = "--max-iters 1000 --eval-interval 250"
KEY_VARIANTS = (
    "teaching:bfloat16:eager,fast:bfloat16:eager,fast:float32:eager,peer:bfloat16:eager,"
    "fast:bfloat16:compiled"
)
NOTEBOOK_12 = "notebooks/12_training_tiny_decoder.ipynb"


def notebooks() -> list[str]:
    """Every notebook's repository path, in order."""
    paths = (REPOSITORY / "notebooks").glob("*.ipynb")
    return sorted(str(p.relative_to(REPOSITORY)) for p in paths)


# Where the steps write files worth keeping (copied into the log folder).
ARTEFACT_FOLDERS = ("assets/runs", "benchmarks/results")


class Step(NamedTuple):
    name: str
    command: str
    limit_s: int


def planned_steps(
    gpu_slug: str, make: str = "make", python: str = ".venv/bin/python", part: int = 1
) -> list[Step]:
    """The steps of ``part`` in the order they run; ``gpu_slug`` names the records
    (``course_utils.measure.record.device_slug``, e.g. ``nvidia-h100-80gb-hbm3``)."""
    python = shlex.quote(python)
    environment = Step(
        "environment",
        f"{python} -c 'import torch; print(torch.__version__, torch.version.cuda, "
        "torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))'"
        "; command -v nvidia-smi >/dev/null && nvidia-smi || true",
        15,
    )
    if part == 2:
        others = " ".join(n for n in notebooks() if n != NOTEBOOK_12)
        return [environment, Step("notebooks", f'{make} test TESTS= JOBS=8 NBVAL="{others}"', 400)]
    fp16_out = f"assets/runs/gpu-{gpu_slug}-fp16.json"
    return [
        environment,
        Step("record-gpu", f'{make} record CONFIG=gpu ARGS="{RECORD_ARGS} --compile"', 135),
        Step(
            "record-gpu-fp16",
            f'{make} record CONFIG=gpu ARGS="{RECORD_ARGS} {FP16_ARGS} '
            f'--set autocast_dtype=float16 --out {fp16_out}"',
            55,
        ),
        Step("notebook-12", f"{make} test TESTS= JOBS=1 NBVAL={NOTEBOOK_12}", 180),
        Step(
            "bench",
            f"{python} benchmarks/train_throughput.py --device cuda --variants {KEY_VARIANTS}",
            45,
        ),
        Step(
            "profile",
            f"{python} -m course_utils.measure.benchmark_profile --config gpu --device cuda",
            20,
        ),
    ]


def _copy_output(stream, sinks) -> None:
    for line in stream:
        for sink in sinks:
            sink.write(line)
            sink.flush()


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the step's whole process group, SIGKILL 10 s later if it is still there."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_step(index: int, step: Step, folder: Path) -> tuple[str, float]:
    """Run one step within its limit, its output shown and written to ``folder/NN-name.log``.

    Returns ``("exit N" or "stopped at the limit", seconds)``."""
    log = folder / f"{index:02d}-{step.name}.log"
    started = time.perf_counter()
    with log.open("w", encoding="utf-8") as handle:
        handle.write(f"$ {step.command}\n")
        handle.flush()
        process = subprocess.Popen(
            step.command, shell=True, cwd=REPOSITORY, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, executable="/bin/bash", start_new_session=True,
        )  # fmt: skip
        reader = threading.Thread(target=_copy_output, args=(process.stdout, (sys.stdout, handle)))
        reader.start()
        try:
            outcome = f"exit {process.wait(timeout=step.limit_s)}"
        except subprocess.TimeoutExpired:
            _stop(process)
            outcome = "stopped at the limit"
        reader.join(timeout=30)
        if outcome != "exit 0":
            handle.write(f"=== gpu-check: step {step.name}: {outcome} ({step.limit_s} s)\n")
    return outcome, time.perf_counter() - started


def copy_artefacts(since: float, folder: Path) -> list[str]:
    """Copy every record and benchmark file written since ``since`` (a time.time()) into
    ``folder``, under its repository path; return those paths."""
    copied = []
    for top in ARTEFACT_FOLDERS:
        for path in sorted((REPOSITORY / top).rglob("*.json")):
            if path.stat().st_mtime >= since:
                relative = path.relative_to(REPOSITORY)
                (folder / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, folder / relative)
                copied.append(str(relative))
    return copied


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit status 2
        self.exit(2, f"make gpu-check: {message}; see python scripts/gpu_check.py --help\n")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(prog="make gpu-check", description=__doc__.splitlines()[0])
    parser.add_argument("--part", default="1", help="1: records, benchmark, profile; 2: notebooks")
    parser.add_argument("--dry-run", action="store_true", help="print the steps, run nothing")
    parser.add_argument("--logs", type=Path, default=None, help="default logs/gpu-check-<time>")
    parser.add_argument("--make", default="make", help="the make command to call")
    parser.add_argument("--python", default=sys.executable, help="the course's .venv python")
    args = parser.parse_args(argv)
    if args.part not in ("1", "2"):
        parser.error(f"--part must be 1 or 2, got {args.part!r} (PART=1 or PART=2)")
    args.part = int(args.part)
    if args.logs is not None and args.logs.exists() and not args.logs.is_dir():
        parser.error(f"--logs {args.logs} exists and is not a folder; name a folder")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = args.logs or REPOSITORY / "logs" / f"gpu-check-{stamp}-part{args.part}"
    if args.dry_run:  # no torch, no setup: the steps as they would run
        steps = planned_steps("<gpu>", args.make, args.python, args.part)
        print(f"make gpu-check part {args.part} would run, logging to {folder}/:")
        for index, step in enumerate(steps, 1):
            print(f"{index}. {step.name} (limit {step.limit_s} s): {step.command}")
        total = sum(step.limit_s for step in steps)
        print(f"limits {total} s + setup ~{SETUP_S} s <= {BUDGET_S} s")
        return 0
    import torch

    if not torch.cuda.is_available():
        print(
            f"make gpu-check: no CUDA GPU here (torch {torch.__version__}, "
            f"torch.cuda.is_available() is False); run it on a machine with an NVIDIA GPU, or "
            "`make gpu-check ARGS=--dry-run` to see the steps"
        )
        return 1
    from course_utils.measure.record import device_slug

    folder.mkdir(parents=True, exist_ok=True)
    steps = planned_steps(device_slug(torch.device("cuda")), args.make, args.python, args.part)
    results, copied, since = [], [], time.time() - 1
    for index, step in enumerate(steps, 1):
        print(f"=== gpu-check step {index}: {step.name} (limit {step.limit_s} s): {step.command}",
              flush=True)  # fmt: skip
        outcome, seconds = run_step(index, step, folder)
        copied += copy_artefacts(since, folder)
        results.append(
            f"{index:02d} {step.name:<16} {outcome:<21} {seconds:6.1f} s of {step.limit_s:>3} s"
            f"  $ {step.command}"
        )
    summary = "\n".join(results) + "\n"
    if copied:
        summary += "written (also in the repository, ready to commit): " + ", ".join(
            dict.fromkeys(copied)) + "\n"  # fmt: skip
    (folder / "summary.txt").write_text(summary, encoding="utf-8")
    print(f"=== gpu-check part {args.part} done; logs in {folder}/\n{summary}")
    return 0 if all(re.search(r" exit 0 ", line) for line in results) else 1


if __name__ == "__main__":
    sys.exit(main())
