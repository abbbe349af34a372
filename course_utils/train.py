"""Command-line training of the tiny decoder (or today's decoder) on Shakespeare, by character.

Usage: ``python -m course_utils.train --config baby`` (or ``make train CONFIG=baby``).
``--model modern`` trains :class:`~course_utils.modern_model.ModernDecoder` (Llama's recipe:
RMSNorm, SwiGLU, no biases, untied head; ``--set n_kv_heads=2`` for grouped-query attention,
``--set qk_norm=true`` for Qwen3's QK-norm) at the preset's sizes instead of TinyDecoder;
its checkpoint records the kind, and ``--resume`` refuses one of the other kind.

Several processes (PyTorch DDP): ``torchrun --standalone --nproc_per_node=N -m
course_utils.train --config gpu`` (or ``make train CONFIG=gpu NPROC=N``): one process per
GPU (NCCL), or N CPU processes (gloo). Each process trains on the preset's ``batch_size``
windows (N times the tokens per step); gradients are averaged over processes; only rank 0
prints and writes the checkpoint.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from course_utils.config import POSITIONAL_KINDS, PRESETS, ModelConfig, TrainConfig
from course_utils.data import load_shakespeare, train_val_split
from course_utils.lab.device import describe_device, get_device, seed_everything
from course_utils.lab.language import tr
from course_utils.lab.rehearsal import describe_rehearsal, rehearsal_overrides
from course_utils.measure.cli import check_non_negative, check_out_path
from course_utils.model import TinyDecoder
from course_utils.modern_model import ModernDecoder
from course_utils.tokenization import CharTokenizer
from course_utils.training import (
    History,
    close_distributed,
    init_distributed,
    load_checkpoint,
    save_checkpoint,
    train,
)
from course_utils.training.model_kinds import MODEL_KINDS, build_decoder, preset_config
from course_utils.training.precision import describe_precision, device_precision

# The options that override a preset's field of the same name, where a command has them
# (python -m course_utils.measure.record has all of them; this command --max-iters and
# --positional).
PRESET_OPTIONS = ("seed", "positional", "max_iters", "eval_iters", "eval_interval")


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose own errors (an invalid choice, a non-integer ``--max-iters``)
    are one line, ``PROG: error: MESSAGE``, exit status 2, as the course's checks print them
    (argparse would print the usage first); ``--help`` still shows the usage."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line's options (``--help`` lists them), checked: a user's mistake (an
    unknown preset or field, a malformed ``--set``, ``--max-iters 0``, an unknown device)
    prints one line, argparse style, and exits with status 2 (:func:`check_command`)."""
    parser = OneLineParser(prog="python -m course_utils.train", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="baby", help=f"one of {sorted(PRESETS)}")
    parser.add_argument(
        "--model",
        choices=MODEL_KINDS,
        default="tiny",
        help="tiny: TinyDecoder (GPT-2's recipe); modern: ModernDecoder (Llama's recipe, at "
        "the preset's sizes; its fields via --set, e.g. --set n_kv_heads=2)",
    )
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    parser.add_argument("--max-iters", type=int, default=None, help="override the preset")
    parser.add_argument(
        "--positional", choices=POSITIONAL_KINDS, default=None, help="override the preset"
    )
    parser.add_argument(
        "--checkpoint",
        default=None,
        help="where to save (default: checkpoints/CONFIG.pt, checkpoints/CONFIG-modern.pt "
        "with --model modern)",
    )
    parser.add_argument("--resume", action="store_true", help="continue from the checkpoint")
    parser.add_argument(
        "--export",
        default=None,
        help="also write the trained weights alone (no optimizer state) there, e.g. "
        "assets/checkpoints/baby.pt",
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="run the model through torch.compile (slow first steps; faster on a GPU)",
    )
    parser.add_argument("--samples", type=int, default=300, help="characters to sample at the end")
    add_set_option(parser)
    args = parser.parse_args(argv)
    check_command(parser, args)
    _check_outputs(parser, args)
    return args


def checkpoint_path(args: argparse.Namespace) -> str:
    """``--checkpoint``, or ``checkpoints/CONFIG.pt`` (``CONFIG-modern.pt`` for a modern model)."""
    suffix = "-modern" if args.model == "modern" else ""
    return args.checkpoint or f"checkpoints/{args.config}{suffix}.pt"


