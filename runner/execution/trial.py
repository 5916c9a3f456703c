"""Running one trial, start to end, into one result row.

Whatever happens, a trial returns a row: ``ok`` with its measurement, ``skipped`` with the
reason a combination is unsupported, ``oom``, or ``error`` with the exception and traceback.
The sweep always goes on.

Order of a trial (each step's placement is deliberate):

1. apply the trial's global settings (matmul precision, threads) and isolate compile state;
2. build the op's workload(s) on the device, seeded;
3. count FLOPs if the op did not give them (one eager call under ``FlopCounterMode``);
4. compose the execution modes (compile / graphs / backward / streams) around the workloads;
5. check accuracy: float64 reference from the inputs *as they are now*, then one call of the
   composed callable, so the check validates exactly what is timed;
6. reset the peak-memory counters and time it with the shared timer: the burst time first
   (``timer.burst``, gapped samples from the device as the last trial left it), then the
   steady-state device time, warmed up until settled, and the loop time right after it, so
   the power cap's settling is paid once (``runner.execution.timed.time_trial``);
7. optionally (``insight``), right after the device time's samples, at the same settled
   state: a profiled pass and an energy window (runner.execution.insight); they never run
   inside the timed samples;
8. check that the derived columns agree (``consistency_flag``), read the GPU state again,
   free everything, record.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import time
import traceback
from datetime import datetime, timezone
from typing import Any

import torch

from ops.base import OpContext, TrialSkipped, Workload, relative_error
from runner.config.ops import OpPlan, op_builder
from runner.config.schema import TimerSettings
from runner.config.trials import TrialSpec
from runner.core.axes import AXES, CompileMode, DType, GraphMode
from runner.execution import modes
from runner.execution.context import (
    DEFAULT_TOLERANCE,
    MATMUL_PRECISION,
    TORCH_DTYPES,
    trial_settings,
)
from runner.execution.energy_samples import sample_window
from runner.execution.environment import (
    environment,
    git_provenance,
    gpu_state,
    sm_clock_reader,
    user_code_provenance,
)
from runner.execution.insight import InsightOptions, insight_columns
from runner.execution.measured import (
    burst_columns,
    clock_columns,
    consistency_flag,
    cost_columns,
    device_time_columns,
    samples_clock_columns,
    settle_columns,
    throughput_columns,
    timing_columns,
)
from runner.execution.timed import burst_time, clock_for, time_trial
from runner.storage.columns import COST_COLUMNS, Status
from runner.timing.timer import TimerPlan


def run_trial(spec: TrialSpec, plan: OpPlan, timer: TimerSettings, *,
              check_accuracy: bool = True,
              insight: InsightOptions | None = None) -> dict[str, Any]:
    """Run one trial and return its row (never raises for a trial-level failure).
    ``insight``: the profile/energy passes to run after timing (None: neither)."""
    row = spec_columns(spec)
    row["timestamp"] = datetime.now(timezone.utc)
    row["timer_preset"] = timer.preset
    row.update(environment(spec.device))
    row.update(git_provenance())
    row.update(user_code_provenance(str(spec.params_dict.get("target") or ""), spec.target))
    # the threads torch will use in this trial: the axis, else the worker's share (workers=N)
    row["num_threads_used"] = spec.num_threads or torch.get_num_threads()
    row.update({f"{k}_start": v for k, v in gpu_state(spec.device).items()})
    row["consistency_flag"] = None
    started = time.perf_counter()
    held_bytes = _allocated(spec.device)
    try:
        with _on_device(spec.device), trial_settings(spec.dtype, spec.num_threads), \
                modes.compile_isolation(spec):
            row.update(_measure_trial(spec, plan, timer, check_accuracy, insight))
        row["status"], row["reason"] = Status.ok.value, None
        row["consistency_flag"] = consistency_flag(row)
    except TrialSkipped as exc:
        row["status"], row["reason"] = Status.skipped.value, str(exc)
    except torch.OutOfMemoryError as exc:
        row["status"], row["reason"] = Status.oom.value, _first_line(exc)
    except Exception as exc:  # any failure of one trial becomes a row; the sweep goes on
        row["status"], row["reason"] = _classify_error(exc)
        row["error_traceback"] = traceback.format_exc()
    except (SystemExit, KeyboardInterrupt) as exc:  # raised by the op's code: a row too
        if _from_ctrl_c(exc):
            raise
        row["status"] = Status.error.value
        row["reason"] = f"the op raised {type(exc).__name__}({exc}), which would end the sweep"
        row["error_traceback"] = traceback.format_exc()
    finally:
        _release(spec.device, held_bytes)
    row.update({f"{k}_end": v for k, v in gpu_state(spec.device).items()})
    if row.get("cost_settle_s") is not None:  # timed: the rest of the trial's wall is "other"
        known = sum(row[name] for name in COST_COLUMNS if name != "cost_other_s")
        row["cost_other_s"] = max(0.0, time.perf_counter() - started - known)
    return row


def spec_columns(spec: TrialSpec) -> dict[str, Any]:
    """The trial's identity, every registry axis, and values derived from them, as columns."""
    params = spec.params_dict
    row: dict[str, Any] = {"trial_id": spec.trial_id, "op": spec.op, "target": spec.target}
    row.update({axis.name: axis.column_value(getattr(spec, axis.name)) for axis in AXES})
    row.update({
        "torch_dtype": str(TORCH_DTYPES[spec.dtype]).split(".")[-1],
        "tf32": spec.dtype is DType.tf32, "matmul_precision": MATMUL_PRECISION[spec.dtype],
        "shape_str": spec.shape_str, "numel": _product(spec.shape),
        "params_json": json.dumps(params, sort_keys=True), "error_traceback": None,
    })
    row.update({f"param_{k}": v for k, v in params.items()})
    return row


