"""ModernDecoder's checkpoints and training: its kind and config are stored, the right class is
rebuilt, the other kind is refused by name, ``train()`` runs end to end with a checkpoint path
and resumes exactly; ``get_config(..., model="modern")`` and ``--model modern``."""

from __future__ import annotations

from dataclasses import asdict

import pytest
import torch

from course_utils.config import ModelConfig, TrainConfig, get_config
from course_utils.data import train_val_split
from course_utils.model import TinyDecoder
from course_utils.modern_model import ModernConfig, ModernDecoder
from course_utils.train import main, parse_args
from course_utils.training import load_checkpoint, model_from_checkpoint, save_checkpoint, train
from course_utils.training.checksum import payload_sha256
from course_utils.training.model_kinds import preset_config

SIZES = dict(vocab_size=20, block_size=8, d_model=16, n_heads=4, n_layers=2)
#: Every switch away from its default, so that a field lost on the way would show.
SWITCHES = dict(
    n_kv_heads=2, head_dim=6, qk_norm=True, mlp_bias=True, norm_eps=1e-5, rope_base=500.0,
    rope_angle_dtype="float32", scale_by_layer=True, padding_idx=3, d_ff=24,
)  # fmt: skip


def modern(seed: int = 0, **changes) -> ModernDecoder:
    torch.manual_seed(seed)
    return ModernDecoder(ModernConfig(**{**SIZES, **SWITCHES, **changes}))


def tiny(seed: int = 0) -> TinyDecoder:
    torch.manual_seed(seed)
    return TinyDecoder(ModelConfig(**SIZES, positional="rope"))


@pytest.fixture(scope="module")
def splits() -> tuple[torch.Tensor, torch.Tensor]:
    stream = torch.randint(20, (2_000,), generator=torch.Generator().manual_seed(0))
    return train_val_split(stream, 0.1)


def test_the_config_survives_the_round_trip():
    config = modern().config
    assert ModernConfig(**asdict(config)) == config


def test_a_modern_checkpoint_stores_its_kind_and_config_and_rebuilds_a_modern_decoder(tmp_path):
    model = modern().eval()
    path = save_checkpoint(tmp_path / "modern.pt", model, None, step=7)
    state = load_checkpoint(path)
    assert state["model_kind"] == "modern" and state["model_config"] == asdict(model.config)
    assert state["checksum"]["sha256"] == payload_sha256(state)  # the kind is covered too
    rebuilt = model_from_checkpoint(path).eval()
    assert type(rebuilt) is ModernDecoder and rebuilt.config == model.config
    ids = torch.randint(0, 20, (2, 8))
    torch.testing.assert_close(rebuilt(ids)[0], model(ids)[0], rtol=0, atol=0)
    into = modern(seed=1)
    load_checkpoint(path, into)
    for (name, a), b in zip(model.state_dict().items(), into.state_dict().values()):
        assert torch.equal(a, b), name


def test_a_tiny_checkpoint_still_rebuilds_a_tiny_decoder(tmp_path):
    path = save_checkpoint(tmp_path / "tiny.pt", tiny(), None, step=1)
    assert load_checkpoint(path)["model_kind"] == "tiny"
    assert type(model_from_checkpoint(path)) is TinyDecoder


def test_a_checkpoint_written_before_kinds_holds_a_tiny_decoder(tmp_path):
    """Files without ``model_kind`` (and without a checksum) load as before."""
    model = tiny()
    legacy = {"model": model.state_dict(), "model_config": asdict(model.config), "step": 0}
    torch.save(legacy, tmp_path / "old.pt")
    assert "model_kind" not in load_checkpoint(tmp_path / "old.pt")  # the file is not altered
    assert type(model_from_checkpoint(tmp_path / "old.pt")) is TinyDecoder
    load_checkpoint(tmp_path / "old.pt", tiny(seed=1))
    with pytest.raises(ValueError, match="holds a tiny model .*ModernDecoder"):
        load_checkpoint(tmp_path / "old.pt", modern())


@pytest.mark.parametrize("saved_kind", ["tiny", "modern"])
def test_each_kind_refuses_the_other_s_checkpoint_naming_both(tmp_path, saved_kind):
    saved, other = (tiny(), modern()) if saved_kind == "tiny" else (modern(), tiny())
    path = save_checkpoint(tmp_path / "x.pt", saved, None, step=1)
    before = {k: v.clone() for k, v in other.state_dict().items()}
    names = {"tiny": "TinyDecoder, ModelConfig", "modern": "ModernDecoder, ModernConfig"}
    other_kind = "modern" if saved_kind == "tiny" else "tiny"
    with pytest.raises(ValueError) as refused:
        load_checkpoint(path, other)
    message = str(refused.value)
    assert f"holds a {saved_kind} model ({names[saved_kind]})" in message
    assert f"the model passed is a {other_kind} model ({names[other_kind]})" in message
    assert "model_from_checkpoint(path)" in message
    for name, value in other.state_dict().items():  # nothing was loaded
        assert torch.equal(value, before[name]), name