def _check_outputs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Exit 2 with one line for a negative ``--samples``, a ``--checkpoint`` or ``--export``
    that cannot be written, or a ``--resume`` whose checkpoint is missing or holds another
    model (kind or config)."""
    check_non_negative(parser, args, "samples")
    for option, path in (("--checkpoint", checkpoint_path(args)), ("--export", args.export)):
        if path is not None and Path(path).is_dir():
            parser.exit(
                2, f"{parser.prog}: error: {option} {path} is a folder; name a file in it\n"
            )
        check_out_path(parser, Path(path) if path else None, option)
    if args.resume:
        try:
            _check_resumable(args, checkpoint_path(args))
        except (OSError, ValueError, TypeError) as error:
            message = " ".join(str(error).split())
            same = (
                "; to resume, pass the --config, --model and --set options of the run that wrote it"
            )
            fix = same if isinstance(error, ValueError) else ""
            parser.exit(2, f"{parser.prog}: error: --resume: {message}{fix}\n")


def _check_resumable(args: argparse.Namespace, path: str) -> None:
    """Raise unless ``path`` is a checkpoint of ``--model``'s kind whose config is the one this
    command builds (its vocabulary size aside, which comes from the data)."""
    state = load_checkpoint(path)
    saved = state["model_config"]
    vocab_size = saved.get("vocab_size", 1) if isinstance(saved, dict) else 1
    config, _ = preset_config(args.config, vocab_size, args.model, **run_overrides(args))
    model = build_decoder(config)
    load_checkpoint(path, model)  # names another kind, or the fields that differ


def add_set_option(parser: argparse.ArgumentParser) -> None:
    """``--set FIELD=VALUE`` (repeatable): override any field of the preset's configs."""
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override any config field, e.g. --set d_model=32 (repeatable; for quick tests)",
    )


def parse_settings(settings: list[str]) -> dict:
    """``["d_model=32", "dropout=0.1"]`` -> ``{"d_model": 32, "dropout": 0.1}`` (values
    read as JSON, else kept as text).

    Raises:
        ValueError: an item without ``=`` or with nothing before it.
    """
    parsed = {}
    for setting in settings:
        key, value = _check_setting(setting)
        try:
            parsed[key] = json.loads(value)
        except json.JSONDecodeError:
            parsed[key] = value
    return parsed


def _check_setting(setting: str) -> tuple[str, str]:
    """``"FIELD=VALUE"`` as ``(FIELD, VALUE)``; ValueError without ``=`` or a field."""
    key, sep, value = setting.partition("=")
    if not sep or not key:
        raise ValueError(f"--set expects FIELD=VALUE, got {setting!r}; e.g. --set d_model=32")
    return key, value


def run_overrides(args: argparse.Namespace) -> dict:
    """The config fields the command line sets: the rehearsal's shrinking first (when
    ``COURSE_REHEARSE`` is on, :func:`course_utils.lab.rehearsal.rehearsal_overrides`), then the
    :data:`PRESET_OPTIONS` given, then ``--set``.

    Raises:
        ValueError: a malformed ``--set``; an unknown ``COURSE_REHEARSE`` value.
    """
    overrides = rehearsal_overrides()
    for name in PRESET_OPTIONS:
        if getattr(args, name, None) is not None:
            overrides[name] = getattr(args, name)
    overrides.update(parse_settings(getattr(args, "set", [])))
    return overrides


def check_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Check the preset, every override and the device before any data is loaded; on a
    mistake print ``PROG: error: MESSAGE`` (one line) and exit with status 2, as argparse
    does for its own checks.

    The configs are built once with ``vocab_size=1``: every check that does not depend on
    the corpus runs (the real vocabulary size comes later, from the data).
    """
    try:
        preset_config(args.config, 1, getattr(args, "model", "tiny"), **run_overrides(args))
        get_device(args.device)
    except (ValueError, TypeError, RuntimeError) as error:
        message = " ".join(str(error).split())  # one line
        parser.exit(2, f"{parser.prog}: error: {message}\n")


def main(argv: list[str] | None = None) -> dict | None:
    """Train a preset; return a summary on rank 0 (None on the other ranks)."""
    args = parse_args(argv)
    wall_start = time.perf_counter()
    rank, world_size, device = init_distributed(get_device(args.device))
    try:
        return _run(args, rank, world_size, device, wall_start)
    finally:
        close_distributed()


@dataclass
class CommandRun:
    """What a training command (this one, and :mod:`course_utils.measure.record`) builds from its
    options: the corpus as character ids, the preset's configs, a freshly seeded model."""

    args: argparse.Namespace
    device: torch.device
    tokenizer: CharTokenizer
    train_data: torch.Tensor
    val_data: torch.Tensor
    model_config: ModelConfig
    train_config: TrainConfig
    model: TinyDecoder | ModernDecoder

    def train(self, checkpoint_path: str | Path | None = None, on_evaluation=None) -> History:
        """:func:`course_utils.training.train` with the options ``--compile`` and, where the
        command has it, ``--resume``."""
        return train(
            self.model,
            self.train_data,
            self.val_data,
            self.train_config,
            self.device,
            checkpoint_path,
            resume=getattr(self.args, "resume", False),
            compile=self.args.compile,
            on_evaluation=on_evaluation,
        )


