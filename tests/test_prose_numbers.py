"""The numbers the course states must be the numbers its code printed or recorded.

Reads the committed notebooks (their outputs included) and the recorded runs under
``assets/runs/``: the baselines, the loss bar, the recorded losses, the RoPE/sinusoidal
means, and the claims about the untrained model and the trained sample. A number that
drifted from its output, or prose that states a number no output backs, fails here.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
from pathlib import Path

import pytest

from course_utils.measure.record import find_runs, load_run

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nb12_claims  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NB12 = ROOT / "notebooks" / "12_training_tiny_decoder.ipynb"
NUMBER = r"(\d+\.\d+)"


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def output_of(path: Path, marker: str) -> str:
    """The text output (stdout and text/plain) of the one code cell whose source has
    ``marker``."""
    return nb12_claims.code_output(cells(path), marker)


def markdown(path: Path) -> str:
    return "\n".join("".join(c["source"]) for c in cells(path) if c["cell_type"] == "markdown")


def find(pattern: str, text: str) -> tuple[str, ...]:
    match = re.search(pattern, text)
    assert match, f"no match for {pattern!r} in:\n{text[:2000]}"
    return match.groups()


# --- notebook 12 ----------------------------------------------------------------------------


def test_baselines_are_computed_and_the_table_repeats_them():
    baselines = output_of(NB12, "bigram_log_probs = ")
    uniform_train, uniform_val = map(
        float, find(rf"uniform \(ln V\)\s+train {NUMBER}, val {NUMBER}", baselines)
    )
    assert uniform_train == uniform_val == round(math.log(84), 3)
    bigram = tuple(
        map(float, find(rf"bigram \(counts, add-one\)\s+train {NUMBER}, val {NUMBER}", baselines))
    )
    assert 2.0 < bigram[1] < 3.0  # a bigram model of English characters: between the two
    table = output_of(NB12, "table = dict(baselines)")
    assert (
        tuple(
            map(float, find(rf"\| bigram \(counts, add-one\)\s+\| {NUMBER} \| {NUMBER} \|", table))
        )
        == bigram
    )
    history = output_of(NB12, "for step, train_loss, val_loss in zip(history.step")
    last_train, last_val = find(rf"step\s+\d+: train {NUMBER}, val {NUMBER}\n\d", history)
    row = find(rf"\| this run \(\w+ preset, \d+ steps\)\s+\| {NUMBER} \| {NUMBER} \|", table)
    assert row == (last_train, last_val)
    gap = float(find(rf"validation loss is {NUMBER} below the bigram", table)[0])
    assert gap == pytest.approx(bigram[1] - float(last_val), abs=1.5e-3)


def test_no_stale_numbers_in_notebook_12_prose():
    prose = markdown(NB12)
    for stale in ("1.78", "1.94", "about 2.5", "≈ 2.5", "Exeunt", "slightly prefers"):
        assert stale not in prose, f"notebook 12's prose still says {stale!r}"


def test_rope_and_sinusoidal_means_are_those_of_the_records():
    runs = find_runs("positional-*.json")
    by_kind: dict[str, list[float]] = {}
    for run in runs:
        assert run["config_name"] == "baby" and run["device"]["type"] == "cpu"
        by_kind.setdefault(run["model_config"]["positional"], []).append(run["final"]["val_loss"])
    assert sorted(by_kind) == ["rope", "sinusoidal"], "the positional records are missing"
    assert sum(len(losses) for losses in by_kind.values()) >= 3, "fewer than 3 recorded seeds"
    printed = output_of(NB12, 'find_runs("positional-*.json")')
    for kind, losses in by_kind.items():
        mean = float(find(rf"{kind}\s+val loss mean {NUMBER}", printed)[0])
        assert mean == round(statistics.mean(losses), 3)
        assert f"{len(losses)} seed(s)" in printed
        if len(losses) > 1:
            spread = float(find(rf"{kind}\s+val loss mean {NUMBER} ± {NUMBER}", printed)[1])
            assert spread == round(statistics.stdev(losses), 3)
    gap = float(find(rf"RoPE is lower by {NUMBER} nats/char", printed)[0])
    expected = statistics.mean(by_kind["sinusoidal"]) - statistics.mean(by_kind["rope"])
    assert gap == round(expected, 3)


def test_recorded_cpu_run_numbers_and_the_loss_bar():
    record = load_run(ROOT / "assets" / "runs" / "cpu-cpu.json")
    listing = output_of(NB12, "RECORD_MARGIN = record_margin(")
    train, val = find(rf"cpu-cpu: preset 'cpu' .* final train {NUMBER}, val {NUMBER}", listing)
    assert (float(train), float(val)) == (
        round(record["final"]["train_loss"], 3),
        round(record["final"]["val_loss"], 3),
    )
    assert "No GPU record is in assets/runs/ yet" in listing or find_runs("gpu-*.json")
    margin = float(find(rf"RECORD_MARGIN = 3 x {NUMBER}, rounded up = {NUMBER}", listing)[1])
    groups: dict[str, list[float]] = {}
    for run in find_runs("positional-*.json"):
        groups.setdefault(run["model_config"]["positional"], []).append(run["final"]["val_loss"])
    pooled = math.sqrt(
        sum((len(v) - 1) * statistics.variance(v) for v in groups.values())
        / sum(len(v) - 1 for v in groups.values())
    )
    assert margin == math.ceil(300 * pooled) / 100  # 3 pooled sigmas, rounded up to 0.01
    comparison = output_of(NB12, "shown = own or")
    live, recorded = map(float, find(rf"live val {NUMBER}, recorded {NUMBER}", comparison))
    assert recorded == round(record["final"]["val_loss"], 3)
    assert abs(live - recorded) <= margin
    assert f"margin ±{margin}" in comparison
    history = output_of(NB12, "for step, train_loss, val_loss in zip(history.step")
    assert float(find(rf"step\s+\d+: train {NUMBER}, val {NUMBER}\n\d", history)[1]) == live


def test_untrained_model_claim_is_what_the_cell_printed():
    printed = output_of(NB12, "p_repeat = ")
    p, times, uniform = map(
        float,
        find(
            rf"current character p = {NUMBER} on average, {NUMBER} times the uniform "
            rf"1/V = {NUMBER}",
            printed,
        ),
    )
    assert uniform == round(1 / 84, 4)
    assert times == pytest.approx(p * 84, abs=0.1)
    assert times > 2  # the prose says it is not uniform: the output must show that
    excess = float(find(rf"random targets its loss is ln V \+ {NUMBER}", printed)[0])
    assert excess > 0


def test_the_sample_quote_comes_from_the_sample():
    sample = output_of(NB12, "trained_sample = sample(model)")
    quote = output_of(NB12, "short_lines = ")
    short_lines = eval(
        find(r"short lines \(speaker names, stage directions\?\): (\[.*\])", quote)[0]
    )
    for line in short_lines:
        assert line in sample.split("\n")
    words = eval(find(r"occur in the training text: (\[.*\])", quote)[0])
    assert all(word in sample for word in words)


def test_hand_loop_equals_train_and_lecture_budget_is_computed():
    same = output_of(NB12, "first = history.batch_loss[:hand_steps]")
    assert re.search(r"the first 200 losses of train\(\) equal the loop's to within .*: True", same)
    assert "1.48" in markdown(NB12)  # the lecture's number is quoted, as the lecture's


def test_notebook_12_printed_claims_hold_for_its_run():
    """Every sentence printed from the run's numbers agrees with them (the same checks run
    on the copies executed in each rehearsal mode, tests/test_rehearsal_notebooks.py)."""
    nb12_claims.check_all(cells(NB12), "fp32", rehearsing=False)


# --- notebooks 07, 09, 11 -------------------------------------------------------------------


def test_notebook_07_assertion_range_covers_all_rows():
    out = output_of(
        ROOT / "notebooks" / "07_softmax_and_weighted_values.ipynb", "def assert_rows_sum_to_one"
    )
    assert "over all 36 rows (every batch and head)" in out


def test_notebook_09_states_the_layer_norm_std_formula():
    path = ROOT / "notebooks" / "09_residual_and_layernorm.ipynb"
    assert "whatever it went in with" not in markdown(path)
    printed = output_of(path, "eps_outside_only(x, gamma, beta) - from_torch")
    measured, formula = find(
        rf"nn.LayerNorm \(eps inside\): {NUMBER}; sqrt\(var / \(var \+ eps\)\) = {NUMBER}", printed
    )
    assert measured == formula


def test_notebook_11_prompt_occurs_in_the_corpus(shakespeare_text):
    source = "".join(
        "".join(c["source"])
        for c in cells(ROOT / "notebooks" / "11_decoder_block_and_logits.ipynb")
    )
    assert "ROMEO." not in source and "Romeo.\n" in shakespeare_text


def test_readme_rope_paragraph_quotes_the_records():
    readme = (ROOT / "README.md").read_text(encoding="utf-8").replace("\n", " ")
    assert "1.78" not in readme and "1.94" not in readme, "the README still quotes one seed"
    rope, rope_n = find(
        rf"RoPE reached a validation loss of {NUMBER} nats/char \(mean of (\d+) seed", readme
    )
    sinusoidal, sinusoidal_n = find(rf"against {NUMBER} \(mean of (\d+) seed", readme)
    by_kind: dict[str, list[float]] = {}
    for run in find_runs("positional-*.json"):
        by_kind.setdefault(run["model_config"]["positional"], []).append(run["final"]["val_loss"])
    assert (float(rope), int(rope_n)) == (
        round(statistics.mean(by_kind["rope"]), 3),
        len(by_kind["rope"]),
    )
    assert (float(sinusoidal), int(sinusoidal_n)) == (
        round(statistics.mean(by_kind["sinusoidal"]), 3),
        len(by_kind["sinusoidal"]),
    )


def test_notebook_11_temperature_numbers_match_the_output():
    path = ROOT / "notebooks" / "11_decoder_block_and_logits.ipynb"
    low, high = find(rf"largest probability rises from {NUMBER} to {NUMBER}", markdown(path))
    printed = output_of(path, "for name, p in distributions.items():")
    assert find(rf"temperature 1\s+largest probability {NUMBER}", printed)[0] == low
    assert find(rf"temperature 0.1\s+largest probability {NUMBER}", printed)[0] == high
