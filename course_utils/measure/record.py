"""Recorded training runs: ``assets/runs/<config>-<device>.json``, written by a command.

Usage: ``make record CONFIG=cpu`` or ``python -m course_utils.measure.record --config gpu``
(``[--device cpu] [--seed N] [--positional P] [--max-iters N] [--eval-iters N] [--out PATH]``).

The command trains a preset with :func:`course_utils.training.train` (the course's one
training loop; data, preset and model set up as ``python -m course_utils.train`` does, by
:func:`course_utils.train.prepare_run`), then writes one JSON file: the device and versions,
the configs, every evaluation's train/validation loss, time per step, tokens/s, FLOPs per
token and MFU, wall time, and text sampled with fixed seeds. Notebook 12 reads such files
with :func:`load_run` / :func:`find_runs`, so every reader sees a GPU run, with or without a
GPU; it draws one beside its live run with :func:`plot_run_beside` and estimates a T4's time
with :func:`t4_estimate_minutes` (both in :mod:`course_utils.measure.record_report`). Never edit a
record by hand: re-run the command.

Schema 1 (every key is always present; ``null`` where noted)::

    schema: 1, config_name, command, created (UTC, ISO 8601),
    device {type, name, capability [major, minor] or null},
    versions {python, torch, cuda or null}, precision ("bf16" | "fp16" | "fp32"), seed,
    model_config {...}, train_config {...} (eval_iters: batches per evaluation),
    parameters, evaluations [{step, train_loss, val_loss, elapsed_s, train_s (optional:
    elapsed_s less the evaluations' time so far)}],
    final {train_loss, val_loss, eval_batches},
    timing {ms_per_step, tokens_per_s, flops_per_token, mfu or null, train_s, wall_s;
    optional: ms_per_step_steady and mfu_steady, after the first evaluation, so without
    ``torch.compile``'s compilation and the first kernels' warm-up},
    samples [{prompt, text, temperature, top_k, seed}],
    conditions {cpu_model, cpu_count, usable_cpus, threads, load_start, load_mean, load_max,
    rehearsal, platform} (see :mod:`course_utils.measure.record_conditions`; optional: a record
    written before it existed reads every field as "unknown")

A rehearsed run (``COURSE_REHEARSE=cuda-bf16`` or ``cuda-fp16``, :mod:`course_utils.lab.rehearsal`)
is shrunk to seconds and written under ``checkpoints/rehearsal/``, never to ``assets/runs/``.
``make rerecord`` (``scripts/rerecord.py``) redoes the ``cpu`` record and the positional seed
records in sequence.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import re
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from course_utils.config import POSITIONAL_KINDS, PRESETS
from course_utils.lab.assets import ASSETS_DIR
from course_utils.measure.record_conditions import ConditionsProbe, conditions_of, cpu_model
from course_utils.measure.record_report import (  # noqa: F401  (notebook 12's helpers, re-exported)
    T4_PEAK_FLOPS,
    plot_run_beside,
    t4_estimate_minutes,
)

if TYPE_CHECKING:  # imported where used: reading records needs no training code
    from course_utils.train import CommandRun
    from course_utils.training import History

SCHEMA_VERSION = 1
RUNS_DIR = ASSETS_DIR / "runs"
# Sampling after training: fixed prompts and seeds, so a re-run on the same machine
# writes the same text.
SAMPLE_PROMPTS = ("\n", "Romeo.\n")  # this edition names its speakers "Romeo."
SAMPLE_TEMPERATURE, SAMPLE_TOP_K = 0.8, 20

_KEYS = {
    "": (
        "schema",
        "config_name",
        "command",
        "created",
        "device",
        "versions",
        "precision",
        "seed",
        "model_config",
        "train_config",
        "parameters",
        "evaluations",
        "final",
        "timing",
        "samples",
    ),
    "device": ("type", "name", "capability"),
    "versions": ("python", "torch", "cuda"),
    "final": ("train_loss", "val_loss", "eval_batches"),
    "timing": ("ms_per_step", "tokens_per_s", "flops_per_token", "mfu", "train_s", "wall_s"),
    "evaluations[]": ("step", "train_loss", "val_loss", "elapsed_s"),
    "samples[]": ("prompt", "text", "temperature", "top_k", "seed"),
}


def slugify(name: str) -> str:
    """``"NVIDIA H100 80GB HBM3"`` -> ``"nvidia-h100-80gb-hbm3"``: lower case, each run of
    other characters one dash."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def device_slug(device: torch.device | str) -> str:
    """The device part of a record's file name: ``"cpu"``, ``"mps"``, or the CUDA device's
    name slugified (:func:`slugify`), e.g. ``"nvidia-h100-80gb-hbm3"``."""
    device = torch.device(device)
    if device.type != "cuda":
        return device.type
    return slugify(torch.cuda.get_device_name(device))


