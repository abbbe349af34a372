"""Classic vs modern block, and grouped-query attention, measured on Shakespeare (notebook 15).

Usage (``make compare-blocks`` runs every record that is missing, one process at a time)::

    python -m course_utils.measure.compare_blocks train --arm modern --seed 1 [--threads 1]
    python -m course_utils.measure.compare_blocks timing [--rounds 7 --steps 10]
    python -m course_utils.measure.compare_blocks memory

Arms, all with the ``baby`` preset's training settings (2000 steps of 12 windows of 64
characters, AdamW 1e-3 with warm-up and cosine decay) and data (Shakespeare characters, the
first 90 % to train, the rest to validate), as
``python -m course_utils.measure.record --config baby``:

* ``classic``: the course's :class:`~course_utils.model.TinyDecoder` (``baby``: pre-LN
  LayerNorm, GELU MLP of width 512, biases, 4 heads, RoPE, tied head): 804,096 parameters.
  The same run as ``assets/runs/positional-rope-seedN.json`` (same command, same seed).
* ``modern``: :class:`~course_utils.modern_model.ModernDecoder` with RMSNorm, SwiGLU of width
  384, 4 query heads sharing 2 key/value heads, QK-norm, no biases, untied head: 809,344
  parameters (+0.65 %, within the 5 % the comparison allows).
* ``gqa-kvG``: the modern block with G = 1, 2 or 4 key/value heads for its 4 query heads:
  multi-query, grouped (G = 2: the ``modern`` arm itself, whose records it shares) and full
  multi-head attention. Fewer key/value heads also mean smaller W^K and W^V (the parameter
  count falls by 2 * (4 - G) * 32 * 128 per layer).

Each ``train`` run writes ``assets/runs/blocks/blocks-<arm>-seed<N>.json`` (see :func:`run_record`).
``timing`` writes ``blocks-timing.json``: time per training step of ``classic`` and ``modern``
measured *interleaved* (A, B, A, B, ... with medians), so that a machine whose load changes
during the measurement slows both alike. ``memory`` writes ``blocks-kv-memory.json``: the
bytes a KV cache holds after a full context, measured, next to ``2 n_layers T n_kv_heads d_k
bytes``. Never edit these files by hand: re-run the command.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import shlex
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

from course_utils.config import ModelConfig, get_config
from course_utils.lab.assets import ASSETS_DIR
from course_utils.measure.cli import check_out_path, check_rehearsal_switch

# A folder of their own: course_utils.measure.record.find_runs reads every record of notebook 12's
# schema in assets/runs/, and these have another.
RUNS_DIR = ASSETS_DIR / "runs" / "blocks"
POSITIONAL_DIR = ASSETS_DIR / "runs"
ARMS = ("classic", "modern", "gqa-kv1", "gqa-kv2", "gqa-kv4")
#: Arms that are another arm under a second name (same config, so the same runs).
SAME_AS = {"gqa-kv2": "modern"}
SEEDS = (1, 2, 3)  # the seeds of the recorded positional-rope-seedN runs
SCHEMA = "blocks-1"


def arm_config(arm: str, vocab_size: int) -> ModelConfig:
    """The model config of ``arm`` (see the module docstring) for a vocabulary of V tokens.

    Raises:
        ValueError: an unknown arm.
    """
    from course_utils.modern_model import ModernConfig

    base, _ = get_config("baby", vocab_size)
    if arm == "classic":
        return base
    shape = {k: getattr(base, k) for k in ("vocab_size", "block_size", "d_model", "n_layers")}
    if arm == "modern":
        return ModernConfig(**shape, n_heads=4, n_kv_heads=2, d_ff=384, qk_norm=True)
    if arm.startswith("gqa-kv") and arm in ARMS:
        n_kv_heads = int(arm.removeprefix("gqa-kv"))
        return ModernConfig(**shape, n_heads=4, n_kv_heads=n_kv_heads, d_ff=384, qk_norm=True)
    raise ValueError(f"unknown arm {arm!r}; expected one of {ARMS}")


def build_model(config: ModelConfig) -> torch.nn.Module:
    """TinyDecoder for a plain ModelConfig, ModernDecoder for a ModernConfig."""
    from course_utils.model import TinyDecoder
    from course_utils.modern_model import ModernConfig, ModernDecoder

    return ModernDecoder(config) if isinstance(config, ModernConfig) else TinyDecoder(config)


def shakespeare_splits() -> tuple[torch.Tensor, torch.Tensor, int]:
    """``(train, val, V)``: Shakespeare as character ids, split 90/10 as the presets are."""
    from course_utils.data import load_shakespeare, train_val_split
    from course_utils.tokenization import CharTokenizer

    text = load_shakespeare()
    tokenizer = CharTokenizer.from_text(text)
    data = tokenizer.encode_tensor(text)
    train_data, val_data = train_val_split(data, 0.1)
    return train_data, val_data, tokenizer.vocab_size


def _environment() -> dict:
    return {
        "command": "python -m course_utils.measure.compare_blocks " + shlex.join(sys.argv[1:]),
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
    }


def run_record(arm: str, seed: int, max_iters: int | None = None) -> dict:
    """Train ``arm`` with the baby budget and seed ``seed``; return its record.

    Record keys: ``schema``, ``arm``, ``seed``, ``command``, ``created``, ``cpu``, ``threads``,
    ``versions``, ``model_config``, ``train_config``, ``parameters``, ``evaluations``
    [{step, train_loss, val_loss}], ``final`` {train_loss, val_loss}, ``train_s``.
    """
    from course_utils.lab.device import seed_everything
    from course_utils.training import train

    train_data, val_data, vocab_size = shakespeare_splits()
    overrides = {"seed": seed} if max_iters is None else {"seed": seed, "max_iters": max_iters}
    _, train_config = get_config("baby", vocab_size, **overrides)
    model_config = arm_config(arm, vocab_size)
    seed_everything(seed)  # the same initial weights as python -m course_utils.measure.record
    model = build_model(model_config)
    started = time.perf_counter()
    history = train(model, train_data, val_data, train_config, progress=False)
    evaluations = [
        {"step": s, "train_loss": t, "val_loss": v}
        for s, t, v in zip(history.step, history.train_loss, history.val_loss)
    ]
    return {
        "schema": SCHEMA,
        "arm": arm,
        "seed": seed,
        **_environment(),
        "model_config": {**asdict(model_config), "class": type(model).__name__},
        "train_config": asdict(train_config),
        "parameters": model.num_parameters(),
        "evaluations": evaluations,
        "final": {k: evaluations[-1][k] for k in ("train_loss", "val_loss")},
        "train_s": time.perf_counter() - started,
    }


def load_records(
    folder: str | Path | None = None, positional_folder: str | Path | None = None
) -> dict[str, list[dict]]:
    """The recorded runs, ``arm -> records`` sorted by seed (arms without a record left out).

    ``classic`` comes from ``positional-rope-seedN.json`` (written by ``python -m
    course_utils.measure.record --config baby --positional rope --seed N``: the same model, data,
    budget and seed as ``train --arm classic``) and from ``blocks-classic-seedN.json`` where
    that seed has no such record; the other arms from ``blocks-<arm>-seedN.json`` (an arm of
    :data:`SAME_AS` without its own records shares those of its twin).
    Each record is reduced to ``{seed, parameters, steps, val_losses, final_val_loss, file}``.
    ``folder`` holds the ``blocks-*`` records (default ``assets/runs/blocks/``),
    ``positional_folder`` the positional ones (default ``assets/runs/``).
    """
    folder = Path(folder) if folder is not None else RUNS_DIR
    positional = Path(positional_folder) if positional_folder is not None else POSITIONAL_DIR
    runs: dict[str, dict[int, dict]] = {}
    sources = [("classic", p) for p in sorted(positional.glob("positional-rope-seed*.json"))]
    sources += [(None, p) for p in sorted(folder.glob("blocks-*-seed*.json"))]
    for arm, path in sources:
        record = json.loads(path.read_text())
        arm = arm or record["arm"]
        runs.setdefault(arm, {}).setdefault(
            record["seed"],
            {
                "seed": record["seed"],
                "parameters": record["parameters"],
                "steps": [e["step"] for e in record["evaluations"]],
                "val_losses": [e["val_loss"] for e in record["evaluations"]],
                "final_val_loss": record["final"]["val_loss"],
                "file": path.name,
            },
        )
    for arm, same in SAME_AS.items():
        if arm not in runs and same in runs:
            runs[arm] = runs[same]
    return {arm: [runs[arm][s] for s in sorted(runs[arm])] for arm in ARMS if arm in runs}


def _write(record: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {path}")
    return path


def _time_steps(model, optimizer, batches, steps: int, train_config) -> float:
    """Median seconds of ``steps`` training steps (forward, backward, AdamW) after one warm-up."""
    from course_utils.training import training_step

    times = []
    for step in range(steps + 1):
        x, y = batches.sample()
        started = time.perf_counter()
        training_step(model, optimizer, x, y, 1e-3, train_config, "cpu")
        if step:  # the first step allocates buffers
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def timing_record(rounds: int = 7, steps: int = 10) -> dict:
    """Time per step of ``classic`` and ``modern``, interleaved: for each of ``rounds``
    rounds, ``steps`` steps of one, then of the other (the order alternates between rounds);
    each round gives the median step; the record keeps every round and their medians (ms)."""
    from course_utils.lab.device import seed_everything
    from course_utils.training.batches import DeviceBatches
    from course_utils.training.schedule import make_optimizer

    train_data, _, vocab_size = shakespeare_splits()
    _, train_config = get_config("baby", vocab_size, seed=1)
    arms = {}
    for arm in ("classic", "modern"):
        seed_everything(1)
        model = build_model(arm_config(arm, vocab_size)).train()
        batches = DeviceBatches(
            train_data, model.config.block_size, train_config.batch_size, "cpu", 1
        )
        arms[arm] = (model, make_optimizer(model, train_config), batches)
    rounds_ms: dict[str, list[float]] = {arm: [] for arm in arms}
    for index in range(rounds):
        order = list(arms) if index % 2 == 0 else list(reversed(arms))
        for arm in order:
            seconds = _time_steps(*arms[arm], steps, train_config)
            rounds_ms[arm].append(1000 * seconds)
    return {
        "schema": SCHEMA,
        **_environment(),
        "method": (
            f"{rounds} rounds; in each, {steps} training steps of one arm then of the other "
            "(order alternating), the median step of each; reported: the median over rounds"
        ),
        "batch": [train_config.batch_size, arms["classic"][0].config.block_size],
        "rounds_ms": rounds_ms,
        "median_ms": {arm: statistics.median(ms) for arm, ms in rounds_ms.items()},
    }


def memory_record(batch: int = 1) -> dict:
    """For every arm: the bytes its KV cache holds after a full context (``block_size``
    tokens, ``batch`` rows, float32), measured from the cached tensors, next to the formula
    ``2 * n_layers * B * T * n_kv_heads * d_k * 4``. The weights do not change the size:
    untrained models are measured."""
    from course_utils.kv_cache import KVCache, cache_bytes, forward_with_cache

    arms = {}
    for arm in ARMS:
        config = arm_config(arm, 84)
        torch.manual_seed(0)
        model, cache = build_model(config).eval(), KVCache()
        ids = torch.randint(0, config.vocab_size, (batch, config.block_size))
        forward_with_cache(model, ids, cache)
        arms[arm] = {
            "n_layers": config.n_layers,
            "n_heads": config.n_heads,
            "n_kv_heads": getattr(config, "n_kv_heads", None) or config.n_heads,
            "d_k": config.d_k,
            "batch": batch,
            "tokens": config.block_size,
            "measured_bytes": cache.nbytes(),
            "formula_bytes": cache_bytes(config, batch, config.block_size),
            "parameters": model.num_parameters(),
        }
    return {"schema": SCHEMA, **_environment(), "arms": arms}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring); a user's mistake exits 2 with one line."""
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.measure.compare_blocks", description=__doc__.splitlines()[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train one arm with the baby budget")
    train.add_argument("--arm", required=True, choices=ARMS)
    train.add_argument("--seed", type=int, default=1)
    train.add_argument("--max-iters", type=int, default=None, help="shorter run (testing)")
    timing = commands.add_parser("timing", help="classic vs modern time per step, interleaved")
    timing.add_argument("--rounds", type=int, default=7)
    timing.add_argument("--steps", type=int, default=10)
    commands.add_parser("memory", help="KV-cache bytes for each arm, measured")
    for sub in (train, timing, commands.choices["memory"]):
        sub.add_argument("--threads", type=int, default=1, help="torch.set_num_threads(N)")
        sub.add_argument("--out", type=Path, default=None, help="where to write the JSON")
    args = parser.parse_args(argv)
    for name in ("threads", "seed", "max_iters", "rounds", "steps"):
        value = getattr(args, name, None)
        least = 0 if name == "seed" else 1
        if value is not None and value < least:
            parser.error(f"--{name.replace('_', '-')} must be at least {least}, got {value}")
    check_out_path(parser, args.out)
    check_rehearsal_switch(parser)
    return args


def main(argv: list[str] | None = None) -> Path:
    """Run one sub-command and write its record; return the path written."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.command == "train":
        record = run_record(args.arm, args.seed, args.max_iters)
        default = RUNS_DIR / f"blocks-{args.arm}-seed{args.seed}.json"
    elif args.command == "timing":
        record, default = timing_record(args.rounds, args.steps), RUNS_DIR / "blocks-timing.json"
    else:
        record, default = memory_record(), RUNS_DIR / "blocks-kv-memory.json"
    return _write(record, args.out or default)


if __name__ == "__main__":
    main()
