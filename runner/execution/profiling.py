"""``profile=true``: what actually ran in a trial, from a short ``torch.profiler`` pass.

A row's time says how long a call took, not what ran. After the timed samples (never during
them: the profiler adds host work to every launch) the trial's callable runs ``calls`` more
times under ``torch.profiler`` (Kineto). The Chrome/Perfetto trace is written next to the
job's results (``trace_path``) and parsed into per-call columns:

* ``kernel_count`` / ``kernel_time_sum_us`` – kernels per call and their summed duration.
  Overlapping kernels (streams) are each counted, so the sum can exceed the span;
* ``memop_count`` / ``memop_time_sum_us`` – the same for memcpy/memset activities (a copy op
  runs no kernel but one memcpy; a cuBLASLt matmul runs one kernel and one tiny memset);
* ``kernel_span_us`` – first activity start to last activity end, per call: the device time
  of the profiled pass;
* ``gpu_idle_fraction`` – share of the *timed* time per call with no device activity running
  (1 − busy / timed median): the launch gaps of the loop that was timed. The profiled pass
  itself runs slower on the host (the profiler hooks every launch), so idle within its span
  would overstate the gaps of a launch-bound op; without a timed median, the span is used;
* ``top_kernel`` / ``top_kernel_share`` / ``top_kernels_json`` – the activities with the most
  time, their names and shares of the busy time. ``top_kernel`` alone is a cheap column that
  says which cuBLAS/cuDNN kernel a trial got, so runs can be compared by it.

Hazard: after a profiling session CUPTI may stay attached to the process (Kineto's
``TEARDOWN_CUPTI``), which slows every later kernel launch: the timings of the *next* trials
would change. ``TEARDOWN_CUPTI=1`` is set (unless the user set it) so CUPTI is finalised
after each pass.

Parsing works on the trace file (:func:`kernel_summary`), the same file a user opens in
Perfetto, so what the columns say and what the user sees cannot drift apart.

On CPU there are no device activities: the kernel columns are null with ``profile_reason``,
the trace is still written, and ``top_kernels_json`` lists the aten operators by self CPU time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Chrome-trace categories (``cat``) Kineto gives device work: each occupies the device.
DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
#: How many of the costliest kernels ``top_kernels_json`` keeps.
TOP_N = 5

PROFILE_COLUMNS = ("trace_path", "profile_calls", "kernel_count", "kernel_time_sum_us",
                   "memop_count", "memop_time_sum_us", "kernel_span_us", "gpu_idle_fraction",
                   "top_kernel", "top_kernel_share", "top_kernels_json", "profile_reason")


def profile_columns(fn: Callable[[], Any], device: str, calls: int, trace_file: Path, *,
                    before_call: Callable[[], None] | None = None,
                    trace_name: str | None = None,
                    period_us: float | None = None) -> dict[str, Any]:
    """Run ``fn`` ``calls`` times under ``torch.profiler``, write the trace to ``trace_file``
    and return the profile columns. ``trace_name`` is what ``trace_path`` records (a path
    relative to the sweep folder); ``before_call`` runs before each call (grad reset);
    ``period_us`` is the timed median per call (for ``gpu_idle_fraction``)."""
    import os

    os.environ.setdefault("TEARDOWN_CUPTI", "1")  # see the hazard in the module docstring
    # Kineto prints "USDT ... profiler_start/stop" for every pass; the trace path is in the
    # row and the summary. Level 6 is above all of Kineto's levels: a failed pass still
    # raises in Python and becomes profile_reason.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    import torch
    from torch.profiler import ProfilerActivity, profile

    on_cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    sync = (lambda: torch.cuda.synchronize(torch.device(device))) if on_cuda else (lambda: None)
    sync()  # nothing from the timed samples may end up in the profiled window
    with profile(activities=activities) as prof:
        for _ in range(calls):
            if before_call is not None:
                before_call()
            fn()
        sync()  # the last kernels must finish inside the window to be recorded
    trace_file.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(trace_file))
    out = dict.fromkeys(PROFILE_COLUMNS)
    out.update(trace_path=trace_name or str(trace_file), profile_calls=calls)
    if not on_cuda:
        out["top_kernels_json"] = json.dumps(_top_cpu_ops(prof, calls))
        out["profile_reason"] = ("cpu: torch.profiler records CPU operators, not device "
                                 "kernels; top_kernels_json lists aten operators by self CPU "
                                 "time, the trace has the rest")
        return out
    with open(trace_file, encoding="utf-8") as fh:
        summary = kernel_summary(json.load(fh), calls, period_us)
    out.update(summary)
    return out


def kernel_summary(trace: dict[str, Any], calls: int,
                   period_us: float | None = None) -> dict[str, Any]:
    """Per-call kernel columns from a Chrome trace (Kineto's ``traceEvents``) of ``calls``
    calls; ``period_us``: the timed time per call, which ``gpu_idle_fraction`` refers to.
    A trace without device activity gives null columns and a ``profile_reason``."""
    if calls < 1:
        raise ValueError(f"calls={calls} must be >= 1: the trace is divided per call")
    spans = []
    by_name: dict[str, list[float]] = {}
    kernels, memops = [], []
    for event in trace.get("traceEvents", []):
        if event.get("ph") != "X" or event.get("cat") not in DEVICE_CATEGORIES:
            continue
        start, duration = float(event["ts"]), float(event.get("dur", 0.0))
        spans.append((start, start + duration))
        (kernels if event["cat"] == "kernel" else memops).append(duration)
        by_name.setdefault(str(event.get("name", "?")), []).append(duration)
    out: dict[str, Any] = {"kernel_count": None, "kernel_time_sum_us": None,
                           "memop_count": None, "memop_time_sum_us": None,
                           "kernel_span_us": None, "gpu_idle_fraction": None,
                           "top_kernel": None, "top_kernel_share": None,
                           "top_kernels_json": None, "profile_reason": None}
    if not spans:
        out["profile_reason"] = ("the profiler recorded no device activity (kernel, memcpy, "
                                 "memset): CUPTI unavailable, or the op ran on the host")
        return out
    total_us = sum(sum(d) for d in by_name.values())
    span_us = max(end for _, end in spans) - min(start for start, _ in spans)
    busy_us = _union_length(spans)
    ranked = sorted(by_name.items(), key=lambda item: -sum(item[1]))
    top = [{"name": name, "count_per_call": len(d) / calls, "time_us_per_call": sum(d) / calls,
            "share": sum(d) / total_us if total_us > 0 else None} for name, d in ranked[:TOP_N]]
    period = period_us * calls if period_us and period_us > 0 else span_us
    out.update(
        kernel_count=len(kernels) / calls, kernel_time_sum_us=sum(kernels) / calls,
        memop_count=len(memops) / calls, memop_time_sum_us=sum(memops) / calls,
        kernel_span_us=span_us / calls,
        gpu_idle_fraction=max(0.0, 1.0 - busy_us / period) if period > 0 else 0.0,
        top_kernel=top[0]["name"], top_kernel_share=top[0]["share"],
        top_kernels_json=json.dumps(top))
    return out


def _union_length(spans: list[tuple[float, float]]) -> float:
    """Total length covered by possibly overlapping intervals (concurrent kernels count once)."""
    covered, end_so_far = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end <= end_so_far:
            continue
        covered += end - max(start, end_so_far)
        end_so_far = end
    return covered


def _top_cpu_ops(prof: Any, calls: int) -> list[dict[str, Any]]:
    """The aten operators with the most self CPU time, per call (the CPU's "kernels")."""
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events)
    events.sort(key=lambda e: -e.self_cpu_time_total)
    return [{"name": e.key, "count_per_call": e.count / calls,
             "self_cpu_us_per_call": e.self_cpu_time_total / calls,
             "share": e.self_cpu_time_total / total if total else None} for e in events[:TOP_N]]
