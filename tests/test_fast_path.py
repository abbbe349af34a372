"""The fast training path: same function as the teaching path, batches made on the device,
no read-back per step, fused AdamW, the compile flag, and the benchmark's arithmetic."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from script_loader import load_script

from course_utils import training
from course_utils.config import ModelConfig, TrainConfig, get_config
from course_utils.data import get_batch, train_val_split
from course_utils.layers import LayerNorm
from course_utils.measure import benchmark
from course_utils.measure.benchmark import (
    benchmark_table,
    flops_per_token,
    non_embedding_parameters,
    peak_bf16_flops,
)
from course_utils.model import TinyDecoder
from course_utils.train import parse_args
from course_utils.training import (
    DeviceBatches,
    make_optimizer,
    set_explicit_layer_norm,
    train,
)

BENCHMARK_SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "train_throughput.py"


def baby_model(positional: str = "rope", seed: int = 0) -> TinyDecoder:
    """The `baby` preset's model (what `make train` and the CPU benchmark use), V = 84."""
    model_config, _ = get_config("baby", 84, positional=positional)
    torch.manual_seed(seed)
    return TinyDecoder(model_config)


def tiny_model(seed: int = 0, **changes) -> TinyDecoder:
    settings = dict(vocab_size=20, block_size=8, d_model=24, n_heads=3, n_layers=2)
    torch.manual_seed(seed)
    return TinyDecoder(ModelConfig(**{**settings, **changes}))


@pytest.fixture
def random_splits() -> tuple[torch.Tensor, torch.Tensor]:
    stream = torch.randint(20, (2_000,), generator=torch.Generator().manual_seed(0))
    return train_val_split(stream, 0.1)


def teaching_and_fast(model: TinyDecoder, ids: torch.Tensor, targets: torch.Tensor):
    """(logits, loss, grads) of the fast path, then of the teaching path."""
    results = []
    for teaching in (False, True):
        set_explicit_layer_norm(model, teaching)
        model.zero_grad(set_to_none=True)
        logits, loss = model(ids, targets, need_weights=teaching)
        loss.backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters()}
        results.append((logits.detach(), loss.detach(), grads))
    set_explicit_layer_norm(model, False)
    return results


@pytest.mark.parametrize("positional", ["rope", "sinusoidal", "learned"])
def test_fast_and_teaching_paths_give_the_same_logits(positional):
    """fp32 on the CPU: F.scaled_dot_product_attention(is_causal) + F.layer_norm against the
    explicit softmax(QK^T/sqrt(d_k))V with a causal mask + the LayerNorm formula, at 1e-5.
    The loss and every gradient agree too, so training follows the same path."""
    model = baby_model(positional)
    with torch.no_grad():  # trained-looking weights: larger than the initial ones
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    ids = torch.randint(84, (3, 64), generator=torch.Generator().manual_seed(1))
    targets = torch.randint(84, (3, 64), generator=torch.Generator().manual_seed(2))
    (fast, fast_loss, fast_grads), (teach, teach_loss, teach_grads) = teaching_and_fast(
        model, ids, targets
    )
    assert fast.dtype == torch.float32 and fast.shape == (3, 64, 84)
    torch.testing.assert_close(teach, fast, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(teach_loss, fast_loss, rtol=1e-5, atol=1e-5)
    for name, grad in fast_grads.items():
        torch.testing.assert_close(teach_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)
    # The teaching path really ran: weights (B, h, T, T) kept, causal, rows summing to 1.
    weights = model.blocks[0].attention.attention_weights
    assert weights.shape == (3, 4, 64, 64)
    assert torch.all(weights.triu(diagonal=1) == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 64))


def test_the_path_comparison_can_fail():
    """A 1e-3 change to one weight (of the tied LM head) is far outside that tolerance."""
    model = baby_model()
    ids = torch.randint(84, (2, 64), generator=torch.Generator().manual_seed(1))
    fast = model(ids)[0]
    with torch.no_grad():
        model.lm_head.weight[5, 0] += 1e-3
    teach = set_explicit_layer_norm(model, True)(ids, need_weights=True)[0]
    assert not torch.allclose(teach, fast, rtol=1e-5, atol=1e-5)


