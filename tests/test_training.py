"""The training loop: schedule, learning, checkpoints, exact resume and atomic writes."""

from __future__ import annotations

import math
import os
import re

import pytest
import torch

from course_utils import training
from course_utils.config import ModelConfig, TrainConfig
from course_utils.data import train_val_split
from course_utils.model import TinyDecoder
from course_utils.tokenization import CharTokenizer
from course_utils.training import (
    estimate_loss,
    learning_rate_at,
    load_checkpoint,
    model_from_checkpoint,
    save_checkpoint,
    train,
)


def tiny_config(vocab_size: int = 20, **changes) -> ModelConfig:
    settings = dict(vocab_size=vocab_size, block_size=8, d_model=24, n_heads=3, n_layers=2)
    return ModelConfig(**{**settings, **changes})


def tiny_model(seed: int = 0, **changes) -> TinyDecoder:
    torch.manual_seed(seed)
    return TinyDecoder(tiny_config(**changes))


@pytest.fixture(scope="module")
def shakespeare_splits(shakespeare_text) -> tuple[CharTokenizer, torch.Tensor, torch.Tensor]:
    """The first 100 k characters, encoded and split 90/10."""
    text = shakespeare_text[:100_000]
    tokenizer = CharTokenizer.from_text(text)
    data = torch.tensor(tokenizer.encode(text), dtype=torch.long)
    train_data, val_data = train_val_split(data, 0.1)
    return tokenizer, train_data, val_data


@pytest.fixture
def random_splits() -> tuple[torch.Tensor, torch.Tensor]:
    stream = torch.randint(20, (2_000,), generator=torch.Generator().manual_seed(0))
    return train_val_split(stream, 0.1)


def test_learning_rate_schedule():
    """Reference: linear warm-up, then the cosine formula written out by hand."""
    config = TrainConfig(
        batch_size=1, max_iters=110, learning_rate=1e-3, min_lr=1e-4, warmup_iters=10
    )
    rates = [learning_rate_at(step, config) for step in range(config.max_iters + 1)]
    warmup = rates[:10]
    assert warmup[0] == pytest.approx(1e-4)
    steps = [b - a for a, b in zip(warmup, warmup[1:])]
    assert steps == pytest.approx([1e-4] * 9)  # linear
    assert max(rates) == pytest.approx(config.learning_rate)
    assert rates[9] == pytest.approx(config.learning_rate)  # peak at the end of warm-up
    assert all(b <= a for a, b in zip(rates[10:], rates[11:]))  # then only decreasing
    assert rates[60] == pytest.approx((1e-3 + 1e-4) / 2)  # half way down the cosine
    step = 35
    cosine = 0.5 * (1 + math.cos(math.pi * (step - 10) / 100))
    assert rates[step] == pytest.approx(1e-4 + cosine * (1e-3 - 1e-4))
    assert rates[-1] == pytest.approx(config.min_lr)
    assert learning_rate_at(10_000, config) == pytest.approx(config.min_lr)


def test_short_run_learns_shakespeare(shakespeare_splits):
    """80 steps take the validation loss from about ln(V) to well below it."""
    tokenizer, train_data, val_data = shakespeare_splits
    torch.manual_seed(0)
    model = TinyDecoder(tiny_config(tokenizer.vocab_size, block_size=16))
    config = TrainConfig(
        batch_size=16,
        max_iters=80,
        learning_rate=1e-2,
        min_lr=1e-3,
        warmup_iters=8,
        eval_interval=40,
        eval_iters=5,
        seed=0,
    )
    splits = {"val": val_data}
    initial = estimate_loss(model, splits, config, torch.device("cpu"))["val"]
    history = train(model, train_data, val_data, config, progress=False)
    log_v = math.log(tokenizer.vocab_size)
    assert abs(initial - log_v) < 0.1
    assert history.step == [40, 80]
    assert len(history.batch_loss) == 80
    assert history.tokens == 80 * 16 * 16
    assert history.val_loss[-1] < log_v - 0.75, (history.val_loss, log_v)
    assert history.val_loss[-1] < history.val_loss[0] < initial


