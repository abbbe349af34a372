"""keep_trained / load_trained: notebook 12's trained decoder kept beside the learner's parts,
rebuilt by notebook 13 from the parts with the same weights; an untrained stand-in when
nothing (usable) is kept; every misuse named."""

import pytest
import torch

from course_utils.exercises import solution_model
from course_utils.lab.trained import (
    FILE_NAME,
    UNTRAINED_LINE,
    keep_trained,
    load_trained,
    trained_path,
)
from course_utils.tokenization import CharTokenizer

SIZES = dict(block_size=12, d_model=16, n_heads=2, n_layers=2, d_ff=24)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_MY_MODEL", str(tmp_path / "parts"))
    return tmp_path / "parts"


@pytest.fixture
def tokenizer():
    return CharTokenizer.from_text("to be or not to be, that is the question\n")


def decoder(tokenizer, seed=0):
    torch.manual_seed(seed)
    return solution_model.Decoder(len(tokenizer.vocab), *SIZES.values())


def test_kept_in_the_parts_folder_and_rebuilt_with_the_same_weights(folder, tokenizer, capsys):
    model = decoder(tokenizer)
    path = keep_trained(model, tokenizer, *SIZES.values())
    assert path == folder / FILE_NAME == trained_path() and path.is_file()
    assert str(path) in capsys.readouterr().out
    kept = load_trained(solution_model)
    assert kept.trained and kept.module is solution_model and not kept.model.training
    assert kept.arguments == {"vocab_size": len(tokenizer.vocab), **SIZES}
    assert kept.tokenizer.vocab == tokenizer.vocab
    ids = torch.tensor([tokenizer.encode("to be or")])
    assert torch.equal(kept.model(ids)[0], model.eval()(ids)[0])
    assert "Your trained decoder, from" in capsys.readouterr().out


def test_a_second_keep_replaces_the_first(folder, tokenizer):
    keep_trained(decoder(tokenizer, seed=0), tokenizer, *SIZES.values())
    second = decoder(tokenizer, seed=1)
    keep_trained(second, tokenizer, *SIZES.values())
    weight = load_trained(solution_model).model.token_embedding.weight
    assert torch.equal(weight, second.token_embedding.weight)
    assert [p.name for p in folder.iterdir()] == [FILE_NAME]


def test_nothing_kept_gives_none_or_the_untrained_stand_in(folder, capsys):
    assert load_trained(solution_model) is None
    first = load_trained(solution_model, untrained_seed=0)
    assert UNTRAINED_LINE in capsys.readouterr().out
    assert not first.trained and first.arguments["block_size"] == 64
    second = load_trained(solution_model, untrained_seed=0)
    assert torch.equal(
        first.model.blocks[0].attention.w_q.weight, second.model.blocks[0].attention.w_q.weight
    )
    assert first.arguments["vocab_size"] == len(first.tokenizer.vocab)


def test_a_file_that_no_longer_fits_is_named_with_the_fix(folder, tokenizer, capsys):
    keep_trained(decoder(tokenizer), tokenizer, *SIZES.values())
    state = torch.load(trained_path(), weights_only=True)
    state["state_dict"].pop("final_norm.weight")
    torch.save(state, trained_path())
    assert load_trained(solution_model) is None
    out = capsys.readouterr().out
    assert "cannot be used" in out and "run notebook 12 again" in out
    trained_path().write_bytes(b"not a checkpoint")
    assert not load_trained(solution_model, untrained_seed=0).trained
    assert "cannot be used" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("change", "error", "said"),
    [
        (dict(model="weights"), TypeError, "model"),
        (dict(tokenizer="abc"), TypeError, "tokenizer"),
        (dict(block_size=12.0), TypeError, "block_size"),
        (dict(d_ff=0), ValueError, "d_ff"),
        (dict(n_heads=True), TypeError, "n_heads"),
    ],
)
def test_keep_trained_names_the_bad_argument(folder, tokenizer, change, error, said):
    arguments = dict(model=decoder(tokenizer), tokenizer=tokenizer, **SIZES) | change
    with pytest.raises(error, match=said):
        keep_trained(**arguments)
    assert not trained_path().exists()


def test_a_tokenizer_that_does_not_fit_the_model_is_refused(folder, tokenizer):
    other = CharTokenizer.from_text("abc")
    with pytest.raises(ValueError, match="token_embedding has .* rows but tokenizer has 3"):
        keep_trained(decoder(tokenizer), other, *SIZES.values())


def test_load_trained_names_a_bad_module_or_seed(folder):
    with pytest.raises(TypeError, match="module must be the learner's parts"):
        load_trained(torch)
    with pytest.raises(TypeError, match="untrained_seed"):
        load_trained(solution_model, untrained_seed=0.5)


def test_notebook_12s_cell_writes_what_load_trained_reads(folder, tokenizer):
    """Notebook 12 saves with a cell the learner reads (no import: a lesson imports at most
    twelve course names); run that cell's source on a small decoder."""
    import json
    import os
    import types
    from pathlib import Path

    from course_utils.lab.trained import ARGUMENTS

    path = Path(__file__).resolve().parents[1] / "notebooks" / "12_training_tiny_decoder.ipynb"
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    source = next(
        "".join(c["source"]) for c in cells if '"trained_decoder.pt"' in "".join(c["source"])
    )
    folder.mkdir(parents=True)
    model = decoder(tokenizer)
    sizes = dict(SIZES)
    namespace = {
        "os": os,
        "torch": torch,
        "V": len(tokenizer.vocab),
        "block_size": sizes.pop("block_size"),
        "model_config": types.SimpleNamespace(**sizes),
        "tokenizer": tokenizer,
        "model": model,
        "m": types.SimpleNamespace(__file__=str(folder / "my_model.py")),
    }
    exec(compile(source, "notebook 12's cell", "exec"), namespace)
    assert Path(namespace["path"]) == trained_path() and tuple(namespace["arguments"]) == ARGUMENTS
    kept = load_trained(solution_model)
    assert kept.trained and kept.tokenizer.vocab == tokenizer.vocab
    assert torch.equal(kept.model.lm_head.weight, model.lm_head.weight)
