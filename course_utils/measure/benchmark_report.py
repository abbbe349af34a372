"""The text table of :func:`course_utils.measure.benchmark.benchmark_training`'s result."""

from __future__ import annotations

from course_utils.lab.language import display_width, padded, tr, translated


def _mebibytes(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 2**20:,.0f} MiB"


def benchmark_table(results: dict) -> str:
    """The result of :func:`benchmark_training` (or its JSON file, loaded) as a text table.

    One row per variant: training tokens/s, ms per step, speed relative to the first row,
    peak memory, MFU (on a GPU whose peak is known) and the last loss; the lines around
    it say what was measured and how. A variant that failed says so instead of numbers.
    Its words are in the language ``course_utils`` speaks (:mod:`course_utils.lab.language`;
    a wide character counts as two columns in the header), the names of paths, dtypes and
    modes as they are.
    """
    gpu = results["device"].startswith("cuda")
    header = (
        f"{padded(tr('path'), 9)} {padded(tr('dtype'), 9)} {padded(tr('mode'), 8)} "
        f"{padded(tr('tokens/s'), 10, True)} {padded(tr('ms/step'), 8, True)} "
        f"{padded(tr('vs row 1'), 8, True)}  {padded(tr('peak memory'), 20, True)}  "
        f"{padded('MFU', 7, True)}  {padded(tr('last loss'), 9, True)}"
    )
    lines = [*_setup_lines(results), "", header, "-" * display_width(header)]
    # Speeds are relative to the first row that was measured.
    first = next((r["tokens_per_second"] for r in results["rows"] if r["tokens_per_second"]), None)
    lines += [_row_line(row, first, gpu) for row in results["rows"]]
    lines += ["", *ratio_lines(results["rows"])]
    lines += ["", *_legend_lines(results, gpu)]
    return "\n".join(lines)


def _setup_lines(results: dict) -> list[str]:
    """What was measured: the model and batch, the machine, the steps and rounds."""
    config = results["model_config"]
    rounds = ""
    if results["repeats"] > 1:
        rounds = tr(" x {repeats} rounds (variants take turns; median shown)").format(
            repeats=results["repeats"]
        )
    if results.get("repeats_requested", results["repeats"]) > results["repeats"]:
        rounds += tr(" (time budget spent after {repeats} of {requested} rounds)").format(
            repeats=results["repeats"], requested=results["repeats_requested"]
        )
    if results["threads"] == 1:
        device = tr("device {device}: {name}; {threads} CPU thread; torch {torch}; {date}")
    else:
        device = tr("device {device}: {name}; {threads} CPU threads; torch {torch}; {date}")
    return [
        tr(
            "Training step benchmark: preset {preset!r} ({layers} layers, d_model {d_model}, "
            "{heads} heads, B={batch}, T={block}: {tokens:,} tokens/step; data: {data})"
        ).format(
            preset=results["config"],
            layers=config["n_layers"],
            d_model=config["d_model"],
            heads=config["n_heads"],
            batch=results["batch_size"],
            block=config["block_size"],
            tokens=results["tokens_per_step"],
            data=translated(results["data"]),
        ),
        device.format(
            device=results["device"],
            name=results["device_name"],
            threads=results["threads"],
            torch=results["torch"],
            date=results["date"],
        ),
        tr("each row: {warmup} warm-up steps excluded, then {timed} timed steps").format(
            warmup=results["warmup_steps"], timed=results["timed_steps"]
        )
        + rounds,
    ]


def _row_line(row: dict, first: float | None, gpu: bool) -> str:
    """One variant's line of the table (``first``: the tokens/s that is 1.00x)."""
    label = f"{row['path']:<9} {shown_dtype(row):<9} {'compile' if row['compiled'] else 'eager':<8}"
    if not row["tokens_per_second"]:
        return tr("{label} failed: {error}").format(
            label=label, error=row.get("error") or tr("not measured")
        )
    memory = _mebibytes(row["peak_memory_bytes"])
    if row.get("memory_growth_bytes") is not None:
        memory += f" (+{max(0, row['memory_growth_bytes']) / 2**20:,.0f})"
    if row["mfu"] is not None:
        mfu = f"{100 * row['mfu']:.1f} %"
    else:
        mfu = tr("unknown") if gpu else "n/a"
    return (
        f"{label} {row['tokens_per_second']:>10,.0f} {row['ms_per_step']:>8.1f} "
        f"{row['tokens_per_second'] / first:>7.2f}x  {memory:>20}  {padded(mfu, 7, True)}  "
        f"{row['final_loss']:>9.4f}"
    )