def test_set_explicit_layer_norm_switches_every_layer_norm():
    model = baby_model()
    norms = [m for m in model.modules() if isinstance(m, LayerNorm)]
    assert len(norms) == 2 * 4 + 1
    assert set_explicit_layer_norm(model, True) is model
    assert all(m.explicit for m in norms)
    set_explicit_layer_norm(model, False)
    assert not any(m.explicit for m in norms)


def test_device_batches_on_the_cpu_are_get_batch_with_the_same_seed():
    """Reproducible: the same windows as course_utils.data.get_batch, step after step."""
    data = torch.randint(50, (1_000,), generator=torch.Generator().manual_seed(0))
    batches = DeviceBatches(data, block_size=16, batch_size=5, device="cpu", seed=7)
    reference = torch.Generator().manual_seed(7)
    for _ in range(3):
        x, y = batches.sample()
        x_ref, y_ref = get_batch(data, 16, 5, reference)
        assert torch.equal(x, x_ref) and torch.equal(y, y_ref)
        assert x.shape == y.shape == (5, 16) and x.dtype == torch.long
        assert torch.equal(x[:, 1:], y[:, :-1])  # the target is the next token
    assert batches.generator.device.type == "cpu"


def test_ranks_split_one_global_batch():
    """Each of 3 ranks gets its slice; together they are the 1-process batch of 3 * B."""
    data = torch.arange(500)
    whole = DeviceBatches(data, 8, 6, seed=1).sample()
    parts = [DeviceBatches(data, 8, 2, seed=1, rank=r, world_size=3).sample() for r in range(3)]
    assert torch.equal(torch.cat([x for x, _ in parts]), whole[0])
    assert torch.equal(torch.cat([y for _, y in parts]), whole[1])


def test_device_batches_reject_bad_streams():
    with pytest.raises(ValueError, match="need more than block_size=8"):
        DeviceBatches(torch.arange(8), 8, 2)
    with pytest.raises(ValueError, match="1-D"):
        DeviceBatches(torch.zeros(4, 20, dtype=torch.long), 8, 2)
    with pytest.raises(TypeError, match="integer token ids"):
        DeviceBatches(torch.rand(100), 8, 2)
    with pytest.raises(ValueError, match="rank must be in"):
        DeviceBatches(torch.arange(100), 8, 2, rank=2, world_size=2)


def test_train_rejects_ids_outside_the_vocabulary_before_training(random_splits):
    train_data, val_data = random_splits
    with pytest.raises(ValueError, match=r"vocab_size=20"):
        train(tiny_model(), train_data + 20, val_data, TrainConfig(batch_size=2, max_iters=2))


def _count_read_backs(monkeypatch) -> dict[str, int]:
    """Count every tensor -> Python read-back (each one waits for the device on a GPU)."""
    counts: dict[str, int] = {}
    for name in ("item", "tolist", "cpu", "numpy", "__int__", "__float__", "__bool__"):
        original = getattr(torch.Tensor, name)

        def counting(self, *args, _original=original, _name=name, **kwargs):
            counts[_name] = counts.get(_name, 0) + 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counting)
    return counts


def test_the_loop_reads_back_only_at_evaluation(monkeypatch, random_splits):
    """Read-backs do not grow with the number of steps: 4 steps and 12 steps, each with one
    evaluation at the end, read back exactly as often (the model's own id range check is
    switched off inside the loop by embedding.trusted_token_ids)."""
    counts_by_steps = {}
    for steps in (4, 12):
        config = TrainConfig(
            batch_size=2, max_iters=steps, warmup_iters=2, eval_interval=100, eval_iters=2
        )
        model = tiny_model()
        with monkeypatch.context() as patch:
            counts = _count_read_backs(patch)
            history = train(model, *random_splits, config, progress=False)
        assert len(history.batch_loss) == steps
        counts_by_steps[steps] = counts
    assert counts_by_steps[4] == counts_by_steps[12], counts_by_steps
    assert counts_by_steps[4].get("item", 0) == 0  # no loss.item() per step any more


