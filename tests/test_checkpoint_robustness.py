"""Checkpoints beyond tests/test_training.py: the *whole* state after a resume, and real kills.

* tests/test_training.py::test_resume_is_exact compares every batch loss and the final weights
  of "N steps straight" and "N/2, resume, N/2". Here the final checkpoints of both runs are
  compared field by field: optimizer moments and step counts, the batch sampler's generator,
  torch's global RNG (dropout), the evaluation history; only wall-clock time may differ.
* tests/test_training.py::test_checkpoint_write_is_atomic makes torch.save raise. Here the
  writing process is killed with SIGKILL (no ``finally``, no cleanup) in the middle of a
  write, and the last good checkpoint must still be there, intact and loadable.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from course_utils.config import ModelConfig, TrainConfig
from course_utils.data import train_val_split
from course_utils.model import TinyDecoder
from course_utils.training import load_checkpoint, train

ROOT = Path(__file__).resolve().parents[1]
TIME_KEYS = {"seconds"}  # wall-clock time: the only thing allowed to differ
# The checksum covers the wall-clock time too, so it differs with it; each file's own
# checksum is verified by load_checkpoint (tests/test_checkpoint_failures.py).
SKIPPED_KEYS = TIME_KEYS | {"checksum"}


def _model(seed: int) -> TinyDecoder:
    torch.manual_seed(seed)
    config = ModelConfig(
        vocab_size=20, block_size=8, d_model=24, n_heads=3, n_layers=2, dropout=0.1
    )
    return TinyDecoder(config)


def _assert_same(a, b, where: str = "checkpoint") -> None:
    """Recursive equality of nested dicts, lists and tensors (tensors: exact, dtype included)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype, where
        assert torch.equal(a, b), f"{where} differs"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{where}: keys {set(a) ^ set(b)}"
        for key in a:
            if key not in SKIPPED_KEYS:
                _assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), f"{where}: lengths differ"
        for index, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}[{index}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


@pytest.fixture
def splits():
    stream = torch.randint(20, (2_000,), generator=torch.Generator().manual_seed(0))
    return train_val_split(stream, 0.1)


def test_resume_restores_optimizer_rng_and_history_exactly(tmp_path, splits):
    n = 8
    config = TrainConfig(
        batch_size=4, max_iters=n, warmup_iters=2, eval_interval=n // 2, eval_iters=2, seed=3
    )
    straight_path, resumed_path = tmp_path / "straight.pt", tmp_path / "resumed.pt"
    straight = train(_model(0), *splits, config, checkpoint_path=straight_path, progress=False)
    rng_after_straight = torch.get_rng_state()

    train(
        _model(0), *splits, config, checkpoint_path=resumed_path, max_steps=n // 2, progress=False
    )
    half = load_checkpoint(resumed_path)
    assert half["step"] == n // 2
    assert half["optimizer"]["state"], "the optimizer's moments are saved"
    torch.manual_seed(12345)  # anything in between must not matter
    resumed = train(
        _model(1), *splits, config, checkpoint_path=resumed_path, resume=True, progress=False
    )
    rng_after_resumed = torch.get_rng_state()

    assert resumed.batch_loss == straight.batch_loss  # identical at every step
    assert torch.equal(rng_after_resumed, rng_after_straight)  # dropout's RNG too
    _assert_same(load_checkpoint(straight_path), load_checkpoint(resumed_path))


def test_the_field_by_field_comparison_can_fail(tmp_path, splits):
    """Resuming into a fresh optimizer (moments lost) must show up in the comparison."""
    n = 8
    config = TrainConfig(
        batch_size=4, max_iters=n, warmup_iters=2, eval_interval=n // 2, eval_iters=2, seed=3
    )
    train(_model(0), *splits, config, checkpoint_path=tmp_path / "a.pt", progress=False)
    path = tmp_path / "b.pt"
    train(_model(0), *splits, config, checkpoint_path=path, max_steps=n // 2, progress=False)
    state = load_checkpoint(path)
    state["optimizer"]["state"] = {}  # as if the optimizer had not been saved
    del state["checksum"]  # edited by hand: no checksum, as a file written before them
    torch.save(state, path)
    train(_model(1), *splits, config, checkpoint_path=path, resume=True, progress=False)
    with pytest.raises(AssertionError):
        _assert_same(load_checkpoint(tmp_path / "a.pt"), load_checkpoint(path))


# --- killed while writing -----------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import io, sys, time
    import torch
    from course_utils import training
    from course_utils.config import ModelConfig
    from course_utils.model import TinyDecoder

    path, mode = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=20, block_size=8, d_model=24, n_heads=3, n_layers=2)
    if mode == "loop":  # big enough that a write takes a while
        config = ModelConfig(vocab_size=4000, block_size=64, d_model=256, n_heads=4, n_layers=4)
    model = TinyDecoder(config)
    training.save_checkpoint(path, model, None, step=1)
    print("good", flush=True)
    if mode == "half":
        # The next write stops half-way through the bytes of a real checkpoint, and waits
        # there to be killed.
        real_save = torch.save

        def half_save(obj, f, *args, **kwargs):
            buffer = io.BytesIO()
            real_save(obj, buffer)
            with open(f, "wb") as handle:
                handle.write(buffer.getvalue()[: len(buffer.getvalue()) // 2])
                handle.flush()
            print("half-written", flush=True)
            time.sleep(120)

        training.checkpoint.torch.save = half_save
        training.save_checkpoint(path, model, None, step=2)
    else:
        for step in range(2, 10_000):
            training.save_checkpoint(path, model, None, step=step)
    """
)


def _start_writer(path: Path, mode: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), mode],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(process: subprocess.Popen, line: str) -> None:
    got = process.stdout.readline().strip()
    if got != line:
        process.kill()
        raise AssertionError(f"writer said {got!r}: {process.stderr.read()[-2000:]}")


@pytest.mark.tooling  # a fresh process: make test-tooling (CI)
def test_a_writer_killed_half_way_leaves_the_last_good_checkpoint(tmp_path):
    path = tmp_path / "model.pt"
    writer = _start_writer(path, "half")
    try:
        _wait_for(writer, "good")
        good = path.read_bytes()
        _wait_for(writer, "half-written")
        temporary = [p for p in tmp_path.iterdir() if p != path]
        assert len(temporary) == 1 and temporary[0].stat().st_size > 0  # the half-written file
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=60)
    assert writer.returncode == -signal.SIGKILL
    assert path.read_bytes() == good, "the half-written checkpoint replaced the good one"
    assert load_checkpoint(path)["step"] == 1


@pytest.mark.tooling  # a fresh process: make test-tooling (CI)
def test_a_writer_killed_at_a_random_moment_never_leaves_a_broken_checkpoint(tmp_path):
    """Real torch.save, no patching: kill as soon as a write is under way (a temp file exists)."""
    path = tmp_path / "model.pt"
    writer = _start_writer(path, "loop")
    try:
        _wait_for(writer, "good")
        deadline = time.monotonic() + 60
        while not any(p != path for p in tmp_path.iterdir()) and time.monotonic() < deadline:
            pass  # spin: the write of the next checkpoint has started when a temp file appears
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=60)
    state = load_checkpoint(path)  # loadable: the last complete write, not a torn one
    assert state["step"] >= 1
    rebuilt = TinyDecoder(ModelConfig(**state["model_config"]))
    rebuilt.load_state_dict(state["model"])  # every tensor is there, with its full shape


def test_checkpoint_gets_the_usual_file_mode_not_the_temp_files(tmp_path):
    """mkstemp creates files readable by their owner only; the final checkpoint is not."""
    import os

    from course_utils.config import ModelConfig
    from course_utils.model import TinyDecoder
    from course_utils.training import save_checkpoint

    umask = os.umask(0o022)
    try:
        model = TinyDecoder(
            ModelConfig(vocab_size=10, block_size=8, d_model=8, n_heads=2, n_layers=1)
        )
        path = save_checkpoint(tmp_path / "model.pt", model, None, step=0)
    finally:
        os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o644
    assert list(tmp_path.iterdir()) == [path], "no temporary file is left behind"
