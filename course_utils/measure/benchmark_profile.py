"""Where one training step spends its time: a ``torch.profiler`` table of a preset's step.

Usage: ``python -m course_utils.measure.benchmark_profile --config gpu [--device auto] [--rows 25]``
(``make gpu-check`` runs it on CUDA).

The step is the course's own (:func:`course_utils.training.training_step`: forward under the
run's autocast, backward with the fp16 run's gradient scaler, clipping, AdamW) on the fast
path, after a few untimed warm-up steps (allocator, kernel selection). The table lists the
operators by total device time (CUDA) or CPU time, self and with children, and their call
counts. With ``COURSE_REHEARSE`` on, the CPU profiles the rehearsed (shrunk) step.
"""

from __future__ import annotations

import argparse

import torch

from course_utils.checks import check_int


def profile_training_step(
    device: torch.device | str = "auto", config: str = "gpu", warmup_steps: int = 3, rows: int = 25
) -> str:
    """Profile one training step of preset ``config`` on ``device``; return the table.

    Args:
        device: ``"auto"``, ``"cpu"``, ``"cuda"``... (:func:`course_utils.lab.device.get_device`).
        config: a preset name (:data:`course_utils.config.PRESETS`).
        warmup_steps: untimed steps before the profiled one, >= 0.
        rows: rows of the table (the most expensive operators), >= 1.

    Returns:
        The text of ``torch.profiler``'s ``key_averages().table(...)``, preceded by one line
        naming the preset, device, precision and batch shape.

    Raises:
        ValueError: an unknown preset or device; ``warmup_steps < 0`` or ``rows < 1``.
    """
    from torch.profiler import ProfilerActivity, profile

    from course_utils.config import get_config
    from course_utils.lab.device import resolve_device
    from course_utils.lab.rehearsal import rehearsal_overrides
    from course_utils.measure.benchmark import _benchmark_data
    from course_utils.model import TinyDecoder
    from course_utils.training import DeviceBatches, make_optimizer, training_step
    from course_utils.training.precision import device_precision, make_grad_scaler

    warmup_steps = check_int(warmup_steps, "warmup_steps", minimum=0)
    rows = check_int(rows, "rows", minimum=1)
    device = resolve_device(device, "device")
    data, vocab_size, _ = _benchmark_data()
    model_config, train_config = get_config(config, vocab_size, **rehearsal_overrides())
    torch.manual_seed(0)
    model = TinyDecoder(model_config).to(device).train()
    optimizer = make_optimizer(model, train_config)
    precision = device_precision(device, train_config)
    scaler = make_grad_scaler(device, precision)
    batches = DeviceBatches(
        data, model_config.block_size, train_config.batch_size, device, seed=train_config.seed
    )

    def step() -> None:
        x, y = batches.sample()
        training_step(model, optimizer, x, y, train_config.learning_rate, train_config, device,
                      scaler=scaler)  # fmt: skip

    for _ in range(warmup_steps):
        step()
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    if cuda:
        torch.cuda.synchronize(device)
    with profile(activities=activities) as profiler:
        step()
        if cuda:
            torch.cuda.synchronize(device)
    sort_by = "cuda_time_total" if cuda else "cpu_time_total"
    header = (
        f"one training step: preset {config!r} on {device} ({precision}), "
        f"B={train_config.batch_size}, T={model_config.block_size}, "
        f"{model.num_parameters():,} parameters; sorted by {sort_by}"
    )
    return header + "\n" + profiler.key_averages().table(sort_by=sort_by, row_limit=rows)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.measure.benchmark_profile", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--config", default="gpu", help="a preset: baby, cpu or gpu")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--rows", type=int, default=25, help="rows of the table")
    args = parser.parse_args(argv)
    from course_utils.config import get_config
    from course_utils.lab.device import get_device

    try:  # a user's mistake: one line, exit status 2; a failure of the run itself: traceback
        get_config(args.config, 1)
        get_device(args.device)
        check_int(args.warmup, "--warmup", minimum=0)
        check_int(args.rows, "--rows", minimum=1)
    except (ValueError, TypeError, RuntimeError) as error:
        parser.exit(2, f"{parser.prog}: error: {' '.join(str(error).split())}\n")
    table = profile_training_step(args.device, args.config, args.warmup, args.rows)
    print(table)
    return table


if __name__ == "__main__":
    main()