def test_per_step_losses_are_those_of_each_step(random_splits):
    """batch_loss, moved to the host at evaluation, equals the loss each step computed."""
    config = TrainConfig(batch_size=3, max_iters=5, warmup_iters=1, eval_interval=2, eval_iters=1)
    history = train(tiny_model(), *random_splits, config, progress=False)
    model = tiny_model()
    optimizer = make_optimizer(model, config)
    batches = DeviceBatches(random_splits[0], 8, 3, seed=config.seed)
    expected = []
    for step in range(5):
        x, y = batches.sample()
        loss = training.training_step(
            model, optimizer, x, y, training.learning_rate_at(step, config), config, "cpu"
        )
        expected.append(loss.item())
    assert history.batch_loss == expected
    assert history.step == [2, 4, 5]


def test_adamw_is_fused_on_the_cpu():
    optimizer = make_optimizer(tiny_model(), TrainConfig(batch_size=1, max_iters=1))
    assert optimizer.defaults["fused"] is True


def test_compile_flag_compiles_the_model(monkeypatch, random_splits):
    """train(compile=True) calls the model through torch.compile (stubbed here: compiling
    takes about a minute on 2 CPU cores) and still writes an unwrapped checkpoint."""
    calls = []

    def fake_compile(module, **kwargs):
        calls.append(module)
        return module

    monkeypatch.setattr(training.loop.torch, "compile", fake_compile)
    config = TrainConfig(batch_size=2, max_iters=3, warmup_iters=1, eval_interval=3, eval_iters=1)
    model = tiny_model()
    eager = train(tiny_model(), *random_splits, config, progress=False)
    compiled = train(model, *random_splits, config, progress=False, compile=True)
    assert calls == [model]
    assert compiled.batch_loss == eager.batch_loss
    assert parse_args(["--compile"]).compile and not parse_args([]).compile


def test_unwrap_model_sees_through_torch_compile():
    class Compiled(torch.nn.Module):  # what torch.compile returns keeps the model here
        def __init__(self, module):
            super().__init__()
            self._orig_mod = module

    model = tiny_model()
    assert training.unwrap_model(Compiled(Compiled(model))) is model
    assert training.unwrap_model(model) is model


@pytest.mark.parametrize(
    "name, tflops, entry",
    [
        ("NVIDIA H100 80GB HBM3", 989, "H100 SXM"),
        ("NVIDIA H100 SXM5 80GB", 989, "H100 SXM"),
        ("NVIDIA H100 PCIe", 756, "H100 PCIe"),
        ("NVIDIA H200", 989, "H200"),
        ("NVIDIA A100-SXM4-80GB", 312, "A100"),
        ("NVIDIA A100 80GB PCIe", 312, "A100"),
        ("NVIDIA H100 NVL", None, "unknown"),
        ("NVIDIA H200 NVL", None, "unknown"),
        ("NVIDIA GH200 480GB", None, "unknown"),
        ("NVIDIA GeForce RTX 4090", None, "unknown"),
        ("Tesla T4", None, "unknown"),
    ],
)
def test_peak_flops_come_from_the_table_or_are_unknown(name, tflops, entry):
    peak, source = peak_bf16_flops(name)
    assert source == entry
    assert peak == (None if tflops is None else tflops * 1e12)


def test_flops_per_token_by_hand():
    """baby: 4 blocks of (4 C^2 + 4 C attention, 8 C^2 + 5 C feed-forward, 4 C norms) + 2 C."""
    model = baby_model()
    c, layers, t = 128, 4, 64
    n = layers * (4 * c * c + 4 * c + 2 * 4 * c * c + 4 * c + c + 4 * c) + 2 * c
    assert non_embedding_parameters(model) == n == model.num_parameters() - 84 * c
    assert flops_per_token(model) == 6 * n + 12 * layers * 4 * 32 * t
    learned = baby_model("learned")  # its position table is an embedding too
    assert non_embedding_parameters(learned) == n


