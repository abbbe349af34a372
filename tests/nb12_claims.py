"""The sentences notebooks 12 and 16 print from their runs' numbers, checked against those numbers.

Used on the committed notebooks (tests/test_prose_numbers.py) and on the copies executed in
each rehearsal mode (tests/test_rehearsal_notebooks.py): a printed claim that contradicts the
numbers printed beside it fails, whatever the device.
"""

from __future__ import annotations

import math
import re

NUMBER = r"(-?\d+\.\d+)"
EVEN_PROMPT = "Romeo.\nBut soft! what light"  # notebook 12's heatmap prompt


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


def markdown_text(cells: list[dict]) -> str:
    """Every markdown cell's text, lines joined with spaces (a sentence may wrap anywhere)."""
    text = " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return " ".join(text.split())


def _find(pattern: str, text: str) -> tuple[str, ...]:
    match = re.search(pattern, text)
    assert match, f"no match for {pattern!r} in:\n{text[:3000]}"
    return match.groups()


# --- notebook 12 ------------------------------------------------------------------------------


def check_size_claim(cells: list[dict], rehearsing: bool) -> dict[str, int]:
    """The device cell names the size of run; returns the printed TrainConfig's counts."""
    printed = code_output(cells, "= device_config(")
    preset = _find(r"device \w+: the '(\w+)' size", printed)[0]
    if rehearsing:
        assert preset == "gpu", printed  # the GPU branch, taken on the CPU
    assert "sinusoidal positions, dropout 0.0" in printed  # the learner's model
    max_iters, batch_size = _find(r"training: (\d+) steps of (\d+) windows", printed)
    eval_interval, eval_iters = _find(r"validation every (\d+) steps on (\d+) batches", printed)
    values = (max_iters, eval_interval, eval_iters, batch_size)
    keys = ("max_iters", "eval_interval", "eval_iters", "batch_size")
    return {key: int(value) for key, value in zip(keys, values)}


def check_initial_loss_claim(cells: list[dict]) -> None:
    """After the N(0, 0.02) initialisation the loss is near ln V, as the prose says."""
    printed = code_output(cells, "initial_weights = copy.deepcopy")
    constructed, gpt2, ln_v = map(
        float,
        _find(
            rf"as constructed {NUMBER}, after N\(0, 0.02\) initialisation {NUMBER}; "
            rf"ln V = {NUMBER}",
            printed,
        ),
    )
    assert ln_v == round(math.log(84), 3)
    assert abs(gpt2 - ln_v) < 0.15 and constructed > 0


def check_plain_loop_claims(cells: list[dict], counts: dict[str, int]) -> None:
    """The loop ran the budget the config printed, and reported every eval_interval steps."""
    printed = code_output(cells, "for step in range(train_config.max_iters):")
    reports = re.findall(r"step\s+(\d+): batch loss", printed)
    expected = list(
        range(counts["eval_interval"], counts["max_iters"] + 1, counts["eval_interval"])
    )
    assert [int(r) for r in reports] == expected, reports
    assert int(_find(r"(\d+) steps in \d+ s", printed)[0]) == counts["max_iters"]


def check_precision_claim(cells: list[dict], expected: str) -> None:
    """The cell before train() prints the precision train() uses: ``expected`` (fp32/bf16/fp16)."""
    printed = code_output(cells, ".device_precision(device, train_config)")
    assert f"train() on this machine: {expected}, " in printed, printed[:500]
    assert ("with a gradient scaler" in printed) == (expected == "fp16")


def check_equality_claims(cells: list[dict], counts: dict[str, int]) -> float:
    """Plain loop and train(): the same first losses (train() stopped by max_steps), and the
    numbers of the sentences are the ones printed beside them. Returns the val loss."""
    own = code_output(cells, "val_loss = estimate_loss(model, val_data)")
    val, steps = _find(rf"after (\d+) steps: validation loss {NUMBER}", own)[::-1]
    assert int(steps) == counts["max_iters"]
    check = code_output(cells, "n, tolerance = n_compare")
    n, first, allowed = _find(
        r"first (\d+) losses: largest difference ([\d.e+-]+) \(allowed ([\d.e+-]+)\)", check
    )
    assert float(first) < float(allowed) and int(n) <= counts["max_iters"]
    ladder = code_output(cells, 'show_ladder("12-full-run"')
    assert f"the whole decoder, full run: validation loss {val} nats/char" in ladder
    below = float(_find(rf"validation loss is {NUMBER} nats/char below", ladder)[0])
    assert abs(below - (math.log(84) - float(val))) <= 0.006
    return float(val)