def prepare_run(
    args: argparse.Namespace,
    device: torch.device,
    max_chars: int | None = None,
    settings: dict | None = None,
) -> CommandRun:
    """Load Shakespeare (its first ``max_chars`` characters), split it 90/10, build the preset
    ``args.config`` with :func:`run_overrides` (rehearsal, options, ``--set``) and
    ``settings`` (any other fields), seed, and build the model on ``device``: a TinyDecoder,
    or a ModernDecoder with ``args.model == "modern"``.

    Raises:
        ValueError: an unknown preset, kind or field, or a bad value (see
            :func:`~course_utils.training.model_kinds.preset_config`).
    """
    text = load_shakespeare(max_chars)
    tokenizer = CharTokenizer.from_text(text)
    data = tokenizer.encode_tensor(text)
    train_data, val_data = train_val_split(data, 0.1)
    overrides = run_overrides(args)
    overrides.update(settings or {})
    kind = getattr(args, "model", "tiny")  # commands without --model train a TinyDecoder
    model_config, train_config = preset_config(args.config, tokenizer.vocab_size, kind, **overrides)
    seed_everything(train_config.seed)  # the same initial weights on every rank
    model = build_decoder(model_config).to(device)
    return CommandRun(
        args, device, tokenizer, train_data, val_data, model_config, train_config, model
    )


def _run(
    args: argparse.Namespace,
    rank: int,
    world_size: int,
    device: torch.device,
    wall_start: float,
) -> dict | None:
    """Train on every rank; on rank 0 also report, export, sample and summarise."""
    run = prepare_run(args, device)
    if rank == 0:
        _print_setup(run, world_size)
    checkpoint = checkpoint_path(args)
    history = run.train(checkpoint)
    if rank != 0:
        return None
    for step, train_loss, val_loss in zip(history.step, history.train_loss, history.val_loss):
        print(
            tr("step {step:5d}: train {train:.4f}, val {val:.4f}").format(
                step=step, train=train_loss, val=val_loss
            )
        )
    if args.export:
        save_checkpoint(args.export, run.model, None, history.step[-1], run.train_config, history)
        print(tr("weights exported to {path}").format(path=args.export))
    _print_sample(run, args.samples)
    summary = {
        "config": args.config,
        "model": args.model,
        "processes": world_size,
        "final_val_loss": history.val_loss[-1],
        "train_seconds": history.seconds,
        "wall_seconds": time.perf_counter() - wall_start,
        "tokens_per_second": history.tokens_per_second,
    }
    print(
        tr(
            "final val loss {loss:.4f} nats/char; training {train_seconds:.1f} s "
            "({tokens_per_second:,.0f} tokens/s), wall {wall_seconds:.1f} s; "
            "checkpoint {checkpoint}"
        ).format(
            loss=summary["final_val_loss"],
            train_seconds=summary["train_seconds"],
            tokens_per_second=summary["tokens_per_second"],
            wall_seconds=summary["wall_seconds"],
            checkpoint=checkpoint,
        )
    )
    return summary


def _print_setup(run: CommandRun, world_size: int) -> None:
    """The preset, the device, the model's size, the data and the precision."""
    print(
        tr("config {config}, {model}: {model_config}").format(
            config=run.args.config, model=type(run.model).__name__, model_config=run.model_config
        )
    )
    processes = tr("; {count} processes (DDP)").format(count=world_size) if world_size > 1 else ""
    print(
        tr(
            "device {device}{processes}; {parameters:,} parameters; {train:,} train / {val:,} "
            "val characters"
        ).format(
            device=describe_device(run.device),
            processes=processes,
            parameters=run.model.num_parameters(),
            train=len(run.train_data),
            val=len(run.val_data),
        )
    )
    print(describe_precision(device_precision(run.device, run.train_config), run.device))
    if describe_rehearsal():
        print(describe_rehearsal())


def _print_sample(run: CommandRun, characters: int) -> None:
    """Text sampled after a newline (seed 0, temperature 0.8, top-k 20)."""
    prompt = torch.tensor([run.tokenizer.encode("\n")], device=run.device)
    generator = torch.Generator(device=run.device).manual_seed(0)
    sample = run.model.generate(prompt, characters, temperature=0.8, top_k=20, generator=generator)
    text = run.tokenizer.decode(sample[0].tolist())
    print(tr("--- sample ---") + "\n" + text + "\n--------------")


if __name__ == "__main__":
    main()
