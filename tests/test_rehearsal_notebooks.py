"""The GPU branches rehearsed on the CPU (COURSE_REHEARSE, course_utils/lab/rehearsal.py):
notebook 12 (training) and notebook 16 (the appendix: records, benchmark, generation timing)
top to bottom, and the commands make train / record / bench, in each mode.

Outputs are not compared (the run is shrunk to seconds); every cell runs and every assert in
it; a failure names the notebook, the mode and the cell. The claims both notebooks print are
checked against their own printed numbers (tests/nb12_claims.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest

from course_utils.lab.rehearsal import REHEARSAL_ENV, REHEARSAL_MODES

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nb12_claims  # noqa: E402
from notebook_runner import execute_or_fail  # noqa: E402
from script_loader import load_script  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = {
    "12": ROOT / "notebooks" / "12_training_tiny_decoder.ipynb",
    "16": ROOT / "notebooks" / "16_appendix.ipynb",
}
PRECISION = {"cuda-bf16": "bf16", "cuda-fp16": "fp16"}


def _execute(path: Path, mode: str, workdir: Path, monkeypatch) -> nbformat.NotebookNode:
    """Execute a copy of the notebook in a kernel that sees ``COURSE_REHEARSE=mode``."""
    monkeypatch.setenv(REHEARSAL_ENV, mode)
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    notebook = nbformat.read(path, as_version=4)
    return execute_or_fail(notebook, workdir, f"{path.name} with {REHEARSAL_ENV}={mode}")


@pytest.mark.tooling  # 36 s of make test's five minutes; CI runs it in make test-tooling
@pytest.mark.parametrize("mode", REHEARSAL_MODES)
@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_notebook_runs_top_to_bottom_in_each_mode(name, mode, tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_MY_MODEL", str(tmp_path / "my_model"))  # the learner's parts
    notebook = _execute(NOTEBOOKS[name], mode, tmp_path, monkeypatch)
    cells = json.loads(nbformat.writes(notebook))["cells"]
    if name == "12":
        nb12_claims.check_all(cells, PRECISION[mode], rehearsing=True)
    else:
        nb12_claims.check_appendix(cells, PRECISION[mode], rehearsing=True)


@pytest.mark.parametrize(
    "mode", [pytest.param(m, marks=() if m == "cuda-bf16" else pytest.mark.tooling)
             for m in REHEARSAL_MODES],
)  # fmt: skip
def test_commands_take_the_gpu_branch(mode, tmp_path, monkeypatch, capsys):
    """make train / record / bench with CONFIG=gpu, shrunk: the GPU's precision on the CPU."""
    from course_utils import train
    from course_utils.measure import record
    from course_utils.measure.benchmark import benchmark_table, benchmark_training

    monkeypatch.setenv(REHEARSAL_ENV, mode)
    monkeypatch.chdir(tmp_path)  # checkpoints/ and checkpoints/rehearsal/ land here
    summary = train.main(["--config", "gpu", "--device", "cpu", "--samples", "5"])
    out = capsys.readouterr().out
    assert f"precision {PRECISION[mode]} on cpu, rehearsing CUDA" in out
    assert summary["config"] == "gpu" and len(summary) > 0
    written = record.main(["--config", "gpu", "--device", "cpu", "--sample-chars", "8",
                           "--max-chars", "200000", "--threads", "1"])  # fmt: skip
    assert written["precision"] == PRECISION[mode]
    assert written["conditions"]["rehearsal"] == mode
    assert written["model_config"]["dropout"] == 0.2  # the gpu preset's own
    assert (tmp_path / "checkpoints" / "rehearsal" / f"gpu-{mode}.json").is_file()
    results = benchmark_training("cpu", config="gpu")
    assert {row["dtype"] for row in results["rows"]} == {"float32", "bfloat16"}
    assert all(row["error"] is None for row in results["rows"])
    ran_as = {row["precision"] for row in results["rows"] if row["dtype"] == "bfloat16"}
    assert ran_as == {PRECISION[mode]}  # a T4 runs the "bfloat16" rows in float16
    table = benchmark_table(results)
    assert (" float16 " in table) == (mode == "cuda-fp16")
    throughput = load_script("benchmarks/train_throughput.py")
    assert throughput.results_path(results).parent.name == "rehearsal"  # never over a measurement
