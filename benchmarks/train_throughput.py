"""Training throughput: teaching path, fast path and a PyTorch peer, one full training step.

Usage: ``make bench`` or ``python benchmarks/train_throughput.py [--device cuda]``.

It times the whole step (sample a batch, forward, backward, clip, AdamW) of a preset
(``baby`` on the CPU, ``gpu`` on CUDA) for each variant: teaching path (explicit attention
with its weights kept, LayerNorm written out), fast path (one fused Q/K/V product,
``F.scaled_dot_product_attention`` with ``is_causal``, fused LayerNorm) and a peer of the same
shape built from ``nn.TransformerEncoderLayer(norm_first=True, batch_first=True)``; on CUDA
also fp32 vs bf16 autocast and eager vs ``torch.compile``. It prints one table (tokens/s,
ms/step, the speed ratios fast / teaching and fast / peer, peak memory, MFU on a GPU whose
peak is known, with FLOPs per token = 6N + 12·L·T·d written out) and writes the same numbers
to ``benchmarks/results/<device>.json``.
The measuring is :func:`course_utils.measure.benchmark.benchmark_training`; the table is
:func:`course_utils.measure.benchmark.benchmark_table`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from course_utils.lab.device import get_device
from course_utils.lab.rehearsal import rehearsal_mode
from course_utils.measure.benchmark import (
    CUDA_BENCHMARK_VARIANTS,
    PATHS,
    benchmark_table,
    benchmark_training,
)

RESULTS = Path(__file__).resolve().parent / "results"


def results_path(results: dict) -> Path:
    """``benchmarks/results/cpu.json``, or e.g. ``cuda-nvidia-h100-80gb-hbm3.json``; a
    rehearsed run (``COURSE_REHEARSE``) goes to ``checkpoints/rehearsal/bench-<mode>.json``,
    never over a measurement."""
    mode = rehearsal_mode()
    if mode is not None and not results["device"].startswith("cuda"):
        return RESULTS.parent.parent / "checkpoints" / "rehearsal" / f"bench-{mode}.json"
    if results["device"].startswith("cuda"):
        slug = "cuda-" + re.sub(r"[^a-z0-9]+", "-", results["device_name"].lower()).strip("-")
    else:
        slug = results["device"].split(":")[0]
    return RESULTS / f"{slug}.json"


def parse_variants(parser: argparse.ArgumentParser, text: str | None) -> tuple | None:
    """``--variants`` as ``((path, dtype, compiled), ...)``; a mistake exits with one line."""
    if text is None:
        return None
    variants = []
    for item in text.split(","):
        parts = item.strip().split(":")
        if (
            len(parts) != 3
            or parts[0] not in PATHS
            or parts[1] not in ("float32", "bfloat16")
            or parts[2] not in ("eager", "compiled")
        ):
            parser.exit(
                2,
                f"{parser.prog}: error: --variants item {item!r}: expected PATH:DTYPE:MODE with "
                f"PATH one of {list(PATHS)}, DTYPE float32 or bfloat16, MODE eager or compiled\n",
            )
        variants.append((parts[0], parts[1], parts[2] == "compiled"))
    return tuple(variants)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    parser.add_argument("--config", default=None, help="preset (default: baby on CPU, gpu on CUDA)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps per variant")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per variant")
    parser.add_argument("--repeats", type=int, default=None, help="rounds (median kept)")
    parser.add_argument(
        "--time-budget",
        type=float,
        default=None,
        help="seconds after which no new round starts (default 40 on CPU, none on CUDA)",
    )
    parser.add_argument("--no-compile", action="store_true", help="CUDA: skip compiled rows")
    parser.add_argument(
        "--variants",
        default=None,
        help="only these, e.g. fast:bfloat16:compiled,teaching:float32:eager (PATH:DTYPE:MODE)",
    )
    parser.add_argument("--out", type=Path, default=None, help="JSON file to write")
    args = parser.parse_args(argv)

    variants = parse_variants(parser, args.variants)
    device = get_device(args.device)
    if args.no_compile and device.type == "cuda":
        variants = tuple(v for v in variants or CUDA_BENCHMARK_VARIANTS if not v[2])
    results = benchmark_training(
        device,
        config=args.config,
        variants=variants,
        warmup_steps=args.warmup,
        timed_steps=args.steps,
        repeats=args.repeats,
        time_budget=args.time_budget,
        log=lambda message: print(f"  measuring {message}", file=sys.stderr, flush=True),
    )
    print(benchmark_table(results))
    out = args.out or results_path(results)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nresults written to {out}")
    return results


if __name__ == "__main__":
    main()