@pytest.mark.tooling  # a fresh process: make test-tooling (CI)
def test_benchmark_script_writes_json_and_prints_the_table(tmp_path, capsys):
    """A short CPU run of `make bench`'s script: both paths, one table, the same numbers
    in the JSON file, and the same last loss on both paths (same seed and batches)."""
    script = load_script(BENCHMARK_SCRIPT)
    out = tmp_path / "cpu.json"
    argv = ["--device", "cpu", "--warmup", "1", "--steps", "2", "--repeats", "1"]
    results = script.main([*argv, "--out", str(out)])
    printed = capsys.readouterr().out
    assert json.loads(out.read_text()) == json.loads(json.dumps(results))
    assert f"results written to {out}" in printed
    assert benchmark_table(results) in printed
    assert results["config"] == "baby" and results["timed_steps"] == 2
    rows = {row["path"]: row for row in results["rows"]}
    assert set(rows) == {"teaching", "fast", "peer"}
    for row in rows.values():
        assert row["tokens_per_second"] > 0 and row["mfu"] is None
        assert row["dtype"] == "float32" and row["compiled"] is False
    assert math.isclose(rows["teaching"]["final_loss"], rows["fast"]["final_loss"], rel_tol=1e-5)
    assert "1 warm-up steps excluded, then 2 timed steps" in printed
    assert "speed ratios (float32, eager): fast / teaching = " in printed
    assert "; fast / peer = " in printed
    assert "6 x 793,344 + 12 x 4 x 64 x 128 = 5,153,280" in printed
    assert "getrusage" in results["memory_kind"]
    assert script.results_path({"device": "cuda:0", "device_name": "NVIDIA H100 PCIe"}).name == (
        "cuda-nvidia-h100-pcie.json"
    )
    with pytest.raises(ValueError, match="CUDA only"):
        benchmark.benchmark_training("cpu", variants=(("fast", "bfloat16", False),))


def test_benchmark_table_on_a_gpu_shows_mfu_or_unknown():
    row = dict(
        path="fast",
        dtype="bfloat16",
        compiled=True,
        tokens_per_second=1e6,
        ms_per_step=16.4,
        peak_memory_bytes=3 * 2**30,
        memory_growth_bytes=None,
        mfu=0.4,
        final_loss=2.5,
    )
    results = dict(
        device="cuda:0",
        device_name="NVIDIA H100 PCIe",
        threads=16,
        torch="2.13.0",
        date="today",
        config="gpu",
        model_config=dict(n_layers=6, d_model=384, n_heads=6, block_size=256),
        batch_size=64,
        tokens_per_step=16384,
        data="Shakespeare, characters",
        flops_per_token=6 * 10**7 + 12 * 6 * 256 * 384,
        non_embedding_parameters=10**7,
        peak_flops=756e12,
        peak_flops_source="H100 PCIe",
        memory_kind="torch.cuda.max_memory_allocated",
        warmup_steps=10,
        timed_steps=50,
        repeats=1,
        rows=[row, {**row, "mfu": None}],
    )
    table = benchmark_table(results)
    assert "40.0 %" in table and "756 TFLOP/s (H100 PCIe bf16 dense)" in table
    assert "unknown" in table.splitlines()[7]
    assert "3,072 MiB" in table and "compile" in table


def test_a_variant_that_fails_is_reported_not_fatal(monkeypatch):
    """A compiler error or out-of-memory in one variant leaves the others measured."""

    def measure(variant, *args):
        if variant[0] == "teaching":
            raise RuntimeError("CUDA out of memory (pretend)")
        return 0.5, 3.0, 2**30, None

    monkeypatch.setattr(benchmark, "measure_variant", measure)
    results = benchmark.benchmark_training("cpu", timed_steps=4, repeats=2)
    teaching, fast, peer = results["rows"]
    assert teaching["tokens_per_second"] is None and "out of memory" in teaching["error"]
    assert fast["tokens_per_second"] == 4 * 768 / 0.5 and fast["error"] is None
    table = benchmark_table(results)
    assert "failed: RuntimeError: CUDA out of memory (pretend)" in table
    assert "6,144" in table and "1.00x" in table  # the first measured row is the reference
    with pytest.raises(ValueError, match="timed_steps >= 1"):
        benchmark.benchmark_training("cpu", timed_steps=0)


def test_the_time_budget_stops_further_rounds(monkeypatch):
    calls = []

    def measure(variant, *args):
        calls.append(variant)
        return 0.5, 3.0, 2**30, None

    monkeypatch.setattr(benchmark, "measure_variant", measure)
    results = benchmark.benchmark_training("cpu", timed_steps=1, repeats=3, time_budget=0)
    assert len(calls) == 3  # one round of the three variants, then the budget is spent
    assert results["repeats"] == 1 and results["repeats_requested"] == 3
    assert "time budget spent after 1 of 3 rounds" in benchmark_table(results)


