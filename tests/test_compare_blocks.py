"""compare_blocks: the arms' configs, reading the records, and the KV-memory record."""

from __future__ import annotations

import json

from course_utils.measure.compare_blocks import ARMS, arm_config, load_records, memory_record


def _record(folder, name, seed, loss, arm=None):
    record = {
        "seed": seed,
        "parameters": 1,
        "evaluations": [{"step": 2000, "val_loss": loss}],
        "final": {"val_loss": loss},
    }
    if arm is not None:
        record["arm"] = arm
    (folder / name).write_text(json.dumps(record))


def test_load_records_reads_classic_from_the_positional_runs_and_shares_twins(tmp_path):
    _record(tmp_path, "positional-rope-seed2.json", 2, 1.8)
    _record(tmp_path, "positional-rope-seed1.json", 1, 1.7)
    _record(tmp_path, "blocks-classic-seed1.json", 1, 9.9, "classic")  # seed 1 already there
    _record(tmp_path, "blocks-modern-seed1.json", 1, 1.6, "modern")
    records = load_records(tmp_path, positional_folder=tmp_path)
    assert [r["final_val_loss"] for r in records["classic"]] == [1.7, 1.8]  # sorted by seed
    assert records["gqa-kv2"] == records["modern"]  # the same config under two names
    assert "gqa-kv1" not in records


def test_memory_record_measures_the_formula_for_every_arm():
    arms = memory_record()["arms"]
    assert list(arms) == list(ARMS)
    for arm, m in arms.items():
        formula = 2 * m["n_layers"] * m["batch"] * m["tokens"] * m["n_kv_heads"] * m["d_k"] * 4
        assert m["measured_bytes"] == m["formula_bytes"] == formula
        assert m["n_kv_heads"] == (getattr(arm_config(arm, 84), "n_kv_heads", None) or 4)
    assert arms["gqa-kv1"]["measured_bytes"] * 4 == arms["gqa-kv4"]["measured_bytes"]
