"""The learner's decoder: the course's solution equals TinyDecoder, parts are saved and
assembled (the learner's own or the course's solution), a faulty part is named and replaced,
and every notebook's solution cell is the solution file's source."""

import ast
import json
import linecache
import textwrap
from pathlib import Path

import pytest
import torch

import course_utils.exercises.solution_model as solution_model
from course_utils.config import ModelConfig
from course_utils.lab import parts
from course_utils.model import TinyDecoder

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(parts.FOLDER_ENV, str(tmp_path / "my_model"))
    return tmp_path / "my_model"


@pytest.mark.parametrize(
    "sizes",
    [
        dict(vocab_size=11, block_size=8, d_model=24, n_heads=3, n_layers=2),
        dict(vocab_size=84, block_size=5, d_model=16, n_heads=1, n_layers=1, d_ff=20),
    ],
)
def test_solution_decoder_equals_tiny_decoder_with_copied_weights(sizes):
    torch.manual_seed(0)
    tiny = TinyDecoder(ModelConfig(**sizes, positional="sinusoidal", dropout=0.0)).eval()
    mine = solution_model.Decoder(**{**sizes, "d_ff": tiny.config.d_ff})
    mine.load_state_dict(tiny.state_dict())  # same attribute names: strict load
    ids = torch.randint(0, sizes["vocab_size"], (3, sizes["block_size"]))
    targets = torch.randint(0, sizes["vocab_size"], ids.shape)
    logits, loss = mine(ids, targets)
    expected, expected_loss = tiny(ids, targets)
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(loss, expected_loss, atol=1e-6, rtol=1e-6)
    # and it is a language model: changing a later token leaves earlier logits alone
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 1) % sizes["vocab_size"]
    torch.testing.assert_close(mine(changed)[0][:, :-1], logits[:, :-1])


def test_run_all_keeps_the_learners_part(folder, capsys):
    """The solution cell after the learner's cell passes too; it must not replace theirs."""
    parts.save_part(_define(RIGHT_SPLIT, "split_heads", "<cell-4>"))
    solution = parts.solution_source("split_heads")
    assert parts.save_part(_define(solution, "split_heads", "<cell-5>")) is None
    assert "permute(0, 2, 1, 3)" in (folder / "split_heads.py").read_text()


def test_a_class_from_the_solution_cell_is_the_course_solution(folder, capsys):
    source = parts.solution_source("FeedForward")  # ends with a comment on its last line
    assert source.rstrip().endswith("# (B, T, C) -> (B, T, d_ff) -> (B, T, C)")
    namespace = {"__name__": "__main__", "nn": torch.nn, "F": torch.nn.functional}
    linecache.cache["<cell-9>"] = (len(source), None, source.splitlines(True), "<cell-9>")
    exec(compile(source, "<cell-9>", "exec"), namespace)
    assert parts.save_part(namespace["FeedForward"]) is None  # the solution is not saved
    assert not (folder / "FeedForward.py").exists()
    parts.my_model()
    assert "FeedForward         notebook 10: the course's solution" in capsys.readouterr().out


def test_without_saved_parts_every_part_is_the_solution(folder, capsys):
    module = parts.my_model()
    out = capsys.readouterr().out
    assert out.count("the course's solution") == len(parts.PARTS)
    assert (folder / "my_model.py").is_file()
    for name in parts.PARTS:
        assert hasattr(module, name)


