"""Where an op's bytes live: an L2-resident op timed on several allocations of its inputs.

An op that moves bytes more than it computes, and whose bytes fit in the GPU's L2, reads them
from L2 call after call when the timer leaves the cache warm (``timer.flush_l2=false``).
Which lines they occupy follows from the physical memory the allocator gave the process, and
the time follows the lines: on an H200 a layer_norm of fp32 1024×4096 (32 MiB a call) read
12.15–12.32 µs over eight allocations of its inputs in one process, each steady within
0.31–0.48% over its own rounds, and the same trial 12.64–13.26 µs in the processes of one
host's sweeps (docs/timing.md#where-an-ops-bytes-live). One allocation is one draw: two
identical runs then disagree by more than their samples allow.

So such a trial (:func:`takes_allocations`) builds its inputs ``timer.allocations - 1`` times
more, each build kept alive while the next is made so that each lands on other memory
(:func:`time_allocations`), and times each with the trial's timer, back to back on the
device the trial left warm (``runner.execution.timed.probed_device_time``: without the
clock reader or a warm-up minimum after capped work, since an op this light is not capped).
The row keeps its own samples as the headline and adds the median over all allocations,
their spread, and an ``allocation_flag`` when that spread is more than the samples can
explain, with the GPU's clock and temperature: the headline then depends on where the
process put the bytes, and another process may read it as far apart. On one H200,
layer_norms of 1024×4096 read 1.0–3.3% apart over their four allocations (bf16 and fp32,
five processes each), and on a 4×H200 host every warm layer_norm of fp32 1024×4096
1.8–3.7%. The median over four did not reliably repeat better between five processes than
one allocation (1.8% against 1.5% on one host, 0.9% against 1.6% on another): part of what
moves is the process's own state, which no allocation inside it escapes. So the flag, not
the median, is what makes two runs' rows agree or say why not.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import torch

from runner.core.host_link import crosses_host_link
from runner.execution import modes
from runner.execution.task import TrialTask
from runner.execution.timed import WorkerTiming, probed_device_time
from runner.execution.workload import build_checked
from runner.timing.clocks import Clock
from runner.timing.measurement import Measurement

#: FLOPs per byte moved under which an op's time is its bytes' (none of the ops here that do
#: fewer is compute-bound): the GPUs' fp32 units need 14-20 FLOP/byte (an H200's 67 TFLOP/s
#: over 4.8 TB/s, an H100's over 3.35) before memory stops being what they wait on.
MEMORY_BOUND_FLOP_PER_BYTE = 8.0

#: The empty columns of a trial that did not time allocations (not a warm L2-resident op).
NO_ALLOCATIONS: dict[str, Any] = {"allocations": None, "gpu_time_allocations_median_us": None,
                                 "allocation_spread": None, "allocation_flag": None,
                                 "allocation_reason": None}


@dataclasses.dataclass(frozen=True)
class Allocating:
    """What timing a trial's other allocations needs: the trial, its own device time's
    samples, the row so far (``bytes_moved``, ``arithmetic_intensity``, the GPU's clock and
    temperature), the clock its samples were taken with, the worker's state, and whether
    the modes left the op's plain eager call (``modes.Prepared.capturable``: a compiled op
    would compile again for each allocation, a captured one capture again and keep each
    graph's pool; the modes decide, in one place)."""

    task: TrialTask
    own: Measurement | None
    row: dict[str, Any]
    clock: Clock
    state: WorkerTiming
    eager: bool = True


def takes_allocations(allocating: Allocating, l2_bytes: int) -> bool:
    """Whether the trial's time may follow where its bytes live: a warm CUDA device time
    (no L2 flush) of the op's plain eager call, of under :data:`MEMORY_BOUND_FLOP_PER_BYTE`
    (or no counted FLOPs), whose bytes per call fit in ``l2_bytes`` and do not cross the
    host-device link (``runner.core.host_link``), and ``timer.allocations`` above 1."""
    task, row = allocating.task, allocating.row
    timer, spec = task.timer, task.spec
    intensity, moved = row.get("arithmetic_intensity"), row.get("bytes_moved")
    return (allocating.own is not None and allocating.eager and timer.allocations > 1
            and not timer.flush_l2 and spec.device.startswith("cuda")
            and not crosses_host_link(spec.params_dict.get("direction"))
            and moved is not None and 0 < moved <= l2_bytes
            and (intensity is None or intensity < MEMORY_BOUND_FLOP_PER_BYTE))