def test_a_different_modern_config_is_named_field_by_field(tmp_path):
    path = save_checkpoint(tmp_path / "x.pt", modern(), None, step=1)
    with pytest.raises(ValueError, match=r"n_kv_heads: checkpoint 2 vs model 1.*ModernConfig\("):
        load_checkpoint(path, modern(n_kv_heads=1))


def test_an_unknown_kind_or_field_is_refused_by_name(tmp_path):
    state = load_checkpoint(save_checkpoint(tmp_path / "x.pt", modern(), None, step=1))
    for change, pattern in (
        ({"model_kind": "mamba"}, "model_kind='mamba'.*knows \\['tiny', 'modern'\\]"),
        ({"model_kind": "tiny"}, r"\(tiny model\) has model_config field\(s\) \['n_kv_heads'"),
    ):
        edited = {k: v for k, v in state.items() if k != "checksum"} | change
        torch.save(edited, tmp_path / "edited.pt")
        with pytest.raises(ValueError, match=pattern):
            model_from_checkpoint(tmp_path / "edited.pt")


def test_train_runs_end_to_end_with_a_checkpoint(tmp_path, splits):
    """The reported failure: train(modern, checkpoint_path=...) stopped at the first
    evaluation. Now it evaluates, writes the checkpoint, and the file holds the model."""
    config = TrainConfig(batch_size=4, max_iters=6, warmup_iters=1, eval_interval=3, eval_iters=2)
    model, path = modern(), tmp_path / "run.pt"
    history = train(model, *splits, config, checkpoint_path=path, progress=False)
    assert history.step == [3, 6] and len(history.batch_loss) == 6
    assert all(0 < loss < 10 for loss in history.val_loss)
    state = load_checkpoint(path)
    assert state["step"] == 6 and state["model_kind"] == "modern"
    assert state["history"]["val_loss"] == history.val_loss
    rebuilt = model_from_checkpoint(path)
    for (name, a), b in zip(model.state_dict().items(), rebuilt.state_dict().values()):
        assert torch.equal(a, b), name


class OwnDecoder(torch.nn.Module):
    """A learner's own model: trains with train(), but checkpoints do not hold it."""

    def __init__(self):
        super().__init__()
        self.config = ModelConfig(**SIZES)
        self.table = torch.nn.Embedding(20, 20)

    def forward(self, ids, targets=None):
        logits = self.table(ids)
        return logits, torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())


def test_train_refuses_a_checkpoint_it_could_not_write_before_the_first_step(tmp_path, splits):
    config = TrainConfig(batch_size=2, max_iters=4, eval_interval=2, eval_iters=1)
    (tmp_path / "file").write_text("not a folder")
    for model, path, error, pattern in (
        (OwnDecoder(), tmp_path / "own.pt", TypeError, "hold a TinyDecoder or a ModernDecoder"),
        (modern(), tmp_path, IsADirectoryError, "is a folder; name a file in it"),
        (modern(), tmp_path / "file" / "m.pt", NotADirectoryError, "which is a file"),
    ):
        before = [p.clone() for p in model.parameters()]
        with pytest.raises(error, match=pattern):
            train(model, *splits, config, checkpoint_path=path, progress=False)
        assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # no step
    assert train(OwnDecoder(), *splits, config, progress=False).step == [2, 4]  # without: fine


