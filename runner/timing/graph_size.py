"""How many calls the device time's CUDA graph holds (``runner.timing.device_time``).

A small op's time per call depends on how many calls one graph holds: on an H200 a transposed
2048² sum read 5.48 µs per call in graphs of 8 calls, 5.26 at 32, 5.18 from 512 to 8192, and
5.35 at 32768 (benchmarks/graph_size_check.py). A short replay pays its edges, a huge graph its
own overhead; the plateau between is the op's steady time. K from the loop time comes from
launch-bound calls, which read several times slower than the device runs them, so it lands on
the slope. The graph is captured with the K whose replay fills :data:`PLATEAU_SHARE` of a
sample (``timer.batch_target_us``), from the device's time per call:

* first from a burst of eager calls queued behind a spin (:func:`eager_per_call_s`): one
  capture, at the plateau K;
* where the host could not stay ahead of that burst (a call of many kernels), from a chunk of
  replays of the loop's K (:func:`replay_per_call_s`), and the graph captured again.

Capturing costs host time per call (about 7 µs on an H200), so half a sample is the aim:
enough to be on the plateau, half the capture of a whole one.

A graph must also run what the user's eager code runs: :func:`slower_than_eager` holds its
replays against eager calls queued back to back.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.timing.chunks import SPIN_MIN_S
from runner.timing.measurement import Measurement, TimerPlan

#: A graph replay should fill this share of ``timer.batch_target_us``.
PLATEAU_SHARE = 0.5
#: Eager calls in the burst that estimates the device's time per call. A call of up to 32
#: kernels keeps the burst within CUDA's ~1024 pending launches, so the host stays ahead.
ESTIMATE_CALLS = 32

#: A graph replay may read at most this much slower per call than the same calls queued
#: eagerly, back to back, before the eager calls are measured instead (the ``blocked``
#: method): captured, an op can run other work than the eager code the user runs (on an H100
#: a 1 GiB device copy ran 883 µs as a graph's memcpy node against 712 µs eagerly). Not
#: tighter: a graph sampled while the clock still came back after a capped trial read 3.3%
#: slower than eager calls a moment later (an fp32 2048³ matmul on an H200).
EAGER_AGREE_TOL = 0.05
#: The check runs for ops of at least this many seconds per call, long enough for the host to
#: keep the eager queue full; and not for power-capped ops, whose gapped eager burst runs at a
#: clock the sustained replays do not.
EAGER_CHECK_MIN_S = 20e-6
#: Seconds of eager calls in each of the check's three bursts.
EAGER_CHECK_S = 0.005


def eager_per_call_s(fn: Callable[[], Any], calls: int, loop_per_call_s: float,
                     device: Any) -> float | None:
    """The device's seconds per call of ``fn``: up to :data:`ESTIMATE_CALLS` eager calls
    queued behind a spin that covers twice the loop's time for them, then timed between two
    events. None when the host's enqueue outlasted the spin (the device then waited on it).
    Eager calls run a little slower than replays, so the K chosen from it errs short."""
    n = min(calls, ESTIMATE_CALLS)

    def burst() -> None:
        for _ in range(n):
            fn()

    timed = device.timed(burst, 2 * n * loop_per_call_s + SPIN_MIN_S, None)
    if timed.host_s >= timed.spin_s or timed.work_s <= 0:
        return None
    return timed.work_s / n


@dataclass(frozen=True)
class CapturedGraph:
    """The replay method's graph, as the eager check needs it: its replay, the calls it
    holds, and the samples its replays gave."""

    replay: Callable[[], None]
    calls: int
    samples: Measurement


def slower_than_eager(fn: Callable[[], Any], graph: CapturedGraph, device: Any,
                      notes: list[str]) -> str | None:
    """Why the graph's replays must not stand for ``fn``, or None: they read more than
    :data:`EAGER_AGREE_TOL` slower per call than eager calls queued back to back (the
    median of three bursts of up to :data:`ESTIMATE_CALLS` calls, about
    :data:`EAGER_CHECK_S` each). Checked only where the eager queue stays full and the op is
    not power-capped (:data:`EAGER_CHECK_MIN_S`).

    Where the samples read slower, the graph is replayed again beside the eager bursts, the
    two in turn (eager first, then replay first, then eager first: a clock still rising
    favours neither), and judged on that: the device may have sped up since its samples. An
    fp32 linear (21.4 ms a call) sampled right after capped work on an H100 read 22.5 ms a
    call, its clock still held down (1365 MHz at the start), 5.3% slower than eager calls a
    moment later: judged on the samples, the trial was measured again by the blocked method,
    6.6 s of device time in place of 0.8-1.3 s. A graph that runs other work (a copy as a
    memcpy node) reads slower in turn too. Samples kept that way get a note in ``notes``."""
    per_call_s = graph.samples.stats.median
    if graph.samples.power_capped or per_call_s < EAGER_CHECK_MIN_S:
        return None
    calls = max(1, min(ESTIMATE_CALLS, math.ceil(EAGER_CHECK_S / per_call_s)))
    eager_s = _median_or_none([eager_per_call_s(fn, calls, per_call_s, device)
                               for _ in range(3)])
    if eager_s is None or per_call_s <= (1 + EAGER_AGREE_TOL) * eager_s:
        return None  # agreed, or the host did not stay ahead of the eager calls
    eager: list[float | None] = []
    replayed: list[float] = []
    for turn in range(3):
        if turn % 2:
            replayed.append(replay_per_call_s(graph.replay, graph.calls, device))
        eager.append(eager_per_call_s(fn, calls, per_call_s, device))
        if not turn % 2:
            replayed.append(replay_per_call_s(graph.replay, graph.calls, device))
    eager_s = _median_or_none(eager)
    replay_s = statistics.median(replayed)
    if eager_s is None or replay_s <= (1 + EAGER_AGREE_TOL) * eager_s:
        notes.append(f"graph: its samples read {per_call_s * 1e6:.4g} µs per call, replays "
                     f"a moment later {replay_s * 1e6:.4g} µs beside eager calls "
                     f"{(eager_s or per_call_s) * 1e6:.4g} µs: the device sped up after "
                     "the samples (a clock coming back after capped work); they are kept")
        return None
    return (f"graph: a replay read {replay_s * 1e6:.4g} µs per call (its samples "
            f"{per_call_s * 1e6:.4g} µs), {calls} eager calls back to back "
            f"{eager_s * 1e6:.4g} µs, in turn (more than {EAGER_AGREE_TOL:.0%} apart): "
            "captured, the op runs other work than eager code does, so the eager calls are "
            "measured")


def _median_or_none(bursts: list[float | None]) -> float | None:
    """The median of the eager bursts; None when any of them could not be read."""
    if any(burst is None for burst in bursts):
        return None
    return statistics.median(bursts)


def replay_per_call_s(replay: Callable[[], None], calls: int, device: Any) -> float:
    """The device's seconds per call from the median of three back-to-back replays of a graph
    of ``calls`` calls."""
    times = device.wait(device.enqueue(replay, 3, 3 * SPIN_MIN_S, None))
    return sorted(times)[1] / calls


def plateau_calls(per_call_s: float, calls: int, plan: TimerPlan,
                  bound: Callable[[int], int]) -> int:
    """The K whose replay fills :data:`PLATEAU_SHARE` of ``batch_target_us``, never below
    ``calls`` nor above ``max_calls_per_sample`` and ``bound`` (the memory bound). An op of
    one call per sample (a call of ``batch_below_us`` or more) is left as it is."""
    target_s = plan.batch_target_us * 1e-6
    if calls == 1 or per_call_s <= 0 or calls * per_call_s >= PLATEAU_SHARE * target_s:
        return calls
    wanted = min(plan.max_calls_per_sample, math.ceil(PLATEAU_SHARE * target_s / per_call_s))
    return max(bound(wanted), calls)


def capture_or_keep(fn: Callable[[], Any], device: Any, wanted: int, calls: int,
                    notes: list[str]) -> tuple[Callable[[], None], int]:
    """The graph of ``wanted`` calls or, where it cannot be captured (memory), of ``calls``
    again, with a note: a smaller K still measures the op, a little off the plateau."""
    if wanted == calls:
        return device.capture(fn, calls), calls
    try:
        return device.capture(fn, wanted), wanted
    except Exception as exc:
        replay = device.capture(fn, calls)  # raises where the op cannot be captured at all
        notes.append(f"graph: K={wanted} could not be captured ({first_line(exc)}); "
                     f"K={calls} kept")
        return replay, calls


def first_line(exc: BaseException) -> str:
    """An exception's first non-empty line (300 characters at most), for a reason column."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return (lines[0][:300] if lines else type(exc).__name__)


