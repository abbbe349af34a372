"""`make gpu-check` (scripts/gpu_check.py) on a machine without CUDA: one line and stop;
--dry-run prints every step (the CUDA run itself cannot be tested here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPOSITORY = Path(__file__).resolve().parent.parent
SCRIPT = [sys.executable, "scripts/gpu_check.py"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_it_stops_at_once_with_one_line(tmp_path):
    logs = tmp_path / "logs"
    done = subprocess.run([*SCRIPT, "--logs", str(logs)], cwd=REPOSITORY, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 1
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("make gpu-check: no CUDA GPU here")
    assert done.stderr == "" and not logs.exists()  # nothing started, nothing written


def test_dry_run_prints_every_step():
    done = subprocess.run([*SCRIPT, "--dry-run"], cwd=REPOSITORY, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "logs/gpu-check-" in out
    for step in (
        "make test",
        'make record CONFIG=gpu ARGS="--eval-iters 200"',
        "--set autocast_dtype=float16 --out assets/runs/gpu-",
        "make bench",
        "-m course_utils.measure.benchmark_profile --config gpu --device cuda",
    ):
        assert step in out


def test_the_steps_parse(capsys):
    """The record steps' options pass the record command's own checks."""
    sys.path.insert(0, str(REPOSITORY / "scripts"))
    try:
        import gpu_check
    finally:
        sys.path.pop(0)
    from course_utils.measure.record import parse_args

    steps = dict(gpu_check.planned_steps("tesla-t4"))
    fp16 = steps["record-gpu-fp16"].split('ARGS="')[1].rstrip('"').split()
    args = parse_args(["--config", "gpu", "--device", "cpu", *fp16])
    assert args.eval_iters == 200 and args.set == ["autocast_dtype=float16"]
    assert str(args.out) == "assets/runs/gpu-tesla-t4-fp16.json"


def test_the_profile_step_runs_on_the_cpu():
    from course_utils.measure.benchmark_profile import profile_training_step

    table = profile_training_step("cpu", "cpu", warmup_steps=0, rows=5)
    assert table.startswith("one training step: preset 'cpu' on cpu (fp32)")
    assert "aten::" in table