def _define(source: str, name: str, filename: str):
    """Run ``source`` as a notebook cell would (its lines in linecache), return ``name``."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "__main__", "torch": torch, "nn": torch.nn}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


RIGHT_SPLIT = """
def split_heads(x, n_heads):
    B, T, C = x.shape
    return x.reshape(B, T, n_heads, C // n_heads).permute(0, 2, 1, 3)
"""

WRONG_LAYER_NORM = """
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        centred = x - x.mean(-1, keepdim=True)
        return self.weight * centred / (x.std(-1, keepdim=True) + self.eps) + self.bias  # BUG
"""


def test_saved_parts_are_used_and_a_faulty_one_is_named_and_replaced(folder, capsys):
    split = _define(RIGHT_SPLIT, "split_heads", "<cell-1>")
    norm = _define(WRONG_LAYER_NORM, "LayerNorm", "<cell-2>")  # a class: found via its methods
    assert parts.save_part(split) == folder / "split_heads.py"
    assert parts.save_part(norm) == folder / "LayerNorm.py"
    assert (folder / "LayerNorm.py").read_text() == textwrap.dedent(WRONG_LAYER_NORM).lstrip()
    assert "# BUG" in (folder / "LayerNorm.py").read_text()  # a comment on the last line kept
    module = parts.my_model()
    out = capsys.readouterr().out
    assert "split_heads         notebook 04: yours" in out
    assert "LayerNorm           notebook 09: yours" in out
    assert (
        "LayerNorm: yours is replaced by the course's solution in this model: looks like x.std()"
        in out
    )
    assembled = (folder / "my_model.py").read_text()
    assert "permute(0, 2, 1, 3)" in assembled  # the learner's split_heads kept
    assert "x.std(-1" not in assembled  # the faulty LayerNorm replaced
    assert "# notebook 04: mine\ndef split_heads(" in assembled  # each part says whose it is
    assert "# notebook 09: the course's solution\nclass LayerNorm(" in assembled
    assert "# notebook 07: the course's solution\ndef attention(" in assembled
    torch.manual_seed(0)
    reference = solution_model.Decoder(11, 8, 24, 3, 2, 96)
    mine = module.Decoder(11, 8, 24, 3, 2, 96)
    mine.load_state_dict(reference.state_dict())
    ids = torch.randint(0, 11, (2, 8))
    torch.testing.assert_close(mine(ids)[0], reference(ids)[0])


def test_a_part_that_does_not_load_is_named(folder, capsys):
    (folder).mkdir(parents=True)
    (folder / "FeedForward.py").write_text("class FeedForward(nn.Module):\n    def __init__(self\n")
    parts.my_model()
    out = capsys.readouterr().out
    assert "FeedForward: yours is replaced by the course's solution in this model: its file " in out
    assert "FeedForward.py in your parts folder does not parse (SyntaxError: " in out


def test_my_parts_returns_the_asked_parts_and_refuses_unknown_names(folder, capsys):
    parts.save_part(_define(RIGHT_SPLIT, "split_heads", "<cell-3>"))
    split, attend = parts.my_parts("split_heads", "attention")
    out = capsys.readouterr().out
    assert "split_heads (notebook 04): yours" in out
    assert "attention (notebook 07): the course's solution" in out
    x = torch.randn(2, 5, 12)
    torch.testing.assert_close(split(x, 3), solution_model.split_heads(x, 3))
    with pytest.raises(ValueError, match=r"unknown|needs part names.*'split_head'"):
        parts.my_parts("split_head")


def test_save_part_ignores_what_is_not_a_part_and_never_raises(folder, capsys):
    assert parts.save_part(len) is None
    assert parts.save_part(42) is None
    orphan = type("Block", (), {})  # a part's name, but no source anywhere
    assert parts.save_part(orphan) is None
    assert "could not be saved" in capsys.readouterr().out


def _solution_cells(notebook: Path) -> dict[str, str]:
    """{part name: its def/class source} from the notebook's "# Solution" cells."""
    found = {}
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or not source.startswith("# Solution"):
            continue
        lines = source.splitlines(True)
        for node in ast.parse(source).body:
            name = getattr(node, "name", None)
            if name in parts.PARTS:  # whole lines: a trailing comment is part of the source
                found[name] = "".join(lines[node.lineno - 1 : node.end_lineno])
    return found


@pytest.mark.parametrize("name", list(parts.PARTS))
def test_each_part_has_a_solution_cell_equal_to_the_solution_file(name):
    [notebook] = NOTEBOOKS.glob(f"{parts.PARTS[name]}_*.ipynb")
    cells = _solution_cells(notebook)
    assert name in cells, f"{notebook.name} has no '# Solution' cell defining {name}"
    assert textwrap.dedent(cells[name]).strip() == parts.solution_source(name).strip()


def test_the_assembled_decoder_trained_by_a_plain_loop_reaches_train_s_loss():
    """Issue 30's measure at a budget of seconds: notebook 12's plain loop on the learner's
    decoder (the course's solutions assembled) and train() on TinyDecoder, from the same
    weights and batches, reach the same validation loss (within 0.05; here they agree to
    rounding)."""
    from course_utils.config import get_config
    from course_utils.lab.ladder import ladder_data, validation_loss
    from course_utils.training import train
    from course_utils.training.schedule import learning_rate_at

    data = ladder_data()
    sizes = dict(block_size=16, d_model=32, n_heads=4, n_layers=2, batch_size=16)
    model_config, config = get_config(
        "cpu", data.vocab_size, positional="sinusoidal", dropout=0.0, max_iters=120,
        eval_interval=120, eval_iters=2, **sizes,
    )  # fmt: skip
    torch.manual_seed(config.seed)
    mine = solution_model.Decoder(
        data.vocab_size, 16, 32, 4, 2, model_config.d_ff
    )  # as notebook 12: N(0, 0.02) initialisation, then the same start for both
    for module in mine.modules():
        if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
            torch.nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, torch.nn.Linear) and module.bias is not None:
            torch.nn.init.zeros_(module.bias)
    course = TinyDecoder(model_config)
    course.load_state_dict(mine.state_dict())

    decay = [p for p in mine.parameters() if p.dim() >= 2]
    rest = [p for p in mine.parameters() if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": rest, "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=config.learning_rate, betas=(0.9, config.beta2))
    generator = torch.Generator().manual_seed(config.seed)
    losses = []
    for step in range(config.max_iters):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate_at(step, config)
        starts = torch.randint(len(data.train) - 16, (16,), generator=generator)
        offsets = starts[:, None] + torch.arange(16)
        _, loss = mine(data.train[offsets], data.train[offsets + 1])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(mine.parameters(), config.grad_clip)
        optimizer.step()
        losses.append(loss.item())
    history = train(course, data.train, data.val, config, progress=False)
    assert max(abs(a - b) for a, b in zip(losses[:20], history.batch_loss[:20])) < 1e-4
    assert abs(validation_loss(mine) - validation_loss(course)) < 0.05
