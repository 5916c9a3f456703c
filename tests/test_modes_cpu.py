"""Execution modes on a CPU: what runs, what is skipped with a reason, and what is measured.

Trials go through ``runner.execution.trial.run_trial`` exactly as a job runs them (composed config,
``plan_job``, the smoke timer), so every row here is a row a sweep would write.
"""

from __future__ import annotations

import shutil
import sys
from typing import Any

import pytest
import torch

from ops.base import OpContext, Workload
from runner.config.trials import TrialSpec
from runner.core.axes import CompileMode, DType, GraphMode
from runner.execution import modes

needs_compiler = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                                    reason="torch.compile on cpu needs a C++ compiler")
CPU = ("device=cpu", "timer=smoke")


@pytest.fixture(scope="module")
def run(run_one: Any) -> Any:
    def run(*overrides: str) -> dict[str, Any]:
        return run_one(*CPU, *overrides)
    return run


# ---------------------------------------------------------------------------------------
# CUDA-only modes are skipped, with the reason
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("overrides", [
    ("graph=cuda_graph",), ("graph=graphed_callable",), ("streams=2",),
    ("graph=cuda_graph", "streams=2"),
])
@pytest.mark.parametrize("op", [("op=pointwise_chain", "shape=[4]", "op.iterations=2"),
                                ("op=mlp", "shape=[4,8]")])
def test_cuda_only_modes_are_skipped_on_cpu(run: Any, op: tuple, overrides: tuple) -> None:
    row = run(*op, *overrides)
    assert row["status"] == "skipped", row["reason"]
    assert "CUDA" in row["reason"] and "cpu" in row["reason"]
    assert row.get("time_median_us") is None
    assert row["error_traceback"] is None


def test_skipped_row_keeps_its_identity(run: Any) -> None:
    row = run("op=matmul", "shape=[8,8,8]", "graph=cuda_graph")
    assert row["status"] == "skipped"
    assert (row["op"], row["graph"], row["shape"], row["device"]) == (
        "matmul", "cuda_graph", [8, 8, 8], "cpu")
    assert len(row["trial_id"]) == 16


# ---------------------------------------------------------------------------------------
# backward
# ---------------------------------------------------------------------------------------

def test_backward_matmul_counts_forward_and_backward_flops(run: Any) -> None:
    m, n, k = 8, 12, 16
    row = run("op=matmul", f"shape=[{m},{n},{k}]", "backward=true")
    assert row["status"] == "ok", row["reason"]
    # forward 2MNK, backward dA and dB 2MNK each: 3 x 2MNK (FlopCounterMode)
    assert row["flops"] == 3 * 2 * m * n * k
    assert row["tflops"] == pytest.approx(row["flops"] / (row["time_median_us"] * 1e-6) / 1e12)
    assert row["bytes_moved"] is None and row["gbps"] is None  # forward bytes do not apply
    assert row["backward"] is True
    assert row["accuracy_ok"] is True


def test_forward_matmul_flops_for_comparison(run: Any) -> None:
    row = run("op=matmul", "shape=[8,12,16]")
    assert row["status"] == "ok"
    assert row["flops"] == 2 * 8 * 12 * 16
    assert row["gbps"] is not None and row["gbps"] > 0


def test_backward_on_an_op_without_backward_is_skipped(run: Any) -> None:
    row = run("op=copy", "shape=[16]", "backward=true")
    assert row["status"] == "skipped"
    assert "backward" in row["reason"]


def test_backward_resets_grads_before_every_sample() -> None:
    """Without the reset, backward would accumulate into .grad (an extra read-modify-write
    per leaf per call, and a growing gradient)."""
    x = torch.randn(4, 4)
    workload = Workload(fn=lambda: (x * 3).sum(), bytes_moved=0, inputs=(x,),
                        supports_backward=True)
    spec = TrialSpec(op="t", target="t", shape=(4, 4), dtype=DType.fp32, device="cpu", seed=0,
                     num_threads=None, streams=1, graph=GraphMode.none,
                     compile=CompileMode.none, compile_dynamic=None, fullgraph=False,
                     backward=True)
    modes.enable_grads(workload)
    prepared = modes.prepare(spec, [workload])
    assert prepared.before_sample is not None
    prepared.fn()
    prepared.fn()
    assert torch.equal(x.grad, torch.full((4, 4), 6.0))  # accumulated twice
    prepared.before_sample()
    assert x.grad is None
    prepared.fn()
    assert torch.equal(x.grad, torch.full((4, 4), 3.0))


# ---------------------------------------------------------------------------------------
# torch.compile
# ---------------------------------------------------------------------------------------

@pytest.mark.slow
@needs_compiler
def test_compile_default_on_cpu(run: Any) -> None:
    row = run("op=pointwise_chain", "shape=[4]", "op.iterations=3", "compile=default")
    assert row["status"] == "ok", (row["reason"], row.get("error_traceback"))
    assert row["compile_time_s"] > 0
    assert row["graph_count"] >= 1
    assert row["graph_break_count"] == 0
    assert row["recompile_count"] == 0  # nothing recompiled while timing
    assert row["accuracy_ok"] is True
    assert row["compile"] == "default"


@pytest.mark.slow
@needs_compiler
def test_graph_break_is_counted(run: Any) -> None:
    row = run("op=custom", "op.target=fakes:explicit_graph_break", "shape=[4]",
              "compile=default")
    assert row["status"] == "ok", (row["reason"], row.get("error_traceback"))
    assert row["graph_break_count"] >= 1
    assert row["graph_count"] >= 2  # one graph each side of the break
    assert "graph_break" in row["graph_break_reasons"]
    assert row["accuracy_ok"] is True


