"""The committed notebooks read well without a kernel (GitHub, nbviewer, a plain file viewer).

Over every saved output:

* a widget output also carries a readable ``text/plain`` fallback (a static render shows only
  that), not a widget repr such as ``HBox(children=...)`` nor nothing at all;
* no progress bar is frozen below 100% (``training:   0%|   | 0/1200``): the saved copy shows
  the run's final state;
* no ANSI escape codes (colours print as ``[31m`` garbage outside a terminal);
* no warnings on stderr, nor any error output.

Each rule is also tested on a hand-made bad output, so a rule that cannot fail is caught.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
WIDGET = "application/vnd.jupyter.widget-view+json"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# tqdm's bar: "  37%|███▋      | 444/1200 [..." (the n/total is what counts)
BAR = re.compile(r"(\d+)%\|[^|\n]*\|\s*(\d+(?:\.\d+)?)([kMG]?)/(\d+(?:\.\d+)?)([kMG]?)\b")
WIDGET_REPR = re.compile(r"^\s*[A-Z]\w*\(.*\)\s*$", re.S)  # HBox(children=...), FloatProgress(...)
WARNING = re.compile(r"\b\w*Warning\b|\bwarn(ing)?:", re.I)


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _last_frame(text: str) -> str:
    """What a terminal shows of text written with carriage returns: each line's last frame."""
    frames = ([f for f in line.split("\r") if f] or [""] for line in text.split("\n"))
    return "\n".join(frame[-1] for frame in frames)


def _frozen_bars(text: str) -> list[str]:
    scale = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}
    frozen = []
    for match in BAR.finditer(_last_frame(text)):
        done = float(match.group(2)) * scale[match.group(3)]
        total = float(match.group(4)) * scale[match.group(5)]
        if done < total:
            frozen.append(match.group(0))
    return frozen


def output_problems(output: dict) -> list[str]:
    """What is wrong with one saved output for a reader without a kernel; empty when fine."""
    problems = []
    kind = output.get("output_type")
    texts = []
    if kind == "stream":
        text = _text(output.get("text", ""))
        texts.append(text)
        if output.get("name") == "stderr" and WARNING.search(text):
            problems.append(f"a warning on stderr: {text.strip()[:200]!r}")
    elif kind == "error":
        problems.append(f"an error output: {output.get('ename')}: {output.get('evalue')}")
        texts += [_text(line) for line in output.get("traceback", [])]
    else:
        data = output.get("data", {})
        texts += [_text(v) for k, v in data.items() if k.startswith("text/")]
        if WIDGET in data:
            plain = _text(data.get("text/plain", "")).strip()
            if not plain or WIDGET_REPR.match(plain):
                problems.append(
                    f"a widget whose saved text is {plain!r}: a static render shows nothing "
                    "readable; save the final state as text/plain"
                )
    for text in texts:
        if ANSI.search(text):
            problems.append(f"ANSI escape codes in {text.strip()[:120]!r}")
        problems += [f"a progress bar frozen at {bar!r}" for bar in _frozen_bars(text)]
    return problems


def notebook_problems(path: Path) -> list[str]:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return [
        f"{path.name} cell {index} ({cell.get('id')}): {problem}"
        for index, cell in enumerate(notebook["cells"])
        for output in cell.get("outputs", [])
        for problem in output_problems(output)
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_outputs_read_well_without_a_kernel(path):
    problems = notebook_problems(path)
    assert not problems, "\n".join(problems) + "\n(re-execute the notebook: `make course`)"


# --- each rule can fail ------------------------------------------------------------------------


def _display(data: dict) -> dict:
    return nbformat.v4.new_output("display_data", data=data)


WIDGET_ID = {"model_id": "abc", "version_major": 2, "version_minor": 0}


@pytest.mark.parametrize(
    "output, expected",
    [
        (_display({WIDGET: WIDGET_ID}), "a widget whose saved text is ''"),
        (
            _display(
                {WIDGET: WIDGET_ID, "text/plain": "HBox(children=(FloatProgress(value=0.0),))"}
            ),
            "a widget whose saved text is 'HBox(",
        ),
        (
            _display(
                {
                    WIDGET: WIDGET_ID,
                    "text/plain": ["training:   0%|          | 0/1200 [00:00<?, ?step/s]"],
                }
            ),
            "a progress bar frozen at '0%|          | 0/1200'",
        ),
        (
            nbformat.v4.new_output("stream", name="stderr", text="eval:  40%|████      | 2/5\r"),
            "a progress bar frozen at '40%|████      | 2/5'",
        ),
        (
            nbformat.v4.new_output("stream", name="stdout", text="\x1b[31mred\x1b[0m\n"),
            "ANSI escape codes",
        ),
        (
            nbformat.v4.new_output(
                "stream",
                name="stderr",
                text="/x/_compat.py:18: UserWarning: pkg_resources is deprecated\n",
            ),
            "a warning on stderr",
        ),
        (
            nbformat.v4.new_output("error", ename="ValueError", evalue="bad", traceback=[]),
            "an error output: ValueError: bad",
        ),
    ],
    ids=[
        "widget-only",
        "widget-repr",
        "widget-frozen",
        "stream-frozen",
        "ansi",
        "warning",
        "error",
    ],
)
def test_each_rule_catches_its_bad_output(output, expected):
    problems = output_problems(output)
    assert any(p.startswith(expected) for p in problems), problems


@pytest.mark.parametrize(
    "output",
    [
        _display(
            {
                WIDGET: WIDGET_ID,
                "text/plain": "training: 100%|██████████| 1200/1200 [01:10<00:00, loss=1.91]",
            }
        ),
        nbformat.v4.new_output(
            "stream", name="stderr", text="eval:  40%|████  | 2/5\reval: 100%|██████| 5/5\n"
        ),
        nbformat.v4.new_output("stream", name="stdout", text="step 1200/1200: val loss 1.91\n"),
        _display({"text/plain": "tensor([1, 2])", "text/html": "<b>ok</b>"}),
    ],
    ids=["finished-widget", "finished-stream", "plain-ratio", "plain-display"],
)
def test_good_outputs_pass(output):
    assert output_problems(output) == []