def describe_record_device(device: torch.device | str) -> dict:
    """``{"type", "name", "capability"}`` of ``device`` (capability ``[major, minor]`` on
    CUDA, else ``None``)."""
    device = torch.device(device)
    if device.type == "cuda":
        return {
            "type": "cuda",
            "name": torch.cuda.get_device_name(device),
            "capability": list(torch.cuda.get_device_capability(device)),
        }
    name = cpu_model() if device.type == "cpu" else device.type
    return {"type": device.type, "name": name, "capability": None}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line's options (``--help`` lists them), checked as
    :func:`course_utils.train.check_command` does: a user's mistake prints one line and
    exits with status 2."""
    from course_utils.measure.cli import check_non_negative, check_out_path, check_rehearsal_switch
    from course_utils.train import add_set_option, check_command

    parser = argparse.ArgumentParser(
        prog="python -m course_utils.measure.record", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--config", required=True, help=f"one of {sorted(PRESETS)}")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    parser.add_argument("--seed", type=int, default=None, help="override the preset's seed")
    parser.add_argument("--positional", choices=POSITIONAL_KINDS, default=None)
    parser.add_argument("--max-iters", type=int, default=None, help="override the preset")
    parser.add_argument("--eval-iters", type=int, default=None, help="batches per evaluation")
    parser.add_argument("--eval-interval", type=int, default=None, help="override the preset")
    parser.add_argument("--compile", action="store_true", help="run through torch.compile")
    parser.add_argument("--sample-chars", type=int, default=300, help="characters per sample")
    add_set_option(parser)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads(N)")
    parser.add_argument(
        "--max-chars", type=int, default=None, help="use only the corpus's first N characters"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="default assets/runs/<config>-<device>.json"
    )
    args = parser.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    check_command(parser, args)  # a user's mistake: one line, exit status 2
    check_non_negative(parser, args, "sample_chars")
    if args.max_chars is not None and args.max_chars < 1:
        parser.exit(
            2, f"{parser.prog}: error: --max-chars must be at least 1, got {args.max_chars}\n"
        )
    check_out_path(parser, args.out)
    check_rehearsal_switch(parser)
    return args


def record_run(argv: list[str] | None = None) -> tuple[dict, Path]:
    """Train the preset named on the command line and write its record; return both."""
    from course_utils.lab.device import get_device
    from course_utils.train import prepare_run
    from course_utils.training.precision import describe_precision, device_precision

    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    wall_started = time.perf_counter()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = get_device(args.device)
    run = prepare_run(args, device, max_chars=args.max_chars)
    precision = device_precision(device, run.train_config)
    print(describe_precision(precision, device), flush=True)
    probe = ConditionsProbe()  # CPU, threads, and the load average while it runs
    evaluations, history, step_seconds = _train_and_time(run, probe.sample)
    conditions = probe.finish()
    samples = _samples(run.model, run.tokenizer, device, args.sample_chars)
    record = {
        "schema": SCHEMA_VERSION,
        "config_name": args.config,
        "command": shlex.join(["python", "-m", "course_utils.measure.record", *argv]),
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "device": describe_record_device(device),
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
        },
        "precision": precision,
        "seed": run.train_config.seed,
        "model_config": asdict(run.model_config),
        "train_config": asdict(run.train_config),
        "parameters": run.model.num_parameters(),
        "evaluations": evaluations,
        "final": {
            "train_loss": evaluations[-1]["train_loss"],
            "val_loss": evaluations[-1]["val_loss"],
            "eval_batches": run.train_config.eval_iters,
        },
        "timing": _timing(run, history, evaluations, step_seconds, wall_started),
        "samples": samples,
        "conditions": conditions,
    }
    out = args.out or default_record_path(args.config, device)
    validate_run(record, str(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return record, out


def default_record_path(config_name: str, device: torch.device | str) -> Path:
    """``assets/runs/<config>-<device>.json``; a rehearsed run (``COURSE_REHEARSE``) goes to
    ``checkpoints/rehearsal/<config>-<mode>.json`` instead: it is no record to commit."""
    from course_utils.lab.rehearsal import rehearsal_mode

    mode = rehearsal_mode()
    if mode is not None and torch.device(device).type == "cpu":
        return Path("checkpoints") / "rehearsal" / f"{config_name}-{mode}.json"
    return RUNS_DIR / f"{config_name}-{device_slug(device)}.json"


def _train_and_time(run: CommandRun, at_evaluation=None) -> tuple[list[dict], History, float]:
    """Train the model of ``run``, printing each evaluation (and calling ``at_evaluation()``
    after each, e.g. to sample the load average).

    Returns:
        ``(evaluations, history, seconds spent in training steps)``: the evaluations as the
        record lists them, and the time of the steps alone (each evaluation's own time is
        taken out; each ends with a read-back, so the device has finished its work when
        the clock is read).
    """
    evaluations: list[dict] = []
    eval_seconds = [0.0]
    train_started = time.perf_counter()

    def on_evaluation(info: dict) -> None:
        eval_seconds[0] += info["eval_seconds"]
        evaluations.append(
            {
                "step": info["step"],
                "train_loss": info["train"],
                "val_loss": info["val"],
                "elapsed_s": time.perf_counter() - train_started,
                "train_s": time.perf_counter() - train_started - eval_seconds[0],
            }
        )
        print(f"step {info['step']:5d}: train {info['train']:.4f}, val {info['val']:.4f}")
        if at_evaluation is not None:
            at_evaluation()

    history = run.train(on_evaluation=on_evaluation)
    return evaluations, history, history.seconds - eval_seconds[0]


def steady_ms_per_step(evaluations: list[dict]) -> float | None:
    """Milliseconds per step after the first evaluation: the first stretch holds the warm-up
    (``torch.compile``'s compilation, CUDA's first kernels), this one only the steady state.

    Uses each evaluation's ``train_s`` (seconds in training steps so far, evaluations taken
    out). None with fewer than two evaluations.
    """
    if len(evaluations) < 2:
        return None
    first, last = evaluations[0], evaluations[-1]
    return 1000.0 * (last["train_s"] - first["train_s"]) / (last["step"] - first["step"])


def _timing(
    run: CommandRun,
    history: History,
    evaluations: list[dict],
    step_seconds: float,
    wall_started: float,
) -> dict:
    """The record's ``timing``: time per step, tokens/s, FLOPs per token, MFU where the
    GPU's peak is known, seconds in :func:`train` and since ``wall_started``."""
    from course_utils.measure.benchmark import flops_per_token, peak_bf16_flops

    device = run.device
    tokens_per_s = history.tokens / step_seconds
    tokens_per_step = history.tokens / run.train_config.max_iters
    steady = steady_ms_per_step(evaluations)
    flops = flops_per_token(run.model)
    peak = peak_bf16_flops(torch.cuda.get_device_name(device))[0] if device.type == "cuda" else None
    return {
        "ms_per_step": 1000.0 * step_seconds / run.train_config.max_iters,
        "ms_per_step_steady": steady,
        "mfu_steady": (
            flops * tokens_per_step / (steady / 1000.0) / peak if peak and steady else None
        ),
        "tokens_per_s": tokens_per_s,
        "flops_per_token": flops,
        "mfu": flops * tokens_per_s / peak if peak else None,
        "train_s": history.seconds,
        "wall_s": time.perf_counter() - wall_started,
    }


