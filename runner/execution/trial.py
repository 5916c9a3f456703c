"""Running one trial, start to end, into one result row.

Whatever happens, a trial returns a row (``ok`` with its measurement, ``skipped`` with the
reason, ``oom``, or ``error`` with the traceback), and the sweep goes on.

:func:`run_trial` takes the job's :class:`~runner.execution.task.TrialTask`, applies the
trial's global settings (matmul precision, threads) and isolates compile state around
:func:`_measure_trial`, whose docstring gives the order of the measurement and why; then it
checks that the derived columns agree (``consistency_flag``), frees everything
(:func:`_release`), reads the GPU state again and returns the row. The op's own steps are
``runner.execution.workload``; :func:`failed_row` is the row of a trial that gave none.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import math
import time
import traceback
from datetime import datetime, timezone
from typing import Any

import torch

from ops.base import TrialSkipped, Workload
from runner.config.trials import TrialSpec
from runner.core.axes import AXES, DType
from runner.execution import modes
from runner.execution.allocations import Allocating, allocation_columns
from runner.execution.context import MATMUL_PRECISION, TORCH_DTYPES, trial_settings
from runner.execution.energy_samples import sample_window
from runner.execution.environment import (
    environment,
    git_provenance,
    gpu_state,
    sm_clock_reader,
    user_code_provenance,
)
from runner.execution.insight import insight_columns
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
from runner.execution.sustained import sustained_columns
from runner.execution.task import TrialTask
from runner.execution.timed import TrialTimes, WorkerTiming, burst_time, clock_for, time_trial
from runner.execution.timed_call import TimedCall
from runner.execution.workload import accuracy, build_checked, count_flops
from runner.storage.columns import COST_COLUMNS, Status
from runner.timing.measurement import Measurement


def run_trial(task: TrialTask, state: WorkerTiming | None = None) -> dict[str, Any]:
    """Run one trial and return its row (never raises for a trial-level failure). ``state``:
    what the process running trials keeps between them (``timed.WorkerTiming``); None: a
    fresh one, as for a trial with nothing before it."""
    state = WorkerTiming() if state is None else state
    spec = task.spec
    row = spec_columns(spec)
    row["timestamp"] = datetime.now(timezone.utc)
    row["timer_preset"] = task.timer.preset
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
            row.update(_measure_trial(task, state))
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
        "shape_str": spec.shape_str, "numel": math.prod(spec.shape),
        "params_json": json.dumps(params, sort_keys=True), "error_traceback": None,
    })
    row.update({f"param_{k}": v for k, v in params.items()})
    return row


def failed_row(task: TrialTask, status: Status, reason: str) -> dict[str, Any]:
    """The row of a trial that gave none (its worker died or hung, its handler failed):
    identity and status, no measurement."""
    row = spec_columns(task.spec)
    row.update(timestamp=datetime.now(timezone.utc), timer_preset=task.timer.preset,
               status=status.value, reason=reason)
    return row


def _measure_trial(task: TrialTask, state: WorkerTiming) -> dict[str, Any]:
    """Build, check and time one trial; its measured columns. The order makes them right:

    1. settle the device's graph state (once per process), build the workloads, seeded; an
       unsupported mode is a skip before the op is called; backward makes the leaves require
       grad before anything is counted or composed;
    2. count FLOPs (one eager call) before the modes compose: the counter cannot see into a
       compiled or captured callable; the counted call's grads are dropped;
    3. compose the modes (compile, graphs, backward, streams): compiling and capturing
       happen here, in their own columns, never inside the samples;
    4. check accuracy on the composed callable against a float64 reference of the inputs as
       they are now: the check validates exactly what is timed;
    5. free the check's memory and reset the peaks: ``peak_*`` are the timed op's;
    6. read the energy window's idle baseline now, while the GPU is still idle;
    7. the burst time first (the device time's settling warm-up would heat the GPU past its
       boost clock), then the device time and the loop time right after it, so the power
       cap's settling is paid once (``runner.execution.timed.time_trial``);
    8. read the clocks before anything else runs on the GPU: the state the samples ended in;
    9. an op whose bytes stay in L2 is timed on other allocations of its inputs
       (``runner.execution.allocations``); 10. insight passes last, never in the samples.
    """
    spec, timer, device, set_up_at = (task.spec, task.timer, torch.device(task.spec.device),
                                      time.perf_counter())
    state.settle_graphs(device)  # 1
    workloads = build_checked(spec, device)
    flops_per_op = count_flops(workloads[0], spec.backward)  # 2
    prepared = modes.prepare(spec, workloads)  # 3
    checked_at = time.perf_counter()
    out: dict[str, Any] = {"compile_time_s": prepared.compile_time_s, "capture_time_s":
                           prepared.capture_time_s, "cost_setup_s": checked_at - set_up_at}
    if task.check_accuracy:  # 4
        out.update(accuracy(spec, workloads, prepared))
    held_bytes = _fresh_peaks(device)  # 5
    accuracy_s = time.perf_counter() - checked_at
    watch = _energy_watch(task)  # 6
    read_clock, clock = sm_clock_reader(spec.device), clock_for(timer, device)
    burst = burst_time(timer, prepared, device, clock, held_bytes, state)  # 7
    times = time_trial(timer, prepared, device, clock, held_bytes, state,
                       read_clock=read_clock, watch=watch)
    out.update(clock_columns(spec.device))  # 8
    out.update(_timed_columns(task, prepared, times, burst, accuracy_s, gpu_after=dict(out)))
    # Rates at the device time, the GPU's own speed (docs/timing.md), else the loop time.
    rate = times.device.measurement or times.loop
    out.update(_rate_columns(spec, workloads, flops_per_op, rate.time_s))
    out.update(allocation_columns(Allocating(task, times.device.measurement, out, clock, state,
                                             eager=prepared.capturable)))  # 9
    out.update(_after_timing(task, prepared, watch, times, rate, out))  # 10
    return out


def _fresh_peaks(device: torch.device) -> int:
    """Free the check's cache, reset the peaks (``peak_*``: the timed op's); the bytes held."""
    if device.type != "cuda":
        return 0
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    return torch.cuda.memory_allocated(device)


def _energy_watch(task: TrialTask) -> Any:
    """``energy=true`` reads the energy over the device time's own (back-to-back) samples
    where it can; its idle baseline is read here, before any timing, so no idle gap falls
    inside it. None: the energy pass runs a window of its own, after timing."""
    insight, timer = task.insight, task.timer
    if insight is None or not insight.energy or not timer.device_time or timer.flush_l2:
        return None
    return sample_window(task.spec.device, insight.energy_window_s, insight.energy_idle_s)


def _timed_columns(task: TrialTask, prepared: modes.Prepared, times: TrialTimes,
                   burst: Measurement | None, accuracy_s: float, gpu_after: dict[str, Any]
                   ) -> dict[str, Any]:
    """The loop time, device time and burst time, the memory they used, their cost."""
    out = {**times.memory, **cost_columns(times, accuracy_s)}
    prepared.finish()  # after the samples: graphs dynamo made since are recompiles
    out.update(prepared.compile_stats)
    out.update(timing_columns(times.loop, prepared.ops_per_sample))
    out.update(device_time_columns(times.device, prepared.ops_per_sample,
                                   out["time_per_op_us"]))
    out.update(settle_columns(times.loop, times.device.measurement))
    out.update(samples_clock_columns(times.device.measurement))
    out.update(burst_columns(burst))
    out.update(sustained_columns(times, burst, gpu_after))
    out["l2_flush"] = bool(task.timer.flush_l2 and task.spec.device.startswith("cuda"))
    return out


def _rate_columns(spec: TrialSpec, workloads: list[Workload], flops_per_op: float | None,
                  per_call_s: float) -> dict[str, Any]:
    """FLOP/s and bytes/s of one sample's ops (all streams' workloads), and the op's extras."""
    first = workloads[0]
    n_ops = 1 if first.parts else len(workloads)
    bytes_per_op = None if spec.backward else first.bytes_moved
    out = throughput_columns(
        flops=None if flops_per_op is None else flops_per_op * n_ops,
        bytes_moved=None if bytes_per_op is None else bytes_per_op * n_ops, per_call_s=per_call_s)
    out.update({f"extra_{k}": v for k, v in first.extra.items()})
    return out


