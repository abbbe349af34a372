"""`make gpu-check` (scripts/gpu_check.py) on a machine without CUDA: one line and stop;
--dry-run prints every step of both parts with their time limits, without torch and without
setup; a step past its limit is stopped and the later steps still run (the CUDA run itself
cannot be tested here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from makefile_env import run_make
from script_loader import load_script

REPOSITORY = Path(__file__).resolve().parent.parent
SCRIPT = [sys.executable, "scripts/gpu_check.py"]
gpu_check = load_script("scripts/gpu_check.py", register=True)


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*SCRIPT, *args], cwd=REPOSITORY, capture_output=True, text=True,
                          timeout=60, env=env)  # fmt: skip


@pytest.mark.tooling  # a fresh process: make test-tooling (CI)
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_it_stops_at_once_with_one_line(tmp_path):
    logs = tmp_path / "logs"
    done = _run("--logs", str(logs))
    assert done.returncode == 1
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("make gpu-check: no CUDA GPU here")
    assert done.stderr == "" and not logs.exists()  # nothing started, nothing written


def test_dry_run_prints_every_step_without_torch(tmp_path):
    """A `torch` that cannot be imported is first on the path: the dry run never needs it."""
    (tmp_path / "torch.py").write_text("raise ImportError('the dry run imported torch')\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)}
    first = _run("--dry-run", "--logs", "out/gpu", env=env)
    assert first.returncode == 0, first.stderr
    assert "logging to out/gpu/" in first.stdout
    for step in (
        'make record CONFIG=gpu ARGS="--eval-iters 200 --compile"',
        "make test TESTS= JOBS=1 NBVAL=notebooks/12_training_tiny_decoder.ipynb",
        "--max-iters 1000 --eval-interval 250 --set autocast_dtype=float16 --out assets/runs/gpu-",
        "benchmarks/train_throughput.py --device cuda --variants teaching:bfloat16:eager,",
        "fast:bfloat16:compiled",
        "-m course_utils.measure.benchmark_profile --config gpu --device cuda",
    ):
        assert step in first.stdout
    second = _run("--dry-run", "--part", "2", env=env)
    assert second.returncode == 0, second.stderr
    assert "make test TESTS= JOBS=8" in second.stdout and "notebooks/16_appendix" in second.stdout
    assert "12_training" not in second.stdout  # part 1 runs it
    assert "logs/gpu-check-" in second.stdout and "-part2/" in second.stdout


@pytest.mark.parametrize("part", [1, 2])
def test_each_part_fits_in_eight_minutes_with_setup(part):
    steps = gpu_check.planned_steps("tesla-t4", part=part)
    assert steps[0].name == "environment" and len({s.name for s in steps}) == len(steps)
    assert sum(s.limit_s for s in steps) + gpu_check.SETUP_S <= gpu_check.BUDGET_S == 480


@pytest.mark.parametrize(
    "args, message",
    [
        (["--part", "3"], "--part must be 1 or 2, got '3'"),
        (["--logs", "README.md"], "--logs README.md exists and is not a folder"),
        (["--colour"], "unrecognized arguments: --colour"),
    ],
)
def test_a_wrong_argument_gets_one_line_and_status_2(args, message):
    done = _run(*args)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("make gpu-check: ") and message in line


def test_make_gpu_check_dry_run_needs_no_setup(tmp_path):
    """The Makefile runs the dry run with $(PYTHON), and setup only for a real run."""
    venv = tmp_path / "no-venv"
    dry = run_make("gpu-check", "ARGS=--dry-run", "PART=2", f"VENV={venv}",
                   f"PYTHON={sys.executable}")  # fmt: skip
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "make gpu-check part 2 would run" in dry.stdout and not venv.exists()
    real = run_make("-n", "gpu-check", f"VENV={venv}")
    assert (
        "pip install" in real.stdout and f'"{venv}/bin/python" scripts/gpu_check.py' in real.stdout
    )


@pytest.mark.tooling  # slow (make test-tooling, CI): keeps make test under 5 minutes
def test_a_step_past_its_limit_is_stopped_and_the_next_still_runs(tmp_path):
    steps = [
        gpu_check.Step("slow", "echo started; sleep 30; echo fin${x}ished", 1),
        gpu_check.Step("failing", "exit 3", 5),
        gpu_check.Step("fine", "echo ok", 5),
    ]
    outcomes = [gpu_check.run_step(i, s, tmp_path)[0] for i, s in enumerate(steps, 1)]
    assert outcomes == ["stopped at the limit", "exit 3", "exit 0"]
    log = (tmp_path / "01-slow.log").read_text()
    assert "started" in log and "finished" not in log and "stopped at the limit (1 s)" in log


def test_the_steps_parse():
    """The record and bench steps' options pass those commands' own checks."""
    from course_utils.measure.record import parse_args

    steps = {s.name: s.command for s in gpu_check.planned_steps("tesla-t4")}
    fp16 = steps["record-gpu-fp16"].split('ARGS="')[1].rstrip('"').split()
    args = parse_args(["--config", "gpu", "--device", "cpu", *fp16])
    assert args.eval_iters == 200 and args.set == ["autocast_dtype=float16"]
    assert args.max_iters == 1000 and args.eval_interval == 250
    assert str(args.out) == "assets/runs/gpu-tesla-t4-fp16.json"
    bench = load_script("benchmarks/train_throughput.py")
    parser = bench.argparse.ArgumentParser()
    variants = bench.parse_variants(parser, steps["bench"].split("--variants ")[1])
    assert ("fast", "bfloat16", True) in variants and ("teaching", "bfloat16", False) in variants


@pytest.mark.tooling  # slow (make test-tooling, CI): keeps make test under 5 minutes
def test_the_profile_step_runs_on_the_cpu():
    from course_utils.measure.benchmark_profile import profile_training_step

    table = profile_training_step("cpu", "cpu", warmup_steps=0, rows=5)
    assert table.startswith("one training step: preset 'cpu' on cpu (fp32)")
    assert "aten::" in table
