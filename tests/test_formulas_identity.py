"""Values compared by equality, not identity.

``x is 300`` or ``kind is "sinusoidal"`` happens to hold in CPython for small ints (-5..256)
and for strings written as literals, so tests with small sizes and literal names cannot tell
``is`` from ``==``. Here the sizes are above 256 and the names are built at run time (as
from a JSON config or a checkpoint).
"""

from __future__ import annotations

import sys

import pytest
import torch

from course_utils.config import ModelConfig, TrainConfig
from course_utils.kv_cache import KVCache
from course_utils.model import TinyDecoder
from course_utils.positional import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    additive_positions,
)
from course_utils.rmsnorm import RMSNorm
from course_utils.rotary import RotaryEmbedding, apply_rotary_embedding
from course_utils.training import train


def _runtime(text: str) -> str:
    """The same text as a new, non-interned string object."""
    return "".join(list(text))


def test_position_kinds_named_at_run_time():
    kind = _runtime("sinusoidal")
    assert kind == "sinusoidal" and kind is not sys.intern("sinusoidal")  # another object
    assert isinstance(additive_positions(kind, 8, 4), SinusoidalPositionalEncoding)
    assert isinstance(additive_positions(_runtime("learned"), 8, 4), LearnedPositionalEmbedding)
    assert isinstance(additive_positions(_runtime("rope"), 8, 4), torch.nn.Identity)


def test_rotary_offset_past_256_positions():
    """A token after 300 cached ones is rotated by its absolute position, 300."""
    x = torch.randn(1, 2, 3, 8, dtype=torch.float64)
    rotated = RotaryEmbedding(8, 400)(x, offset=300)
    expected = apply_rotary_embedding(x, torch.arange(300, 303))
    torch.testing.assert_close(rotated, expected)


def test_rmsnorm_of_more_than_256_channels():
    x = torch.randn(2, 300)
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + RMSNorm(300).eps)
    torch.testing.assert_close(RMSNorm(300)(x), expected)


@pytest.mark.tooling  # slow (make test-tooling, CI): keeps make test under 5 minutes
def test_the_last_step_is_evaluated_and_saved_once_past_256_steps(tmp_path, monkeypatch):
    """max_iters = 260 with eval_interval = 100: evaluations (and checkpoints) at 100, 200
    and the end, 260; the end is not saved a second time."""
    import course_utils.training.loop as loop

    saved = []
    real_save = loop.save_checkpoint

    def counting_save(path, model, optimizer, step, *args, **kwargs):
        saved.append(step)
        return real_save(path, model, optimizer, step, *args, **kwargs)

    monkeypatch.setattr(loop, "save_checkpoint", counting_save)
    torch.manual_seed(0)
    model = TinyDecoder(ModelConfig(vocab_size=8, block_size=4, d_model=8, n_heads=2, n_layers=1))
    stream = torch.randint(8, (400,), generator=torch.Generator().manual_seed(0))
    config = TrainConfig(
        batch_size=1, max_iters=260, warmup_iters=1, eval_interval=100, eval_iters=1, seed=0
    )
    history = train(
        model, stream[:300], stream[300:], config, checkpoint_path=tmp_path / "c.pt", progress=False
    )
    assert history.step == [100, 200, 260]
    assert saved == [100, 200, 260]


@pytest.mark.parametrize("v_shape", [(1, 2, 3, 5), (1, 2, 4, 4), (1, 2, 3, 3)])
def test_keys_and_values_of_other_shapes_are_refused(v_shape):
    """k and v must have the same (B, h, T_new, d_k), whichever is larger."""
    with pytest.raises(ValueError, match="k and v must both be"):
        KVCache().append(0, torch.zeros(1, 2, 3, 4), torch.zeros(v_shape))


def test_no_identity_comparison_with_a_literal_anywhere_in_the_package():
    """``x is "cuda"`` or ``n is 1`` compiles with a SyntaxWarning (Python >= 3.8): it compares
    objects, not values, and holds or not by accident of interning. Every module of the package
    compiles without one (the device branches of the training loop run only on a GPU, so no
    CPU test could reach them)."""
    import warnings
    from pathlib import Path

    import course_utils

    package = Path(course_utils.__file__).parent
    for path in sorted(package.rglob("*.py")):
        with warnings.catch_warnings():
            warnings.simplefilter("error", SyntaxWarning)
            compile(path.read_text(encoding="utf-8"), str(path), "exec")