@needs_compiler
@pytest.mark.parametrize(("target", "needle"), [
    ("fakes:explicit_graph_break", "graph_break"),
    ("fakes:data_dependent_branch", "data-dependent"),
])
def test_fullgraph_with_a_graph_break_is_an_error(run: Any, target: str, needle: str) -> None:
    row = run("op=custom", f"op.target={target}", "shape=[4]", "compile=default",
              "fullgraph=true")
    assert row["status"] == "error"
    assert needle in row["reason"], row["reason"]
    assert "Traceback" in row["error_traceback"]
    assert row["fullgraph"] is True


def test_compile_state_is_isolated_between_trials(run: Any) -> None:
    """An eager trial after a compiled one reports no compile columns."""
    row = run("op=matmul", "shape=[8,8,8]")
    assert row["compile_time_s"] is None
    assert "graph_count" not in row or row["graph_count"] is None


# ---------------------------------------------------------------------------------------
# Global settings are restored after every trial
# ---------------------------------------------------------------------------------------

def test_trial_settings_are_restored(run: Any) -> None:
    threads = torch.get_num_threads()
    precision = torch.get_float32_matmul_precision()
    row = run("op=matmul", "shape=[8,8,8]", "dtype=tf32", "num_threads=1")
    assert row["status"] == "ok"
    assert row["matmul_precision"] == "high" and row["tf32"] is True
    assert row["num_threads"] == 1
    assert torch.get_num_threads() == threads
    assert torch.get_float32_matmul_precision() == precision


def test_settings_are_restored_after_a_failing_trial(run: Any) -> None:
    threads = torch.get_num_threads()
    row = run("op=custom", "op.target=ops.examples:always_fails", "shape=[4]",
              "num_threads=1", "dtype=tf32")
    assert row["status"] == "error"
    assert "fails on purpose" in row["reason"]
    assert torch.get_num_threads() == threads


def run_module_op(monkeypatch: pytest.MonkeyPatch, name: str, build: Any) -> dict[str, Any]:
    """One CPU trial, exactly as a job runs it, of an op whose builder is ``build`` (put in a
    module of its own, ``name``)."""
    import types

    from runner.config.schema import TimerSettings
    from runner.execution import trial
    from runner.execution.task import TrialTask, TrialTimer

    module = types.ModuleType(name)
    module.build = build  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, name, module)
    spec = TrialSpec(op=name, target=f"{name}:build", shape=(4,), dtype=DType.fp32,
                     device="cpu", seed=0, num_threads=None, streams=1, graph=GraphMode.none,
                     compile=CompileMode.none, compile_dynamic=None, fullgraph=False,
                     backward=False)
    timer = TrialTimer.from_settings(TimerSettings(min_samples=3, max_samples=3))
    return trial.run_trial(TrialTask(0, spec, timer))


def plus_one(ctx: OpContext) -> Workload:
    x = ctx.randn(4)
    return Workload(fn=lambda: x + 1, flops=4, bytes_moved=32, reference=lambda: x.double() + 1)


def test_workload_contract_violation_is_an_error_row(frozen_gc: None,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """An op that returns something other than a Workload fails its trial only."""
    def build(ctx: OpContext) -> Any:
        return 42

    row = run_module_op(monkeypatch, "opsweep_bad_op", build)
    assert row["status"] == "error"
    assert "ops.base.Workload" in row["reason"]


def test_a_slow_build_is_the_trials_setup_not_other(frozen_gc: None,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Building the inputs is ``cost_setup_s``, not ``cost_other_s``: the summary's "other"
    is then what is left over, and a build that grows (a kernel's first use in a worker)
    shows where it grew. The parts still add up to no more than the trial's wall."""
    import time

    from runner.storage.columns import COST_COLUMNS

    build_s = 0.5

    def build(ctx: OpContext) -> Workload:
        time.sleep(build_s)
        return plus_one(ctx)

    began = time.perf_counter()
    row = run_module_op(monkeypatch, "opsweep_slow_build_op", build)
    wall_s = time.perf_counter() - began
    assert row["status"] == "ok", row["reason"]
    assert row["cost_setup_s"] >= build_s
    assert row["cost_other_s"] < build_s
    assert sum(row[name] for name in COST_COLUMNS) <= wall_s


def test_a_trial_hands_the_gpu_state_after_its_timing_to_the_sustained_flag(
        frozen_gc: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The thermal flag reads NVML's clock-event reasons as the timing ended: the trial must
    pass the ``*_timed`` columns it read to ``sustained_columns``, not an empty state."""
    from runner.execution import trial

    hot = {"sm_clock_mhz_timed": 1365, "power_w_timed": 520.0, "temperature_c_timed": 88,
           "throttle_reasons_timed": "SwThermalSlowdown"}
    seen: dict[str, Any] = {}
    real = trial.sustained_columns

    def spy(times: Any, burst: Any, gpu_after: Any = None) -> dict[str, Any]:
        seen.update(gpu_after or {})
        return real(times, burst, gpu_after)

    monkeypatch.setattr(trial, "clock_columns", lambda device: dict(hot))
    monkeypatch.setattr(trial, "sustained_columns", spy)
    row = run_module_op(monkeypatch, "opsweep_state_op", plus_one)
    assert row["status"] == "ok", row["reason"]
    assert {k: seen.get(k) for k in hot} == hot and row["throttle_reasons_timed"] == \
        "SwThermalSlowdown"
