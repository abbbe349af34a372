"""Checkpoints that must not load silently: damaged bytes, another model's optimizer, a config
field from another version of the course; and the shipped checkpoint's checksum (issue 23).
"""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from course_utils.config import ModelConfig, TrainConfig
from course_utils.model import TinyDecoder
from course_utils.training import (
    load_checkpoint,
    make_optimizer,
    model_from_checkpoint,
    save_checkpoint,
)
from course_utils.training.checkpoint import add_checksum, payload_sha256

ROOT = Path(__file__).resolve().parents[1]
BABY = ROOT / "assets" / "checkpoints" / "baby.pt"


def _model(d_model: int = 24, seed: int = 0) -> TinyDecoder:
    torch.manual_seed(seed)
    config = ModelConfig(vocab_size=20, block_size=8, d_model=d_model, n_heads=3, n_layers=2)
    return TinyDecoder(config)


def _trained_checkpoint(path: Path, d_model: int = 24) -> Path:
    """A checkpoint with optimizer moments (one AdamW step), so its optimizer state is real."""
    model = _model(d_model)
    optimizer = make_optimizer(model, TrainConfig(batch_size=2, max_iters=1))
    ids = torch.randint(20, (2, 8), generator=torch.Generator().manual_seed(1))
    _, loss = model(ids, ids)
    loss.backward()
    optimizer.step()
    return save_checkpoint(path, model, optimizer, step=1)


def _flip_middle(path: Path, count: int = 64) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + count] = bytes(b ^ 0xFF for b in data[middle : middle + count])
    path.write_bytes(bytes(data))


# --- checksum -------------------------------------------------------------------------------


def test_64_flipped_bytes_are_refused_naming_the_file(tmp_path):
    path = _trained_checkpoint(tmp_path / "run.pt")
    before = torch.load(path, weights_only=True)
    _flip_middle(path)
    # torch itself reads the damaged file without a word, with other numbers in it: only
    # the checksum can tell.
    after = torch.load(path, weights_only=True)
    assert payload_sha256(after) != payload_sha256(before)
    with pytest.raises(ValueError, match=rf"checkpoint {re.escape(str(path))} is damaged"):
        load_checkpoint(path)
    model = _model(seed=5)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match="checksum stored when it was written"):
        load_checkpoint(path, model)
    assert all(torch.equal(weights[k], v) for k, v in model.state_dict().items()), "untouched"
    with pytest.raises(ValueError, match="is damaged"):
        model_from_checkpoint(path)


def test_an_intact_checkpoint_verifies_on_every_load(tmp_path):
    path = _trained_checkpoint(tmp_path / "run.pt")
    state = load_checkpoint(path)
    assert state["checksum"]["sha256"] == payload_sha256(state)
    assert len(state["checksum"]["sha256"]) == 64


def test_the_checksum_sees_every_kind_of_change():
    """One changed bit of a weight, a changed setting, a dtype, a list turned into a tuple."""
    state = {"model": {"w": torch.ones(3)}, "step": 2, "history": {"loss": [1.0, 0.5]}}
    reference = payload_sha256(state)
    bit = torch.ones(3)
    bit.view(torch.int32)[1] ^= 1  # the lowest bit of one float
    for changed in (
        {**state, "model": {"w": bit}},
        {**state, "model": {"w": torch.ones(3, dtype=torch.float64)}},
        {**state, "model": {"w": torch.ones(1, 3)}},
        {**state, "step": 3},
        {**state, "history": {"loss": (1.0, 0.5)}},
        {**state, "extra": None},
    ):
        assert payload_sha256(changed) != reference, changed
    reordered = {"history": {"loss": [1.0, 0.5]}, "step": 2, "model": {"w": torch.ones(3)}}
    assert payload_sha256(reordered) == reference, "key order does not matter"
    assert payload_sha256({**state, "checksum": {"sha256": "x"}}) == reference


def test_a_checkpoint_from_before_checksums_loads_and_add_checksum_keeps_every_bit(tmp_path):
    """Decision: a file without a checksum (written before they existed) loads unchecked;
    add_checksum stores one without changing a tensor, and from then on damage is caught."""
    path = _trained_checkpoint(tmp_path / "old.pt")
    old = torch.load(path, weights_only=True)
    del old["checksum"]
    torch.save(old, path)
    assert "checksum" not in load_checkpoint(path)  # loads, as it always did
    digest = add_checksum(path)
    upgraded = torch.load(path, weights_only=True)
    assert upgraded["checksum"]["sha256"] == digest == payload_sha256(old)
    for name, tensor in old["model"].items():
        assert torch.equal(upgraded["model"][name], tensor) and tensor.dtype == (
            upgraded["model"][name].dtype
        )
    assert add_checksum(path) == digest, "a second call changes nothing"
    _flip_middle(path)
    with pytest.raises(ValueError, match="is damaged"):
        load_checkpoint(path)


def test_the_shipped_checkpoint_carries_a_checksum_that_verifies():
    state = load_checkpoint(BABY)  # recomputes it: raises if the file was damaged
    assert state["checksum"]["sha256"] == payload_sha256(state)


# --- another model's optimizer ----------------------------------------------------------------


def test_an_optimizer_of_another_model_gets_the_course_message(tmp_path):
    path = _trained_checkpoint(tmp_path / "run.pt", d_model=24)
    model = _model(24, seed=3)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    wider = _model(48)  # same number of tensors, other shapes
    fewer = TinyDecoder(ModelConfig(vocab_size=20, block_size=8, d_model=24, n_heads=3, n_layers=1))
    config = TrainConfig(batch_size=2, max_iters=1)
    for other, what in ((wider, r"has shape \(48,\)|has shape \(20, 48\)"), (fewer, "sizes")):
        with pytest.raises(ValueError) as caught:
            load_checkpoint(path, model, make_optimizer(other, config))
        message = str(caught.value)
        assert str(path) in message and "not the optimizer of a model like" in message
        assert re.search(what, message), message
        assert "make_optimizer(model, train_config)" in message
        assert "doesn't match the size" not in message  # not torch's raw words
    assert all(torch.equal(weights[k], v) for k, v in model.state_dict().items()), "untouched"
    # the model's own optimizer still loads
    optimizer = make_optimizer(model, config)
    load_checkpoint(path, model, optimizer)
    assert optimizer.state_dict()["state"], "the moments were loaded"


# --- a config field this version does not know ------------------------------------------------


def test_a_model_config_field_from_another_version_is_named(tmp_path):
    path = _trained_checkpoint(tmp_path / "newer.pt")
    state = torch.load(path, weights_only=True)
    state["model_config"]["n_kv_heads"] = 1  # a field a later version might add
    del state["checksum"]
    torch.save(state, path)
    for load in (
        lambda: load_checkpoint(path),
        lambda: load_checkpoint(path, _model()),
        lambda: model_from_checkpoint(path),
    ):
        with pytest.raises(ValueError) as caught:
            load()
        message = str(caught.value)
        assert str(path) in message and "['n_kv_heads']" in message
        assert "another version of course_utils" in message and "git pull" in message
        assert "unexpected keyword" not in message  # not the bare dataclass TypeError
    assert set(asdict(_model().config)) < set(state["model_config"])