def test_checkpoint_round_trip_gives_identical_logits(tmp_path):
    model = tiny_model(seed=0, positional="learned").eval()
    path = save_checkpoint(tmp_path / "model.pt", model, None, step=7)
    rebuilt = model_from_checkpoint(path).eval()  # built from a different random init
    ids = torch.randint(20, (2, 8), generator=torch.Generator().manual_seed(0))
    assert torch.equal(rebuilt(ids)[0], model(ids)[0])
    assert rebuilt.config == model.config
    assert rebuilt.lm_head.weight is rebuilt.token_embedding.weight  # still tied after loading
    assert load_checkpoint(path)["step"] == 7


def test_loading_into_a_different_config_names_the_field(tmp_path):
    path = save_checkpoint(tmp_path / "model.pt", tiny_model(), None, step=0)
    other = tiny_model(d_model=32, n_heads=4)
    with pytest.raises(ValueError, match=r"d_model: checkpoint 24 vs model 32"):
        load_checkpoint(path, other)


def test_missing_checkpoint(tmp_path):
    path = tmp_path / "nowhere.pt"
    with pytest.raises(FileNotFoundError, match=re.escape(str(path))):
        load_checkpoint(path)


def test_corrupt_checkpoint(tmp_path):
    path = tmp_path / "broken.pt"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(ValueError, match=r"is not a readable checkpoint"):
        load_checkpoint(path)


def test_resume_without_checkpoint_is_an_error(tmp_path, random_splits):
    config = TrainConfig(batch_size=2, max_iters=4)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        train(tiny_model(), *random_splits, config, checkpoint_path=tmp_path / "x.pt", resume=True)


def test_resume_is_exact(tmp_path, random_splits):
    """N steps straight == N/2 steps, then resume to N: same batch losses, same weights.

    Dropout is on, so the RNG state must be restored too, not only weights and optimizer.
    """
    n = 8
    config = TrainConfig(
        batch_size=4, max_iters=n, warmup_iters=2, eval_interval=n // 2, eval_iters=2, seed=3
    )
    straight = tiny_model(seed=0, dropout=0.1)
    history_straight = train(
        straight, *random_splits, config, checkpoint_path=tmp_path / "a.pt", progress=False
    )

    first_half = tiny_model(seed=0, dropout=0.1)
    path = tmp_path / "b.pt"
    history_half = train(
        first_half, *random_splits, config, checkpoint_path=path, max_steps=n // 2, progress=False
    )
    assert len(history_half.batch_loss) == n // 2 and load_checkpoint(path)["step"] == n // 2
    torch.manual_seed(999)  # whatever happens in between must not matter
    resumed = tiny_model(seed=1, dropout=0.1)  # different init: everything comes from the file
    history_resumed = train(
        resumed, *random_splits, config, checkpoint_path=path, resume=True, progress=False
    )

    assert history_resumed.batch_loss == history_straight.batch_loss
    assert history_resumed.val_loss == history_straight.val_loss
    assert history_resumed.step == history_straight.step == [n // 2, n]
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name


def test_resume_check_can_fail(tmp_path, random_splits):
    """Without the checkpoint's RNG and optimizer state the second half differs."""
    n = 8
    config = TrainConfig(
        batch_size=4, max_iters=n, warmup_iters=2, eval_interval=n // 2, eval_iters=2, seed=3
    )
    straight = train(tiny_model(dropout=0.1), *random_splits, config, progress=False)
    model = tiny_model(dropout=0.1)
    train(model, *random_splits, config, max_steps=n // 2, progress=False)
    restarted = train(model, *random_splits, config, progress=False)  # fresh optimizer and RNG
    assert restarted.batch_loss[n // 2 :] != straight.batch_loss[n // 2 :]


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    """A crash inside torch.save leaves the previous checkpoint intact and no temp file."""
    model = tiny_model()
    path = save_checkpoint(tmp_path / "model.pt", model, None, step=1)
    good_bytes = path.read_bytes()

    def crashing_save(obj, f, *args, **kwargs):
        with open(f, "wb") as handle:
            handle.write(b"PK\x03\x04 half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(training.checkpoint.torch, "save", crashing_save)
    with torch.no_grad():
        model.token_embedding.weight.add_(1.0)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, model, None, step=2)
    monkeypatch.undo()

    assert path.read_bytes() == good_bytes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"]
    assert load_checkpoint(path)["step"] == 1
