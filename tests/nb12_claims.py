"""The sentences notebook 12 prints from its run's numbers, checked against those numbers.

Used on the committed notebook (tests/test_prose_numbers.py) and on the copies executed in
each rehearsal mode (tests/test_rehearsal_notebooks.py): a printed claim that contradicts
the numbers printed beside it fails, whatever the device.
"""

from __future__ import annotations

import re

NUMBER = r"(-?\d+\.\d+)"
LECTURE_TOKENS = 5000 * 64 * 256


def code_output(cells: list[dict], marker: str) -> str:
    """The text output of the one code cell whose source contains ``marker``."""
    hits = [c for c in cells if c["cell_type"] == "code" and marker in "".join(c["source"])]
    assert len(hits) == 1, f"{len(hits)} code cells contain {marker!r}"
    parts = []
    for output in hits[0].get("outputs", []):
        if "text" in output:
            parts.append("".join(output["text"]))
        elif "text/plain" in output.get("data", {}):
            parts.append("".join(output["data"]["text/plain"]))
    return "".join(parts)


def _find(pattern: str, text: str) -> tuple[str, ...]:
    match = re.search(pattern, text)
    assert match, f"no match for {pattern!r} in:\n{text[:3000]}"
    return match.groups()


def check_budget_and_gap_claims(cells: list[dict]) -> None:
    """Cell "tokens_seen = ": passes, the train/validation gap and the budget sentence."""
    history = code_output(cells, "for step, train_loss, val_loss in zip(history.step")
    rows = re.findall(rf"step\s+\d+: train {NUMBER}, val {NUMBER}", history)
    train, val = map(float, rows[-1])
    budget = code_output(cells, "tokens_seen = ")
    tokens, passes = _find(r"this run: ([\d,]+) training tokens = ([\d.e+-]+) passes", budget)
    tokens, passes = int(tokens.replace(",", "")), float(passes)
    gap, verdict = _find(
        r"validation loss is ([+-]\d+\.\d+) nats/char from its training loss "
        r"\((nearly equal|apart)\)",
        budget,
    )
    assert abs(float(gap) - (val - train)) <= 1.5e-3, (gap, val, train)
    assert (verdict == "nearly equal") == (abs(val - train) < 0.05)
    if passes <= 1.5:
        assert "at most about once, so it cannot memorise" in budget
    else:
        assert f"about {passes:.0f} times, so it can memorise" in budget
    ratio = float(_find(r"Its budget is ([\d.e+-]+) times the lecture's", budget)[0])
    assert ratio == float(f"{tokens / LECTURE_TOKENS:.2g}")


def check_table_claim(cells: list[dict]) -> None:
    """Cell "table = dict(baselines)": below or above each baseline, as the numbers say."""
    table = code_output(cells, "table = dict(baselines)")
    rows = dict(
        (name.strip(), (float(t), float(v)))
        for name, t, v in re.findall(r"\| (.+?)\s+\| (\d+\.\d+) \| (\d+\.\d+) \|", table)
    )
    run = next(value for name, value in rows.items() if name.startswith("this run"))
    for baseline, label in (
        ("bigram (counts, add-one)", "the bigram's"),
        ("uniform (ln V)", "uniform"),
    ):
        amount, side = _find(rf"{NUMBER} (below|above) {re.escape(label)}", table)
        difference = rows[baseline][1] - run[1]
        assert side == ("below" if difference >= 0 else "above"), (side, difference)
        assert abs(float(amount) - abs(difference)) <= 1.5e-3


def check_precision_claim(cells: list[dict], expected: str) -> None:
    """The hand loop prints the precision that train() uses: ``expected`` (bf16/fp16/fp32)."""
    printed = code_output(cells, "hand_steps = min(200")
    assert f"precision {expected} on " in printed, printed[:500]
    assert ("GradScaler" in printed) == (expected == "fp16")


def check_hand_loop_claim(cells: list[dict]) -> None:
    hand = code_output(cells, "hand_steps = min(200")
    steps = int(_find(r"\n(\d+) steps: loss", "\n" + hand)[0])
    same = code_output(cells, "first = history.batch_loss[:hand_steps]")
    count = int(_find(r"the first (\d+) losses of train\(\) equal the loop's .*: True", same)[0])
    assert count == steps or count == 20


def check_head_claims(cells: list[dict]) -> None:
    """The sentence after each block's figure says what the head table says."""
    table = code_output(cells, "verdicts = name_heads(")
    heads = {}
    # HeadName.describe(): "layer 0 head 1: previous character | best previous character
    # (5.5x even), margin 1.73 over itself"
    for layer, head, name, best, ratio, margin, runner in re.findall(
        r"layer (\d+) head (\d+): (.+?)\s+\| best (.+?) \(([\d.]+)x even\), margin "
        r"([\d.]+|inf) over (.+)",
        table,
    ):
        heads[int(layer), int(head)] = (name.strip(), best, ratio, margin, runner.strip())
    assert heads, table[:1000]
    said = code_output(cells, 'head_titles=[f"head {v.head}: {v.name}"')
    for layer, sentence in re.findall(r"Block (\d+): (.*)", said):
        layer = int(layer)
        named = {h: v for (lay, h), v in heads.items() if lay == layer}
        mixed = sum(v[0] == "mixed" for v in named.values())
        assert f"{mixed} of {len(named)} heads mixed" in sentence
        for head, (name, best, ratio, margin, runner) in named.items():
            if name != "mixed":
                ratio_text = f"{float(ratio):.1f}"
                assert (
                    f"head {head} puts {ratio_text} times an even spread's weight on the {best} "
                    f"({margin} times its runner-up, {runner})" in sentence
                ), sentence


def check_record_claims(cells: list[dict], rehearsing: bool) -> None:
    listing = code_output(cells, "RECORD_MARGIN = record_margin(")
    if rehearsing:
        assert "is compared with: no record" in listing
        comparison = code_output(cells, "shown = own or")
        assert "no record of preset 'gpu' on cuda" in comparison
        timing = code_output(cells, "explain_timing_gap(")
        assert "no timing to compare with" in timing


def check_all(cells: list[dict], precision: str, rehearsing: bool) -> None:
    check_budget_and_gap_claims(cells)
    check_table_claim(cells)
    check_precision_claim(cells, precision)
    check_hand_loop_claim(cells)
    check_head_claims(cells)
    check_record_claims(cells, rehearsing)
