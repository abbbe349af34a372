"""The recorded-run command (course_utils.measure.record): end to end on a tiny config, and the
reader."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from course_utils.config import PRESETS
from course_utils.measure import record as rec
from course_utils.measure import record_report as report
from course_utils.measure.record_conditions import CONDITION_KEYS
from course_utils.train import parse_settings

REPOSITORY = Path(__file__).resolve().parent.parent
# A tiny model on the corpus's first 200 000 characters: seconds on a CPU.
TINY = [
    "--config", "cpu", "--device", "cpu", "--max-iters", "6", "--eval-interval", "3",
    "--eval-iters", "2", "--sample-chars", "12", "--max-chars", "200000",
    "--set", "n_layers=1", "--set", "d_model=32", "--set", "n_heads=2",
    "--set", "block_size=16", "--set", "batch_size=4", "--threads", "1",
]  # fmt: skip


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[dict, Path, subprocess.CompletedProcess]:
    """Run ``python -m course_utils.measure.record`` in a fresh process, as ``make record`` does."""
    out = tmp_path_factory.mktemp("runs") / "tiny-cpu.json"
    result = subprocess.run(
        [sys.executable, "-m", "course_utils.measure.record", *TINY, "--out", str(out)],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(out.read_text(encoding="utf-8")), out, result


@pytest.mark.tooling  # the record command in a fresh process: make test-tooling (CI)
def test_the_command_writes_every_key_of_the_schema(recorded):
    record, out, _ = recorded
    assert rec.load_run(out) == record  # load_run validates it
    assert set(record) == set(rec._KEYS[""]) | {"conditions"}
    conditions = record["conditions"]
    assert set(conditions) == set(CONDITION_KEYS)
    assert conditions["threads"] == 1 and conditions["rehearsal"] is None  # --threads 1
    assert conditions["usable_cpus"] >= 1 and 0 <= conditions["load_mean"] <= conditions["load_max"]
    assert "--threads 1" in record["command"]
    assert record["schema"] == 1 and record["config_name"] == "cpu"
    assert record["command"].startswith("python -m course_utils.measure.record --config cpu")
    assert record["device"] == {"type": "cpu", "name": record["device"]["name"], "capability": None}
    assert record["precision"] == "fp32"
    assert record["versions"]["torch"] == __import__("torch").__version__
    assert record["model_config"]["d_model"] == 32 and record["train_config"]["max_iters"] == 6


@pytest.mark.tooling  # the record command in a fresh process: make test-tooling (CI)
def test_the_record_holds_every_evaluation_and_consistent_timing(recorded):
    record, _, result = recorded
    evaluations = record["evaluations"]
    assert [e["step"] for e in evaluations] == [3, 6]
    assert evaluations[0]["elapsed_s"] < evaluations[1]["elapsed_s"]
    final = record["final"]
    assert final == {
        "train_loss": evaluations[-1]["train_loss"],
        "val_loss": evaluations[-1]["val_loss"],
        "eval_batches": 2,
    }
    assert record["train_config"]["eval_iters"] == final["eval_batches"]
    # an untrained model over V characters is near ln V
    assert abs(final["val_loss"] - math.log(record["model_config"]["vocab_size"])) < 0.5
    timing = record["timing"]
    tokens_per_step = record["train_config"]["batch_size"] * record["model_config"]["block_size"]
    assert timing["tokens_per_s"] * timing["ms_per_step"] / 1000 == pytest.approx(tokens_per_step)
    assert timing["ms_per_step"] * 6 / 1000 <= timing["train_s"] <= timing["wall_s"]
    assert timing["mfu"] is None and timing["mfu_steady"] is None  # no known peak on a CPU
    # steady: the steps after the first evaluation, from each evaluation's training seconds
    first, last = evaluations
    assert 0 < first["train_s"] < last["train_s"]
    assert timing["ms_per_step_steady"] == pytest.approx(
        1000 * (last["train_s"] - first["train_s"]) / 3
    )
    assert last["elapsed_s"] - last["train_s"] > first["elapsed_s"] - first["train_s"] > 0
    # (the evaluations' own time, taken out: it grows at each one)
    assert timing["flops_per_token"] > 6 * 32 * 32 * 12  # at least 6 N for one block
    assert f"final val loss {final['val_loss']:.4f}" in result.stdout


@pytest.mark.tooling  # the record command in a fresh process: make test-tooling (CI)
def test_samples_use_fixed_prompts_and_seeds(recorded):
    record, _, _ = recorded
    assert [s["prompt"] for s in record["samples"]] == list(rec.SAMPLE_PROMPTS)
    for index, sample in enumerate(record["samples"]):
        assert sample["seed"] == index and sample["top_k"] == rec.SAMPLE_TOP_K
        assert sample["text"].startswith(sample["prompt"])
        assert len(sample["text"]) == len(sample["prompt"]) + 12


@pytest.mark.tooling  # the record command in a fresh process: make test-tooling (CI)
def test_load_run_names_a_missing_key_and_the_fix(recorded, tmp_path):
    record, _, _ = recorded
    for section, key in [("", "timing"), ("timing", "mfu"), ("device", "capability")]:
        broken = json.loads(json.dumps(record))
        del (broken[section] if section else broken)[key]
        path = tmp_path / "broken.json"
        path.write_text(json.dumps(broken))
        with pytest.raises(ValueError, match=rf"lacks the keys \['{key}'\].*make record"):
            rec.load_run(path)
    broken = json.loads(json.dumps(record))
    del broken["evaluations"][1]["elapsed_s"]
    path.write_text(json.dumps(broken))
    with pytest.raises(ValueError, match=r"evaluations\[1\] lacks the keys \['elapsed_s'\]"):
        rec.load_run(path)
    path.write_text(json.dumps({**record, "evaluations": []}))
    with pytest.raises(ValueError, match="'evaluations' must be a non-empty list"):
        rec.load_run(path)
    path.write_text(json.dumps({**record, "schema": 2}))
    with pytest.raises(ValueError, match="expected schema 1, got 2"):
        rec.load_run(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        rec.load_run(path)
    with pytest.raises(FileNotFoundError, match="make record CONFIG"):
        rec.load_run(tmp_path / "absent.json")


@pytest.mark.tooling  # the record command in a fresh process: make test-tooling (CI)
def test_find_runs_sorts_by_file_name_and_filters(recorded, tmp_path):
    record, _, _ = recorded
    for name in ("b-cpu.json", "a-cpu.json", "gpu-x.json"):
        (tmp_path / name).write_text(json.dumps({**record, "config_name": name}))
    assert [r["config_name"] for r in rec.find_runs(folder=tmp_path)] == [
        "a-cpu.json",
        "b-cpu.json",
        "gpu-x.json",
    ]
    assert [r["config_name"] for r in rec.find_runs("*-cpu.json", tmp_path)] == [
        "a-cpu.json",
        "b-cpu.json",
    ]
    assert rec.find_runs("none-*.json", tmp_path) == []


def test_device_slug():
    assert rec.slugify("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert rec.slugify("Tesla T4") == "tesla-t4"
    assert rec.device_slug("cpu") == "cpu"


def test_bad_set_option_says_the_form():
    with pytest.raises(ValueError, match="FIELD=VALUE"):
        parse_settings(["d_model"])
    assert parse_settings(["d_model=32", "dropout=0.1", "positional=rope"]) == {
        "d_model": 32,
        "dropout": 0.1,
        "positional": "rope",
    }


def test_shipped_records_are_valid_and_written_by_the_command():
    """Every file in assets/runs/ reads back and names the command that wrote it."""
    for record in [run for preset in PRESETS for run in rec.find_runs(f"{preset}-*.json")]:
        assert record["command"].startswith("python -m course_utils.measure.record ")
        assert record["final"]["eval_batches"] == record["train_config"]["eval_iters"]


def _gpu_like(record: dict, mfu: float | None) -> dict:
    """The tiny record reshaped as the gpu preset on an H100 (numbers for the arithmetic)."""
    run = json.loads(json.dumps(record))
    run["model_config"].update(block_size=256, d_model=384, n_layers=6)
    run["train_config"].update(batch_size=64, max_iters=5000, eval_iters=200)
    run["evaluations"] = [dict(run["evaluations"][0], step=s) for s in range(0, 5001, 500)]
    run["timing"].update(flops_per_token=71_548_416, mfu=mfu)
    return run


@pytest.mark.tooling  # the record command in a fresh process: make test-tooling (CI)
def test_t4_estimate_is_the_flops_over_the_t4_peak(recorded):
    record, _, _ = recorded
    run = _gpu_like(record, mfu=0.10)
    training = 5000 * 64 * 256 * 71_548_416
    evaluating = 11 * 2 * 200 * 64 * 256 * 71_548_416 / 3
    expected = (training + evaluating) / (65e12 * 0.10) / 60  # T4 data sheet: 65 TFLOP/s fp16
    assert rec.t4_estimate_minutes(run) == pytest.approx(expected)
    assert 19 < expected < 20
    assert rec.t4_estimate_minutes(run, mfu=0.05) == pytest.approx(2 * expected)
    assert rec.t4_estimate_minutes(run, precision="fp32") == pytest.approx(expected * 65 / 8.1)
    with pytest.raises(ValueError, match="has no MFU"):
        rec.t4_estimate_minutes(record)  # a CPU record
    with pytest.raises(ValueError, match=r"mfu must be in \(0, 1\]"):
        rec.t4_estimate_minutes(run, mfu=0.0)
    with pytest.raises(ValueError, match="precision must be one of"):
        rec.t4_estimate_minutes(run, precision="bf16")


@pytest.mark.tooling  # the record command in a fresh process: make test-tooling (CI)
def test_plot_run_beside_a_live_history(recorded):
    import matplotlib.pyplot as plt

    from course_utils.training import History

    record, _, _ = recorded
    live = History(step=[2, 4], train_loss=[3.0, 2.5], val_loss=[3.1, 2.6], batch_loss=[3.2] * 4)
    fig = rec.plot_run_beside(record, live, bar=2.0)
    left, right = fig.axes
    assert left.get_title().startswith("recorded: 'cpu' on ") and "(fp32)" in left.get_title()
    assert right.get_title() == "live: this machine"
    assert list(left.lines[1].get_ydata()) == [e["val_loss"] for e in record["evaluations"]]
    assert list(right.lines[2].get_ydata()) == [3.1, 2.6]
    assert left.get_ylabel() and left.get_xlabel() == "optimizer step"
    assert len(rec.plot_run_beside(record).axes) == 1
    plt.close("all")


def test_steady_ms_per_step_needs_two_evaluations():
    assert rec.steady_ms_per_step([{"step": 500, "train_s": 9.0}]) is None
    two = [{"step": 500, "train_s": 9.0}, {"step": 5000, "train_s": 54.0}]
    assert rec.steady_ms_per_step(two) == pytest.approx(10.0)  # 45 s over 4500 steps


@pytest.mark.tooling  # the record command in a fresh process: make test-tooling (CI)
def test_t4_estimate_text_uses_the_float16_record_of_the_same_gpu(recorded):
    record, _, _ = recorded
    bf16 = _gpu_like(record, mfu=0.08)
    bf16["device"] = {"type": "cuda", "name": "NVIDIA H100 80GB HBM3", "capability": [9, 0]}
    bf16["precision"] = "bf16"
    fp16 = json.loads(json.dumps(bf16))
    fp16["precision"] = "fp16"
    fp16["timing"]["mfu"] = 0.05
    text = report.t4_estimate_text([bf16, fp16])
    (line,) = text.splitlines()  # one estimate: the bf16 run's, at the fp16 run's MFU
    minutes = report.t4_estimate_minutes(bf16, mfu=0.05)
    assert line.startswith("ESTIMATE, not a measurement")
    assert f"about {minutes:.0f} min" in line and "MFU 5.0 % of its float16 run" in line
    assert "5000 steps x 16,384 tokens x 71.5 MFLOP/token" in line
    other = json.loads(json.dumps(fp16))
    other["device"]["name"] = "Tesla T4"  # another GPU's float16 run: not this one's partner
    alone = report.t4_estimate_text([bf16, other])
    assert f"about {report.t4_estimate_minutes(bf16):.0f} min" in alone
    assert "bf16 run itself on the NVIDIA H100 80GB HBM3)" in alone  # which GPU's run
    assert report.t4_estimate_text([record]) == ""  # a CPU record: nothing to estimate
