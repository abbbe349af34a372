"""One command for a machine with an NVIDIA GPU: ``make gpu-check`` (``--dry-run``: the steps).

On a CUDA machine it runs, one after the other (under 20 minutes on an H100):

1. the environment: torch, CUDA, the GPU (``nvidia-smi`` where present);
2. ``make test``: every unit test and strict nbval of every notebook (notebook 12 trains the
   ``gpu`` preset there);
3. ``make record CONFIG=gpu ARGS="--eval-iters 200"``: the GPU record, bf16 where the GPU has
   it (fp16 with a gradient scaler on compute capability 7.x);
4. the same with float16 forced (``--set autocast_dtype=float16``): the T4's path, measured;
5. ``make bench``: training tokens/s, teaching vs fast path, fp32 vs bf16, eager vs compiled;
6. a ``torch.profiler`` table of one training step of the ``gpu`` preset.

Every step's output goes to one folder, ``logs/gpu-check-<UTC time>/`` (one log per step and
``summary.txt``); the records go to ``assets/runs/gpu-<gpu>.json`` and
``assets/runs/gpu-<gpu>-fp16.json``, the benchmark to ``benchmarks/results/``: all ready to
commit. A failing step does not stop the later ones (GPU time is scarce); the exit status is
1 if any failed. Without CUDA it stops at once with one line (exit status 1).
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
RECORD_ARGS = "--eval-iters 200"


def planned_steps(gpu_slug: str, make: str = "make") -> list[tuple[str, str]]:
    """``[(name, shell command)]`` in the order they run; ``gpu_slug`` names the records
    (``course_utils.measure.record.device_slug``, e.g. ``nvidia-h100-80gb-hbm3``)."""
    python = shlex.quote(sys.executable)
    environment = (
        f"{python} -c 'import torch; print(torch.__version__, torch.version.cuda, "
        "torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))'"
        "; command -v nvidia-smi >/dev/null && nvidia-smi || true"
    )
    fp16_out = f"assets/runs/gpu-{gpu_slug}-fp16.json"
    return [
        ("environment", environment),
        ("test", f"{make} test"),
        ("record-gpu", f'{make} record CONFIG=gpu ARGS="{RECORD_ARGS}"'),
        (
            "record-gpu-fp16",
            f'{make} record CONFIG=gpu ARGS="{RECORD_ARGS} --set autocast_dtype=float16 '
            f'--out {fp16_out}"',
        ),
        ("bench", f"{make} bench"),
        (
            "profile",
            f"{python} -m course_utils.measure.benchmark_profile --config gpu --device cuda",
        ),
    ]


def _run_step(index: int, name: str, command: str, folder: Path) -> tuple[int, float]:
    """Run one step, its output both shown and written to ``folder/NN-name.log``."""
    log = folder / f"{index:02d}-{name}.log"
    started = time.perf_counter()
    with log.open("w", encoding="utf-8") as handle:
        handle.write(f"$ {command}\n")
        handle.flush()
        process = subprocess.Popen(
            command, shell=True, cwd=REPOSITORY, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, executable="/bin/bash",
        )  # fmt: skip
        for line in process.stdout:
            sys.stdout.write(line)
            handle.write(line)
        code = process.wait()
    return code, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make gpu-check", description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the steps, run nothing")
    parser.add_argument("--logs", type=Path, default=None, help="default logs/gpu-check-<time>")
    parser.add_argument("--make", default="make", help="the make command to call")
    args = parser.parse_args(argv)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = args.logs or REPOSITORY / "logs" / f"gpu-check-{stamp}"
    import torch

    if args.dry_run:
        slug = _gpu_slug(torch) if torch.cuda.is_available() else "<gpu>"
        print(f"make gpu-check would run, logging to {folder}/:")
        for index, (name, command) in enumerate(planned_steps(slug, args.make), 1):
            print(f"{index}. {name}: {command}")
        return 0
    if not torch.cuda.is_available():
        print(
            f"make gpu-check: no CUDA GPU here (torch {torch.__version__}, "
            f"torch.cuda.is_available() is False); run it on a machine with an NVIDIA GPU, or "
            "`make gpu-check ARGS=--dry-run` to see the steps"
        )
        return 1
    folder.mkdir(parents=True, exist_ok=True)
    results = []
    for index, (name, command) in enumerate(planned_steps(_gpu_slug(torch), args.make), 1):
        print(f"=== gpu-check step {index}: {name}: {command}", flush=True)
        code, seconds = _run_step(index, name, command, folder)
        results.append(f"{index:02d} {name:<16} exit {code}  {seconds:7.1f} s  $ {command}")
    summary = "\n".join(results) + "\n"
    (folder / "summary.txt").write_text(summary, encoding="utf-8")
    print(f"=== gpu-check done; logs in {folder}/\n{summary}")
    return 1 if any(" exit 0 " not in line for line in results) else 0


def _gpu_slug(torch) -> str:
    from course_utils.measure.record import device_slug

    return device_slug(torch.device("cuda"))


if __name__ == "__main__":
    sys.exit(main())