def check_head_claims(cells: list[dict], rehearsing: bool) -> None:
    """The heads' three lines: weights in [0, 1], each even spread is what the prompt gives,
    and (the committed CPU run, which the prose describes) one head puts about five times an
    even share on the previous character and three heads about three times on the last space."""
    printed = code_output(cells, "plot_attention_heads(weights")
    T = len(EVEN_PROMPT)
    last_space = [max((s for s in range(t) if EVEN_PROMPT[s] in " \n"), default=None)
                  for t in range(T)]  # fmt: skip
    rows = {"the previous character": range(1, T), "itself": range(1, T),
            "the last break": [t for t in range(T) if last_space[t] is not None]}  # fmt: skip
    found = {}
    for name, queries in rows.items():
        said = name.replace("break", "(?:break|space)")  # "space" before the Chinese edition
        line = _find(rf"weight on {said} +heads 0-\d+: ([\d., ]+) \(an even spread: {NUMBER}\)",
                     printed)  # fmt: skip
        weights = [float(w) for w in line[0].split(", ")]
        assert all(0 <= w <= 1 for w in weights), (name, weights)
        even = sum(1 / (t + 1) for t in queries) / len(queries)
        assert float(line[1]) == round(even, 2), (name, line[1], even)
        found[name] = weights, even
    if not rehearsing:
        text = " ".join(markdown_text(cells).split())
        assert "one head puts about five times an even share on the previous character" in text
        weights, even = found["the previous character"]
        assert 4.5 <= max(weights) / round(even, 2) <= 5.5, (weights, even)
        assert "itself is at most about twice an even spread" in text
        weights, even = found["itself"]
        assert max(weights) / round(even, 2) <= 2.1, (weights, even)
        assert "three heads put about three times an even share on the last break" in text
        weights, even = found["the last break"]
        shares = sorted((w / round(even, 2) for w in weights), reverse=True)
        assert all(2.5 <= share <= 3.5 for share in shares[:3]) and shares[3] < 2.5, shares


def check_checkpoint_claims(cells: list[dict]) -> None:
    assert "reloaded logits are identical: True" in code_output(cells, "reloaded.load_state_dict(")
    resumed = code_output(cells, "def tiny_run(")
    assert "per-step losses identical: True" in resumed
    assert "final weights identical:   True" in resumed


def check_all(cells: list[dict], precision: str, rehearsing: bool) -> None:
    counts = check_size_claim(cells, rehearsing)
    check_initial_loss_claim(cells)
    check_plain_loop_claims(cells, counts)
    check_precision_claim(cells, precision)
    check_equality_claims(cells, counts)
    check_head_claims(cells, rehearsing)
    check_checkpoint_claims(cells)


# --- notebook 16, the appendix ----------------------------------------------------------------


def check_appendix_rehearsal_claims(cells: list[dict], expected: str, rehearsing: bool) -> None:
    """The switch's cell says which preset and precision the run takes."""
    printed = code_output(cells, "describe_precision(precision, device)")
    assert f"precision {expected} on " in printed, printed[:500]
    assert ("GradScaler" in printed) == (expected == "fp16")
    if rehearsing:
        assert "acts as 'cuda': preset 'gpu'" in printed and "rehearsing CUDA" in printed
    else:
        assert "off (this machine runs as itself)" in printed


def check_appendix_record_claims(cells: list[dict], rehearsing: bool) -> None:
    """The replay is held to its record, or says that it has none (rehearsed runs never do)."""
    replay = code_output(cells, "replay = train(replay_model")
    timing = code_output(cells, "explain_timing_gap(")
    if rehearsing:
        assert "no record of preset 'gpu' on cuda" in replay
        assert "no timing to compare with" in timing
        return
    live, recorded, gap, margin = map(
        float,
        _find(
            rf"live val {NUMBER}, recorded {NUMBER}: difference ([+-]\d+\.\d+), margin "
            rf"±{NUMBER}",
            replay,
        ),
    )
    assert abs(gap - (live - recorded)) <= 1.5e-3 and abs(gap) <= margin
    assert "x the record's speed" in timing


def check_appendix_timing_claims(cells: list[dict]) -> None:
    """Each printed speed-up is the ratio of the two times printed beside it.

    The cell divides the unrounded times and rounds each printed number to one decimal, so
    the check allows exactly that rounding: each time lies within 0.05 of its printed value,
    the ratio within 0.05 of its own. It holds for any timing the machine produces (at
    0.6 ms the rounding alone moves the ratio by 10 %; a time printed as 0.0 bounds nothing).
    """
    printed = code_output(cells, "time_per_token(net, lengths, use_cache=False)")
    rows = re.findall(rf"{NUMBER} ms without, {NUMBER} ms with the cache \({NUMBER}x\)", printed)
    assert rows, printed[:500]
    for without, with_cache, ratio in rows:
        low, high = ratio_bounds(float(without), float(with_cache), half_step=0.05)
        assert low - 0.05 - 1e-9 <= float(ratio) <= high + 0.05 + 1e-9, (without, with_cache, ratio)


def ratio_bounds(numerator: float, denominator: float, half_step: float) -> tuple[float, float]:
    """The range of ``a / b`` over the true values ``a`` and ``b`` that print, rounded to
    ``half_step * 2``, as ``numerator`` and ``denominator`` (times are > 0)."""
    low = max(numerator - half_step, 0.0) / (denominator + half_step)
    if denominator <= half_step:  # the true denominator may be as close to 0 as it likes
        return low, math.inf
    return low, (numerator + half_step) / (denominator - half_step)


def check_appendix(cells: list[dict], precision: str, rehearsing: bool) -> None:
    check_appendix_rehearsal_claims(cells, precision, rehearsing)
    check_appendix_record_claims(cells, rehearsing)
    check_appendix_timing_claims(cells)