# --- speed levers: one fused Q/K/V product, cached RoPE tables, no read-back with fp16 ---


def _count_linear_calls(monkeypatch) -> list[tuple]:
    """Record the weight shape of every F.linear (nn.Linear calls it too)."""
    calls = []
    original = torch.nn.functional.linear

    def counting(x, weight, bias=None):
        calls.append(tuple(weight.shape))
        return original(x, weight, bias)

    monkeypatch.setattr(torch.nn.functional, "linear", counting)
    return calls


@pytest.mark.parametrize("bias", [True, False])
def test_fast_path_projects_q_k_v_in_one_product(monkeypatch, bias):
    """Fast path: one (3C, C) product then W^O; teaching path: W^Q, W^K, W^V, W^O. Same
    output (1e-6), and the fused product reads the live weights (no stale copy)."""
    from course_utils.attention import MultiHeadAttention

    torch.manual_seed(0)
    attention = MultiHeadAttention(24, 3, bias=bias, rotary_max_len=6).eval()
    x = torch.randn(2, 6, 24)
    calls = _count_linear_calls(monkeypatch)
    fast = attention(x, is_causal=True)
    assert calls == [(72, 24), (24, 24)]
    calls.clear()
    teaching = attention(x, is_causal=True, need_weights=True)
    assert calls == [(24, 24)] * 4
    torch.testing.assert_close(fast, teaching, rtol=1e-6, atol=1e-6)
    with torch.no_grad():
        attention.w_k.weight.mul_(2.0)  # an in-place change, as an optimizer step makes
    torch.testing.assert_close(
        attention(x, is_causal=True), attention(x, is_causal=True, need_weights=True)
    )
    assert not torch.allclose(attention(x, is_causal=True), fast)


def test_fused_path_trains_the_three_weight_tensors():
    from course_utils.attention import MultiHeadAttention

    attention = MultiHeadAttention(24, 3)
    attention(torch.randn(2, 6, 24), is_causal=True).square().sum().backward()
    for layer in (attention.w_q, attention.w_k, attention.w_v):
        assert layer.weight.grad is not None and layer.weight.grad.abs().sum() > 0
        assert layer.bias.grad is not None
    names = [name for name, _ in attention.named_parameters()]
    assert "w_q.weight" in names and not any("qkv" in name for name in names)  # same state_dict


def test_rope_tables_are_built_once_per_device_and_dtype(monkeypatch):
    from course_utils.rotary import RotaryEmbedding, apply_rotary_embedding

    rope = RotaryEmbedding(8, 16)
    built = []
    original = torch.complex
    monkeypatch.setattr(torch, "complex", lambda *a: built.append(1) or original(*a))
    x = torch.randn(2, 3, 16, 8)
    first = rope(x)
    for _ in range(3):
        rope(x[..., :5, :], offset=4)
    assert len(built) == 1  # one table, reused by every later call
    torch.testing.assert_close(first, apply_rotary_embedding(x), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(first[..., 4:9, :], rope(x[..., 4:9, :], offset=4))
    rope.double()  # moving or casting the module rebuilds the tables
    assert rope._rotations == {}
    assert rope(x.double()).dtype == torch.float64 and len(built) == 2


def test_an_fp16_run_reads_back_only_at_evaluation(monkeypatch, random_splits):
    """With float16 autocast and its GradScaler (fused AdamW takes the scale and the inf flag
    as tensors) the loop still never waits per step. A GPU would check this with
    torch.cuda.set_sync_debug_mode("error"), which exists for CUDA only."""
    counts_by_steps = {}
    for steps in (4, 12):
        config = TrainConfig(
            batch_size=2,
            max_iters=steps,
            warmup_iters=2,
            eval_interval=100,
            eval_iters=2,
            autocast_dtype="float16",
        )
        with monkeypatch.context() as patch:
            counts = _count_read_backs(patch)
            train(tiny_model(), *random_splits, config, progress=False)
        counts_by_steps[steps] = counts
    assert counts_by_steps[4] == counts_by_steps[12], counts_by_steps
