"""The text table of :func:`course_utils.measure.benchmark.benchmark_training`'s result."""

from __future__ import annotations


def _mebibytes(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 2**20:,.0f} MiB"


def benchmark_table(results: dict) -> str:
    """The result of :func:`benchmark_training` (or its JSON file, loaded) as a text table.

    One row per variant: training tokens/s, ms per step, speed relative to the first row,
    peak memory, MFU (on a GPU whose peak is known) and the last loss; the lines around
    it say what was measured and how. A variant that failed says so instead of numbers.
    """
    gpu = results["device"].startswith("cuda")
    header = (
        f"{'path':<9} {'dtype':<9} {'mode':<8} {'tokens/s':>10} {'ms/step':>8} "
        f"{'vs row 1':>8}  {'peak memory':>20}  {'MFU':>7}  {'last loss':>9}"
    )
    lines = [*_setup_lines(results), "", header, "-" * len(header)]
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
        rounds = f" x {results['repeats']} rounds (variants take turns; median shown)"
    if results.get("repeats_requested", results["repeats"]) > results["repeats"]:
        rounds += (
            f" (time budget spent after {results['repeats']} of "
            f"{results['repeats_requested']} rounds)"
        )
    return [
        f"Training step benchmark: preset {results['config']!r} "
        f"({config['n_layers']} layers, d_model {config['d_model']}, {config['n_heads']} heads, "
        f"B={results['batch_size']}, T={config['block_size']}: "
        f"{results['tokens_per_step']:,} tokens/step; data: {results['data']})",
        f"device {results['device']}: {results['device_name']}; {results['threads']} CPU "
        f"thread{'s' if results['threads'] != 1 else ''}; torch {results['torch']}; "
        f"{results['date']}",
        f"each row: {results['warmup_steps']} warm-up steps excluded, then "
        f"{results['timed_steps']} timed steps" + rounds,
    ]


def _row_line(row: dict, first: float | None, gpu: bool) -> str:
    """One variant's line of the table (``first``: the tokens/s that is 1.00x)."""
    label = f"{row['path']:<9} {shown_dtype(row):<9} {'compile' if row['compiled'] else 'eager':<8}"
    if not row["tokens_per_second"]:
        return f"{label} failed: {row.get('error') or 'not measured'}"
    memory = _mebibytes(row["peak_memory_bytes"])
    if row.get("memory_growth_bytes") is not None:
        memory += f" (+{max(0, row['memory_growth_bytes']) / 2**20:,.0f})"
    if row["mfu"] is not None:
        mfu = f"{100 * row['mfu']:.1f} %"
    else:
        mfu = "unknown" if gpu else "n/a"
    return (
        f"{label} {row['tokens_per_second']:>10,.0f} {row['ms_per_step']:>8.1f} "
        f"{row['tokens_per_second'] / first:>7.2f}x  {memory:>20}  {mfu:>7}  "
        f"{row['final_loss']:>9.4f}"
    )


def _legend_lines(results: dict, gpu: bool) -> list[str]:
    """What the paths are, what the last loss and the memory column mean, how MFU is
    computed."""
    return [
        "teaching = explicit attention with weights kept + LayerNorm formula; "
        "fast = one fused Q/K/V product + F.scaled_dot_product_attention(is_causal) + fused "
        "layer_norm; peer = the same shape from nn.TransformerEncoderLayer(norm_first=True, "
        "batch_first=True) with a causal mask, the same embedding and tied head (learned "
        "positions where the preset has RoPE; PyTorch's own initialisation)"
        + ("; float32 uses TF32 matrix products, bfloat16 = autocast" if gpu else ""),
        "last loss: of the last timed step (same seed and batches in every row; the peer "
        "starts from other initial weights)",
        f"memory: {results['memory_kind']}",
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
        lines.append(f"speed ratios ({dtype}, {mode}): " + "; ".join(parts))
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
    peak = results["peak_flops"]
    return (
        f"MFU = tokens/s x FLOPs/token / peak; FLOPs/token = 6N + 12·L·T·d = 6 x {n:,} + "
        f"12 x {layers} x {block} x {width} = {flops:,} (N = non-embedding parameters: all "
        "but the tied token table and any learned position table) / peak "
        + (
            f"{peak / 1e12:,.0f} TFLOP/s ({results['peak_flops_source']} bf16 dense)"
            if peak
            else f"({results['peak_flops_source']})"
        )
    )