def time_allocations(count: int, build: Callable[[], Any],
                    time_one: Callable[[Any], Measurement | None]) -> list[Measurement | None]:
    """``count`` allocations: all built first, each kept alive while the next is built (a
    freed block would be handed back, and the next build would land where this one did),
    then each timed."""
    held = [build() for _ in range(count)]
    return [time_one(placed) for placed in held]


def allocation_columns(allocating: Allocating) -> dict[str, Any]:
    """The trial's other allocations timed, and the columns they give (:data:`NO_ALLOCATIONS`
    where the trial takes none)."""
    task, own = allocating.task, allocating.own
    device = torch.device(task.spec.device)
    l2_bytes = (torch.cuda.get_device_properties(device).L2_cache_size
                if device.type == "cuda" else 0)
    if not takes_allocations(allocating, l2_bytes):
        return dict(NO_ALLOCATIONS)

    def build() -> modes.Prepared:
        return modes.prepare(task.spec, build_checked(task.spec, device))

    def time_one(prepared: modes.Prepared) -> Measurement | None:
        torch.cuda.reset_peak_memory_stats(device)  # a call's allocations bound K from here
        held_bytes = torch.cuda.memory_allocated(device)
        return probed_device_time(task.timer, prepared, device, allocating.clock, held_bytes,
                                  allocating.state, steady=True).measurement

    return columns_over(own, task.timer.allocations - 1, build, time_one, allocating.row)


def columns_over(own: Measurement | None, count: int, build: Callable[[], Any],
                 time_one: Callable[[Any], Measurement | None], row: dict[str, Any]
                 ) -> dict[str, Any]:
    """The columns of ``own`` and ``count`` more allocations (:func:`time_allocations`). The
    trial's own time is measured by now: a failure here (no memory for more copies, a build
    that fails the second time) costs the extra columns and says why, never the row."""
    try:
        others = time_allocations(count, build, time_one)
    except Exception as exc:  # the row is measured: any failure is this pass's alone
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return {**NO_ALLOCATIONS, "allocation_reason":
                f"{count} more allocations failed: {type(exc).__name__}: {first}"[:300]}
    return spread_columns([own, *others], row)


def spread_columns(measured: Sequence[Measurement | None], row: dict[str, Any]
                   ) -> dict[str, Any]:
    """The allocations' columns from their measurements (the trial's own first; None: one
    that gave no device time): the median over their medians, their spread (the slowest
    over the fastest, minus one) and the flag when that spread is more than the samples
    allow (two CIs that just touch, the widest of them) and more than the timer was asked
    to resolve (``timer.target_rel``): a softmax of fp32 1024×4096 read 0.6-1.6% apart over
    its allocations while five processes agreed on it within 0.11%, and a spread under the
    precision asked for is no news to a user who asked for it."""
    taken = [m for m in measured if m is not None and m.samples_s]
    if len(taken) < 2:
        return {**NO_ALLOCATIONS, "allocations": len(taken) or None, "allocation_reason":
                f"{len(measured) - len(taken)} of {len(measured)} allocations gave no device time"}
    medians_us = [m.stats.median * 1e6 for m in taken]  # per call, as gpu_time_median_us
    spread = max(medians_us) / min(medians_us) - 1
    allowed = max(2 * max(m.stats.ci_rel_halfwidth for m in taken),
                  max(m.target_rel for m in taken))
    return {"allocations": len(taken),
            "gpu_time_allocations_median_us": statistics.median(medians_us),
            "allocation_spread": spread,
            "allocation_flag": (allocation_flag_text(medians_us, allowed, row)
                               if spread > allowed else None), "allocation_reason": None}


def allocation_flag_text(medians_us: Sequence[float], allowed: float, row: dict[str, Any]) -> str:
    """Why the row's device time depends on the process that measured it, with the GPU's
    clock and temperature (they say which state of the GPU the spread was seen in)."""
    low, high = min(medians_us), max(medians_us)
    clock, temperature = row.get("sm_clock_mhz_samples_median"), row.get("temperature_c_timed")
    state = ", ".join(filter(None, (_known(clock) and f"{clock:.0f} MHz",
                                    _known(temperature) and f"{temperature:.0f} °C")))
    at = f", at {state}" if state else ""
    return (f"where its bytes live moves it: {len(medians_us)} allocations of its inputs read "
            f"{low:.4g}-{high:.4g} µs, {high / low - 1:.1%} apart (its samples and "
            f"timer.target_rel allow {allowed:.1%}){at}. Its bytes stay in L2 between calls, "
            "and another process, which puts them elsewhere, may read it as far apart: "
            "compare such rows within one process, or time it cold with timer.flush_l2=true")


def _known(value: Any) -> bool:
    """A number that was read (a row's missing reading is None, or NaN once in pandas)."""
    return value is not None and math.isfinite(value)
