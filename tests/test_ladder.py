"""The loss ladder: one budget for every rung, measured on the CPU; the committed rungs agree
with what each notebook printed when it measured them."""

import json
import math
import re
from pathlib import Path

import pytest
import torch
from torch import nn

from course_utils.lab import ladder

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
RUNGS = ["00-bigram", "02-embedding", "07-one-head", "08-heads", "09-residual-layernorm",
         "10-feed-forward", "11-blocks", "12-full-run"]  # fmt: skip


class Bigram(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.table = nn.Parameter(torch.zeros(vocab_size, vocab_size))

    def forward(self, ids):
        return self.table[ids]


def test_an_untrained_uniform_model_scores_ln_v_and_training_lowers_it():
    data = ladder.ladder_data()
    model = Bigram(data.vocab_size)
    assert ladder.validation_loss(model) == pytest.approx(math.log(data.vocab_size), abs=1e-5)
    trained = ladder.train_briefly(model, steps=100)
    assert trained < math.log(data.vocab_size) - 0.5
    assert trained == ladder.validation_loss(model)  # the model is left trained, in eval mode


def test_train_briefly_is_notebook_00s_loop():
    """Notebook 00 trains its bigram with a loop written out and calls train_briefly "the loop
    above, packaged": both give the same model, step for step."""
    import torch.nn.functional as F

    from course_utils.data import get_batch

    data, budget = ladder.ladder_data(), ladder.LADDER
    by_hand = Bigram(data.vocab_size)
    optimizer = torch.optim.AdamW(by_hand.parameters(), lr=budget.lr)
    generator = torch.Generator().manual_seed(0)
    for step in range(40):  # notebook 00's loop, 40 of its steps
        for group in optimizer.param_groups:  # the ladder's half cosine
            group["lr"] = ladder.ladder_lr(step, 40)
        x, y = get_batch(data.train, budget.block_size, budget.batch_size, generator)
        loss = F.cross_entropy(by_hand(x).view(-1, data.vocab_size), y.view(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    packaged = Bigram(data.vocab_size)
    assert ladder.train_briefly(packaged, steps=40) == ladder.validation_loss(by_hand)
    assert torch.equal(packaged.table, by_hand.table)


def test_the_same_seed_gives_the_same_rung_and_a_tuple_output_is_accepted():
    data = ladder.ladder_data()

    class WithLoss(Bigram):
        def forward(self, ids):
            return self.table[ids], None  # (logits, loss) as the course's models return

    first = ladder.train_briefly(Bigram(data.vocab_size), steps=20)
    assert ladder.train_briefly(WithLoss(data.vocab_size), steps=20) == first
    assert ladder.train_briefly(Bigram(data.vocab_size), steps=20, seed=1) != first


def test_wrong_logits_are_named_with_both_shapes():
    wide = nn.Embedding(ladder.ladder_data().vocab_size, 7)  # logits of width 7, not V
    with pytest.raises(
        ValueError, match=r"logits of shape \(B, T, vocab_size\) = \(32, 16, 84\).*\(32, 16, 7\)"
    ):
        ladder.train_briefly(wide, steps=1)
    with pytest.raises(TypeError, match="model"):
        ladder.train_briefly("model", steps=1)


@pytest.mark.parametrize(
    ("key", "label", "loss", "error"),
    [
        ("7-head", "x", 2.0, ValueError),
        ("07-x", 3, 2.0, TypeError),
        ("07-x", "x", float("nan"), ValueError),
        ("07-x", "x", "2.0", TypeError),
    ],
)
def test_show_ladder_refuses_bad_rungs(key, label, loss, error):
    with pytest.raises(error):
        ladder.show_ladder(key, label, loss)


def test_show_ladder_writes_a_rung_only_when_asked(tmp_path, monkeypatch, capsys):
    committed, learner = tmp_path / "committed", tmp_path / "parts"
    committed.mkdir()
    monkeypatch.setattr(ladder, "LADDER_DIR", committed)
    monkeypatch.setenv("COURSE_MY_MODEL", str(learner))
    monkeypatch.delenv(ladder.WRITE_ENV, raising=False)
    monkeypatch.delenv(ladder.CHECK_ENV, raising=False)  # make test sets it for the notebooks
    ladder.show_ladder("05-test", "a test rung", 2.5)
    assert not list(committed.iterdir())
    monkeypatch.setenv(ladder.WRITE_ENV, "1")
    ladder.show_ladder("05-test", "a test rung", 2.5)
    ladder.show_ladder("06-next", "the next rung", 2.25)
    out = capsys.readouterr().out
    # make course's runs write the course's rungs and show them as the course's, never as the
    # learner's (a rung kept in the parts folder by an earlier run of the learner's is not read)
    assert (
        "the rung before (05, a test rung, the course's run): 2.500; this model is 0.250 lower"
        in out
    )
    assert json.loads((committed / "05-test.json").read_text())["val_loss"] == 2.5
    assert [p.stem for p in (learner / "ladder").glob("*.json")] == ["05-test"]  # the first call


def test_the_rung_before_is_the_learners_own_when_they_ran_it(tmp_path, monkeypatch, capsys):
    """A learner's rung (their parts) is kept beside their parts; the next notebook compares
    with it and says so; a rung they have not run is the course's, also said."""
    import matplotlib.pyplot as plt

    committed, learner = tmp_path / "committed", tmp_path / "parts"
    committed.mkdir()
    monkeypatch.setattr(ladder, "LADDER_DIR", committed)
    monkeypatch.setenv("COURSE_MY_MODEL", str(learner))
    monkeypatch.delenv(ladder.WRITE_ENV, raising=False)
    monkeypatch.delenv(ladder.CHECK_ENV, raising=False)
    (committed / "05-test.json").write_text(json.dumps({"label": "five", "val_loss": 2.5}))
    plt.close(ladder.show_ladder("06-next", "six", 2.4))
    assert "the rung before (05, five, the course's run): 2.500" in capsys.readouterr().out
    plt.close(ladder.show_ladder("05-test", "five", 2.45))  # the learner's own run of 05
    assert ladder.learner_rungs()["05-test"]["val_loss"] == 2.45
    plt.close(ladder.show_ladder("06-next", "six", 2.4))
    assert "the rung before (05, five, your run): 2.450; this model is 0.050 lower" in (
        capsys.readouterr().out
    )
    (learner / "ladder" / "05-test.json").write_text("{half a file")  # unreadable: course's
    plt.close(ladder.show_ladder("06-next", "six", 2.4))
    assert "the rung before (05, five, the course's run): 2.500" in capsys.readouterr().out


def test_a_rung_prints_what_its_model_writes(tmp_path, monkeypatch, capsys):
    """The sample is the model's: a bigram that only ever predicts one character writes only
    that character; the same seed gives the same text; at most three lines are printed."""
    import matplotlib.pyplot as plt

    data = ladder.ladder_data()
    monkeypatch.setenv("COURSE_MY_MODEL", str(tmp_path))
    monkeypatch.delenv(ladder.WRITE_ENV, raising=False)
    monkeypatch.delenv(ladder.CHECK_ENV, raising=False)
    only_e = Bigram(data.vocab_size)
    with torch.no_grad():
        only_e.table[:, data.tokenizer.encode("e")[0]] = 50.0
    assert ladder.sample_text(only_e, n_chars=30) == "e" * 30
    lines = Bigram(data.vocab_size)  # uniform: every character, line breaks included
    assert ladder.sample_text(lines, seed=3) == ladder.sample_text(lines, seed=3)
    assert ladder.sample_text(lines, seed=3) != ladder.sample_text(lines, seed=4)
    plt.close(ladder.show_ladder("05-test", "a test rung", 2.5, model=lines))
    out = capsys.readouterr().out.split("it writes:\n")[1]
    assert 1 <= len(out.strip("\n").splitlines()) <= 3
    with pytest.raises(ValueError, match="n_chars"):
        ladder.sample_text(lines, n_chars=0)


def _ladder_output(notebook: Path) -> str:
    """What the notebook's show_ladder cell printed."""
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        if "show_ladder(" in "".join(cell["source"]):
            return "".join("".join(o.get("text", "")) for o in cell.get("outputs", []))
    return ""


@pytest.mark.parametrize("key", RUNGS)
def test_each_rung_is_committed_and_is_what_its_notebook_printed(key):
    path = ladder.LADDER_DIR / f"{key}.json"
    assert path.is_file(), f"no committed rung {path.name}: run `make course`"
    [notebook] = NOTEBOOKS.glob(f"{key[:2]}_*.ipynb")
    printed = _ladder_output(notebook)
    found = re.search(r": validation loss (\d+\.\d+) nats/char \(ln V", printed)
    assert found, f"{notebook.name} printed no rung"
    # printed to 3 decimals; the file keeps more (0.0006: a value on a rounding boundary)
    assert abs(float(found.group(1)) - json.loads(path.read_text())["val_loss"]) <= 6e-4
    # the rung before, as the notebook printed it, is the committed one (else a notebook ran
    # before the one ahead of it was re-measured: execute it again)
    before = re.search(r"the rung before \((\d\d), .*\): (\d+\.\d+);", printed)
    if key != RUNGS[0]:
        previous = RUNGS[RUNGS.index(key) - 1]
        assert before and before.group(1) == previous[:2], f"{notebook.name}: no rung before"
        committed = json.loads((ladder.LADDER_DIR / f"{previous}.json").read_text())["val_loss"]
        assert abs(float(before.group(2)) - committed) <= 6e-4, f"re-execute {notebook.name}"


def test_the_ladder_falls_from_the_table_to_the_full_run():
    rungs = ladder.recorded_rungs()
    assert rungs["12-full-run"]["val_loss"] < rungs["11-blocks"]["val_loss"]
    assert rungs["11-blocks"]["val_loss"] < rungs["00-bigram"]["val_loss"] - 0.2


def test_notebook_02s_rung_is_as_low_as_counting_the_pairs_and_00s_table_is_still_learning():
    # Notebook 02 says its model is about as low as any bigram can go, and 00's table is still
    # learning: the maximum-likelihood bigram (pair counts, lightly smoothed) on the same split.
    data = ladder.ladder_data()
    counts = torch.full((data.vocab_size, data.vocab_size), 0.1, dtype=torch.float64)
    pairs = (data.train[:-1], data.train[1:])
    counts.index_put_(pairs, torch.ones(len(data.train) - 1, dtype=torch.float64), accumulate=True)
    probability = counts / counts.sum(dim=1, keepdim=True)  # (V, V): row = this character
    counted = -probability[data.val[:-1], data.val[1:]].log().mean().item()
    rungs = ladder.recorded_rungs()
    assert abs(rungs["02-embedding"]["val_loss"] - counted) < 0.01, counted
    assert rungs["00-bigram"]["val_loss"] > counted + 0.1, counted


def test_make_test_holds_a_rung_to_its_committed_value(monkeypatch):
    """With COURSE_CHECK_LADDER=1 (make test) a rung more than RUNG_TOLERANCE from its
    committed value fails, naming the rung and the fix; learners (no variable) never fail."""
    import matplotlib.pyplot as plt

    committed = ladder.recorded_rungs()["08-heads"]["val_loss"]
    monkeypatch.delenv(ladder.WRITE_ENV, raising=False)
    monkeypatch.delenv(ladder.CHECK_ENV, raising=False)
    plt.close(ladder.show_ladder("08-heads", "+ heads", committed + 0.5))  # a learner's own parts
    monkeypatch.setenv(ladder.CHECK_ENV, "1")
    plt.close(ladder.show_ladder("08-heads", "+ heads", committed + 0.01))  # another CPU's digits
    with pytest.raises(AssertionError, match=r"rung '08-heads'.*make course"):
        ladder.show_ladder("08-heads", "+ heads", committed + 0.05)
    plt.close(ladder.show_ladder("12-full-run", "full run", committed + 0.5, same_budget=False))


SEEDS = ladder.LADDER_DIR / "seeds.json"


def test_the_ladders_learning_rate_warms_up_then_falls_along_a_half_cosine():
    budget, steps = ladder.LADDER, ladder.LADDER.steps
    rates = [ladder.ladder_lr(step, steps) for step in range(steps)]
    warm = budget.warmup
    assert rates[0] == pytest.approx(budget.lr / warm) and rates[warm - 1] == pytest.approx(
        budget.lr
    )
    assert all(a < b for a, b in zip(rates[:warm], rates[1:warm]))  # rises
    assert all(a > b for a, b in zip(rates[warm:], rates[warm + 1 :]))  # then falls
    half = budget.min_lr + (budget.lr - budget.min_lr) / 2  # the half cosine at steps / 2
    assert ladder.ladder_lr(steps // 2, steps) == pytest.approx(half)
    assert budget.min_lr < rates[-1] < budget.min_lr * 1.001


def test_each_rung_is_below_the_one_before_by_more_than_its_seed_spread():
    """scripts/ladder_seeds.py trains every rung's model three times (seeds 0, 1, 2): the mean of
    each rung is below the rung before by more than the larger of the two seed spreads (the
    second block of notebook 11 too, since the budget's warm-up)."""
    seeds = json.loads(SEEDS.read_text(encoding="utf-8"))
    keys = list(seeds)
    assert keys == sorted(keys) and keys[0] == "00-bigram" and keys[-1] == "11-blocks"
    for before, key in zip(keys, keys[1:]):
        a, b = seeds[before]["val_loss"], seeds[key]["val_loss"]
        assert len(a) == len(b) >= 3
        spread = max(max(a) - min(a), max(b) - min(b))
        drop = sum(a) / len(a) - sum(b) / len(b)
        assert drop > spread, f"{key}: {drop:.3f} below {before}, seed spread {spread:.3f}"
    cells = json.loads(NOTEBOOK_11.read_text(encoding="utf-8"))["cells"]
    text = " ".join(" ".join("".join(c["source"]) for c in cells).split())
    assert f"{drop:.3f} nats/char below one block" in text and f"({spread:.3f}," in text


NOTEBOOK_11 = ladder.LADDER_DIR.parents[1] / "notebooks" / "11_decoder_block_and_logits.ipynb"


@pytest.mark.parametrize(
    "script, extra",
    [
        ("ladder_seeds.py", []),
        ("positions_experiment.py", []),
        ("scale_experiment.py", [(["--d-k", "1"], "--d-k must be at least 2")]),
    ],
)
def test_the_seed_scripts_check_their_arguments_first(script, extra, tmp_path, capsys):
    from script_loader import load_script

    module = load_script(f"scripts/{script}", f"{script[:-3]}_under_test")
    for argv, said in [
        (["--seeds", "1"], "at least two different seeds"),
        (["--steps", "0"], "--steps must be at least 1"),
        (["--out", str(tmp_path / "no" / "x.json")], "does not exist"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        *extra,
    ]:
        with pytest.raises(SystemExit) as exit_:
            module.main(argv)
        out = capsys.readouterr().out
        assert exit_.value.code == 2 and said in out and len(out.strip().splitlines()) == 1
        assert out.startswith(f"{script}: ") and f"usage: python scripts/{script}" in out


def test_the_scale_experiment_finds_no_slowdown_at_the_ladders_budget():
    """scripts/scale_experiment.py: one head at d_k = 512 (LayerNorm before it, AdamW, the
    ladder's budget) trained with and without 1/sqrt(d_k), three seeds. The record's finding:
    the two means differ by less than the seeds' spread, and notebook 05 (Going deeper) says
    so with the record's numbers. A new record that finds the slowdown fails here, on purpose:
    then the notebook should show it."""
    record = json.loads((ladder.LADDER_DIR / "scale.json").read_text(encoding="utf-8"))
    scaled, unscaled = record["scaled"], record["unscaled"]
    assert record["d_k"] >= 256 and len(scaled) == len(unscaled) == len(record["seeds"]) >= 3
    spread = max(max(scaled) - min(scaled), max(unscaled) - min(unscaled))
    gap = sum(unscaled) / len(unscaled) - sum(scaled) / len(scaled)
    assert abs(gap) < spread, f"unscaled {gap:+.3f} from scaled, seed spread {spread:.3f}"
    notebook = ladder.LADDER_DIR.parents[1] / "notebooks" / "05_scores_and_scaling.ipynb"
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    text = " ".join(" ".join("".join(c["source"]) for c in cells).split())
    (mean_s, spread_s), (mean_u, spread_u) = map(_mean_and_spread, (scaled, unscaled))
    assert f"d_k = {record['d_k']}" in text and "training does not notice" in text
    assert f"With the scale the validation loss ends at {mean_s:.3f}" in text
    assert f"without it at {mean_u:.3f}" in text and f"({spread_s:.3f} and {spread_u:.3f})" in text
    assert record["steps"] == ladder.LADDER.steps
    spreads = []
    for steps in (150, 300):  # shorter budgets: behind by about the seeds' spread
        short = json.loads((ladder.LADDER_DIR / f"scale-{steps}-steps.json").read_text("utf-8"))
        assert short["steps"] == steps and short["d_k"] == record["d_k"]
        (mean_s, spread_s), (mean_u, spread_u) = map(
            _mean_and_spread, (short["scaled"], short["unscaled"])
        )
        spreads.append(max(spread_s, spread_u))
        assert 0.5 * spreads[-1] < mean_u - mean_s < 1.5 * spreads[-1], (steps, mean_u - mean_s)
        assert f"{steps} steps" in text and f"{mean_u:.3f} against {mean_s:.3f}" in text
    assert f"({spreads[0]:.3f} and {spreads[1]:.3f})" in text


@pytest.mark.tooling
def test_the_scale_script_trains_both_variants(tmp_path):
    from script_loader import load_script

    script = load_script("scripts/scale_experiment.py", "scale_experiment_run")
    out = tmp_path / "scale.json"
    assert script.main(["--seeds", "0", "1", "--d-k", "8", "--steps", "2", "--out", str(out)]) == 0
    record = json.loads(out.read_text(encoding="utf-8"))
    assert record["seeds"] == [0, 1] and len(record["scaled"]) == len(record["unscaled"]) == 2
    assert record["scaled"] != record["unscaled"]  # the scale changes the run


def test_a_run_on_another_corpus_is_printed_not_kept(tmp_path, monkeypatch, capsys):
    """Notebook 12 of the Chinese edition trains on Tang poems: its loss is on another scale
    (ln V 8.67, not 4.43), so it is not a rung of the Shakespeare ladder."""
    import matplotlib.pyplot as plt

    committed, learner = tmp_path / "committed", tmp_path / "parts"
    committed.mkdir()
    (committed / "11-two-blocks.json").write_text(json.dumps({"label": "eleven", "val_loss": 2.2}))
    monkeypatch.setattr(ladder, "LADDER_DIR", committed)
    monkeypatch.setenv("COURSE_MY_MODEL", str(learner))
    monkeypatch.setenv(ladder.WRITE_ENV, "1")
    figure = ladder.show_ladder("12-full-run", "full", 5.1, same_budget=False, corpus="tang_poems")
    out = capsys.readouterr().out
    assert "full: validation loss 5.100 nats/char on tang_poems (ln V = 8.672, V = 5,840)" in out
    assert "not drawn among them" in out and "the rung before" not in out
    labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    plt.close(figure)
    assert labels == ["11  eleven"]  # the Shakespeare rungs only
    assert not (committed / "12-full-run.json").exists() and not (learner / "ladder").exists()
    with pytest.raises(ValueError, match=r"corpus='poems' is not a corpus of the course"):
        ladder.show_ladder("12-full-run", "full", 5.1, corpus="poems")


def _mean_and_spread(losses: list[float]) -> tuple[float, float]:
    return sum(losses) / len(losses), max(losses) - min(losses)


def test_positions_buy_nothing_alone_and_pay_off_with_attention():
    """scripts/positions_experiment.py, three seeds at the ladder's budget: notebook 02's model
    with the table is no lower than without it (no rung for 03 alone); 07's head without the
    table is no lower than 02's model; with it, lower than without by more than the spreads.
    Notebooks 03 and 07 quote the means."""
    record = json.loads((ladder.LADDER_DIR / "positions.json").read_text(encoding="utf-8"))
    assert len(record["seeds"]) >= 3
    (emb, s_emb), (pos, s_pos), (bag, s_bag), (head, s_head) = (
        _mean_and_spread(record[k])
        for k in ("02-embedding", "03-positions", "07-no-positions", "07-one-head")
    )
    assert emb - pos < max(s_emb, s_pos), "positions alone now buy a rung: show it in 03"
    assert emb - bag < max(s_emb, s_bag), "a head without positions now buys a rung"
    assert bag - head > max(s_bag, s_head), "the table no longer lowers the head's loss"
    notebooks = ladder.LADDER_DIR.parents[1] / "notebooks"
    for name in ("03_positional_encoding", "07_softmax_and_weighted_values"):
        cells = json.loads((notebooks / f"{name}.ipynb").read_text(encoding="utf-8"))["cells"]
        text = " ".join(" ".join("".join(c["source"]) for c in cells).split())
        for value in (emb, bag, head) + ((pos,) if name.startswith("03") else ()):
            assert f"{value:.3f}" in text, f"{name} does not quote {value:.3f}"


@pytest.mark.tooling
def test_the_positions_script_trains_the_four_models(tmp_path):
    from script_loader import load_script

    script = load_script("scripts/positions_experiment.py", "positions_experiment_run")
    out = tmp_path / "positions.json"
    assert script.main(["--seeds", "0", "1", "--steps", "2", "--out", str(out)]) == 0
    record = json.loads(out.read_text(encoding="utf-8"))
    assert list(record) == ["seeds", *script.VARIANTS] and record["seeds"] == [0, 1]
    assert record["07-no-positions"] != record["07-one-head"]  # the table changes the run