def capture_replay(fn: Callable[[], Any], calls: int, plan: TimerPlan, device: Any,
                   per_call_s: float, bound: Callable[[int], int], notes: list[str], *,
                   plateau: bool) -> tuple[Callable[[], None], int, float]:
    """The replay method's graph (its replay), its K and the device's seconds per call (an
    estimate that sizes the samples; ``per_call_s``, the loop's, where none is taken).
    ``plateau``: K is grown to the plateau (module docstring), within ``bound`` (the memory
    bound of a K); else (the cold protocol) the loop's K, ``calls``, is kept."""
    if not plateau or calls == 1:
        return device.capture(fn, calls), calls, per_call_s
    estimate = eager_per_call_s(fn, calls, per_call_s, device)
    if estimate is not None:  # one capture, at the plateau K
        replay, graph_calls = capture_or_keep(
            fn, device, plateau_calls(estimate, calls, plan, bound), calls, notes)
        return replay, graph_calls, estimate
    # The host could not stay ahead of eager calls: the loop's K, replayed, tells the K.
    replay = device.capture(fn, calls)
    per_call_s = replay_per_call_s(replay, calls, device)
    wanted = plateau_calls(per_call_s, calls, plan, bound)
    if wanted == calls:
        return replay, calls, per_call_s
    del replay  # frees the smaller graph and its pool before the larger one
    replay, graph_calls = capture_or_keep(fn, device, wanted, calls, notes)
    return replay, graph_calls, per_call_s
