"""The command line `python -m course_utils.train`: a short preset run, checkpoint and export."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
import torch

from course_utils.train import main
from course_utils.training import load_checkpoint, model_from_checkpoint


@pytest.mark.tooling  # a fresh process: make test-tooling (CI)
def test_export_writes_the_trained_weights_without_optimizer_state(tmp_path, capsys):
    full, export = tmp_path / "full.pt", tmp_path / "assets" / "baby.pt"
    summary = main(
        ["--config", "cpu", "--device", "cpu", "--max-iters", "3", "--samples", "5"]
        + ["--checkpoint", str(full), "--export", str(export)]
    )
    assert summary is not None and summary["config"] == "cpu"
    assert f"weights exported to {export}" in capsys.readouterr().out
    exported, trained = load_checkpoint(export), load_checkpoint(full)
    assert exported["optimizer"] is None and trained["optimizer"] is not None
    assert exported["step"] == trained["step"] == 3
    assert export.stat().st_size < full.stat().st_size / 2  # AdamW keeps two moments per weight
    ids = torch.randint(0, exported["model_config"]["vocab_size"], (2, 16))
    logits_exported, _ = model_from_checkpoint(export).eval()(ids)
    logits_trained, _ = model_from_checkpoint(full).eval()(ids)
    torch.testing.assert_close(logits_exported, logits_trained, rtol=0, atol=0)


# A user's mistake on the command line: one line, argparse style, exit status 2, no traceback.
MISTAKES = [
    (["--config", "nope"], "unknown config 'nope'"),
    (["--config", "cpu", "--set", "d_modle=32"], "did you mean: 'd_modle' -> 'd_model'?"),
    (["--config", "cpu", "--set", "d_model"], "--set expects FIELD=VALUE, got 'd_model'"),
    (["--config", "cpu", "--set", "=3"], "--set expects FIELD=VALUE"),
    (["--config", "cpu", "--max-iters", "0"], "max_iters must be at least 1, got 0"),
    (["--config", "cpu", "--set", "dropout=1.5"], "dropout"),
    (["--config", "cpu", "--device", "gpu"], "for an NVIDIA GPU the name is 'cuda'"),
]


@pytest.mark.parametrize("tool", ["train", "measure.record"])
@pytest.mark.parametrize(("argv", "expected"), MISTAKES)
def test_a_mistake_prints_one_line_and_exits_2(tool, argv, expected, capsys):
    module = importlib.import_module(f"course_utils.{tool}")
    with pytest.raises(SystemExit) as exited:
        module.parse_args(argv)
    assert exited.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"python -m course_utils.{tool}: error: ")
    assert expected in lines[0]
    assert "Traceback" not in captured.err and captured.out == ""


@pytest.mark.tooling  # a fresh process: make test-tooling (CI)
def test_a_mistake_in_a_fresh_process_has_no_traceback():
    """As a user runs it: the process itself exits 2 with the one line."""
    done = subprocess.run(
        [sys.executable, "-m", "course_utils.train", "--config", "cpu", "--max-iters", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "python -m course_utils.train: error: max_iters must be at least 1, got 0"
    )


def test_valid_options_pass_the_check():
    from course_utils.measure.record import parse_args as record_args
    from course_utils.train import parse_args as train_args

    args = train_args(["--config", "cpu", "--max-iters", "3", "--set", "d_model=32"])
    assert args.max_iters == 3 and args.set == ["d_model=32"]
    assert record_args(["--config", "gpu", "--set", "autocast_dtype=float16"]).config == "gpu"
