"""The command line `python -m course_utils.train`: a short preset run, checkpoint and export."""

from __future__ import annotations

import torch

from course_utils.train import main
from course_utils.training import load_checkpoint, model_from_checkpoint


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