@torch.no_grad()
def _samples(model, tokenizer, device: torch.device, chars: int) -> list[dict]:
    """Text sampled from each of :data:`SAMPLE_PROMPTS`, seed i for prompt i."""
    model.eval()
    samples = []
    for seed, prompt in enumerate(SAMPLE_PROMPTS):
        ids = torch.tensor([tokenizer.encode(prompt)], device=device)
        generator = torch.Generator(device=device).manual_seed(seed)
        out = model.generate(
            ids, chars, temperature=SAMPLE_TEMPERATURE, top_k=SAMPLE_TOP_K, generator=generator
        )
        samples.append(
            {
                "prompt": prompt,
                "text": tokenizer.decode(out[0].tolist()),
                "temperature": SAMPLE_TEMPERATURE,
                "top_k": SAMPLE_TOP_K,
                "seed": seed,
            }
        )
    return samples


def validate_run(record: dict, source: str = "record") -> dict:
    """Check that ``record`` has every key of schema 1 (see the module docstring).

    Returns:
        ``record`` unchanged.

    Raises:
        ValueError: a wrong schema version, a missing key, or an empty ``evaluations``;
            the message names the file, the key and how to rewrite the file.
    """
    fix = "re-run `make record CONFIG=<preset>` to rewrite it (records are never hand-written)"
    if not isinstance(record, dict) or record.get("schema") != SCHEMA_VERSION:
        found = record.get("schema") if isinstance(record, dict) else type(record).__name__
        raise ValueError(f"{source}: expected schema {SCHEMA_VERSION}, got {found!r}; {fix}")
    for section, keys in _KEYS.items():
        name = section.rstrip("[]")
        items = [record] if not section else record.get(name)
        if section.endswith("[]"):
            if not isinstance(items, list) or not items:
                raise ValueError(f"{source}: {name!r} must be a non-empty list; {fix}")
        elif section:
            items = [items]
        for index, item in enumerate(items):
            where = f"{name}[{index}]" if section.endswith("[]") else name or "the top level"
            missing = [key for key in keys if not isinstance(item, dict) or key not in item]
            if missing:
                raise ValueError(f"{source}: {where} lacks the keys {missing}; {fix}")
    return record