def _after_timing(task: TrialTask, prepared: modes.Prepared, watch: Any, times: TrialTimes,
                  rate: Measurement, out: dict[str, Any]) -> dict[str, Any]:
    """The energy read over the device time's samples, then the insight passes (profile,
    an energy window where the samples gave none): after timing and the memory peaks."""
    spec, insight, found = task.spec, task.insight, {}
    device_s = None if times.device.measurement is None else times.device.measurement.time_s
    watched = (watch.columns(flops=out["flops"], bytes_moved=out["bytes_moved"],
                             device_time_s=rate.time_s)
               if watch and device_s is not None else None)
    if watched is not None:
        found.update(watched)
        insight = dataclasses.replace(insight, energy=False)  # read: no second window
    if insight is not None:
        call = TimedCall(prepared.fn, rate.time_s, flops=out["flops"],
                         bytes_moved=out["bytes_moved"], capturable=prepared.capturable,
                         before_call=prepared.before_sample, device_time_s=device_s)
        found.update(insight_columns(insight, call, spec))
    return found


def _on_device(device: str) -> Any:
    if device.startswith("cuda"):
        return torch.cuda.device(torch.device(device))
    return contextlib.nullcontext()


def _allocated(device: str) -> int:
    return torch.cuda.memory_allocated(torch.device(device)) if device.startswith("cuda") else 0


def _release(device: str, held_bytes: int) -> None:
    """Free the trial's memory so the next trial starts clean (and its peaks are its own),
    after every trial, whatever its outcome (``run_trial``'s ``finally``).

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