def _measure_trial(spec: TrialSpec, plan: OpPlan, timer: TimerSettings,
                   check_accuracy: bool, insight: InsightOptions | None = None
                   ) -> dict[str, Any]:
    device = torch.device(spec.device)
    workloads = _build_workloads(spec, plan, device)
    first = workloads[0]
    modes.check_supported(spec, first)
    if spec.backward:
        for workload in workloads:
            modes.enable_grads(workload)
    flops_per_op = _count_flops(first, spec.backward)
    prepared = modes.prepare(spec, workloads)

    out: dict[str, Any] = {"compile_time_s": prepared.compile_time_s,
                           "capture_time_s": prepared.capture_time_s}
    accuracy_started = time.perf_counter()
    if check_accuracy:
        out.update(_accuracy(spec, workloads, prepared))
    if device.type == "cuda":
        # The float64 reference and its temporaries are freed by now; return their cached
        # blocks so peak_reserved_bytes reflects the timed op, not the accuracy check.
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    accuracy_s = time.perf_counter() - accuracy_started
    held_bytes = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0

    # energy=true reads the energy over the device time's own (back-to-back) samples where it
    # can; its idle baseline is read here, before any timing, so no idle gap falls inside it.
    watch = (sample_window(spec.device, insight.energy_window_s, insight.energy_idle_s)
             if insight is not None and insight.energy and timer.device_time
             and not timer.flush_l2 else None)
    timer_plan = TimerPlan.from_settings(timer)
    read_clock = sm_clock_reader(spec.device)
    clock = clock_for(timer, device)
    # The burst time goes first: the device time's settling warm-up would heat the GPU.
    burst = burst_time(spec, timer, timer_plan, prepared, device, clock, held_bytes)
    times = time_trial(spec, timer, timer_plan, prepared, device, clock, held_bytes,
                       read_clock=read_clock, watch=watch)
    measurement, device_time = times.loop, times.device
    # Read before anything else runs on the GPU: the state the loop-time samples ended in.
    out.update(clock_columns(spec.device))
    out.update(times.memory)
    out.update(cost_columns(times, accuracy_s))
    prepared.finish()
    out.update(prepared.compile_stats)
    out.update(timing_columns(measurement, prepared.ops_per_sample))
    out.update(device_time_columns(device_time, prepared.ops_per_sample,
                                   out["time_per_op_us"]))
    out.update(settle_columns(measurement, device_time.measurement))
    out.update(samples_clock_columns(device_time.measurement))
    out.update(burst_columns(burst))
    out["l2_flush"] = bool(timer.flush_l2 and device.type == "cuda")
    n_ops = 1 if first.parts else len(workloads)
    bytes_per_op = None if spec.backward else first.bytes_moved
    # Rates at the device time where there is one: the GPU's own speed, which the roofline
    # holds against the GPU's ceilings (docs/timing.md); else at the loop time.
    rate_measurement = device_time.measurement or measurement
    out.update(throughput_columns(
        flops=None if flops_per_op is None else flops_per_op * n_ops,
        bytes_moved=None if bytes_per_op is None else bytes_per_op * n_ops,
        median_s=rate_measurement.stats.median))
    out.update({f"extra_{k}": v for k, v in first.extra.items()})
    watched = (watch.columns(flops=out["flops"], bytes_moved=out["bytes_moved"],
                             device_time_s=rate_measurement.stats.median)
               if watch and device_time.measurement is not None else None)
    if watched is not None:
        out.update(watched)
        insight = dataclasses.replace(insight, energy=False)  # read: no second window
    if insight is not None:  # after timing and memory peaks: never inside the samples
        out.update(insight_columns(
            insight, fn=prepared.fn, device=spec.device, label=spec.label(),
            trial_id=spec.trial_id, per_call_s=rate_measurement.stats.median,
            device_time_s=None if device_time.measurement is None else
            device_time.measurement.stats.median, flops=out["flops"],
            bytes_moved=out["bytes_moved"], before_call=prepared.before_sample,
            capturable=spec.graph is GraphMode.none and spec.compile is CompileMode.none
            and not spec.backward))
    return out


