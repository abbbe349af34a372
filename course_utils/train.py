"""Command-line training of the tiny decoder on Shakespeare, character level.

Usage: ``python -m course_utils.train --config baby`` (or ``make train CONFIG=baby``).

Several processes (PyTorch DDP): ``torchrun --standalone --nproc_per_node=N -m
course_utils.train --config gpu`` (or ``make train CONFIG=gpu NPROC=N``): one process per
GPU (NCCL), or N CPU processes (gloo). Each process trains on the preset's ``batch_size``
windows (N times the tokens per step); gradients are averaged over processes; only rank 0
prints and writes the checkpoint.
"""

from __future__ import annotations

import argparse
import time

import torch

from course_utils.config import POSITIONAL_KINDS, PRESETS, get_config
from course_utils.data import load_shakespeare, train_val_split
from course_utils.device import describe_device, get_device, seed_everything
from course_utils.model import TinyDecoder
from course_utils.tokenization import CharTokenizer
from course_utils.training import (
    close_distributed,
    init_distributed,
    save_checkpoint,
    train,
)
from course_utils.training.precision import describe_precision, device_precision


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line's options (``--help`` lists them)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="baby", help=f"one of {sorted(PRESETS)}")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    parser.add_argument("--max-iters", type=int, default=None, help="override the preset")
    parser.add_argument(
        "--positional", choices=POSITIONAL_KINDS, default=None, help="override the preset"
    )
    parser.add_argument(
        "--checkpoint", default=None, help="where to save (default: checkpoints/CONFIG.pt)"
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
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict | None:
    """Train a preset; return a summary on rank 0 (None on the other ranks)."""
    args = parse_args(argv)
    wall_start = time.perf_counter()
    rank, world_size, device = init_distributed(get_device(args.device))
    try:
        return _run(args, rank, world_size, device, wall_start)
    finally:
        close_distributed()


def _run(
    args: argparse.Namespace,
    rank: int,
    world_size: int,
    device: torch.device,
    wall_start: float,
) -> dict | None:
    main_process = rank == 0
    text = load_shakespeare()
    tokenizer = CharTokenizer.from_text(text)
    data = torch.tensor(tokenizer.encode(text), dtype=torch.long)
    train_data, val_data = train_val_split(data, 0.1)
    overrides = {"max_iters": args.max_iters, "positional": args.positional}
    overrides = {key: value for key, value in overrides.items() if value is not None}
    model_config, train_config = get_config(args.config, tokenizer.vocab_size, **overrides)
    seed_everything(train_config.seed)  # the same initial weights on every rank
    model = TinyDecoder(model_config).to(device)
    if main_process:
        print(f"config {args.config}: {model_config}")
        processes = f"; {world_size} processes (DDP)" if world_size > 1 else ""
        print(
            f"device {describe_device(device)}{processes}; {model.num_parameters():,} "
            f"parameters; {len(train_data):,} train / {len(val_data):,} val characters"
        )
        print(describe_precision(device_precision(device, train_config), device))
    checkpoint = args.checkpoint or f"checkpoints/{args.config}.pt"
    history = train(
        model,
        train_data,
        val_data,
        train_config,
        device,
        checkpoint,
        resume=args.resume,
        compile=args.compile,
    )
    if not main_process:
        return None
    for step, train_loss, val_loss in zip(history.step, history.train_loss, history.val_loss):
        print(f"step {step:5d}: train {train_loss:.4f}, val {val_loss:.4f}")
    if args.export:
        save_checkpoint(args.export, model, None, history.step[-1], train_config, history)
        print(f"weights exported to {args.export}")
    prompt = torch.tensor([tokenizer.encode("\n")], device=device)
    generator = torch.Generator(device=device).manual_seed(0)
    sample = model.generate(prompt, args.samples, temperature=0.8, top_k=20, generator=generator)
    print("--- sample ---\n" + tokenizer.decode(sample[0].tolist()) + "\n--------------")
    summary = {
        "config": args.config,
        "processes": world_size,
        "final_val_loss": history.val_loss[-1],
        "train_seconds": history.seconds,
        "wall_seconds": time.perf_counter() - wall_start,
        "tokens_per_second": history.tokens_per_second,
    }
    print(
        f"final val loss {summary['final_val_loss']:.4f} nats/char; "
        f"training {summary['train_seconds']:.1f} s "
        f"({summary['tokens_per_second']:,.0f} tokens/s), "
        f"wall {summary['wall_seconds']:.1f} s; checkpoint {checkpoint}"
    )
    return summary


if __name__ == "__main__":
    main()