def test_resume_is_exact(tmp_path, splits):
    """N steps straight == N/2 steps, save, resume to N: same losses, same weights (dropout on,
    so the random state must come back too)."""
    n = 8
    config = TrainConfig(
        batch_size=4, max_iters=n, warmup_iters=2, eval_interval=n // 2, eval_iters=2, seed=3
    )
    straight = modern(dropout=0.1)
    history_straight = train(
        straight, *splits, config, checkpoint_path=tmp_path / "a.pt", progress=False
    )
    path = tmp_path / "b.pt"
    half = modern(dropout=0.1)
    train(half, *splits, config, checkpoint_path=path, max_steps=n // 2, progress=False)
    assert load_checkpoint(path)["step"] == n // 2
    torch.manual_seed(999)  # whatever happens in between must not matter
    resumed = modern(seed=1, dropout=0.1)  # another init: everything comes from the file
    history = train(resumed, *splits, config, checkpoint_path=path, resume=True, progress=False)
    assert history.batch_loss == history_straight.batch_loss
    assert history.val_loss == history_straight.val_loss and history.step == [n // 2, n]
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name
    with pytest.raises(ValueError, match="holds a modern model"):  # resume into the other kind
        train(tiny(), *splits, config, checkpoint_path=path, resume=True, progress=False)


def test_preset_config_builds_a_modern_config_of_the_preset_s_sizes():
    model_config, train_config = preset_config("baby", 84, model="modern", n_kv_heads=2)
    tiny_config, tiny_train = get_config("baby", 84)
    assert type(model_config) is ModernConfig and type(tiny_config) is ModelConfig
    for name in ("block_size", "d_model", "n_heads", "n_layers", "positional", "dropout"):
        assert getattr(model_config, name) == getattr(tiny_config, name), name
    assert model_config.n_kv_heads == 2 and model_config.norm == "rmsnorm"
    assert train_config == tiny_train and preset_config("baby", 84) == (tiny_config, tiny_train)
    assert get_config("baby", 84, ModernConfig, n_kv_heads=2)[0] == model_config
    with pytest.raises(ValueError, match=r"unknown model 'llama'; expected one of \['tiny'"):
        preset_config("baby", 84, model="llama")
    with pytest.raises(ValueError, match=r"\['qk_norm'\] are fields of ModernConfig .*--model mo"):
        preset_config("baby", 84, qk_norm=True)
    with pytest.raises(ValueError, match=r"unknown config fields \['qk_norm'\]"):
        get_config("baby", 84, qk_norm=True)  # a ModelConfig: as before
    with pytest.raises(TypeError, match="config_class must be ModelConfig or a subclass"):
        get_config("baby", 84, "modern")


TINY_RUN = ["--config", "cpu", "--device", "cpu", "--samples", "5", "--set", "d_model=16"]
TINY_RUN += ["--set", "n_layers=1", "--set", "block_size=16", "--set", "batch_size=2"]
TINY_RUN += ["--set", "eval_iters=1", "--set", "eval_interval=2"]


def test_the_command_line_trains_and_resumes_a_modern_decoder(tmp_path, capsys):
    path = tmp_path / "m.pt"
    options = [*TINY_RUN, "--model", "modern", "--set", "n_kv_heads=2", "--checkpoint", str(path)]
    summary = main([*options, "--max-iters", "2"])
    assert summary["model"] == "modern" and "ModernDecoder" in capsys.readouterr().out
    assert type(model_from_checkpoint(path)) is ModernDecoder
    assert model_from_checkpoint(path).config.n_kv_heads == 2
    main([*options, "--max-iters", "4", "--resume"])
    assert load_checkpoint(path)["history"]["step"] == [2, 4]


def mistake(argv: list[str], capsys) -> str:
    """The one line a mistake prints (exit status 2, nothing on stdout)."""
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    captured = capsys.readouterr()
    assert exited.value.code == 2 and captured.out == "" and "Traceback" not in captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m course_utils.train: error: ")
    return lines[0]


def test_command_line_mistakes_print_one_line_and_exit_2(tmp_path, capsys):
    modern_path = save_checkpoint(tmp_path / "m.pt", modern(), None, step=1)
    tiny_path = save_checkpoint(tmp_path / "t.pt", tiny(), None, step=1)
    cases = [
        (["--model", "llama"], "argument --model: invalid choice: 'llama'"),
        (["--max-iters", "ten"], "argument --max-iters: invalid int value: 'ten'"),
        (["--set", "n_kv_heads=2"], "['n_kv_heads'] are fields of ModernConfig"),
        (["--model", "modern", "--set", "n_kv_heads=3"], "n_kv_heads=3 must divide n_heads=4"),
        (["--samples", "-1"], "--samples must be 0 or more, got -1"),
        (["--checkpoint", str(tmp_path)], "is a folder; name a file in it"),
        (["--export", f"{tiny_path}/w.pt"], "is a file, so no folder can be made under it"),
        (["--resume", "--checkpoint", str(tmp_path / "no.pt")], "--resume: no checkpoint at"),
        (["--resume", "--checkpoint", str(modern_path)], "holds a modern model"),
        (["--model", "modern", "--resume", "--checkpoint", str(tiny_path)], "holds a tiny model"),
        (
            ["--model", "modern", "--resume", "--checkpoint", str(modern_path)],
            "different model config (block_size: checkpoint 8 vs model 64",
        ),
    ]
    for argv, expected in cases:
        assert expected in mistake(["--config", "cpu", *argv], capsys), argv


def test_help_lists_the_model_option(capsys):
    with pytest.raises(SystemExit) as exited:
        parse_args(["--help"])
    out = capsys.readouterr().out
    assert exited.value.code == 0 and out.startswith("usage: python -m course_utils.train")
    assert "--model {tiny,modern}" in out and "ModernDecoder" in out
