"""Training with PyTorch DDP: 2 CPU processes (gloo), started by torchrun as `make train
NPROC=2` does, against one process on the combined batch.

Run as a script (by torchrun) this file is the worker; under pytest it is the test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from course_utils import training
from course_utils.config import ModelConfig, TrainConfig
from course_utils.data import train_val_split
from course_utils.model import TinyDecoder

pytestmark = pytest.mark.tooling  # two processes: make test-tooling (CI), not make test

WORLD_SIZE = 2
STEPS = 6


def tiny_model(dropout: float = 0.0) -> TinyDecoder:
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=20, block_size=8, d_model=24, n_heads=3, n_layers=2, dropout=dropout
    )
    return TinyDecoder(config)


def splits() -> tuple[torch.Tensor, torch.Tensor]:
    stream = torch.randint(20, (3_000,), generator=torch.Generator().manual_seed(0))
    return train_val_split(stream, 0.1)


def run_config(batch_size: int) -> TrainConfig:
    return TrainConfig(
        batch_size=batch_size,
        max_iters=STEPS,
        learning_rate=3e-3,
        warmup_iters=2,
        eval_interval=STEPS // 2,
        eval_iters=4,
        seed=3,
    )


def summary(model: TinyDecoder, history: training.History) -> dict:
    return {
        "weights": {k: v.clone() for k, v in model.state_dict().items()},
        "batch_loss": history.batch_loss,
        "val_loss": history.val_loss,
        "train_loss": history.train_loss,
        "step": history.step,
        "tokens": history.tokens,
    }


def worker(out: Path) -> None:
    """One rank: a plain run, then with dropout a straight run and a half run + resume."""
    torch.set_num_threads(1)
    rank, world_size, device = training.init_distributed("cpu")
    assert world_size == WORLD_SIZE and torch.distributed.get_backend() == "gloo"
    saves = []
    save_checkpoint = training.loop.save_checkpoint

    def counting_save(*args, **kwargs):
        saves.append(args[3])  # the step
        return save_checkpoint(*args, **kwargs)

    training.loop.save_checkpoint = counting_save  # where train() looks it up
    result = {"rank": rank}
    model = tiny_model()
    history = training.train(
        model, *splits(), run_config(4), device, checkpoint_path=out / "plain.pt", progress=False
    )
    result["plain"] = summary(model, history)
    result["saves"] = list(saves)

    straight = tiny_model(dropout=0.1)
    history = training.train(straight, *splits(), run_config(4), progress=False)
    result["dropout_straight"] = summary(straight, history)
    half = tiny_model(dropout=0.1)
    path = out / "half.pt"
    training.train(half, *splits(), run_config(4), checkpoint_path=path, max_steps=STEPS // 2)
    torch.manual_seed(1234 + rank)  # whatever happens in between must not matter
    resumed = tiny_model(dropout=0.1)
    with torch.no_grad():
        for parameter in resumed.parameters():
            parameter.add_(1.0)  # everything must come from the checkpoint
    history = training.train(
        resumed, *splits(), run_config(4), checkpoint_path=path, resume=True, progress=False
    )
    result["dropout_resumed"] = summary(resumed, history)
    torch.save(result, out / f"rank{rank}.pt")
    training.close_distributed()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("ddp")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={WORLD_SIZE}",
        __file__,
        str(out),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"torchrun failed:\n{done.stdout}\n{done.stderr}"
    files = sorted(p.name for p in out.iterdir())
    assert files == ["half.pt", "plain.pt", "rank0.pt", "rank1.pt"], files  # no temp files
    results = [torch.load(out / f"rank{r}.pt", weights_only=True) for r in range(WORLD_SIZE)]
    results[0]["checkpoint"] = training.load_checkpoint(out / "plain.pt")
    return results


def single_process_on_the_combined_batch() -> dict:
    torch.manual_seed(0)
    model = tiny_model()
    history = training.train(model, *splits(), run_config(4 * WORLD_SIZE), progress=False)
    return summary(model, history)


def test_both_ranks_end_with_identical_weights(ranks):
    first, second = ranks[0]["plain"], ranks[1]["plain"]
    for name, weight in first["weights"].items():
        assert torch.equal(weight, second["weights"][name]), name
    assert first["batch_loss"] == second["batch_loss"]  # all-reduced: the global batch's loss
    assert first["val_loss"] == second["val_loss"]


def test_loss_and_weights_match_one_process_on_the_combined_batch(ranks):
    """2 ranks x 4 windows == 1 process x 8 windows: the same windows, the same mean loss,
    the same averaged gradient; only the order of floating-point sums differs."""
    single = single_process_on_the_combined_batch()
    ddp = ranks[0]["plain"]
    assert len(ddp["batch_loss"]) == STEPS and ddp["step"] == single["step"] == [3, 6]
    assert ddp["tokens"] == single["tokens"] == STEPS * 8 * 8
    assert ddp["batch_loss"] == pytest.approx(single["batch_loss"], rel=1e-5)
    assert ddp["val_loss"] == pytest.approx(single["val_loss"], rel=1e-5)
    assert ddp["train_loss"] == pytest.approx(single["train_loss"], rel=1e-5)
    for name, weight in single["weights"].items():
        torch.testing.assert_close(ddp["weights"][name], weight, rtol=1e-4, atol=1e-5, msg=name)
    assert single["batch_loss"][-1] < single["batch_loss"][0]  # it did learn something


def test_only_rank_zero_saves(ranks):
    assert ranks[0]["saves"] == [3, 6]
    assert ranks[1]["saves"] == []
    checkpoint = ranks[0]["checkpoint"]
    assert checkpoint["step"] == STEPS
    assert len(checkpoint["rng"]["per_rank"]) == WORLD_SIZE
    for name, weight in ranks[0]["plain"]["weights"].items():
        assert torch.equal(checkpoint["model"][name], weight), name


def test_resume_with_dropout_is_exact_on_every_rank(ranks):
    """Each rank restores its own dropout stream from the checkpoint written by rank 0."""
    for rank in ranks:
        straight, resumed = rank["dropout_straight"], rank["dropout_resumed"]
        assert resumed["batch_loss"] == straight["batch_loss"]
        assert resumed["val_loss"] == straight["val_loss"]
        for name, weight in straight["weights"].items():
            assert torch.equal(resumed["weights"][name], weight), name


if __name__ == "__main__":
    worker(Path(sys.argv[1]))