def _legend_lines(results: dict, gpu: bool) -> list[str]:
    """What the paths are, what the last loss and the memory column mean, how MFU is
    computed."""
    return [
        tr(
            "teaching = explicit attention with weights kept + LayerNorm formula; "
            "fast = one fused Q/K/V product + F.scaled_dot_product_attention(is_causal) + fused "
            "layer_norm; peer = the same shape from nn.TransformerEncoderLayer(norm_first=True, "
            "batch_first=True) with a causal mask, the same embedding and tied head (learned "
            "positions where the preset has RoPE; PyTorch's own initialisation)"
        )
        + (tr("; float32 uses TF32 matrix products, bfloat16 = autocast") if gpu else ""),
        tr(
            "last loss: of the last timed step (same seed and batches in every row; the peer "
            "starts from other initial weights)"
        ),
        tr("memory: {kind}").format(kind=translated(results["memory_kind"])),
        mfu_line(results),
    ]


def shown_dtype(row: dict) -> str:
    """The format a row ran in: its dtype request, except that a "bfloat16" request runs
    float16 (with a gradient scaler) on compute capability 7.x (``row["precision"]``)."""
    return "float16" if row.get("precision") == "fp16" else row["dtype"]


def ratio_lines(rows: list[dict]) -> list[str]:
    """``fast / teaching`` and ``fast / peer`` speed ratios for each (dtype, mode) measured."""
    lines = []
    groups = sorted({(shown_dtype(row), row["compiled"]) for row in rows})
    for dtype, compiled in groups:
        rate = {
            row["path"]: row["tokens_per_second"]
            for row in rows
            if (shown_dtype(row), row["compiled"]) == (dtype, compiled) and row["tokens_per_second"]
        }
        if "fast" not in rate:
            continue
        parts = [
            f"fast / {other} = {rate['fast'] / rate[other]:.2f}x"
            for other in ("teaching", "peer")
            if other in rate
        ]
        if not parts:
            continue
        mode = "compile" if compiled else "eager"
        lines.append(
            tr("speed ratios ({dtype}, {mode}): {ratios}").format(
                dtype=dtype, mode=mode, ratios=tr("; ").join(parts)
            )
        )
    return lines


def mfu_line(results: dict) -> str:
    """How MFU is computed, with this model's numbers written out."""
    config, n = results["model_config"], results["non_embedding_parameters"]
    layers, block, width = config["n_layers"], config["block_size"], config["d_model"]
    flops = 6 * n + 12 * layers * block * width
    if flops != results["flops_per_token"]:  # a result file from an older formula
        raise ValueError(
            f"flops_per_token {results['flops_per_token']:,} is not 6N + 12LTd = {flops:,}; "
            "re-run make bench to rewrite the result file"
        )
    peak, source = results["peak_flops"], translated(results["peak_flops_source"])
    if peak:
        peak_text = tr("peak {tflops:,.0f} TFLOP/s ({source} bf16 dense)")
    else:
        peak_text = tr("peak ({source})")
    return tr(
        "MFU = tokens/s x FLOPs/token / peak; FLOPs/token = 6N + 12·L·T·d = 6 x {n:,} + "
        "12 x {layers} x {block} x {width} = {flops:,} (N = non-embedding parameters: all "
        "but the tied token table and any learned position table) / {peak}"
    ).format(
        n=n,
        layers=layers,
        block=block,
        width=width,
        flops=flops,
        peak=peak_text.format(tflops=(peak or 0) / 1e12, source=source),
    )
