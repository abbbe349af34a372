"""The progress bar: bounded IOPub traffic in Jupyter, final state saved, tqdm in a terminal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from tqdm import tqdm

from course_utils.training import progress

REPOSITORY = Path(__file__).resolve().parent.parent


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeHandle:
    def __init__(self) -> None:
        self.shown: list[str] = []

    def update(self, data, raw=False):
        self.shown.append(data["text/plain"])


@pytest.fixture
def fake_display(monkeypatch):
    """Replace IPython's display by a recorder (no kernel in a unit test)."""
    import IPython.display

    handle = FakeHandle()

    def display(data, raw=False, display_id=False):
        assert raw and display_id is True
        handle.shown.append(data["text/plain"])
        return handle

    monkeypatch.setattr(IPython.display, "display", display)
    return handle


def run_steps(bar: progress.NotebookProgress, clock: FakeClock, seconds_per_step: float):
    for step in bar:
        clock.now += seconds_per_step
        if (step + 1) % 500 == 0:
            bar.set_postfix(train=f"{step / 1000:.3f}", val="1.500")
    bar.close()


@pytest.mark.parametrize(
    "steps, seconds_per_step, most",
    [(5000, 0.03, 160), (1200, 0.05, 110), (200_000, 0.18, 450)],  # 150 s, 60 s, 10 hours
)
def test_refreshes_stay_bounded_whatever_the_run_length(
    fake_display, steps, seconds_per_step, most
):
    clock = FakeClock()
    bar = progress.NotebookProgress(range(steps), clock=clock)
    run_steps(bar, clock, seconds_per_step)
    # one first frame + throttled refreshes + the final one: far below ZeroMQ's 1,000
    assert len(fake_display.shown) == 1 + bar.refreshes
    assert 10 < bar.refreshes <= most


def test_the_throttle_is_what_bounds_it(fake_display):
    """Without the throttle (interval 0) every step is a message: the bound above can fail."""
    clock = FakeClock()
    bar = progress.NotebookProgress(range(5000), clock=clock, min_interval=0.0, growth=0.0)
    run_steps(bar, clock, 0.03)
    assert bar.refreshes == 5000 + 1


def test_the_final_frame_is_complete(fake_display):
    clock = FakeClock()
    bar = progress.NotebookProgress(range(1200), clock=clock)
    run_steps(bar, clock, 0.0625)  # exact in binary: 75 s in all
    bar.close()  # a second close adds nothing
    assert fake_display.shown[0].startswith("training:   0%|")
    final = fake_display.shown[-1]
    assert "1200/1200" in final and "100%" in final and "[01:15<00:00, 16.00step/s" in final
    assert final.endswith("train=0.999, val=1.500]")
    assert "\x1b" not in "".join(fake_display.shown)  # no ANSI escapes


def test_bad_throttle_is_refused(fake_display):
    with pytest.raises(ValueError, match="min_interval and growth must be >= 0"):
        progress.NotebookProgress(range(3), min_interval=-1.0)


def test_a_terminal_gets_tqdm():
    assert not progress.in_jupyter_kernel()
    bar = progress.progress_bar(range(3))
    assert isinstance(bar, tqdm) and not bar.disable
    bar.close()
    assert progress.progress_bar(range(3), enabled=False).disable


TRAIN_CELL = """\
import torch
from course_utils.config import ModelConfig, TrainConfig
from course_utils.model import TinyDecoder
from course_utils.training import train
torch.manual_seed(0)
model = TinyDecoder(ModelConfig(vocab_size=11, block_size=8, d_model=16, n_heads=2, n_layers=1))
data = torch.randint(11, (2000,))
config = TrainConfig(batch_size=2, max_iters=40, eval_interval=20, eval_iters=2)
history = train(model, data[:1500], data[1500:], config)
"""


def _notebook(*sources: str) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    return notebook


@pytest.mark.tooling  # make test-tooling (CI)
def test_an_executed_notebook_saves_the_final_state_as_text():
    """What `jupyter nbconvert --execute` (nbclient) saves from a training cell."""
    notebook = _notebook(TRAIN_CELL)
    NotebookClient(notebook, timeout=300, kernel_name="python3").execute()
    outputs = notebook.cells[0].outputs
    assert [output.output_type for output in outputs] == ["display_data"]
    assert list(outputs[0].data) == ["text/plain"]  # no widget, no HTML
    text = outputs[0].data["text/plain"]
    assert text.startswith("training: 100%|██████████| 40/40 [")
    assert "train=" in text and "val=" in text and "\x1b" not in text


@pytest.mark.tooling  # make test-tooling (CI)
def test_a_long_cell_passes_nbval(tmp_path):
    """20,000 steps in one cell: tqdm's widget (or one update per step) makes nbval 0.11 fail
    with "Timeout of 5 seconds exceeded waiting for output" on this machine; the throttled
    bar sends a few dozen messages and passes."""
    notebook = _notebook(
        "# NBVAL_IGNORE_OUTPUT\n"
        "from course_utils.training.progress import progress_bar\n"
        "bar = progress_bar(range(20000))\n"
        "for step in bar:\n"
        "    bar.set_postfix(loss=f'{step:.3f}')\n"
        "bar.close()",
        "print('after')",
    )
    path = tmp_path / "long.ipynb"
    NotebookClient(notebook, timeout=300, kernel_name="python3").execute()
    nbformat.write(notebook, path)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env", "-p",
         "no:cacheprovider", "-q", str(path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:]
    assert "2 passed" in result.stdout
