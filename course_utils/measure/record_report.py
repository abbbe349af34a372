"""Reading recorded runs (:mod:`course_utils.measure.record`) for notebook 12: the record of a
preset and device kind, the margin a live run may differ by (measured over seeds), a T4 time
estimate from a record's FLOPs, and a record's loss curve beside the live run."""

from __future__ import annotations

import math
import statistics

from course_utils.lab.language import N_, tr, translated

#: How many pooled seed standard deviations the live run may differ from its record by.
MARGIN_SIGMAS = 3


def seed_spread(groups: dict[str, list[dict]]) -> tuple[float, int]:
    """The pooled sample standard deviation of the final validation loss over seeds.

    Each group holds records of one setting that differ only in their seed (e.g. the
    positional records: ``{"rope": [3 runs], "sinusoidal": [3 runs]}``); the variances are
    pooled: ``sqrt(sum_g (n_g - 1) s_g^2 / sum_g (n_g - 1))``.

    Returns:
        ``(pooled standard deviation in nats per token, degrees of freedom)``.

    Raises:
        ValueError: fewer than two runs in every group (no spread can be measured).
    """
    squares, dof = 0.0, 0
    for runs in groups.values():
        losses = [run["final"]["val_loss"] for run in runs]
        if len(losses) > 1:
            squares += (len(losses) - 1) * statistics.variance(losses)
            dof += len(losses) - 1
    if dof == 0:
        raise ValueError(
            f"no group has two seeds ({ {k: len(v) for k, v in groups.items()} }): a spread "
            "needs at least two runs of one setting; record more seeds (`make rerecord`)"
        )
    return math.sqrt(squares / dof), dof


def record_margin(groups: dict[str, list[dict]], sigmas: float = MARGIN_SIGMAS) -> float:
    """The margin a live run's final validation loss may differ from its record's by:
    ``sigmas`` x :func:`seed_spread`, rounded up to 0.01 nats.

    Why seeds: a live run replays the record's seed, but another thread count or CPU sums in
    another order, and after a few hundred steps that rounding difference makes another
    trajectory, as a new seed does. The spread over seeds is the measured size of such
    differences; 3 sigmas leave about 0.3 % of honest runs outside (normal tails).

    Raises:
        ValueError: as :func:`seed_spread`.
    """
    spread, _ = seed_spread(groups)
    return math.ceil(100 * sigmas * spread) / 100


def own_record(
    records: dict[str, dict],
    config_name: str,
    device_type: str,
    precision: str | None = None,
    configs: tuple[dict, dict] | None = None,
) -> dict | None:
    """The record a live run is held to: preset ``config_name``, made on a device of type
    ``device_type`` (``"cpu"``, ``"cuda"``, ``"mps"``), or ``None``. A CPU run is never
    compared with a GPU record of the same preset, nor the reverse; a rehearsed record (its
    conditions name a rehearsal mode) is never chosen. Among several (a GPU's bf16 record and
    its float16-forced one), the one in the run's ``precision`` (``"bf16"``, ``"fp16"``,
    ``"fp32"``) comes first; then the first by name. With ``configs``, the live run's
    ``(asdict(model_config), asdict(train_config))``, only a record of that very run is chosen
    (not the shrunk run of the rehearsal switch, nor a 1000-step float16 record)."""
    matching = [
        record
        for record in records.values()
        if record["config_name"] == config_name
        and record["device"]["type"] == device_type
        and (record.get("conditions") or {}).get("rehearsal") in (None, "unknown")
        and (configs is None or _same_run(record, configs))
    ]
    same_precision = [record for record in matching if record.get("precision") == precision]
    return (same_precision or matching or [None])[0]


def _same_run(record: dict, configs: tuple[dict, dict]) -> bool:
    """The record's configs are ``configs``; a ModelConfig field the record lacks (added to the
    course after it was written) reads as its default, the behaviour the run had."""
    from course_utils.config import ModelConfig, with_defaults

    model, train = configs
    saved = with_defaults(record["model_config"], ModelConfig, names=model)
    return (saved, record["train_config"]) == (model, train)


# NVIDIA T4 Tensor Core GPU data sheet (2019): 65 TFLOP/s mixed precision (FP16 tensor cores
# with FP32 accumulation), 8.1 TFLOP/s FP32; no bf16 tensor cores (compute capability 7.5).
T4_PEAK_FLOPS = {"fp16": 65e12, "fp32": 8.1e12}


def t4_estimate_minutes(run: dict, mfu: float | None = None, precision: str = "fp16") -> float:
    """ESTIMATE (not a measurement) of the minutes ``run``'s training takes on a T4.

    total FLOPs / (T4 peak x MFU), where total FLOPs = training tokens x ``flops_per_token``
    (6N + 12LTd) + evaluation tokens x ``flops_per_token / 3`` (forward only), and the MFU is
    the one the record measured on its own GPU (the assumption: the T4 is used as well as
    that GPU was) unless ``mfu`` is given.

    Args:
        run: a record (:func:`load_run`).
        mfu: model FLOPs utilisation to assume, in (0, 1].
        precision: ``"fp16"`` (what the course chooses on a T4) or ``"fp32"``.

    Raises:
        ValueError: no MFU in the record (a CPU record) and none given, an MFU outside
            (0, 1], or an unknown precision.
    """
    if precision not in T4_PEAK_FLOPS:
        raise ValueError(f"precision must be one of {sorted(T4_PEAK_FLOPS)}, got {precision!r}")
    mfu = run["timing"]["mfu"] if mfu is None else mfu
    if mfu is None:
        raise ValueError(
            f"the record {run['config_name']!r} on {run['device']['name']} has no MFU (not a "
            "GPU with a known peak); pass mfu=, e.g. the one of a GPU record"
        )
    if not 0 < mfu <= 1:
        raise ValueError(f"mfu must be in (0, 1], got {mfu}")
    model, train = run["model_config"], run["train_config"]
    tokens_per_batch = train["batch_size"] * model["block_size"]
    flops = run["timing"]["flops_per_token"]
    training = train["max_iters"] * tokens_per_batch * flops
    evaluating = len(run["evaluations"]) * 2 * train["eval_iters"] * tokens_per_batch * flops / 3
    return (training + evaluating) / (T4_PEAK_FLOPS[precision] * mfu) / 60


