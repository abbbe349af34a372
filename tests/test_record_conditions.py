"""Record conditions, the record margin measured over seeds, the record of a device kind,
and the re-record command (course_utils.measure.record_conditions, record_report,
scripts/rerecord.py)."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from course_utils.measure import record as rec
from course_utils.measure.record_conditions import (
    CONDITION_KEYS,
    UNKNOWN,
    ConditionsProbe,
    conditions_of,
    explain_timing_gap,
)
from course_utils.measure.record_report import own_record, record_margin, seed_spread

REPOSITORY = Path(__file__).resolve().parent.parent


def _conditions(**changes) -> dict:
    base = dict(cpu_model="AMD EPYC", cpu_count=2, usable_cpus=2, threads=1, load_start=0.1,
                load_mean=1.0, load_max=1.1, rehearsal=None, platform="Linux")  # fmt: skip
    return {**base, **changes}


def test_probe_fills_every_key():
    probe = ConditionsProbe()
    probe.sample()
    conditions = probe.finish()
    assert set(conditions) == set(CONDITION_KEYS)
    assert conditions["load_mean"] <= conditions["load_max"]
    assert len(probe.loads) == 2


def test_an_old_record_reads_unknown_conditions(tmp_path):
    """The committed records predate the fields: they still load, every field "unknown"."""
    old = json.loads((REPOSITORY / "assets/runs/cpu-cpu.json").read_text(encoding="utf-8"))
    old.pop("conditions", None)
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    record = rec.load_run(path)
    assert record["conditions"] == {key: UNKNOWN for key in CONDITION_KEYS}
    assert conditions_of({"conditions": {"threads": 4}})["threads"] == 4


def test_gap_explained_by_an_oversubscribed_record():
    text = explain_timing_gap(
        _conditions(load_max=6.0, load_mean=5.0), 1289.0, _conditions(), 9135.0
    )
    assert (
        "7.09x" in text and "the record's machine was oversubscribed (load up to 6.0 on 2" in text
    )


def test_gap_with_an_old_record_says_its_load_is_unknown():
    unknown = {key: UNKNOWN for key in CONDITION_KEYS}
    text = explain_timing_gap(unknown, 1289.0, _conditions(), 9135.0)
    assert "does not say under which load it ran" in text and "make rerecord" in text


def test_no_gap_and_unexplained_gap():
    assert "no gap to explain" in explain_timing_gap(_conditions(), 1000.0, _conditions(), 1100.0)
    assert "Nothing in the recorded conditions" in explain_timing_gap(
        _conditions(), 1000.0, _conditions(), 2000.0
    )
    assert "different thread counts" in explain_timing_gap(
        _conditions(threads=2), 1000.0, _conditions(), 2000.0
    )


def _run(loss: float, config="baby", device="cpu", rehearsal=None) -> dict:
    return {"final": {"val_loss": loss}, "config_name": config, "device": {"type": device},
            "conditions": {"rehearsal": rehearsal}, "precision": "bf16"}  # fmt: skip


def test_seed_spread_pools_the_sample_variances():
    groups = {"a": [_run(1.0), _run(1.2), _run(1.1)], "b": [_run(2.0), _run(2.4)]}
    expected = math.sqrt(
        (2 * statistics.variance([1.0, 1.2, 1.1]) + statistics.variance([2.0, 2.4])) / 3
    )
    assert seed_spread(groups) == (pytest.approx(expected), 3)
    assert record_margin(groups) == math.ceil(100 * 3 * expected) / 100
    with pytest.raises(ValueError, match="at least two runs"):
        seed_spread({"a": [_run(1.0)]})


def test_the_committed_seed_records_give_a_margin():
    groups: dict[str, list[dict]] = {}
    for run in rec.find_runs("positional-*.json"):
        groups.setdefault(run["model_config"]["positional"], []).append(run)
    assert sorted(len(runs) for runs in groups.values()) == [3, 3]
    spread, dof = seed_spread(groups)
    assert dof == 4 and 0 < spread < 0.1
    assert record_margin(groups) >= 3 * spread


def test_the_record_is_chosen_by_preset_and_device_kind():
    records = {"gpu-h100": _run(1.5, "gpu", "cuda"), "cpu-cpu": _run(1.9, "cpu", "cpu"),
               "gpu-rehearsed": _run(4.4, "gpu", "cpu", rehearsal="cuda-bf16")}  # fmt: skip
    assert own_record(records, "cpu", "cpu") is records["cpu-cpu"]
    assert own_record(records, "gpu", "cuda") is records["gpu-h100"]
    assert own_record(records, "gpu", "cpu") is None  # neither the GPU's nor a rehearsal
    assert own_record(records, "cpu", "cuda") is None
    forced = {**records["gpu-h100"], "precision": "fp16"}
    both = {"gpu-h100-fp16": forced, **records}  # the fp16 record sorts first by name
    assert own_record(both, "gpu", "cuda", "bf16")["precision"] != "fp16"
    assert own_record(both, "gpu", "cuda", "fp16") is forced


def test_rerecord_plans_seven_valid_commands():
    """--dry-run lists the cpu record and the 3 + 3 positional seeds, each with one thread,
    and every command passes the record command's own checks."""
    sys.path.insert(0, str(REPOSITORY / "scripts"))
    try:
        import rerecord
    finally:
        sys.path.pop(0)
    plan = rerecord.planned_commands(Path("out"), ["--max-iters", "4"])
    assert [out.name for _, out in plan] == ["cpu-cpu.json"] + [
        f"positional-{kind}-seed{seed}.json"
        for kind in ("rope", "sinusoidal")
        for seed in (1, 2, 3)
    ]
    for argv, out in plan:
        args = rec.parse_args(argv[2:])  # drop "-m course_utils.measure.record"
        assert args.threads == 1 and args.device == "cpu" and args.max_iters == 4
        assert args.out == out
    done = subprocess.run([sys.executable, "scripts/rerecord.py", "--dry-run"], cwd=REPOSITORY,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0
    assert done.stdout.count("--threads 1") == 7 and "[7/7]" in done.stdout


def test_own_record_with_configs_chooses_only_the_same_run():
    run = {"config_name": "gpu", "device": {"type": "cuda"}, "precision": "bf16",
           "model_config": {"d_model": 384}, "train_config": {"max_iters": 5000}}  # fmt: skip
    records = {"gpu-h100": run}
    same = ({"d_model": 384}, {"max_iters": 5000})
    assert own_record(records, "gpu", "cuda", "bf16", same) is run
    shrunk = ({"d_model": 48}, {"max_iters": 20})  # the rehearsal switch's run
    assert own_record(records, "gpu", "cuda", "bf16", shrunk) is None
    # a record written before ModelConfig had a field holds the run of its default
    with_default, with_other = {"d_model": 384, "bias": True}, {"d_model": 384, "bias": False}
    assert own_record(records, "gpu", "cuda", "bf16", (with_default, same[1])) is run
    assert own_record(records, "gpu", "cuda", "bf16", (with_other, same[1])) is None