def load_run(path: str | Path) -> dict:
    """Read one record and check its schema.

    Args:
        path: a JSON file written by ``python -m course_utils.measure.record``.

    Returns:
        The record as a dict (keys in the module docstring).

    Raises:
        FileNotFoundError: no file at ``path`` (the message says how to write one).
        ValueError: not JSON, or not schema 1 (see :func:`validate_run`).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no recorded run at {path}; write one with `make record CONFIG=<preset>`"
        )
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON ({error}); re-run `make record`") from error
    record = validate_run(record, str(path))
    record["conditions"] = conditions_of(record)  # older records: every field "unknown"
    return record


def find_runs(pattern: str = "*.json", folder: str | Path | None = None) -> list[dict]:
    """Every record in ``assets/runs/`` (or ``folder``) whose file name matches ``pattern``,
    sorted by file name; each is checked by :func:`load_run`. Empty if none matches."""
    folder = Path(folder) if folder is not None else RUNS_DIR
    return [load_run(path) for path in sorted(folder.glob(pattern))]


def main(argv: list[str] | None = None) -> dict:
    """Run the command; print where the record went and its headline numbers."""
    record, out = record_run(argv)
    timing = record["timing"]
    mfu = "n/a" if timing["mfu"] is None else f"{100 * timing['mfu']:.1f} %"
    print(
        f"final val loss {record['final']['val_loss']:.4f} ({record['final']['eval_batches']} "
        f"batches); {timing['ms_per_step']:.1f} ms/step, {timing['tokens_per_s']:,.0f} "
        f"tokens/s, MFU {mfu}; training {timing['train_s']:.1f} s, wall {timing['wall_s']:.1f} s"
    )
    if timing.get("ms_per_step_steady") is not None:
        mfu = "n/a" if timing["mfu_steady"] is None else f"{100 * timing['mfu_steady']:.1f} %"
        print(
            f"after the first evaluation (warm-up and compilation excluded): "
            f"{timing['ms_per_step_steady']:.2f} ms/step, MFU {mfu}"
        )
    print(f"record written to {out}")
    return record


if __name__ == "__main__":
    main()