def _build_workloads(spec: TrialSpec, plan: OpPlan, device: torch.device) -> list[Workload]:
    """One workload, or ``streams`` independent ones (seeds seed, seed+1, ...) for an op
    without parts."""
    builder = op_builder(plan)

    def build(offset: int) -> Workload:
        generator = torch.Generator(device=device)
        generator.manual_seed(spec.seed + offset)
        ctx = OpContext(shape=spec.shape, dtype=TORCH_DTYPES[spec.dtype], device=device,
                        generator=generator, seed=spec.seed + offset,
                        dtype_name=spec.dtype.value)
        workload = builder(ctx, **spec.params_dict)
        if not isinstance(workload, Workload):
            raise TypeError(f"op '{spec.op}' ({spec.target}) returned "
                            f"{type(workload).__name__}; an op must return ops.base.Workload")
        return workload

    first = build(0)
    if spec.streams == 1 or first.parts:
        return [first]
    return [first] + [build(i) for i in range(1, spec.streams)]


def _count_flops(workload: Workload, backward: bool) -> float | None:
    """The op's FLOPs per call; counted with ``FlopCounterMode`` (one eager call) when the op
    gives none, and always in backward mode, where the op's forward formula does not apply.
    FlopCounterMode only sees matmul-like ops: a count of 0 is recorded as unknown."""
    if workload.flops is not None and not backward:
        return float(workload.flops)
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        out = workload.fn()
        if backward and isinstance(out, torch.Tensor) and out.requires_grad:
            out.backward(torch.ones_like(out))
    for leaf in modes._grad_leaves(workload):
        leaf.grad = None
    total = counter.get_total_flops()
    return float(total) if total else None


def _accuracy(spec: TrialSpec, workloads: list[Workload],
              prepared: modes.Prepared) -> dict[str, Any]:
    with torch.no_grad():
        references = [w.reference() if w.reference is not None else None for w in workloads]
    result = prepared.fn()
    # The call may still be running (or, for a d2h copy into pinned memory, still writing
    # host memory): wait before reading its output.
    _sync(torch.device(spec.device))
    outputs = prepared.split(result)
    errors = []
    for workload, reference, output in zip(workloads, references, outputs):
        if workload.accuracy is not None:
            errors.append(float(workload.accuracy(output)))
        elif reference is not None:
            errors.append(relative_error(output, reference))
    del references, outputs
    tolerance = workloads[0].tolerance or DEFAULT_TOLERANCE[spec.dtype]
    if not errors:
        return {"rel_error": None, "rel_error_tol": None, "accuracy_ok": None}
    worst = max(errors)
    return {"rel_error": worst, "rel_error_tol": tolerance, "accuracy_ok": worst <= tolerance}


def _on_device(device: str) -> Any:
    if device.startswith("cuda"):
        return torch.cuda.device(torch.device(device))
    return contextlib.nullcontext()


def _allocated(device: str) -> int:
    return torch.cuda.memory_allocated(torch.device(device)) if device.startswith("cuda") else 0


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _release(device: str, held_bytes: int) -> None:
    """Free the trial's memory so the next trial starts clean (and its peaks are its own).
    Runs after every trial, whatever its outcome (``run_trial``'s ``finally``).

    A trial's objects are young: collecting the young generations frees its reference cycles.
    A full collection walks every object of the process (torch's included), ~100 ms per trial,
    the largest per-trial cost of a sweep of small trials; it runs only when the device still
    holds more than before the trial."""
    gc.collect(1)
    if _allocated(device) > held_bytes:
        gc.collect()
    if device.startswith("cuda"):
        torch.cuda.synchronize(torch.device(device))
        torch.cuda.empty_cache()


def _classify_error(exc: Exception) -> tuple[str, str]:
    """An op/dtype/device combination PyTorch does not implement is a skip, not an error."""
    text = _first_line(exc)
    if isinstance(exc, NotImplementedError) or "not implemented for" in text:
        return Status.skipped.value, f"unsupported by PyTorch: {text}"
    return Status.error.value, f"{type(exc).__name__}: {text}"


def _from_ctrl_c(exc: BaseException) -> bool:
    """A KeyboardInterrupt raised by the Ctrl-C handler (runner.execution.interrupt), not by
    the op: with isolation=none the second Ctrl-C must still stop the sweep."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return isinstance(exc, KeyboardInterrupt) and tb is not None \
        and tb.tb_frame.f_code.co_filename.endswith("interrupt.py")


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[0][:500] if lines else type(exc).__name__


def _product(shape: tuple[int, ...]) -> int:
    total = 1
    for size in shape:
        total *= size
    return total