def t4_estimate_text(records: list[dict]) -> str:
    """ESTIMATE, with its arithmetic, of what a free T4 (Colab) takes for each GPU record's
    training: its FLOPs (:func:`t4_estimate_minutes`) over the T4's float16 peak times the MFU
    of the float16 + gradient-scaler record made on the same GPU (the T4's precision; the
    record's own MFU when no such record exists). Empty when no GPU record is given. In the
    language ``course_utils`` speaks (:mod:`course_utils.lab.language`).
    """
    lines = []
    gpu = [r for r in records if r["device"]["type"] == "cuda"]
    for run in (r for r in gpu if r["precision"] != "fp16"):
        partner = next((r for r in gpu if r["precision"] == "fp16"
                        and r["device"]["name"] == run["device"]["name"]), None)  # fmt: skip
        mfu = (partner or run)["timing"]["mfu"]
        model, train = run["model_config"], run["train_config"]
        tokens = train["batch_size"] * model["block_size"]
        flops = run["timing"]["flops_per_token"]
        minutes = t4_estimate_minutes(run, mfu=mfu)
        if partner:
            source = tr("its float16 run on the {gpu}").format(gpu=run["device"]["name"])
        else:
            source = tr("the {precision} run itself on the {gpu}").format(
                precision=run["precision"], gpu=run["device"]["name"]
            )
        lines.append(
            tr(
                "ESTIMATE, not a measurement: the {preset!r} preset on a T4 takes about "
                "{minutes:.0f} min = ({steps} steps x {tokens:,} tokens x "
                "{mflops:.1f} MFLOP/token, + evaluations at a third of that per token) / "
                "(T4 float16 peak {peak:.0f} TFLOP/s x MFU "
                "{mfu:.1f} % of {source}); it assumes a T4 is used as well as that GPU was."
            ).format(
                preset=run["config_name"],
                minutes=minutes,
                steps=train["max_iters"],
                tokens=tokens,
                mflops=flops / 1e6,
                peak=T4_PEAK_FLOPS["fp16"] / 1e12,
                mfu=100 * mfu,
                source=source,
            )
        )
    return "\n".join(lines)


#: The y label of :func:`plot_run_beside` for the units the course uses (shown translated).
_Y_LABELS = {
    "token": N_("cross-entropy (nats per token)"),
    "character": N_("cross-entropy (nats per character)"),
}


def plot_run_beside(
    run: dict,
    history=None,
    bar: float | None = None,
    title: str | None = None,
    unit: str = "token",
):
    """A record's loss curve (left) beside a live :class:`History` (right), same loss axis:
    side by side, so neither curve hides the other even where they coincide. Validation is
    drawn as large open squares, train as small filled dots on top of it.

    Args:
        run: a record (:func:`load_run`), e.g. the gpu preset recorded on an H100.
        history: this machine's run, or None for the record alone.
        bar: a horizontal line at this validation loss on both panels.
        title: the figure's title (default: says which is which).
        unit: what the loss is per, in the y label (``"character"`` for a character model).

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt

    panels = 1 if history is None else 2
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4), sharey=True, squeeze=False)
    steps = [e["step"] for e in run["evaluations"]]
    left = axes[0][0]
    validation = dict(markersize=9, markerfacecolor="none", linestyle="--")
    left.plot(steps, [e["train_loss"] for e in run["evaluations"]], "o-", label=tr("train"))
    left.plot(steps, [e["val_loss"] for e in run["evaluations"]], "s", **validation,
              label=tr("validation"))  # fmt: skip
    left.set_title(
        tr("recorded: {preset!r} on {device} ({precision})").format(
            preset=run["config_name"], device=run["device"]["name"], precision=run["precision"]
        )
    )
    if history is not None:
        right = axes[0][1]
        batch_steps = range(1, len(history.batch_loss) + 1)
        right.plot(batch_steps, history.batch_loss, color="0.75", linewidth=0.8,
                   label=tr("batch"))  # fmt: skip
        right.plot(history.step, history.train_loss, "o-", label=tr("train"))
        right.plot(history.step, history.val_loss, "s", **validation, label=tr("validation"))
        right.set_title(tr("live: this machine"))
    for ax in axes[0]:
        if bar is not None:
            ax.axhline(bar, color="crimson", linestyle="--", linewidth=1,
                       label=tr("bar {bar:.3f}").format(bar=bar))  # fmt: skip
        ax.set_xlabel(tr("optimizer step"))
        ax.grid(alpha=0.3)
        ax.legend()
    y_label = _Y_LABELS.get(unit)
    left.set_ylabel(
        translated(y_label) if y_label else tr("cross-entropy (nats per {unit})").format(unit=unit)
    )
    fig.suptitle(title or tr("Recorded run beside the live run"))
    fig.tight_layout()
    return fig
